"""How ``run``, ``rerun`` and ``demo`` show a run while it executes in this process: the start-up steps as a
status line, then the sweep's progress bars, then the closing steps; Ctrl-C once keeps the cell in flight as
partial and tears the engine down, SIGTERM likewise (exit 143), and a known automatic fix (the executable-stack
patch) is applied when the flag says so or a person at the terminal agrees."""

from __future__ import annotations

import sys
import threading
from typing import Any

import typer

from accelbench.cli._progress import ConsoleProgress
from accelbench.cli.common import OutputFormat, err_console, graceful_interrupt
from accelbench.cli.sweep import SWEEP_STOP_MESSAGE, SweepDisplay
from accelbench.domain.diagnosis import Diagnosis
from accelbench.domain.progress import Progress, TerminatedBySignal
from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunStatus
from accelbench.services.run_local import LocalExecution, execute_here, termination_signals
from accelbench.services.session import Store


class RunDisplay(Progress):
    """Start-up steps as a status line, then the sweep's progress bars, then the closing steps (rich allows
    one live display at a time, so each hands over to the next). It is the lifecycle's ``events``: the same
    phases, lines and sweep events whatever the target."""

    def __init__(self, enabled: bool) -> None:
        self.steps = ConsoleProgress(quiet=not enabled)
        self.sweep_display = SweepDisplay(enabled=enabled)
        self._in_sweep = False

    def __enter__(self) -> RunDisplay:
        self.steps.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._in_sweep:
            self.sweep_display.__exit__(None, None, None)
            self._in_sweep = False
        self.steps.pause(ok=exc[0] is None)

    def finish(self, run: RunInfo) -> None:
        """Close the last step as the run ended: the lifecycle returns a failed run rather than raising, and a
        step it failed in (an engine that never answered) is crossed, not ticked."""
        self.steps.pause(ok=run.status == RunStatus.completed)

    def phase(self, message: str) -> None:
        self.steps.phase(message)

    def line(self, text: str) -> None:
        self.steps.line(text)

    def note(self, text: str) -> None:
        self.steps.note(text)

    def sweep(self, ev: Any) -> None:
        if ev.kind == "start" and not self._in_sweep:
            self.steps.pause()
            self.sweep_display.__enter__()
            self._in_sweep = True
        self.sweep_display(ev)
        if ev.kind == "end" and self._in_sweep:
            self.sweep_display.__exit__(None, None, None)
            self._in_sweep = False
            self.steps.__enter__()


def _fix_callback(choice: bool | None) -> Any:
    """Whether to apply a known automatic fix: the flag decides, else ask on a terminal, else no."""

    def decide(diag: Diagnosis) -> bool:
        if choice is not None:
            return choice
        if not sys.stdin.isatty():
            return False
        err_console.print(diag.explain(), highlight=False)
        return typer.confirm("Let accelbench apply this fix and restart the engine?", default=True)

    return decide


def execute_with_display(
    store: Store, run: RunInfo, *, fmt: OutputFormat, fix_execstack: bool | None = None
) -> RunInfo:
    """Execute a stored run in this process, with the terminal display, signals and Ctrl-C handled."""
    cancel = threading.Event()
    show = fmt == OutputFormat.table or err_console.is_terminal
    try:
        with (
            termination_signals(),
            graceful_interrupt(cancel, SWEEP_STOP_MESSAGE),
            RunDisplay(show) as display,
        ):
            execution = LocalExecution(
                run_id=run.id,
                cancel=cancel,
                events=display,
                fix=_fix_callback(fix_execstack),
                cancel_status=RunStatus.interrupted,
            )
            final = execute_here(store, execution)
            display.finish(final)
            return final
    except TerminatedBySignal as exc:  # before KeyboardInterrupt: it is one
        err_console.print(f"[yellow]{exc}; the engine was stopped.[/]")
        raise typer.Exit(143) from None
    except KeyboardInterrupt:
        err_console.print(f"[yellow]Aborted; the engine was stopped. Stored cells stay with run {run.id}.[/]")
        raise typer.Exit(130) from None
