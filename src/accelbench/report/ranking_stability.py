"""How stable a ranking of measured figures is: each ranked figure is resampled (its repeats, then its requests:
``bench.intervals.cell_replicates``, independently per item) and the share of resamples in which the top choice
stays on top, and in which neighbours swap places, is counted.

"g6.xlarge has the highest output throughput in 97% of resamples; m8i.2xlarge and c8g.4xlarge swap places in
41%". Items without an interval (results stored before intervals existed) are left out of the resampling."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from accelbench.bench.intervals import cell_replicates
from accelbench.report.tables import CellAggregate, MetricAggregate

#: a swap rarer than this is not worth a sentence
MIN_SWAP = 0.05


@dataclass(frozen=True)
class Stability:
    """A ranking and how often it survives resampling."""

    names: list[str]  # best first, by the figures as measured
    top_share: float  # resamples in which names[0] is best
    swap_shares: list[float]  # per neighbouring pair (names[i], names[i + 1]): resamples in which they swap


def replicates(agg: MetricAggregate, salt: int) -> np.ndarray:
    """The bootstrap replicates of one aggregated figure."""
    within = agg.repeat_ci95 or [None] * agg.n
    cis = [(float(c[0]), float(c[1])) if c is not None else None for c in within]
    return cell_replicates(agg.values, cis, salt=salt)


def rank_stability(
    items: Sequence[tuple[str, MetricAggregate]],
    *,
    higher_is_better: bool,
    transform: Callable[[str, np.ndarray], np.ndarray] | None = None,
) -> Stability | None:
    """The stability of ranking ``items`` (name, figure) best first; ``transform`` maps a name's replicates to the
    ranked quantity (e.g. throughput to cost per token). None with fewer than two items that have intervals."""
    kept = [(name, agg) for name, agg in items if agg.ci95 is not None]
    if len(kept) < 2:
        return None
    reps = []
    for i, (name, agg) in enumerate(kept):
        r = replicates(agg, salt=100 + i)
        reps.append(transform(name, r) if transform is not None else r)
    points = [float(np.mean(r)) for r in reps]
    sign = -1.0 if higher_is_better else 1.0
    order = sorted(range(len(kept)), key=lambda i: sign * points[i])
    table = np.stack([reps[i] for i in order]) * sign  # lower is better from here on
    top_share = float(np.mean(np.argmin(table, axis=0) == 0))
    swaps = [float(np.mean(table[i] > table[i + 1])) for i in range(len(order) - 1)]
    return Stability(names=[kept[i][0] for i in order], top_share=top_share, swap_shares=swaps)


def stability_sentence(s: Stability, best: str) -> str:
    """``"A has the highest output throughput in 97% of resamples; B and C swap places in 41%."``"""
    text = f"{s.names[0]} {best} in {s.top_share:.0%} of resamples"
    swaps = [
        f"{s.names[i]} and {s.names[i + 1]} swap places in {share:.0%}"
        for i, share in enumerate(s.swap_shares)
        if share >= MIN_SWAP
    ]
    return text + ("; " + "; ".join(swaps) if swaps else "") + "."


def best_configuration_stability(
    items: Sequence[tuple[str, CellAggregate | None, float | None]],
) -> list[str]:
    """Sentences on how stable the ranking of runs at their best configurations is (``items``: each run's name,
    its best cell and its hourly price): by output throughput, and by cost per 1M output tokens when every run
    has a price."""
    with_tps = [
        (n, agg, usd) for n, c, usd in items if c is not None and (agg := c.metric("output_throughput"))
    ]
    out: list[str] = []
    s = rank_stability([(n, agg) for n, agg, _ in with_tps], higher_is_better=True)
    if s is not None:
        out.append(stability_sentence(s, "has the highest output throughput at its best configuration"))
    prices = {n: usd for n, _, usd in with_tps if usd}
    if len(prices) == len(with_tps):

        def cost(name: str, tps: np.ndarray) -> np.ndarray:
            return prices[name] * 1e6 / 3600.0 / np.maximum(tps, 1e-9)

        c = rank_stability([(n, agg) for n, agg, _ in with_tps], higher_is_better=False, transform=cost)
        if c is not None:
            out.append(
                stability_sentence(c, "is the cheapest per 1M output tokens at its best configuration")
            )
    return out
