"""This machine, shared by the runs one process executes at once: measuring needs it to itself, waiting does not.

A run whose load generator runs here (or whose engine starts here) holds the machine while it measures (a local
engine: from start-up to teardown), so two runs never measure on one machine at the same time; a run waiting
for a remote engine to become ready holds nothing, and says so (``waiting``), so that the service's worker may
take the next run meanwhile. Waiting for the machine is cancellable at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from accelbench.deploy.target import DeployCancelled


class Machine:
    """The measuring slot of this process, and which runs are waiting for a remote engine (and since when)."""

    def __init__(self) -> None:
        self._slot = threading.Lock()
        self._guard = threading.Lock()
        self._waiting: dict[str, float] = {}

    @property
    def busy(self) -> bool:
        return self._slot.locked()

    @contextmanager
    def held(self, cancel: threading.Event, say: Callable[[str], None] | None = None) -> Iterator[None]:
        """Have the machine to this run alone; while another run measures, wait (``say`` is told why) until it
        is done or this run is cancelled (``DeployCancelled``)."""
        if not self._slot.acquire(blocking=False):
            if say is not None:
                say("Waiting for this machine: another run is measuring on it")
            while not self._slot.acquire(timeout=0.2):
                if cancel.is_set():
                    raise DeployCancelled("Cancelled while waiting for another run to finish measuring.")
        try:
            yield
        finally:
            self._slot.release()

    @contextmanager
    def waiting(self, run_id: str) -> Iterator[None]:
        """The run waits for something remote (an engine starting elsewhere) and holds nothing here."""
        with self._guard:
            self._waiting[run_id] = time.monotonic()
        try:
            yield
        finally:
            with self._guard:
                self._waiting.pop(run_id, None)

    def all_waiting(self, run_ids: Sequence[str], for_at_least_s: float) -> bool:
        """True when every one of ``run_ids`` has been waiting (holding nothing here) that long."""
        now = time.monotonic()
        with self._guard:
            return all(
                run_id in self._waiting and now - self._waiting[run_id] >= for_at_least_s
                for run_id in run_ids
            )


#: the one machine of this process
MACHINE = Machine()
