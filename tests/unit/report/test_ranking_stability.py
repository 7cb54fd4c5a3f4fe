"""How often a ranking survives resampling: a clear leader stays on top, two close runs swap places."""

from __future__ import annotations

import numpy as np
import pytest

from accelbench.bench.intervals import stat_intervals
from accelbench.report.ranking_stability import rank_stability, stability_sentence
from accelbench.report.tables import MetricAggregate


def figure(rng: np.random.Generator, center: float, repeats: int = 3) -> MetricAggregate:
    values, cis = [], []
    for _ in range(repeats):
        x = center * rng.lognormal(0.0, 0.2, 300)
        values.append(float(np.median(x)))
        cis.append(list(stat_intervals(x)["median"]))
    agg = MetricAggregate.of(values, cis)
    assert agg is not None
    return agg


def test_a_clear_leader_stays_on_top_and_close_runs_swap() -> None:
    rng = np.random.default_rng(8)
    s = rank_stability(
        [("slow", figure(rng, 100.0)), ("fast", figure(rng, 150.0)), ("close", figure(rng, 101.0))],
        higher_is_better=True,
    )
    assert s is not None and s.names[0] == "fast"
    assert s.top_share > 0.99
    assert s.swap_shares[0] < 0.01  # fast vs the next
    assert 0.1 < s.swap_shares[1] < 0.9  # slow and close: about as often one way as the other
    text = stability_sentence(s, "has the highest output throughput")
    assert text.startswith("fast has the highest output throughput in 100% of resamples; ")
    assert "swap places in" in text


def test_lower_is_better_and_a_transform_rank_by_cost() -> None:
    rng = np.random.default_rng(9)
    items = [("a", figure(rng, 100.0)), ("b", figure(rng, 120.0))]
    price = {"a": 1.0, "b": 3.0}  # b is faster but three times the price: a is cheaper per token
    s = rank_stability(items, higher_is_better=False, transform=lambda n, tps: price[n] / tps)
    assert s is not None and s.names == ["a", "b"] and s.top_share == pytest.approx(1.0)
    assert rank_stability(items[:1], higher_is_better=True) is None
