"""Whether a difference between two measured cells is real: ratio, its 95% interval, and a verdict.

For each matched cell and metric a run is set against the baseline: ``ratio`` is the run's figure over the
baseline's, ``ratio_ci95`` the 2.5th-97.5th percentile of the same ratio over the two cells' bootstrap replicates
(``bench.intervals.cell_replicates``: repeats, then requests within them; the two cells draw independently).
The verdict follows the metric's direction (lower latency, higher throughput is better): ``better`` or
``worse`` when the interval leaves 1 out, else ``no detectable difference``, which also says how many repeats
(of the same size) would detect a 5% difference at the variance measured (two-sided 5% test, 80% power).
Cells without intervals (results stored before they existed) get ``unknown``: nothing can be said.

Each verdict also says which side is better (``better``: a run id, None without a detected difference) and the
words every view writes for it (``words``, made here once by ``verdict_words``): a supported difference as its
size in the metric's own terms with its interval, "25% faster (22-28%)" (a latency: the speed, one over it),
"12% higher (8-16%)" (a throughput), "20% cheaper (15-25%)" (a cost), a factor where it is twice or more
("2.5x slower (2.1-2.9x)"); otherwise "no detectable difference"; blank when unknown. The cost per 1M output
tokens gets a verdict of its own (``cost_verdict``) from the output throughput's and the two prices.

The comparison holds these once (``Comparison.verdicts``) and every output reads them: the findings, the
headline, the side-by-side tables, the compare page and the compare CSV.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import Field

from accelbench.bench.intervals import cell_replicates
from accelbench.domain.strict import StrictModel
from accelbench.report.formatting import fmt_pct
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
    better: str | None = Field(
        default=None,
        description="The run id of the better side (the run or the baseline) when the verdict is better or "
        "worse; None otherwise.",
    )
    words: str = Field(
        default="",
        description='How every view says the verdict: "25% faster (22-28%)", "12% higher (8-16%)", "no '
        'detectable difference"; blank when unknown.',
    )


#: how a difference in each kind of figure is said: (the better word, the worse word)
WORDS_LATENCY = ("faster", "slower")
WORDS_THROUGHPUT = ("higher", "lower")
WORDS_COST = ("cheaper", "more expensive")
COST_METRIC = "cost_per_1m_tokens_usd"


def vocabulary(metric: str) -> tuple[str, str]:
    """The better and the worse word of a metric: a latency's faster/slower, a throughput's higher/lower, a
    cost's cheaper/more expensive."""
    if metric == COST_METRIC:
        return WORDS_COST
    return WORDS_LATENCY if metric.endswith("_ms") else WORDS_THROUGHPUT


def _percents(value: float, low: float, high: float, word: str) -> str:
    """``"25% faster (22-28%)"``: whole percents, one decimal where the size is under 1%."""
    digits = 1 if value < 1 else 0
    return f"{fmt_pct(value, digits)} {word} ({low:.{digits}f}-{fmt_pct(high, digits)})"


def _change(q: float, low: float, high: float, up: str, down: str) -> str:
    """A quantity ``q`` times the baseline's, its interval ``low``-``high`` on one side of 1: a rise as a
    percent ("25% faster (22-28%)"), a fall as the share lost ("20% cheaper (15-25%)"), a factor where it is
    twice or more either way ("2.5x slower (2.1-2.9x)")."""
    if q > 1:
        if q >= 2.0:
            return f"{q:.1f}x {up} ({low:.1f}-{high:.1f}x)"
        return _percents((q - 1) * 100, (low - 1) * 100, (high - 1) * 100, up)
    if 1 / q >= 2.0:
        return f"{1 / q:.1f}x {down} ({1 / high:.1f}-{1 / low:.1f}x)"
    return _percents((1 - q) * 100, (1 - high) * 100, (1 - low) * 100, down)


def verdict_words(v: MetricVerdict) -> str:
    """The words of a verdict, the same in every view: a supported difference as the change against the
    baseline with its interval, of the speed for a latency (one over it: "25% faster (22-28%)"), of the
    figure itself for a throughput ("12% higher (8-16%)") and a cost ("10% more expensive (8-12%)"); "no
    detectable difference"; "" when unknown."""
    if v.verdict == "unknown" or v.ratio_ci95 is None:
        return ""
    if v.verdict == NO_DIFFERENCE:
        return NO_DIFFERENCE
    lo, hi = v.ratio_ci95
    if v.metric.endswith("_ms"):  # a latency, said as speed
        if min(v.ratio, lo, hi) <= 0:
            return ""  # a latency of 0 (every token in one chunk) has no speed to state as a change
        return _change(1 / v.ratio, 1 / hi, 1 / lo, *WORDS_LATENCY)
    if v.metric == COST_METRIC:
        return _change(v.ratio, lo, hi, WORDS_COST[1], WORDS_COST[0])
    return _change(v.ratio, lo, hi, *WORDS_THROUGHPUT)


def _judged(v: MetricVerdict) -> MetricVerdict:
    """``v`` with the better side and its words filled in."""
    v = v.model_copy(update={"better": {"better": v.run_id, "worse": v.baseline}.get(v.verdict)})
    return v.model_copy(update={"words": verdict_words(v)})


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
    made = MetricVerdict(
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
    return _judged(made)


def cost_verdict(
    output: MetricVerdict, baseline_usd_per_hour: float | None, usd_per_hour: float | None
) -> MetricVerdict | None:
    """The cost per 1M output tokens of a matched cell against the baseline's, from the output throughput's
    verdict and the two hourly prices (a price has no noise: the cost ratio is the price ratio over the
    throughput ratio, its interval likewise); None without both prices."""
    if not baseline_usd_per_hour or not usd_per_hour or output.ratio <= 0 or output.value <= 0:
        return None
    price = usd_per_hour / baseline_usd_per_hour
    ci = output.ratio_ci95
    ratio_ci = [price / ci[1], price / ci[0]] if ci is not None and ci[0] > 0 else None
    verdict = judge(ratio_ci, higher_is_better=False)
    made = output.model_copy(
        update={
            "metric": COST_METRIC,
            "label": "$/1M output tokens",
            "direction": "lower is better",
            "baseline_value": baseline_usd_per_hour / output.baseline_value / 3600.0 * 1e6,
            "value": usd_per_hour / output.value / 3600.0 * 1e6,
            "ratio": price / output.ratio,
            "ratio_ci95": ratio_ci,
            "verdict": verdict,
            "repeats_needed": output.repeats_needed if verdict == NO_DIFFERENCE else None,
        }
    )
    return _judged(made)


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
