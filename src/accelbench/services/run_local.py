"""A stored run executed in this process, as ``accelbench run``, ``rerun`` and ``demo`` do it: the lifecycle
(deploy, wait ready, sweep or capacity search, store, report files, teardown) with SIGTERM and SIGHUP turned
into an interrupt; what the run recorded, summarised for its ending; a repeat of a stored run, and its figures
beside the old ones."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.bench.quality_run import quality_line
from accelbench.bench.target_ci import summary_line
from accelbench.deploy import orchestrator
from accelbench.deploy.local import handle_termination_signals
from accelbench.deploy.run_files import write_run_files
from accelbench.domain.diagnosis import Diagnosis
from accelbench.domain.progress import Progress
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import RunSpec, RunStatus
from accelbench.errors import UserInputError
from accelbench.report.tables import METRICS, aggregate_results
from accelbench.services.keywords import keywords
from accelbench.store import Store
from accelbench.telemetry.host import redact_command
from accelbench.telemetry.isa import IsaTraceReport, format_report

__all__ = [
    "LocalExecution",
    "RecordedLines",
    "RunSummaryRequest",
    "execute_here",
    "record_demo_wall",
    "recorded_lines",
    "redacted_command",
    "rerun_comparison",
    "rerun_source",
    "run_results",
    "run_summary",
    "termination_signals",
]


@contextmanager
def termination_signals() -> Iterator[None]:
    """Within this block SIGTERM and SIGHUP raise ``TerminatedBySignal`` (a KeyboardInterrupt), so the engine
    is torn down as on Ctrl-C."""
    with handle_termination_signals():
        yield


@dataclass
class LocalExecution:
    """A stored run to execute here: Ctrl-C sets ``cancel``, the steps go to ``events``, ``fix`` decides
    whether to apply a known automatic fix, and a cancelled run ends ``cancel_status``."""

    run_id: str
    cancel: threading.Event
    events: Progress
    fix: Callable[[Diagnosis], bool] | None = None
    cancel_status: RunStatus = RunStatus.interrupted


def execute_here(store: Store, req: LocalExecution) -> RunInfo:
    """Run the stored run's lifecycle in this process; the run as it ended (a failure is a failed run, not an
    exception)."""
    return orchestrator.execute_run(store, req.run_id, **keywords(req, "run_id"))


def run_results(store: Store, run_id: str) -> list[ResultInfo]:
    return list(store.get_results(run_id))


@dataclass(frozen=True)
class RunSummaryRequest:
    """A finished run, the title its summary carries, and where to write its report files too (None: only
    where the run wrote them)."""

    run: RunInfo
    title: str
    out: Path | None = None


def run_summary(store: Store, req: RunSummaryRequest) -> dict[str, Any]:
    """The run, its cells (mean of the repeats), its files and their directory: what ``--format json`` prints
    and what the ending shows."""
    run, out = req.run, req.out
    files = list(run.extra.get("files") or [])
    if out is not None and store.get_results(run.id):
        files += [str(p) for p in write_run_files(store, run.id, out)]
    return {
        "run": run.model_dump(mode="json"),
        "cells": [c.model_dump(mode="json") for c in aggregate_results(store.get_results(run.id))],
        "files": files,
        "out_dir": str(out) if out else run.extra.get("run_dir"),
        "title": req.title,
    }


@dataclass(frozen=True)
class RecordedLines:
    """What a run recorded beside its figures, each as the line a person reads (None: not recorded)."""

    quality: str | None = None
    isa_trace: str | None = None
    target_ci: str | None = None


def recorded_lines(run: RunInfo) -> RecordedLines:
    quality = run.extra.get("quality")
    isa = run.extra.get("isa_trace")
    ci = run.extra.get("target_ci")
    return RecordedLines(
        quality=quality_line(quality) if isinstance(quality, dict) else None,
        isa_trace=format_report(IsaTraceReport.model_validate(isa))
        if isa and isa.get("total_executions") is not None
        else None,
        target_ci=summary_line(ci) if isinstance(ci, dict) else None,
    )


def redacted_command(argv: list[str]) -> str:
    """The engine's command line with its secrets hidden."""
    return redact_command(argv)


def record_demo_wall(store: Store, run_id: str, seconds: float) -> None:
    store.merge_run_extra(run_id, demo_wall_s=round(seconds, 1))


def rerun_source(store: Store, ref: str) -> tuple[RunInfo, RunSpec]:
    """The stored run ``rerun`` repeats and its recorded spec; only runs made by ``run`` or the API."""
    old = store.get_run(ref)
    if old.kind != "run":
        raise UserInputError(
            f"Run {old.id} is a {old.kind} run; rerun repeats runs made with `accelbench run` or the API.",
            hint="Repeat a sweep with `accelbench sweep --spec ...`.",
        )
    return old, orchestrator.load_spec(old)


def rerun_comparison(store: Store, old: RunInfo, new: RunInfo) -> list[dict[str, Any]]:
    """Per cell (input length, concurrency) and metric: the old and new means and the change in percent."""
    before = {(c.input_len, c.concurrency): c for c in aggregate_results(store.get_results(old.id))}
    after = {(c.input_len, c.concurrency): c for c in aggregate_results(store.get_results(new.id))}
    rows = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        row: dict[str, Any] = {"input_len": key[0], "concurrency": key[1]}
        for m in METRICS:
            va, vb = (a.mean(m.key) if a else None), (b.mean(m.key) if b else None)
            row[m.key] = {
                "old": va,
                "new": vb,
                "change_pct": ((vb - va) / va * 100) if va and vb is not None else None,
                "digits": m.digits,
                "header": m.header,
            }
        rows.append(row)
    return rows
