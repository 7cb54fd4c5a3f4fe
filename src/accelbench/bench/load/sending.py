"""What every load pattern shares: the run's ``Sending`` context, its ``Stop`` flag, waiting until a due time
without missing a cancel, and running a task a cancel may interrupt."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from accelbench.bench.client import StreamClient
from accelbench.bench.collector import Collector
from accelbench.bench.feeds import Feed

_pc = time.perf_counter


class Stop:
    """Whether sending must stop: a cancel (``flag``/``cancelled``) or the deadline (``duration_hit``)."""

    def __init__(self, deadline: float | None) -> None:
        self.flag = False
        self.deadline = deadline
        self.cancelled = False
        self.duration_hit = False

    def should_stop(self, now: float) -> bool:
        if self.flag:
            return True
        if self.deadline is not None and now >= self.deadline:
            self.duration_hit = True
            return True
        return False


@dataclass
class Sending:
    """What a load pattern sends with: requests from ``feed`` through ``client``, outcomes into ``col``, until
    ``stop``; ``t0`` is the clock's start (perf_counter). A task that only waits to send is put in
    ``interruptible`` so a cancel can wake it."""

    client: StreamClient
    feed: Feed
    col: Collector
    stop: Stop
    t0: float = 0.0
    interruptible: list[asyncio.Task[Any]] = field(default_factory=list)


async def wait_until(due: float, stop: Stop) -> bool:
    """Sleep until ``due`` (perf_counter) in short slices, so that a cancel or the deadline ends the wait;
    whether it is still time to send."""
    while (left := due - _pc()) > 0:
        if stop.should_stop(_pc()):
            return False
        await asyncio.sleep(min(left, 0.05))
    return not stop.should_stop(_pc())


async def run_interruptible(coro: Coroutine[Any, Any, None], interruptible: list[asyncio.Task[Any]]) -> None:
    """Run ``coro`` as a task a cancel may interrupt (put in ``interruptible``); returns when it ends, also when
    a cancel interrupted it, and raises what it raised."""
    task = asyncio.get_running_loop().create_task(coro)
    interruptible.append(task)
    try:
        await asyncio.wait([task])  # returns when it ends, also when a cancel interrupted it
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    finally:
        if not task.done():
            task.cancel()
