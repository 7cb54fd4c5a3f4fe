"""The report files of one or more runs: ``report.html`` (self-contained) and ``report.md`` with its PNG charts.
``accelbench report``, ``accelbench compare --out`` and every run's files (deploy/run_files.py) write these."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from accelbench.domain.instance_types import PriceTier
from accelbench.report.document import load_report
from accelbench.report.html import write_html
from accelbench.report.markdown import write_markdown
from accelbench.store.repo import Store


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
