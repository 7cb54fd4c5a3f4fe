"""How figures move with load: per run and input length, TPOT and TTFT growth and throughput scaling from the
lowest to the highest concurrency; between two runs, the decode speed-up at the lowest concurrency both
measured and the throughput gap at each, and whether it widens or narrows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from accelbench.report.comparison import (
    CellResult,
    Growth,
    PairRatios,
    RunScaling,
    ThroughputGap,
    lead,
)


def growth_pct(low: float, high: float) -> float:
    """(high / low - 1) x 100."""
    return (high / low - 1.0) * 100.0


def run_scaling(run_id: str, input_len: int, cells: Sequence[CellResult]) -> RunScaling | None:
    """Scaling of one run at one input length over the given cells (those with metrics); None if none."""
    usable = sorted(
        # a cell stored with concurrency 0 (bench without --max-concurrency, before it was stored as the prompt
        # count) has no known concurrency: it is not a point on the scaling curve
        (
            c
            for c in cells
            if c.run_id == run_id and c.input_len == input_len and c.repeats > 0 and c.concurrency > 0
        ),
        key=lambda c: c.concurrency,
    )
    if not usable:
        return None
    lo, hi = usable[0], usable[-1]

    def _growth(attr: str) -> Growth | None:
        a, b = getattr(lo, attr), getattr(hi, attr)
        if lo is hi or a is None or b is None or a <= 0:
            return None
        return Growth(
            run_id=run_id,
            from_concurrency=lo.concurrency,
            to_concurrency=hi.concurrency,
            from_ms=a,
            to_ms=b,
            growth_pct=growth_pct(a, b),
        )

    per_request = (
        lo.output_throughput / lo.concurrency
        if lo.output_throughput is not None and lo.concurrency > 0
        else None
    )
    scaling = (
        hi.total_throughput / lo.total_throughput
        if lo is not hi and lo.total_throughput and hi.total_throughput is not None
        else None
    )
    return RunScaling(
        run_id=run_id,
        input_len=input_len,
        concurrencies=[c.concurrency for c in usable],
        lowest_concurrency=lo.concurrency,
        highest_concurrency=hi.concurrency,
        tpot_growth=_growth("tpot_p50_ms"),
        ttft_growth=_growth("ttft_p50_ms"),
        per_request_output_tps=per_request,
        aggregate_output_tps=hi.output_throughput,
        total_throughput_low=lo.total_throughput,
        total_throughput_high=hi.total_throughput,
        throughput_scaling=scaling,
    )


def gap_trend(low_ratio: float, high_ratio: float) -> Literal["widens", "narrows", "holds", "reverses"]:
    """How the leader's advantage moves from the low to the high ratio (A/B), judged on the advantages as
    they are printed (one decimal), so a sentence never says "widens from 2.0x to 2.0x"."""
    lo = round(lead(low_ratio), 1)
    hi = round(lead(high_ratio), 1)
    if lo > 1.0 and hi > 1.0 and (low_ratio >= 1.0) != (high_ratio >= 1.0):
        return "reverses"
    if hi > lo:
        return "widens"
    if hi < lo:
        return "narrows"
    return "holds"


def pair_ratios(a: str, b: str, input_len: int, cells: Sequence[CellResult]) -> PairRatios | None:
    """B against A at one input length, over the concurrencies both measured; None when none match."""
    a_cells = {c.concurrency: c for c in cells if c.run_id == a and c.input_len == input_len and c.repeats}
    b_cells = {c.concurrency: c for c in cells if c.run_id == b and c.input_len == input_len and c.repeats}
    common = sorted(set(a_cells) & set(b_cells))
    if not common:
        return None
    lo, hi = common[0], common[-1]
    matched = [a_cells[c] for c in common] + [b_cells[c] for c in common]
    a_scaling = run_scaling(a, input_len, matched)
    b_scaling = run_scaling(b, input_len, matched)
    assert a_scaling is not None and b_scaling is not None
    tpot_a, tpot_b = a_cells[lo].tpot_p50_ms, b_cells[lo].tpot_p50_ms
    speedup = tpot_b / tpot_a if tpot_a and tpot_b else None
    gaps: list[ThroughputGap] = []
    for c in common:
        ta, tb = a_cells[c].total_throughput, b_cells[c].total_throughput
        if ta and tb:
            gaps.append(ThroughputGap(concurrency=c, a_tok_s=ta, b_tok_s=tb, ratio_a_over_b=ta / tb))
    trend = None
    if len(gaps) >= 2 and gaps[0].concurrency == lo and gaps[-1].concurrency == hi:
        trend = gap_trend(gaps[0].ratio_a_over_b, gaps[-1].ratio_a_over_b)
    differs = any(
        a_cells[c].output_len is not None
        and b_cells[c].output_len is not None
        and a_cells[c].output_len != b_cells[c].output_len
        for c in common
    )
    return PairRatios(
        input_len=input_len,
        a=a,
        b=b,
        concurrencies=common,
        lowest_concurrency=lo,
        highest_concurrency=hi,
        tpot_a_ms=tpot_a,
        tpot_b_ms=tpot_b,
        decode_speedup_a_over_b=speedup,
        throughput_gaps=gaps,
        throughput_gap_trend=trend,
        a_scaling=a_scaling,
        b_scaling=b_scaling,
        output_len_differs=differs,
    )
