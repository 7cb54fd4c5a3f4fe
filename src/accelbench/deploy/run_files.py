"""Where a run's files go and which files a finished run gets (every target's runs alike)."""

from __future__ import annotations

import logging
from pathlib import Path

from accelbench.report.files import write_report_files
from accelbench.report.sweep_outputs import write_sweep_outputs
from accelbench.settings import get_settings
from accelbench.store.repo import Store

log = logging.getLogger("accelbench.orchestrator")


def run_dir_for(run_id: str) -> Path:
    """Where a run's engine log and report files go."""
    return get_settings().runs_dir / run_id


def write_reports(store: Store, run_id: str, out_dir: Path) -> list[Path]:
    """``write_run_files`` for a run that has results; a failure is recorded on the run, never raised."""
    if not store.get_results(run_id):
        return []
    try:
        return write_run_files(store, run_id, out_dir)
    except Exception as exc:  # the results stay stored; `accelbench report` can write the files again
        log.warning("run %s: report files not written: %s", run_id, exc)
        store.merge_run_extra(run_id, report_error=f"{type(exc).__name__}: {exc}")
        return []


def write_run_files(store: Store, run_id: str, out_dir: Path) -> list[Path]:
    """A run's files: report.html (self-contained) and report.md with PNG charts, then the sweep's
    results.md / results.csv / plots / per-repeat JSON. report.html comes first: the file a person opens."""

    sweep_files = list(write_sweep_outputs(store, run_id, out_dir).all_paths())
    # both write the same concurrency charts under the same names: list each file once
    return list(dict.fromkeys([*write_report_files(store, [run_id], out_dir), *sweep_files]))
