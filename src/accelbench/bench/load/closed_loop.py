"""The closed loop: a fixed set of workers, each sending the next request as soon as it is free (every request
due at once: an infinite rate at ``max_concurrency``). With a ramp the workers start one by one over it
(``bench.ramp``)."""

from __future__ import annotations

import asyncio
import time

from accelbench.bench import ramp
from accelbench.bench.load.sending import Sending, wait_until

_pc = time.perf_counter


async def send_closed_loop(s: Sending, n: int, max_concurrency: int | None, ramp_s: float = 0.0) -> None:
    """Send ``n`` requests with ``min(max_concurrency, n)`` workers; worker k starts ``ramp.stream_starts``'s
    k-th offset after ``s.t0``."""
    client, feed, col, stop, t0 = s.client, s.feed, s.col, s.stop, s.t0
    workers = min(max_concurrency or n, n)
    next_i = 0
    starts = ramp.stream_starts(workers, ramp_s)

    async def worker(k: int) -> None:
        nonlocal next_i
        send = client.send
        if starts[k] and not await wait_until(t0 + starts[k], stop):
            return
        while True:
            if next_i >= n or stop.should_stop(_pc()):
                return
            item = await feed.get()
            if item is None:
                return
            i = next_i  # taken right after the item, without a pause: item k is request k
            if i >= n:
                return
            next_i = i + 1
            now = _pc()
            if stop.should_stop(now):
                return
            col.take(i, item)
            col.eligible[i] = now
            col.scheduled[i] = t0
            col.add(i, await send(item.data))

    await asyncio.gather(*(worker(k) for k in range(workers)))
