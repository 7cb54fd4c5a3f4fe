"""The event loop a benchmark runs on: uvloop where it is installed, and a way to run a coroutine to its end from
blocking code (``run_blocking``), also from a thread that already runs a loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
    uvloop = None  # type: ignore[assignment]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new uvloop loop, or asyncio's where uvloop is not installed."""
    if uvloop is None:  # pragma: no cover - uvloop is a dependency except on Windows
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_blocking(coro_fn: Callable[[], Any]) -> Any:
    """Run a coroutine on a fresh (uv)loop; from a thread that already runs a loop, on a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            return runner.run(coro_fn())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                box["value"] = runner.run(coro_fn())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    th = threading.Thread(target=target, name="accelbench-bench")
    th.start()
    th.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
