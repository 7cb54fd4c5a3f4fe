"""A ``Progress`` sink for the terminal: each step on its own line with its duration, and a live status line
showing the latest output of the sub-process (pip, the compiler, the engine) with the elapsed time.

A step made of sub-steps (``group``: installing the engine is creating its environment, pip, checks) is ticked
when its last sub-step ends, with their total time; the sub-steps are ticked beneath it, indented. A note (that
the load generator shares cores with the engine) is printed once, as a note, never as the label of a step.

Everything goes to stderr so ``--format json`` keeps stdout clean. Without a terminal (CI logs) only the
step lines are printed, plus a heartbeat line every ``heartbeat_s`` so a long compile is visibly alive.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from rich.markup import escape
from rich.status import Status

from accelbench.cli.common import err_console
from accelbench.domain.progress import Progress

_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")


def _fmt(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}:{s:02d}"


class ConsoleProgress(Progress):
    def __init__(self, *, heartbeat_s: float = 30.0, quiet: bool = False) -> None:
        self.quiet = quiet
        self.heartbeat_s = heartbeat_s
        self._t0 = time.monotonic()
        self._phase: str | None = None
        self._phase_t0 = self._t0
        self._last_beat = self._t0
        self._status: Status | None = None
        self._steps: tuple[int, int] | None = None
        self._group: str | None = None
        self._notes: set[str] = set()

    def __enter__(self) -> ConsoleProgress:
        """Start the live status line (again, after a pause for another live display)."""
        if err_console.is_terminal and not self.quiet and self._status is None:
            self._status = err_console.status("", spinner="dots")
            self._status.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.pause(ok=exc_type is None)

    def pause(self, ok: bool = True) -> None:
        """Close the current step and stop the live line (rich allows one live display at a time)."""
        self._close_phase(ok=ok)
        if self._status is not None:
            self._status.stop()
            self._status = None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _close_phase(self, ok: bool = True) -> None:
        if self._phase is None or self.quiet:
            self._phase = None
            return
        took = time.monotonic() - self._phase_t0
        mark = "[green]✓[/]" if ok else "[red]✗[/]"
        indent = "  " if self._group is not None else ""
        err_console.print(f"{indent}{mark} {escape(self._phase)} [dim]({_fmt(took)})[/]", highlight=False)
        self._phase = None

    @contextmanager
    def group(self, title: str, *, expect: str | None = None) -> Iterator[None]:
        """A step made of the sub-steps inside the block: ``title`` (with ``expect``, what it usually takes) is
        printed when it starts, its sub-steps are ticked beneath it, and it is ticked (or crossed) when the block
        ends, with the total time."""
        self._close_phase()
        t0 = time.monotonic()
        if not self.quiet:
            err_console.print(escape(title + (f" ({expect})" if expect else "")), highlight=False)
        if self._status is not None:
            self._status.update(escape(title))
        self._group = title
        ok = False
        try:
            yield
            ok = True
        finally:
            self._close_phase(ok=ok)
            self._group = None
            if not self.quiet:
                mark = "[green]✓[/]" if ok else "[red]✗[/]"
                took = _fmt(time.monotonic() - t0)
                err_console.print(f"{mark} {escape(title)} [dim]({took} in all)[/]", highlight=False)

    def note(self, text: str) -> None:
        """Said once, above the live line; the step in progress keeps its name and its clock."""
        if self.quiet or text in self._notes:
            return
        self._notes.add(text)
        indent = "  " if self._group is not None else ""
        err_console.print(f"{indent}[yellow]Note:[/] {escape(text)}", highlight=False)

    def phase(self, message: str) -> None:
        self._close_phase()
        self._phase = message
        self._phase_t0 = time.monotonic()
        self._steps = None
        if self._status is not None:
            self._status.update(escape(self._label()))

    def line(self, text: str) -> None:
        m = _STEP.match(text)
        if m:
            self._steps = (int(m.group(1)), int(m.group(2)))
        now = time.monotonic()
        phase_elapsed = _fmt(now - self._phase_t0)
        steps = ""
        if self._steps:
            done, total = self._steps
            steps = f" {100 * done // max(total, 1)}% ({done}/{total})"
        if self._status is not None:
            short = text.strip()
            if len(short) > 90:
                short = short[:87] + "..."
            self._status.update(
                f"{escape(self._label())}{steps} [dim]{phase_elapsed}[/]\n  [dim]{escape(short)}[/]"
            )
        elif not self.quiet and now - self._last_beat >= self.heartbeat_s:
            self._last_beat = now
            err_console.print(f"  … {escape(self._label())}{steps} ({phase_elapsed} so far)", highlight=False)

    def _label(self) -> str:
        """The step in progress as the live line names it: within a group, ``group › step``."""
        phase = self._phase or ""
        return f"{self._group} › {phase}" if self._group is not None and phase else (self._group or phase)
