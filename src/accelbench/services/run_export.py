"""A stored run's results written for other tools (``accelbench runs export ID --format ...`` and the API's
``GET /runs/{id}/results-export``): llm-d-benchmark's benchmark report (one per cell and repeat, each valid
against the vendored schema), vLLM's ``--save-result`` JSON (one per cell and repeat) or the per-cell CSV table."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

from accelbench.bench.importers.llm_d_schema import report_errors
from accelbench.bench.results_io import to_vllm_dict
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.errors import UserInputError
from accelbench.registry import suggestion
from accelbench.report import tables
from accelbench.report.llm_d_report import run_reports
from accelbench.store import Store

FORMATS = ("llm-d-report", "vllm", "csv")


@dataclass
class ExportFile:
    """One file of an export."""

    name: str
    content: str
    media_type: str


def _cells(store: Store, run: RunInfo) -> list[tuple[ResultInfo, BenchmarkSummary]]:
    return [(r, store.get_summary(r.id, with_telemetry=False)) for r in store.get_results(run.id)]


def _dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1, allow_nan=False) + "\n"


def _cell_name(run: RunInfo, r: ResultInfo) -> str:
    return f"{run.id}-in{r.input_len}-c{r.concurrency}-r{r.repeat + 1}"


def export_run(store: Store, ref: str, fmt: str) -> list[ExportFile]:
    """The run's results as files of ``fmt``; a run with no stored result is refused."""
    if fmt not in FORMATS:
        raise UserInputError(
            f"Unknown export format {fmt!r}." + suggestion(fmt, FORMATS), hint="Known: " + ", ".join(FORMATS)
        )
    run = store.get_run(ref)
    if fmt == "csv":
        return [ExportFile(f"{run.id}-results.csv", results_csv(store, run), "text/csv")]
    cells = _cells(store, run)
    if not cells:
        raise UserInputError(f"Run {run.id} has no stored results to export.")
    if fmt == "vllm":
        return [
            ExportFile(f"{_cell_name(run, r)}.json", _dumps(to_vllm_dict(s)), "application/json")
            for r, s in cells
        ]

    out = []
    for (r, _s), report in zip(cells, run_reports(run, cells), strict=True):
        errors = report_errors(report)
        if errors:  # a bug of the exporter, never a user's: say where the report breaks the schema
            raise RuntimeError(
                f"the llm-d report of {_cell_name(run, r)} breaks the schema: {'; '.join(errors)}"
            )
        out.append(ExportFile(f"{_cell_name(run, r)}.llm-d-report.json", _dumps(report), "application/json"))
    return out


def results_csv(store: Store, run: RunInfo) -> str:
    """The run's per-cell table (the same columns as ``runs show`` and the results CSV)."""

    cells = tables.aggregate_results(store.get_results(run.id))
    rng = tables.has_repeats(cells)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(tables.csv_header(with_range=rng))
    w.writerows(tables.csv_rows(cells, with_range=rng))
    return buf.getvalue()
