"""80% ranges: prediction intervals of measured / predicted on a stratum's out-of-source records, the order in
which strata are tried (own family, other engines, nearest family), the figures derived from TTFT and TPOT,
overlaps in a ranking, and coverage graded source by source."""

from __future__ import annotations

import math
import random

import pytest

from accelbench.domain.estimate import SLO, EstimateRow, PredictionRange
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.plan_query import PlanQuery
from accelbench.plan.context import PlanContext
from accelbench.plan.error_records import (
    ErrorRecord,
    family_of,
    regime_of,
    shipped_accuracy,
    shipped_range_scales,
    shipped_records,
)
from accelbench.plan.range_grading import (
    SCALE_GRID,
    StratumCoverage,
    chance_in_band,
    coverage,
    intra_source_correlation,
    outside_band_by_chance,
    range_scale,
    sources_for_band,
)
from accelbench.plan.ranges import (
    MIN_ROWS,
    Interval,
    between_sources,
    capacity_range,
    deciles,
    figure_intervals,
    interval_for,
    mark_overlaps,
    point_ranges,
    pooled_between_source_variance,
)


def rec(i: int, ratio: float, source: str = "s1", family: str = "L4", **over: object) -> ErrorRecord:
    base: dict[str, object] = {
        "id": f"r{i}",
        "source": source,
        "kind": "gpu",
        "family": family,
        "engine": "vllm",
        "regime": "decode-bound",
        "tpot": ratio,
        "ttft": ratio,
        "tps": None,
    }
    base.update(over)
    return ErrorRecord(**base)  # type: ignore[arg-type]


def lognormal(n: int, sd: float, seed: int, source: str, family: str = "L4") -> list[ErrorRecord]:
    rnd = random.Random(seed)
    return [rec(seed * 1000 + i, math.exp(rnd.gauss(0.1, sd)), source, family) for i in range(n)]


WHERE = {"family": "L4", "engine": "vllm", "regime": "decode-bound", "kind": "gpu"}


def test_interval_reads_the_deciles_of_the_log_ratio_and_weighs_the_stratum_by_its_sources() -> None:
    many = lognormal(200, 0.2, 1, "a") + lognormal(200, 0.2, 2, "b")
    iv = interval_for(many, "tpot", **WHERE)
    assert iv is not None
    # log ratio ~ N(0.1, 0.2): the 10th/90th percentiles are exp(0.1 -+ 1.2816 x 0.2)
    assert iv.lo == pytest.approx(math.exp(0.1 - 1.2816 * 0.2), rel=0.06)
    assert iv.hi == pytest.approx(math.exp(0.1 + 1.2816 * 0.2), rel=0.06)
    assert "L4 x vllm x decode-bound: 400 rows, 2 sources, weighed 0.50" in iv.basis
    # another family's rows in the pool: the stratum's deciles count (k - 1) / k, the pool's 1 / k; the pool's
    # four sources disagree (biases 0.1 and about 0.7), so its interval is the random-effects one, wider than
    # its rows' deciles
    other = [rec(9000 + i, 2.0 + i / 100, f"o{i % 2}", family="A10G") for i in range(20)]
    mixed = interval_for(many + other, "tpot", **WHERE)
    own_mu, own_half = between_sources(many, "tpot") or (0.0, 0.0)
    own_lo = min(deciles([math.log(r.tpot or 1) for r in many])[0], own_mu - own_half)
    mu, half = between_sources(many + other, "tpot") or (0.0, 0.0)
    pool_rows_lo, _ = deciles([math.log(r.tpot or 1) for r in many + other])
    assert mu - half < pool_rows_lo
    assert mixed is not None and math.log(mixed.lo) == pytest.approx(
        0.5 * own_lo + 0.5 * (mu - half), rel=0.02
    )


def test_a_new_source_is_not_another_row_of_a_known_one() -> None:
    # three sources of 30 rows each, tight inside (sd 0.02) but biased apart (0.0, 0.3, 0.6): the rows'
    # deciles would reach the outer sources' means; a fourth source's bias can fall beyond them
    rows = [r for i, b in enumerate((0.0, 0.3, 0.6)) for r in lognormal(30, 0.02, i + 1, f"s{i}")]
    rows = [
        rec(r.id, (r.tpot or 1) * math.exp(b - 0.1), r.source)
        for r, b in zip(rows, [0.0] * 30 + [0.3] * 30 + [0.6] * 30, strict=True)
    ]
    mu, half = between_sources(rows, "tpot") or (0.0, 0.0)
    assert mu == pytest.approx(0.3, abs=0.01)
    # tau = 0.3 (the means' sd), (1 + 1/3) for the mean's uncertainty: 1.2816 x 0.3 x sqrt(4/3) = 0.44
    assert half == pytest.approx(1.2816 * math.sqrt(0.09 * 4 / 3 + 0.02**2), rel=0.05)
    lo, hi = deciles([math.log(r.tpot or 1) for r in rows])
    iv = interval_for(rows, "tpot", **WHERE)
    assert iv is not None and math.log(iv.lo) < lo and math.log(iv.hi) > hi
    assert between_sources(lognormal(30, 0.2, 7, "one"), "tpot") is None  # one source: no spread of biases


def test_deciles_are_order_statistics_extrapolated_when_rows_are_few() -> None:
    """Positions 0.1 (n + 1) and 0.9 (n + 1): the extremes of 9 values, past them with fewer."""
    assert deciles([float(x) for x in range(1, 10)]) == pytest.approx((1.0, 9.0))
    lo, hi = deciles([0.0, 1.0, 2.0, 3.0, 4.0])
    assert lo == pytest.approx(-0.4) and hi == pytest.approx(4.4)


def test_a_single_source_stratum_takes_its_kind_s_pool_widened_to_hold_its_own_and_says_so() -> None:
    own = lognormal(20, 0.05, 1, "a")  # one source, narrow
    pool = lognormal(20, 0.3, 2, "b", family="A10G") + lognormal(20, 0.3, 3, "c", family="A10G")
    iv = interval_for(own + pool, "tpot", **WHERE)
    assert iv is not None and "1 source, not validated out of source" in iv.basis
    wide = interval_for(own + pool, "tpot", **(WHERE | {"family": "A10G"}))
    assert (
        wide is not None and iv.lo <= wide.lo * 1.2 and iv.hi >= wide.hi / 1.2
    )  # the pool's spread, not its own


def test_rows_of_one_source_widen_by_how_much_sources_differ_in_the_kind_s_other_strata() -> None:
    # A10G: two sources whose biases sit 0.6 apart (tau^2 = 0.18 about their mean); L4 and its whole regime
    # pool: one tight source. Its rows show only its own noise, not how far a second source's bias may lie
    # (variance 2 tau^2 between two draws), so its range widens by the A10G strata's tau^2.
    a10g = [
        rec(100 + i, math.exp(b + 0.01 * (i % 3)), src, family="A10G", regime="prefill-bound")
        for src, b in (("x", 0.0), ("y", 0.6))
        for i in range(10)
    ]
    tau2 = pooled_between_source_variance(a10g, "tpot")
    assert tau2 == pytest.approx(0.18, rel=0.05)
    assert pooled_between_source_variance(lognormal(20, 0.1, 1, "a"), "tpot") is None  # no stratum of two
    tight = lognormal(20, 0.02, 1, "a")
    alone = interval_for(tight, "tpot", **WHERE)
    widened = interval_for(tight + a10g, "tpot", **WHERE)
    assert alone is not None and widened is not None
    assert math.log(alone.hi / alone.lo) < 0.2  # one source's noise only
    # about its mean 0.1: 1.2816 x sqrt(2 x 0.18 + 0.02^2) = 0.77 either side
    assert math.log(widened.lo) == pytest.approx(0.1 - 1.2816 * math.sqrt(0.36), abs=0.03)
    assert math.log(widened.hi) == pytest.approx(0.1 + 1.2816 * math.sqrt(0.36), abs=0.03)


def test_a_family_without_rows_borrows_the_nearest_and_says_so() -> None:
    rows = lognormal(20, 0.2, 3, "a", family="A10G") + lognormal(20, 0.2, 4, "b", family="A10G")
    iv = interval_for(rows, "tpot", **WHERE)
    assert iv is not None and iv.basis.startswith("not validated on L4") and "A10G" in iv.basis
    own = interval_for(rows, "tpot", **(WHERE | {"family": "A10G"}))
    assert own is not None and iv.hi / iv.lo > own.hi / own.lo  # widened
    assert interval_for(rows[: MIN_ROWS - 1], "tpot", **WHERE) is None  # too few anywhere: no range made up


def test_point_ranges_derive_e2e_throughput_and_cost_from_the_latency_ranges() -> None:
    rows = lognormal(30, 0.2, 5, "a") + lognormal(30, 0.2, 6, "b")
    point: dict[str, float | None] = {
        "ttft_ms": 100.0,
        "tpot_ms": 10.0,
        "e2e_ms": 100.0 + 10.0 * 127,
        "output_tokens_per_s": 400.0,
        "total_tokens_per_s": 2000.0,
        "requests_per_s": 3.0,
        "usd_per_million_output_tokens": 2.0,
        "usd_per_request": 0.001,
    }
    r = point_ranges(point, records=rows, **WHERE)
    assert set(r) == set(point)
    iv = interval_for(rows, "tpot", **WHERE)
    assert iv is not None
    assert r["tpot_ms"].p10 == pytest.approx(10 * iv.lo) and r["tpot_ms"].p90 == pytest.approx(10 * iv.hi)
    assert r["e2e_ms"].p10 == pytest.approx(100 * iv.lo + 1270 * iv.lo)
    # no tokens/s rows: tokens/s follow E2E (inverse), cost follows tokens/s (inverse)
    assert "E2E range" in r["output_tokens_per_s"].basis
    assert r["output_tokens_per_s"].p90 == pytest.approx(400 * point["e2e_ms"] / r["e2e_ms"].p10)  # type: ignore[operator]
    assert r["usd_per_million_output_tokens"].p10 == pytest.approx(2.0 * 400 / r["output_tokens_per_s"].p90)
    for v in r.values():
        assert v.p10 <= v.p90


def test_tokens_per_s_borrowed_from_another_family_give_way_to_the_e2e_range() -> None:
    rows = lognormal(30, 0.2, 5, "a") + lognormal(30, 0.2, 6, "b")
    other = [rec(500 + i, 1.0, f"t{i % 2}", family="A10G", tps=0.5 + i / 20) for i in range(10)]
    point: dict[str, float | None] = {
        "ttft_ms": 100.0,
        "tpot_ms": 10.0,
        "e2e_ms": 1370.0,
        "output_tokens_per_s": 400.0,
    }
    r = point_ranges(point, records=rows + other, **WHERE)
    assert "E2E range" in r["output_tokens_per_s"].basis  # L4 has no tokens/s rows of its own
    own = point_ranges(point, records=rows + other, **(WHERE | {"family": "A10G"}))
    assert "A10G x vllm x decode-bound" in own["output_tokens_per_s"].basis


def test_tokens_per_s_of_one_source_are_held_with_the_e2e_range_inverted() -> None:
    """A family whose tokens/s rows all come from one source: its tokens/s range is the wider of its own and
    the E2E range inverted at each end (both are ranges of the same figure in a closed loop); with a second
    source the family's own stratum decides alone."""
    latency = lognormal(30, 0.3, 7, "a") + lognormal(30, 0.3, 8, "b")
    tight = [rec(600 + i, 1.0, "t", tps=1.0 + i / 1000) for i in range(10)]  # one source, near exact
    one = figure_intervals(latency + tight, WHERE, 0.1)
    assert one.tps is not None and one.e2e is not None and one.tps.one_source
    assert one.tps.lo == pytest.approx(1 / one.e2e.hi) and one.tps.hi == pytest.approx(1 / one.e2e.lo)
    assert "held with the E2E range inverted" in one.tps.basis
    second = [rec(700 + i, 1.0, "u", tps=1.02 + i / 1000) for i in range(10)]
    two = figure_intervals(latency + tight + second, WHERE, 0.1)
    assert two.tps is not None and not two.tps.one_source and "E2E" not in two.tps.basis
    assert two.tps.hi / two.tps.lo < one.tps.hi / one.tps.lo


def test_coverage_is_graded_against_ranges_built_without_the_source() -> None:
    rows = [x for s in range(6) for x in lognormal(25, 0.25, 10 + s, f"s{s}")]
    (cov,) = [c for c in coverage(rows) if c.metric == "tpot"]
    assert cov.n == 150 and cov.sources == 6
    assert 0.7 <= cov.share_inside <= 0.92
    assert 25 < cov.median_half_width_pct < 50


def test_coverage_builds_each_source_s_ranges_from_what_it_is_given_and_says_when_too_few_to_grade() -> None:
    rows = [x for s in range(3) for x in lognormal(10, 0.2, 20 + s, f"s{s}")] + [
        rec(99, 1.0, "lone", family="A10G"),
        rec(98, 1.1, "lone", family="A10G"),
    ]
    asked: list[str] = []

    def without(source: str) -> list[ErrorRecord]:
        asked.append(source)
        return [r for r in rows if r.source != source]

    cov = {(c.stratum, c.metric): c for c in coverage(rows, without)}
    assert sorted(asked) == ["lone", "s0", "s1", "s2"]  # each source held out once
    a10g = cov[("A10G x vllm x decode-bound", "tpot")]
    assert a10g.n == 2 and not a10g.graded  # two rows: no share to speak of
    l4 = cov[("L4 x vllm x decode-bound", "tpot")]
    assert l4.n == 30 and l4.graded and l4.sources == 3
    # nothing left to build a range from: counted apart, not as outside
    (lone,) = [c for c in coverage(rows[-2:]) if c.metric == "tpot"]
    assert lone.n == 0 and lone.no_range == 2


def test_a_scaled_interval_keeps_its_centre_in_logs_and_says_so() -> None:
    iv = Interval(0.5, 2.0, "L4 x vllm x decode-bound: 30 rows, 3 sources")
    assert iv.scaled(1.0) is iv
    half = iv.scaled(0.5)
    assert (half.lo, half.hi) == (pytest.approx(2**-0.5), pytest.approx(2**0.5))
    assert half.basis.startswith(iv.basis)
    assert "its width scaled 0.50x" in half.basis and "of dense models" in half.basis
    off = Interval(1.0, 4.0, "b", validated=False, one_source=True).scaled(1.5, "moe")
    assert off.lo * off.hi == pytest.approx(4.0)  # the geometric centre, 2, stays
    assert off.hi / off.lo == pytest.approx(4.0**1.5)
    assert not off.validated and off.one_source and "of mixture-of-experts models" in off.basis


def test_each_group_s_ranges_take_their_own_factor() -> None:
    rows = [x for s in range(3) for x in lognormal(20, 0.2, 30 + s, f"s{s}")]
    moe_rows = [
        rec(5000 + i, r.tpot or 1.0, r.source, family=family_of("H100", "gpu", moe=True))
        for i, r in enumerate(rows)
    ]
    moe_where = {**WHERE, "family": family_of("H100", "gpu", moe=True)}
    every = rows + moe_rows
    for where, group in ((WHERE, "dense"), (moe_where, "moe")):
        plain = interval_for(every, "tpot", **where)
        assert plain is not None
        for scales in ({group: 0.5}, {group: 0.5, "other": 3.0}):
            got = interval_for(every, "tpot", **where, scales=scales)
            assert got is not None
            assert math.log(got.hi / got.lo) == pytest.approx(0.5 * math.log(plain.hi / plain.lo))
        other = "moe" if group == "dense" else "dense"
        assert interval_for(every, "tpot", **where, scales={other: 0.5}) == plain  # not its group's factor


def test_coverage_grades_each_source_with_the_scales_it_is_given() -> None:
    rows = [x for s in range(6) for x in lognormal(25, 0.25, 10 + s, f"s{s}")]
    asked: list[str] = []

    def scale_for(source: str) -> dict[str, float]:
        asked.append(source)
        return {"dense": 2.0}

    (wide,) = [c for c in coverage(rows, scale_for=scale_for) if c.metric == "tpot"]
    (plain,) = [c for c in coverage(rows) if c.metric == "tpot"]
    assert sorted(asked) == [f"s{s}" for s in range(6)]
    assert wide.inside >= plain.inside and wide.share_inside > 0.95
    assert wide.median_half_width_pct > plain.median_half_width_pct
    assert wide.group == "dense"


def test_range_scale_finds_the_width_that_holds_the_target_and_never_grades_a_source_with_its_own() -> None:
    # six sources of the same error and one whose rows sit five spreads off: outside at any width tried
    rows = [x for s in range(6) for x in lognormal(25, 0.25, 10 + s, f"s{s}")]
    wild = [rec(9000 + i, math.exp(0.1 + 5 * 0.25 * (1 if i % 2 else -1)), "wild") for i in range(25)]
    got = range_scale(rows + wild)
    assert set(got.scales) == {"dense"}  # no mixture-of-experts rows: no factor of theirs
    shares = {}
    for factor in SCALE_GRID:
        covs = coverage(rows + wild, scale_for=lambda _s, f=factor: {"dense": f})
        shares[factor] = sum(c.inside for c in covs) / sum(c.n for c in covs)
    # the factor whose share is nearest 80%, and the shares it reports are those coverage gives
    scale = got.scales["dense"]
    assert abs(shares[scale] - 0.8) == min(abs(v - 0.8) for v in shares.values())
    assert got.share_scaled["dense"] == pytest.approx(shares[scale])
    assert got.share_unscaled["dense"] == pytest.approx(shares[1.0])
    # the wild source's misses ask for wider ranges; chosen without it, the factor is smaller
    assert got.without("wild")["dense"] < scale
    assert got.without("not a source") == got.scales
    # a higher target asks for wider ranges
    assert range_scale(rows + wild, target=0.9).scales["dense"] > scale


def test_estimates_take_the_shipped_scales_and_explicit_records_do_not() -> None:
    point = {"tpot_ms": 20.0, "ttft_ms": 100.0, "e2e_ms": 2640.0, "output_tokens_per_s": 400.0}
    scales = shipped_range_scales()
    assert scales == shipped_accuracy().get("range_scale", {})
    assert set(scales) <= {"dense", "moe"} and all(0.5 <= v <= 1.5 for v in scales.values())
    for moe in (False, True):
        where = {"family": family_of("H100", "gpu", moe=moe), "engine": "vllm", "regime": "decode-bound"}
        shipped = point_ranges(point, **where, kind="gpu")
        full = point_ranges(point, **where, kind="gpu", records=shipped_records())
        factor = scales.get("moe" if moe else "dense", 1.0)
        for key in ("tpot_ms", "ttft_ms"):
            width = math.log(shipped[key].p90 / shipped[key].p10)
            assert width == pytest.approx(factor * math.log(full[key].p90 / full[key].p10), rel=1e-6)
        if factor != 1.0:
            assert f"its width scaled {factor:.2f}x" in shipped["tpot_ms"].basis
        again = point_ranges(point, **where, kind="gpu", records=shipped_records(), scales=scales)
        assert again == shipped


def test_the_share_inside_carries_its_exact_interval() -> None:
    every = StratumCoverage("A100 x vllm x decode-bound", "tpot", n=9, inside=9)
    lo, hi = every.share_interval(0.9)
    assert lo == pytest.approx(0.05 ** (1 / 9)) and hi == 1.0  # 9 of 9: only shares above 72% make it likely
    none = StratumCoverage("x", "tpot", n=4, inside=0)
    assert none.share_interval(0.9) == (0.0, pytest.approx(1 - 0.05 ** (1 / 4)))
    half = StratumCoverage("x", "tpot", n=200, inside=100)
    lo, hi = half.share_interval(0.9)
    assert 0.43 < lo < 0.5 < hi < 0.57  # many rows: a narrow interval about the share
    assert StratumCoverage("x", "tpot").share_interval() == (0.0, 1.0)


def test_rows_of_one_source_that_fall_together_count_as_fewer_checks() -> None:
    # two sources of 10 rows each: one wholly inside, one wholly outside (their biases decide)
    together = StratumCoverage("L40S x vllm x decode-bound", "tpot", n=20, inside=10)
    together.per_source = {"a": (10, 10), "b": (0, 10)}
    icc = intra_source_correlation([together])
    assert icc == pytest.approx(1.0)
    assert together.design_effect(icc) == pytest.approx(10.0)  # 20 rows, 2 independent checks
    lo, hi = together.share_interval(0.9)
    clo, chi = together.share_interval(0.9, icc)
    assert clo < lo < 0.5 < hi < chi and chi > 0.8  # half of two sources says nothing against 80%
    # rows that fall in and out within every source, in the same proportion: no clustering, no widening
    mixed = StratumCoverage("x", "tpot", n=20, inside=16)
    mixed.per_source = {"a": (8, 10), "b": (8, 10)}
    assert intra_source_correlation([mixed]) == 0.0
    assert mixed.share_interval(0.9, 0.0) == mixed.share_interval(0.9)
    # without per-source counts (built by hand) there is nothing to correct
    assert StratumCoverage("x", "tpot", n=9, inside=9).design_effect(0.5) == 1.0


def test_how_often_exact_ranges_leave_the_band_depends_on_rows_per_source() -> None:
    many = StratumCoverage("many sources", "tpot", n=400, inside=320)
    many.per_source = {f"s{i}": (1, 1) if i < 320 else (0, 1) for i in range(400)}  # 400 independent checks
    one = StratumCoverage("one source", "tpot", n=10, inside=10)
    one.per_source = {"a": (10, 10)}
    two = StratumCoverage("two sources", "tpot", n=12, inside=5)
    two.per_source = {"a": (5, 6), "b": (0, 6)}
    got = outside_band_by_chance([many, one, two], icc=0.0, draws=4000)
    # independent rows: 400 draws at 80% leave 70-90% almost never; 10 or 12 draws often (9 or 10 of 12 only)
    assert got.per_stratum[0] < 0.001
    assert got.per_stratum[1] == pytest.approx(1 - 0.3020 - 0.2684 - 0.2013, abs=0.03)  # not 8, 9 or 7 of 10
    assert got.per_stratum[2] == pytest.approx(1 - 0.2362 - 0.2835, abs=0.03)
    assert got.observed == 2  # 10 of 10 and 5 of 12 are outside; 320 of 400 is not
    assert got.expected == pytest.approx(sum(got.per_stratum))
    # rows of one source falling together (the source's bias decides): one source is inside all or nothing
    together = outside_band_by_chance([one], icc=0.999, draws=4000)
    assert together.per_stratum[0] > 0.99 and together.p_at_least_observed > 0.99
    assert together.interval == (1, 1)
    # the same draws from the same seed: the benchmark prints the same figures run after run
    assert outside_band_by_chance([two], 0.3) == outside_band_by_chance([two], 0.3)


def test_the_two_sides_of_the_band_are_counted_apart() -> None:
    # ten small strata of one 10-row source each, all 10 of 10 inside: every one above the band, none below
    full = []
    for i in range(10):
        c = StratumCoverage(f"s{i}", "tpot", n=10, inside=10)
        c.per_source = {f"a{i}": (10, 10)}
        full.append(c)
    got = outside_band_by_chance(full, icc=0.0, draws=4000)
    assert (got.above.observed, got.below.observed) == (10, 0)
    # independent rows at 80%: 10 of 10 happens 10.7% of the time, fewer than 7 of 10 12.1%
    assert got.above.expected == pytest.approx(10 * 0.8**10, abs=0.15)
    assert got.below.expected == pytest.approx(10 * 0.1209, abs=0.15)
    assert got.above.p_as_far < 0.001  # ten of ten above: ranges that are too wide, not chance
    assert got.below.p_as_far == pytest.approx((1 - 0.1209) ** 10, abs=0.03)  # none below: often chance
    assert got.p_all_inside == pytest.approx((1 - 0.1074 - 0.1209) ** 10, abs=0.01)


def test_chance_in_band_is_exact_and_agrees_with_the_simulation() -> None:
    def binomial_in_band(n: int) -> float:
        return sum(
            math.comb(n, x) * 0.8**x * 0.2 ** (n - x)
            for x in range(n + 1)
            if 0.7 - 1e-9 <= x / n <= 0.9 + 1e-9
        )

    assert chance_in_band([10], 0.0) == pytest.approx(binomial_in_band(10))
    assert chance_in_band([4, 6], 0.0) == pytest.approx(
        binomial_in_band(10)
    )  # independent rows: sources moot
    two = StratumCoverage("two sources", "tpot", n=12, inside=5)
    two.per_source = {"a": (5, 6), "b": (0, 6)}
    simulated = outside_band_by_chance([two], icc=0.3).per_stratum[0]
    assert chance_in_band([6, 6], 0.3) == pytest.approx(1 - simulated, abs=0.01)
    # rows of a source that fall together make a one-source stratum all in or all out
    assert chance_in_band([10], 0.999) < 0.01


def test_sources_for_band_counts_the_publishers_a_fair_test_needs() -> None:
    def binomial_in_band(n: int) -> float:
        return chance_in_band([n], 0.0)

    # independent rows: 10 rows a source, the fewest sources from which on 10 k rows stay in 70-90% 90% of
    # the time, checked against the binomial directly
    k = sources_for_band(10, 0.0)
    assert k is not None and binomial_in_band(10 * k) >= 0.9 > binomial_in_band(10 * (k - 1))
    assert all(binomial_in_band(10 * j) >= 0.9 for j in range(k, k + 20))
    # rows that share their source's bias need many more sources, and more for more confidence
    clustered = sources_for_band(10, 0.34)
    assert clustered is not None and clustered > 3 * k
    stricter = sources_for_band(10, 0.34, confidence=0.98)
    assert stricter is not None and stricter > clustered
    assert sources_for_band(10, 0.34, most=5) is None
    assert sources_for_band(0, 0.34) is None


def test_coverage_keeps_each_sources_rows_inside() -> None:
    rows = [x for s in range(3) for x in lognormal(10, 0.2, 40 + s, f"s{s}")]
    (cov,) = [c for c in coverage(rows) if c.metric == "tpot"]
    assert set(cov.per_source) == {"s0", "s1", "s2"}
    assert sum(x for x, _ in cov.per_source.values()) == cov.inside
    assert sum(m for _, m in cov.per_source.values()) == cov.n == 30


def test_a_request_rate_the_engine_cannot_serve_is_queueing() -> None:
    assert regime_of(math.inf, math.inf, 0.0, 0.2, 128) == "queueing"


def _row(name: str, lo: float, hi: float) -> EstimateRow:
    return EstimateRow(
        instance=name,
        accelerator_type=AcceleratorType.gpu,
        accelerator_name="L4",
        accelerator_count=1,
        engine="vllm",
        feasible=True,
        concurrency=1,
        usd_per_million_output_tokens=(lo + hi) / 2,
        ranges={"usd_per_million_output_tokens": PredictionRange(p10=lo, p90=hi, basis="b")},
    )


def test_ranked_neighbours_whose_cost_ranges_overlap_are_named() -> None:
    rows = [_row("a", 1, 2), _row("b", 1.5, 3), _row("c", 4, 5)]
    mark_overlaps(rows)
    assert (
        rows[0].range_overlaps == ["b"] and rows[1].range_overlaps == ["a"] and rows[2].range_overlaps == []
    )


def test_capacity_range_searches_with_the_slo_tightened_and_loosened() -> None:
    est = _row("a", 1, 2)
    est.ttft_ms, est.tpot_ms = 100.0, 10.0
    ranges = {
        "tpot_ms": PredictionRange(p10=8.0, p90=15.0, basis="b"),
        "ttft_ms": PredictionRange(p10=80.0, p90=200.0, basis="b"),
    }
    seen: list[SLO] = []

    def search(slo: SLO) -> int:
        seen.append(slo)
        return int(slo.tpot_ms or 0)

    r = capacity_range(SLO(tpot_ms=30.0), ranges, est, search)
    assert r is not None and (r.p10, r.p90) == (20.0, 37.0)
    assert seen[0].tpot_ms == pytest.approx(20.0) and seen[1].tpot_ms == pytest.approx(37.5)


def test_families_and_regimes() -> None:
    assert family_of("H200", "gpu") == family_of("H100-SXM", "gpu") == "H100/H200"
    assert family_of("Xeon-GNR", "cpu") == "Xeon AMX" and family_of("Graviton4", "cpu") == "Graviton"
    assert family_of("local:AMD EPYC", "cpu", ["avx512"]) == "x86 CPU"
    assert family_of("local:Intel Xeon", "cpu", ["amx"]) == "Xeon AMX"
    assert regime_of(1.0, 0.01, 0.5, 0.2, 128) == "queueing"
    assert regime_of(2.0, 0.01, 0.0, 2.0, 128) == "prefill-bound"
    assert regime_of(0.1, 0.01, 0.0, 0.1, 128) == "decode-bound"
    assert family_of("H200", "gpu", moe=True) == "H100/H200 MoE"


def test_mixture_of_experts_rows_are_their_own_stratum_and_never_widen_a_dense_model_s_range() -> None:
    """MoE rows' misses are the MoE layers' (routing, many small expert GEMMs, which the speed model has no term
    for): a dense estimate's range owes nothing to them, and an MoE estimate takes them as its own."""
    dense = lognormal(20, 0.1, 11, "a") + lognormal(20, 0.1, 12, "b")
    moe = [rec(900 + i, 3.0 + i / 10, f"m{i % 2}", family="L4 MoE") for i in range(10)]
    alone = interval_for(dense, "tpot", **WHERE)
    mixed = interval_for(dense + moe, "tpot", **WHERE)
    assert alone is not None and mixed == alone
    # a dense family with too few rows borrows the kind's pool: the dense rows only
    thin = interval_for(dense + moe, "tpot", **(WHERE | {"family": "A10G"}))
    assert thin is not None and thin.hi < 2.0 and "L4 MoE" not in thin.basis
    own = interval_for(dense + moe, "tpot", **(WHERE | {"family": "L4 MoE"}))
    assert own is not None and own.hi > 3.0 and "L4 MoE x vllm x decode-bound" in own.basis


def test_a_calibrated_estimate_takes_its_tpot_range_from_the_calibration_and_says_so() -> None:
    from accelbench.modelspec import load_model_spec
    from accelbench.plan import estimate
    from accelbench.plan.calibrations import CalibrationSet

    model = load_model_spec("qwen2.5-7b-instruct")
    row = {
        "id": 7,
        "accelerator": "L4",
        "engine": "vllm",
        "factors": {"bandwidth_efficiency": 0.4},
        "n_points": 12,
        "error_before": {"tpot_mape_pct": 30.0},
        "error_after": {"tpot_mape_pct": 5.0},
        "created_at": None,
    }
    asked = PlanQuery(input_len=512, output_len=128, concurrency=1)
    plain = estimate(model, "g6.xlarge", asked)
    tuned = estimate(model, "g6.xlarge", asked, PlanContext(calibrations=CalibrationSet.from_rows([row])))
    r, p = tuned.ranges["tpot_ms"], plain.ranges["tpot_ms"]
    assert "calibrated on your runs" in r.basis and "12 points" in r.basis and "5.0%" in r.basis
    assert r.p90 / r.p10 < p.p90 / p.p10  # narrower than the public data's borrowed range
    # 5% mean absolute error over 12 points: about +-11% at the 10th/90th percentiles
    assert tuned.tpot_ms is not None and r.p90 / tuned.tpot_ms == pytest.approx(1.11, abs=0.02)
    assert "calibrated" not in tuned.ranges["ttft_ms"].basis  # the calibration says nothing of TTFT
    few = CalibrationSet.from_rows([row | {"n_points": 2}])
    assert (
        "calibrated"
        not in estimate(model, "g6.xlarge", asked, PlanContext(calibrations=few)).ranges["tpot_ms"].basis
    )


def test_a_regime_without_rows_borrows_the_family_s_other_regimes_widened() -> None:
    rows = lognormal(20, 0.2, 7, "a") + lognormal(20, 0.2, 8, "b")  # every row decode-bound
    own = interval_for(rows, "ttft", **WHERE)
    queueing = interval_for(rows, "ttft", **(WHERE | {"regime": "queueing"}))
    assert own is not None and queueing is not None
    assert queueing.basis.startswith("too few rows queueing on L4") and "widened" in queueing.basis
    assert queueing.hi / queueing.lo > own.hi / own.lo


def test_throughput_interval_for_capacity_callers() -> None:
    from accelbench.plan.ranges import throughput_interval

    trn = throughput_interval("Trainium", "neuron", "vllm-neuron")
    assert trn is not None and trn.lo < 1 < trn.hi and "Trainium x vllm-neuron" in trn.basis
    # no tokens/s rows validated for vLLM CPU on Graviton: the TPOT range inverted, borrowed and said
    grv = throughput_interval("Graviton4", "cpu", "vllm-cpu", [])
    assert grv is not None and grv.basis.startswith("the TPOT range inverted (not validated on Graviton")
    # a mixture-of-experts model's capacity takes the MoE rows' range: far below the prediction on H200
    moe = throughput_interval("H200", "gpu", "vllm", moe=True)
    dense = throughput_interval("H200", "gpu", "vllm")
    assert moe is not None and dense is not None and "H100/H200 MoE" in moe.basis
    assert moe.lo < dense.lo and "MoE" not in dense.basis


def test_a_mixture_of_experts_estimate_takes_its_range_from_the_moe_rows_and_a_dense_one_does_not() -> None:
    """On the shipped records: DeepSeek-V3 on 8 x H200 is graded against the MoE rows (measured several times
    slower than predicted), Llama-3.1-8B on the same instance against the dense rows."""
    from accelbench.modelspec import load_model_spec
    from accelbench.plan import estimate

    asked = PlanQuery(input_len=512, output_len=128, concurrency=8)
    moe = estimate(load_model_spec("deepseek-v3"), "p5en.48xlarge", asked)
    dense = estimate(load_model_spec("llama-3.1-8b-instruct"), "p5en.48xlarge", asked)
    assert moe.feasible and dense.feasible and moe.tpot_ms and dense.tpot_ms
    assert "H100/H200 MoE" in moe.ranges["tpot_ms"].basis
    assert "MoE" not in dense.ranges["tpot_ms"].basis
    assert moe.ranges["tpot_ms"].p90 / moe.tpot_ms > dense.ranges["tpot_ms"].p90 / dense.tpot_ms
    assert any(n.startswith("Mixture of experts") for n in moe.notes)
    assert not any(n.startswith("Mixture of experts") for n in dense.notes)
