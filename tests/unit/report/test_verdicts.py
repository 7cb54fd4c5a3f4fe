"""Verdicts of a comparison, checked on simulated per-request records from a known distribution: the same server
is seldom called different, a 10% slower one is found, and a cell's interval covers the true median."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelbench.bench.intervals import stat_intervals
from accelbench.domain.run import CellStatus
from accelbench.report.tables import CellAggregate, MetricAggregate
from accelbench.report.verdicts import (
    NO_DIFFERENCE,
    MetricVerdict,
    cell_verdicts,
    judge,
    metric_verdict,
    no_difference_phrase,
    pct_range,
    ratio_interval,
    repeats_needed,
    verdict_words,
)

# per-request TPOT of the simulated server: lognormal around 20 ms, each repeat a little off (waves, noise)
TPOT_MS, REQUEST_SIGMA, REPEAT_SD = 20.0, 0.25, 0.01


def simulated_tpot(
    rng: np.random.Generator, repeats: int, requests: int, slower: float = 1.0
) -> MetricAggregate:
    """A cell's median TPOT over its repeats, each with its request-level interval."""
    values, cis = [], []
    for _ in range(repeats):
        shift = 1.0 + rng.normal(0.0, REPEAT_SD)
        x = TPOT_MS * slower * shift * rng.lognormal(0.0, REQUEST_SIGMA, requests)
        values.append(float(np.median(x)))
        cis.append(list(stat_intervals(x)["median"]))
    agg = MetricAggregate.of(values, cis)
    assert agg is not None
    return agg


def cell(run_id: str, tpot: MetricAggregate) -> CellAggregate:
    return CellAggregate(
        run_id=run_id,
        input_len=128,
        concurrency=4,
        repeats=tpot.n,
        repeats_used=tpot.n,
        status=CellStatus.completed,
        tpot_p50_ms=tpot,
    )


def verdicts(rng: np.random.Generator, trials: int, slower: float, repeats: int = 3) -> list[str]:
    out = []
    for _ in range(trials):
        a = cell("a", simulated_tpot(rng, repeats, 300))
        b = cell("b", simulated_tpot(rng, repeats, 300, slower))
        v = metric_verdict(a, b, "tpot_p50_ms", "TPOT p50 (ms)", False)
        assert v is not None
        out.append(v.verdict)
    return out


def test_two_runs_of_the_same_server_show_no_detectable_difference_nine_times_in_ten() -> None:
    found = verdicts(np.random.default_rng(21), 120, 1.0)
    assert found.count(NO_DIFFERENCE) / len(found) >= 0.85


def test_a_server_ten_percent_slower_per_token_is_found_slower_with_three_repeats() -> None:
    found = verdicts(np.random.default_rng(22), 120, 1.10)
    assert found.count("worse") / len(found) >= 0.9
    assert "better" not in found


def test_a_cells_interval_covers_the_true_median_about_95_percent() -> None:
    rng = np.random.default_rng(23)
    hits, trials = 0, 200
    for _ in range(trials):
        agg = simulated_tpot(rng, 3, 300)
        assert agg.ci95 is not None
        hits += agg.ci95[0] <= TPOT_MS <= agg.ci95[1]
    assert 0.88 <= hits / trials <= 0.995


def test_verdict_follows_the_metrics_direction() -> None:
    assert judge([1.05, 1.2], higher_is_better=True) == "better"
    assert judge([1.05, 1.2], higher_is_better=False) == "worse"
    assert judge([0.8, 0.95], higher_is_better=False) == "better"
    assert judge([0.97, 1.04], higher_is_better=False) == NO_DIFFERENCE
    assert judge(None, higher_is_better=True) == "unknown"


def test_repeats_needed_grows_with_the_variance() -> None:
    assert repeats_needed([0.99, 1.01], 3) == 3  # a 5% difference would already show
    wide = repeats_needed([0.9, 1.1], 3)
    assert wide is not None and wide > repeats_needed([0.95, 1.05], 3)  # type: ignore[operator]
    # 3 repeats give a log-ratio standard error s; n repeats give s * sqrt(3 / n)
    s = (math.log(1.1) - math.log(0.9)) / (2 * 1.959964)
    assert wide == math.ceil(3 * ((1.959964 + 0.841621) * s / math.log(1.05)) ** 2)


def test_a_cell_compares_every_table_metric_and_phrases_what_it_found() -> None:
    rng = np.random.default_rng(24)
    a = cell("a", simulated_tpot(rng, 3, 300))
    b = cell("b", simulated_tpot(rng, 3, 300, 0.8))
    found = cell_verdicts(a, b)
    assert [v.metric for v in found] == ["tpot_p50_ms"]  # the cells hold only TPOT
    v = found[0]
    assert (
        v.verdict == "better" and v.direction == "lower is better" and v.ratio == pytest.approx(0.8, abs=0.03)
    )
    assert v.ratio_ci95 is not None and v.ratio_ci95[1] < 1
    near, far = sorted(round(abs(x - 1) * 100) for x in v.ratio_ci95)
    assert pct_range(v) == f"{abs(v.ratio - 1) * 100:.0f}% ({near}-{far}%)"
    same = metric_verdict(a, a, "tpot_p50_ms", "TPOT p50 (ms)", False)
    assert same is not None and same.verdict == NO_DIFFERENCE and same.repeats_needed is not None
    assert no_difference_phrase(same).startswith("no detectable difference (ratio 1.00")
    bare = MetricAggregate.of([20.0, 21.0])
    assert bare is not None and ratio_interval(bare, bare) is None


def test_a_latency_of_zero_has_no_words_rather_than_a_division_by_zero() -> None:
    """A server that sends every token in one chunk measures TPOT 0: the ratio against it is 0 and its speed is
    not a finite change, so the verdict keeps its judgement and says no figure (it used to raise)."""
    v = MetricVerdict(
        run_id="b",
        baseline="a",
        input_len=128,
        concurrency=1,
        metric="tpot_p50_ms",
        label="TPOT p50 (ms)",
        direction="lower is better",
        baseline_value=2.0,
        value=0.0,
        ratio=0.0,
        ratio_ci95=[0.0, 0.0],
        verdict="better",
        repeats=[3, 3],
    )
    assert verdict_words(v) == ""
