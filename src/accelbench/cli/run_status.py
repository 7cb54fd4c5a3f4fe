"""A run's status as the runs commands print it: its value in the colour of its state."""

from __future__ import annotations

from accelbench.domain.run import RunStatus

STATUS_STYLE = {
    RunStatus.completed: "green",
    RunStatus.failed: "red",
    RunStatus.interrupted: "yellow",
    RunStatus.cancelled: "yellow",
    RunStatus.benchmarking: "cyan",
    RunStatus.deploying: "cyan",
    RunStatus.pending: "dim",
}


def status_text(status: RunStatus) -> str:
    return f"[{STATUS_STYLE.get(status, 'white')}]{status.value}[/]"
