"""``compare`` and ``report`` as the CLI asks for them: two or more stored runs against a baseline, and the
offline report files of one or more runs. The comparison itself is ``report.compare``; its rendering stays with
the shell."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from accelbench.domain.instance_types import PriceTier
from accelbench.report.compare_runs import Comparison, compare_runs
from accelbench.report.files import write_report_files
from accelbench.services.keywords import keywords
from accelbench.store import Store


@dataclass(frozen=True)
class CompareRequest:
    """Runs (ids or prefixes), the baseline among them (else the first), the price tier, and whether runs that
    are not like for like with the baseline stay in the ratios."""

    runs: list[str]
    tier: PriceTier = PriceTier.on_demand
    baseline: str | None = None
    allow_mismatch: bool = False
    min_runs: int = 2


def compare(store: Store, req: CompareRequest) -> Comparison:
    return compare_runs(store, req.runs, **keywords(req, "runs"))


@dataclass(frozen=True)
class ReportRequest:
    runs: list[str]
    out_dir: Path
    tier: PriceTier = PriceTier.on_demand


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    images: list[Path] = field(default_factory=list)


def write_report(store: Store, req: ReportRequest) -> ReportFiles:
    """report.html (self-contained), report.md and their PNG charts, written into ``out_dir``."""
    html, md, *images = write_report_files(store, req.runs, req.out_dir, tier=req.tier)
    return ReportFiles(html=html, markdown=md, images=images)
