"""A load plan of concurrency stages (``LoadStage``, ``bench.stages``): send while fewer requests are in flight
than the plan allows now, else wait for a completion or the plan's next change; stop at the plan's end."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Sequence

from accelbench.bench import stages as stages_mod
from accelbench.bench.load.sending import Sending
from accelbench.domain.load import LoadStage

_pc = time.perf_counter


async def send_staged(s: Sending, n: int, stages: Sequence[LoadStage]) -> None:
    """Send up to ``n`` requests by the concurrency plan ``stages``; the plan's end is ``s.stop.deadline``."""
    client, feed, col, stop, t0 = s.client, s.feed, s.col, s.stop, s.t0
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()
    freed = asyncio.Event()
    in_flight = 0

    async def one(i: int, data: bytes) -> None:
        nonlocal in_flight
        try:
            col.add(i, await client.send(data))
        finally:
            in_flight -= 1
            freed.set()

    i = 0
    try:
        while i < n:
            now = _pc()
            if stop.should_stop(now):
                break
            cap, change = stages_mod.allowed(stages, now - t0)
            if in_flight < cap:
                item = await feed.get()
                sent_at = _pc()
                # the plan may have ended while the feed built the request
                if item is None or stop.should_stop(sent_at):
                    break
                col.take(i, item)
                col.eligible[i] = col.scheduled[i] = sent_at
                in_flight += 1
                task = loop.create_task(one(i, item.data))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                i += 1
                continue
            freed.clear()
            wait = max(0.0, min(t0 + change, stop.deadline or math.inf) - _pc())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(freed.wait(), timeout=wait)
    finally:
        while tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)
