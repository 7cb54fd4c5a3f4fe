"""Timed arrivals: every request released at its planned time (``offsets`` from the clock's start: a request
rate with Poisson/gamma arrivals from ``bench.schedule``, a rate load plan from ``bench.stages``, or a trace's
own send times), with a semaphore bounding how many are in flight. A request that waits for a free slot is sent
late; the wait is its queue time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from accelbench.bench.load.sending import Sending, run_interruptible

_pc = time.perf_counter


async def send_at_times(s: Sending, n: int, offsets: Sequence[float], max_concurrency: int | None) -> None:
    """Send ``n`` requests from ``s.feed``, request i at ``s.t0 + offsets[i]``, at most ``max_concurrency`` at
    a time. The dispatcher only waits to send, so a cancel may interrupt it (``s.interruptible``)."""
    client, feed, col, stop, t0 = s.client, s.feed, s.col, s.stop, s.t0
    sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    tasks: set[asyncio.Task[None]] = set()

    async def one(i: int, data: bytes) -> None:
        try:
            col.add(i, await client.send(data))
        finally:
            if sem is not None:
                sem.release()

    loop = asyncio.get_running_loop()

    async def dispatch() -> None:
        for i in range(n):
            item = await feed.get()  # made before the clock (or by the prompt process, ahead of its time)
            if item is None:
                return
            due = t0 + offsets[i]
            delay = due - _pc()
            if delay > 0:
                await asyncio.sleep(delay)
            while _pc() < due:  # the loop's timers have millisecond resolution and may fire early
                await asyncio.sleep(0)
            if stop.should_stop(_pc()):
                return
            eligible = due
            if sem is not None:
                if sem.locked():
                    await sem.acquire()
                    eligible = max(due, _pc())
                else:
                    await sem.acquire()
            if stop.should_stop(_pc()):
                if sem is not None:
                    sem.release()
                return
            col.take(i, item)
            col.eligible[i] = eligible
            col.scheduled[i] = due
            task = loop.create_task(one(i, item.data))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    try:
        await run_interruptible(dispatch(), s.interruptible)
    finally:
        while tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)
