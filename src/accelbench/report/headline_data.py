"""The headline's plain data, which every view renders: one run's answer (``RunHeadline`` with its
``BestCell``), a ratio between two runs (``Ratio``) and the whole headline (``Headline``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING

from accelbench.report.capacity_results import fmt_usd_per_million
from accelbench.report.cell_slo import SLOChoice
from accelbench.report.verdicts import MetricVerdict

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class BestCell:
    """The configuration a run's headline recommends, with the figures quoted."""

    input_len: int
    concurrency: int
    output_tps: float | None
    tpot_p50_ms: float | None
    ttft_p50_ms: float | None
    usd_per_1m_output: float | None
    hourly_usd: float | None
    meets_slo: bool | None


@dataclass
class RunHeadline:
    """One run's answer: the best configuration, the SLO verdict and where it breaks, cost, failures."""

    run_id: str
    name: str
    best: BestCell | None
    slo: SLOChoice | None = None
    met_cells: int = 0
    missed_cells: int = 0
    unknown_cells: int = 0
    boundaries: list[str] = field(default_factory=list)
    failed: int = 0
    ended: int = 0
    top_failure: str | None = None
    capacity_answer: str | None = None
    price_note: str | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def failure_share(self) -> float:
        return self.failed / self.ended if self.ended else 0.0

    @property
    def slo_verdict(self) -> str | None:
        """all, some, none or unknown; None without an SLO."""
        if self.slo is None:
            return None
        if self.met_cells and not self.missed_cells and not self.unknown_cells:
            return "all"
        if self.met_cells:
            return "some"
        if self.missed_cells and not self.unknown_cells:
            return "none"
        return "unknown"


@dataclass(frozen=True)
class Ratio:
    """``winner`` is ``factor`` x better than ``loser`` at ``what`` (factor >= 1 always)."""

    what: str
    winner: str
    loser: str
    factor: float
    winner_value: float
    loser_value: float
    sentence: str
    #: the comparison's verdict the sentence says (a matched cell's), None where the figures have no interval
    verdict: MetricVerdict | None = None


@dataclass
class Headline:
    """What a report or page opens with: one sentence that answers, then the sentences behind it."""

    title: str
    runs: list[RunHeadline]
    ratios: list[Ratio] = field(default_factory=list)
    stability: list[str] = field(default_factory=list)  # how often the ranking survives resampling

    @property
    def lines(self) -> list[str]:
        """Every sentence after the title, run by run, then the ratios."""
        multi = len(self.runs) > 1
        out: list[str] = []
        for r in self.runs:
            out += [f"{r.name}: {line}" if multi else line for line in r.lines]
        out += [q.sentence for q in self.ratios]
        return out + self.stability

    def as_dict(self) -> dict[str, object]:
        return {"title": self.title, "lines": self.lines, "runs": [asdict(r) for r in self.runs],
                "ratios": [_ratio_dict(q) for q in self.ratios], "stability": self.stability}  # fmt: skip


def _ratio_dict(q: Ratio) -> dict[str, object]:
    out: dict[str, object] = {f.name: getattr(q, f.name) for f in fields(q)}
    out["verdict"] = q.verdict.model_dump(mode="json") if q.verdict is not None else None
    return out


def per_million(value: float | None) -> str:
    return fmt_usd_per_million(value)
