"""The report of one or more stored runs and its files: ``report.html`` (self-contained) and ``report.md`` with its
PNG charts. ``accelbench report``, ``accelbench compare --out``, the API's and the Compare page's report and every
run's files (deploy/run_files.py) read it here: one ``RunView`` per run (``report/run_view.py``, the view
``runs show`` and the run page render too), then the report built from those views (``report/document.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from accelbench.domain.capacity import CapacitySLO
from accelbench.domain.instance_types import PriceTier
from accelbench.plan import CalibrationSet
from accelbench.report.document import ReportData, ReportOptions, report_from_views
from accelbench.report.html import write_html
from accelbench.report.markdown import write_markdown
from accelbench.report.run_view import report_views
from accelbench.store.repo import Store


def load_report(
    store: Store,
    refs: Sequence[str],
    *,
    tier: PriceTier = PriceTier.on_demand,
    slo: CapacitySLO | None = None,
    percentiles: Sequence[int] | None = None,
) -> ReportData:
    """The report of the runs ``refs`` (ids or unambiguous prefixes): their views with per-request records and
    telemetry, compared; each run judged by ``slo`` when given, else by its own SLO, if any; predicted vs
    measured with the store's active calibrations."""
    views = report_views(store, refs, tier=tier)
    calibrations = CalibrationSet.from_rows(store.active_calibrations())
    options = ReportOptions(tier=tier, slo=slo, percentiles=percentiles, calibrations=calibrations)
    return report_from_views(views, options)


def write_report_files(
    store: Store, refs: Sequence[str], out_dir: Path, *, tier: PriceTier = PriceTier.on_demand
) -> list[Path]:
    """Write ``report.html`` (self-contained), ``report.md`` and its PNG charts into ``out_dir``; returns the
    paths, the HTML first. What ``accelbench report`` and every orchestrated run write."""
    data = load_report(store, refs, tier=tier)
    out_dir.mkdir(parents=True, exist_ok=True)
    html = write_html(data, out_dir / "report.html")
    md, images = write_markdown(data, out_dir)
    return [html, md, *images]
