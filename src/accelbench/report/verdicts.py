"""Whether a difference between two measured cells is real: ratio, its 95% interval, and a verdict.

For each matched cell and metric a run is set against the baseline: ``ratio`` is the run's figure over the
baseline's, ``ratio_ci95`` the 2.5th-97.5th percentile of the same ratio over the two cells' bootstrap replicates
(``bench.intervals.cell_replicates``: repeats, then requests within them; the two cells draw independently).
The verdict follows the metric's direction (lower latency, higher throughput is better): ``better`` or
``worse`` when the interval leaves 1 out, else ``no detectable difference``, which also says how many repeats
(of the same size) would detect a 5% difference at the variance measured (two-sided 5% test, 80% power).
Cells without intervals (results stored before they existed) get ``unknown``: nothing can be said.

The comparison holds these once (``Comparison.verdicts``) and every output reads them: the findings, the
headline, the compare page and the compare CSV.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import Field

from accelbench.bench.intervals import cell_replicates
from accelbench.domain.base import StrictModel
from accelbench.report.tables import METRICS, CellAggregate, MetricAggregate

Verdict = Literal["better", "worse", "no detectable difference", "unknown"]
NO_DIFFERENCE: Verdict = "no detectable difference"
#: the difference ``repeats_needed`` is sized to detect
DETECT = 0.05
_Z_TEST, _Z_POWER = 1.959964, 0.841621


class MetricVerdict(StrictModel):
    """One metric of one matched cell: a run against the baseline."""

    run_id: str = Field(description="The run set against the baseline.")
    baseline: str = Field(description="The baseline run id.")
    input_len: int = Field(description="Input tokens of the cell.")
    concurrency: int = Field(description="Concurrency of the cell.")
    metric: str = Field(description="The cell figure compared (e.g. tpot_p50_ms, output_throughput).")
    label: str = Field(description="The figure as tables name it.")
    direction: Literal["lower is better", "higher is better"] = Field(description="What better means here.")
    baseline_value: float = Field(description="The baseline's figure (mean over its repeats).")
    value: float = Field(description="The run's figure.")
    ratio: float = Field(description="value / baseline_value.")
    ratio_ci95: list[float] | None = Field(
        default=None, description="95% interval of the ratio, [low, high]; None without intervals."
    )
    verdict: Verdict = Field(
        description="better / worse when the interval leaves 1 out (in the metric's direction), else no "
        "detectable difference; unknown when a cell has no interval."
    )
    repeats_needed: int | None = Field(
        default=None,
        description="With no detectable difference: repeats of each run that would detect a 5% difference at "
        "the variance measured (the repeats already made when they would have); None otherwise.",
    )
    repeats: list[int] = Field(description="Repeats of the baseline and of the run.")


def ratio_interval(base: MetricAggregate, other: MetricAggregate) -> list[float] | None:
    """95% interval of other / base from the two cells' independent bootstrap replicates; None when either has
    no interval."""
    if base.ci95 is None or other.ci95 is None or base.mean == 0:
        return None

    def reps(agg: MetricAggregate, salt: int) -> np.ndarray:
        within = agg.repeat_ci95 or [None] * agg.n
        cis = [(float(c[0]), float(c[1])) if c is not None else None for c in within]
        return cell_replicates(agg.values, cis, salt=salt)

    a, b = reps(base, 0), reps(other, 1)
    ok = a != 0
    lo, hi = np.percentile(b[ok] / a[ok], (2.5, 97.5))
    return [float(lo), float(hi)]


def repeats_needed(ratio_ci95: Sequence[float], repeats: int) -> int | None:
    """Repeats that would detect a ``DETECT`` difference (5% test, 80% power), scaling the ratio interval's
    spread (on the log scale) as one over the square root of the repeats; at least ``repeats``."""
    lo, hi = ratio_ci95
    if lo <= 0 or hi <= 0:
        return None
    se = (math.log(hi) - math.log(lo)) / (2 * _Z_TEST)
    if se == 0:
        return repeats
    need = repeats * ((_Z_TEST + _Z_POWER) * se / math.log(1 + DETECT)) ** 2
    return max(repeats, math.ceil(need))


def judge(ratio_ci95: Sequence[float] | None, higher_is_better: bool) -> Verdict:
    """The verdict an interval of run / baseline supports."""
    if ratio_ci95 is None:
        return "unknown"
    lo, hi = ratio_ci95
    if lo > 1.0:
        return "better" if higher_is_better else "worse"
    if hi < 1.0:
        return "worse" if higher_is_better else "better"
    return NO_DIFFERENCE


def metric_verdict(
    base: CellAggregate, cell: CellAggregate, key: str, label: str, higher_is_better: bool
) -> MetricVerdict | None:
    """One metric of ``cell`` against the same metric of the baseline's ``base``; None when either lacks it."""
    a, b = base.metric(key), cell.metric(key)
    if a is None or b is None or a.mean == 0:
        return None
    ci = ratio_interval(a, b)
    verdict = judge(ci, higher_is_better)
    return MetricVerdict(
        run_id=cell.run_id,
        baseline=base.run_id,
        input_len=cell.input_len,
        concurrency=cell.concurrency,
        metric=key,
        label=label,
        direction="higher is better" if higher_is_better else "lower is better",
        baseline_value=a.mean,
        value=b.mean,
        ratio=b.mean / a.mean,
        ratio_ci95=ci,
        verdict=verdict,
        repeats_needed=repeats_needed(ci, max(a.n, b.n))
        if ci is not None and verdict == NO_DIFFERENCE
        else None,
        repeats=[a.n, b.n],
    )


def cell_verdicts(base: CellAggregate, cell: CellAggregate) -> list[MetricVerdict]:
    """Every table metric (``report.tables.METRICS``: the latency medians and throughputs) of one matched cell."""
    return [
        v
        for m in METRICS
        if (v := metric_verdict(base, cell, m.key, m.header, m.higher_is_better)) is not None
    ]


def comparison_verdicts(
    cells: Sequence[CellAggregate], baseline: str, matched: Sequence[tuple[int, int]]
) -> list[MetricVerdict]:
    """Each other run's matched cells against the baseline's, metric by metric."""
    by_key = {(c.run_id, c.input_len, c.concurrency): c for c in cells}
    runs = list(dict.fromkeys(c.run_id for c in cells if c.run_id != baseline))
    out: list[MetricVerdict] = []
    for run in runs:
        for il, conc in matched:
            base, cell = by_key.get((baseline, il, conc)), by_key.get((run, il, conc))
            if base is not None and cell is not None:
                out.extend(cell_verdicts(base, cell))
    return out


def cell_intervals(cell: CellAggregate) -> dict[str, list[float]]:
    """The 95% intervals of a cell's table figures by metric key (those that have one)."""
    return {m.key: list(agg.ci95) for m in METRICS if (agg := cell.metric(m.key)) is not None and agg.ci95}


def find(
    verdicts: Sequence[MetricVerdict], run_id: str, input_len: int, concurrency: int, metric: str
) -> MetricVerdict | None:
    """The verdict of one run, cell and metric, if there is one."""
    for v in verdicts:
        if (v.run_id, v.input_len, v.concurrency, v.metric) == (run_id, input_len, concurrency, metric):
            return v
    return None


def pct_range(v: MetricVerdict) -> str:
    """The size of a detected difference and its interval in percent: ``"12% (8-16%)"`` (the interval leaves
    1 out, so both ends lie on the same side of it)."""
    assert v.ratio_ci95 is not None
    near, far = sorted(abs(x - 1) * 100 for x in v.ratio_ci95)
    return f"{abs(v.ratio - 1) * 100:.0f}% ({near:.0f}-{far:.0f}%)"


def no_difference_phrase(v: MetricVerdict) -> str:
    """``"no detectable difference (ratio 1.02, 95% 0.97-1.07; 6 repeats would detect 5%)"``."""
    assert v.ratio_ci95 is not None
    lo, hi = v.ratio_ci95
    text = f"no detectable difference (ratio {v.ratio:.2f}, 95% interval {lo:.2f}-{hi:.2f}"
    if v.repeats_needed is not None:
        made = max(v.repeats)
        if v.repeats_needed > made:
            text += f"; {v.repeats_needed} repeats each would detect a 5% difference"
        else:
            text += "; a 5% difference would have shown"
    return text + ")"
