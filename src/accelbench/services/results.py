"""Stored results as use cases: per-cell aggregates, one run's findings, comparisons (JSON, CSV) and the offline
HTML report, each computed by the report layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.domain.instance_types import PriceTier
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.report.compare_csv import write_compare_csv
from accelbench.report.compare_runs import compare_runs, comparison_json
from accelbench.report.document import ReportData
from accelbench.report.files import load_report
from accelbench.report.html import render_html
from accelbench.report.tables import CellAggregate, aggregate_results
from accelbench.store import Store


def aggregate(results: Sequence[ResultInfo]) -> list[CellAggregate]:
    return aggregate_results(results)


def run_comparison(store: Store, run_id: str) -> Any:
    """The report layer's comparison of one run with itself: its cells, scaling and findings."""
    return compare_runs(store, [run_id], min_runs=1)


def run_findings(store: Store, run: RunInfo, results: Sequence[ResultInfo]) -> list[dict[str, Any]]:
    """Findings about one run (sentences with the figures they quote), computed by the report layer."""
    if not results:
        return []
    return [f.model_dump(mode="json") for f in run_comparison(store, run.id).findings]


def report_data(store: Store, run_ids: Sequence[str], tier: Any = None) -> ReportData:
    """The report of ``run_ids``, in the order given, built from one ``RunView`` per run (``report/files.py``
    ``load_report``): what the offline report renders and the Compare page shows."""
    return load_report(store, list(run_ids), tier=tier or PriceTier.on_demand)


def render_report(store: Store, run_ids: Sequence[str], tier: Any = None) -> str:
    """The offline HTML report of ``run_ids`` (the same file ``accelbench report`` writes)."""
    return render_html(report_data(store, run_ids, tier))


def compare_json(
    store: Store, run_ids: Sequence[str], tier: Any, *, allow_mismatch: bool = False
) -> dict[str, Any]:
    return comparison_json(compare_runs(store, list(run_ids), tier=tier, allow_mismatch=allow_mismatch))


def compare_csv(store: Store, run_ids: Sequence[str], tier: Any, *, allow_mismatch: bool = False) -> str:
    return write_compare_csv(compare_runs(store, list(run_ids), tier=tier, allow_mismatch=allow_mismatch))
