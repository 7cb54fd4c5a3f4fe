"""80% ranges for every predicted figure, from the planner's out-of-source error on the matching stratum.

The shipped records (``plan/data/accuracy.yaml``, written by ``benchmarks/estimate_accuracy.py --write`` from
``plan/error_records.py``) hold measured / predicted for each published measurement, predicted with factors
fitted without its source. For a question on family F, engine E, regime R of accelerator kind K, the range of
a metric comes from the log ratios by one method for every stratum:

- **Deciles by order statistics.** The 10th and 90th percentiles of n log ratios are read at positions
  0.1 (n + 1) and 0.9 (n + 1) of the sorted values (``statistics.quantiles(method="exclusive")``), extrapolated
  past the extremes when n < 9: a new value from the same distribution falls between the order statistics at
  those positions with probability 80% whatever the distribution (a distribution-free prediction interval),
  so few rows give a wider range with no normal assumption, and from 19 rows on a single far outlier moves it
  no more than a near one would.
- **Widened to count sources, not rows.** A new source is not another row of a known one: rows of one
  source share its bias. Where the rows come from two sources or more, the deciles widen to the one-way
  random-effects prediction interval (``between_sources``: the sources' biases and the rows' noise estimated
  apart), so that one source's 23 tightly grouped rows do not read as 23 checks of how a new source errs.
- **Credibility between the stratum and its kind.** Rows of one source share that source's bias, so a
  stratum's spread says how a new source errs only as far as its sources differ: a stratum F x E x R with
  ``MIN_ROWS`` rows from k sources weighs its own deciles (k - 1) / k and the pooled deciles of every stratum
  of kind K in regime R (every regime, when R has too few) 1 / k: k sources are k - 1 checks of the
  between-source spread, the pool counts as one more.
- **One source: not validated out of source.** A stratum whose rows all come from one source takes the
  pooled deciles, widened where needed to hold its own deciles at each end, and says so. Rows of one source
  (a stratum's, or a pool's that rests on one) show that source's noise but not how far a second source's
  bias may lie from its own: they widen to their mean +- 1.2816 x sqrt(2 tau^2 + their variance), tau^2 the
  between-source variance pooled over the kind's strata that have two sources or more
  (``pooled_between_source_variance``).
- **Borrowed: widened for a group not among those pooled.** Too few rows in regime R: F x E in every regime,
  as above; F not validated with E: the kind's pool. A borrowed range is widened about its centre by
  sqrt(1 + 1/g), g the regimes (or family x engine x regime strata) it pools: a new group's bias varies
  about the mean of g groups by the groups' spread and that mean's own uncertainty (1/g of it).
- **Scaled to hold 80% out of source.** Together the rules above can hold more (or less) than 80% of held-out
  sources' rows. The width in logs is multiplied, about its centre, by the factor of the family's group (dense or
  mixture of experts, ``scale_group``) that ``range_grading.range_scale`` found makes 80% of them fall inside,
  shipped with the records (``shipped_range_scales``).

Every figure of an estimate takes these intervals through ``figure_intervals``, and so does the grading:
E2E mixes TTFT's and TPOT's by TTFT's share of it, tokens/s use their own stratum when the family has rows
of them (else E2E's, inverted; and where those rows come from one source, the wider of the two at each end:
in a closed loop tokens/s = requests in flight x output tokens / E2E, so both are ranges of the same figure),
cost the tokens/s range inverted.

``plan/range_grading.py`` grades the ranges the way they are used: each source's rows against the ranges built
from records that owe nothing to that source (``accuracy.held_out_records``).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from accelbench.domain.estimate import SLO, CalibrationRef, EstimateRow, PredictionRange
from accelbench.plan.error_records import (
    ErrorRecord,
    engine_group,
    family_of,
    is_moe_family,
    shipped_range_scales,
    shipped_records,
)

E = TypeVar("E", bound=EstimateRow)
MIN_ROWS = 5  # records a stratum (or a kind's pool) needs before its deciles are read
KIND_LABEL = {"gpu": "GPU", "neuron": "Neuron", "cpu": "CPU"}
DENSE, MOE = "dense", "moe"  # the groups whose ranges' widths are calibrated apart (``scale_group``)
GROUP_LABEL = {DENSE: "dense", MOE: "mixture-of-experts"}


def scale_group(family: str) -> str:
    """Which width factor a family's ranges take: a mixture-of-experts family's rows are a population of their
    own (fitted to nothing, their ranges from their own rows), so their widths are calibrated apart."""
    return MOE if is_moe_family(family) else DENSE


@dataclass(frozen=True)
class Interval:
    """measured / predicted at the 10th and 90th percentile, what it rests on, and whether the question's
    family has rows of its own in it (False: borrowed from other families), and whether those rows all come
    from one source."""

    lo: float
    hi: float
    basis: str
    validated: bool = True
    one_source: bool = False  # the family's own rows come from a single source

    def scaled(self, factor: float, group: str = DENSE) -> Interval:
        """The interval with its width in logs times ``factor`` about its centre in logs (the out-of-source
        calibration of ``group``'s ranges, ``range_grading.range_scale``), saying so in its basis; itself when
        the factor is 1."""
        if factor == 1.0:
            return self
        lo, hi = math.log(self.lo), math.log(self.hi)
        mid, half = (lo + hi) / 2, (hi - lo) / 2 * factor
        basis = (
            f"{self.basis}; its width scaled {factor:.2f}x, the factor with which 80% of held-out sources' rows "
            f"of {GROUP_LABEL[group]} models fall inside"
        )
        return Interval(math.exp(mid - half), math.exp(mid + half), basis, self.validated, self.one_source)


def deciles(logs: Sequence[float]) -> tuple[float, float]:
    """The 10th and 90th percentiles of log ratios at the order-statistic positions 0.1 (n + 1) and
    0.9 (n + 1), extrapolated past the extremes when there are fewer than 9 values."""
    if len(logs) < 2:
        return (logs[0], logs[0]) if logs else (0.0, 0.0)
    q = statistics.quantiles(logs, n=10, method="exclusive")
    return q[0], q[-1]


Z90 = statistics.NormalDist().inv_cdf(0.9)  # the normal's 90th percentile: 1.2816


def _components(records: Sequence[ErrorRecord], metric: str) -> tuple[float, float, float, int] | None:
    """The one-way random-effects split of ``records``' log ratios (log ratio = the source's bias + the row's
    noise): the mean of the sources' means, the noise's variance sigma^2 (the rows' spread about their
    source's mean, pooled), the biases' variance tau^2 (the spread of the sources' means less the noise's
    share of it, method of moments, at least 0) and the number of sources k; None with fewer than two."""
    by: dict[str, list[float]] = defaultdict(list)
    for r in records:
        by[r.source].append(math.log(r.ratio(metric) or 1.0))
    k = len(by)
    if k < 2:
        return None
    means = [statistics.fmean(v) for v in by.values()]
    resid = [x - m for v, m in zip(by.values(), means, strict=True) for x in v]
    n = len(resid)
    sigma2 = sum(x * x for x in resid) / (n - k) if n > k else 0.0
    tau2 = max(statistics.variance(means) - sigma2 * statistics.fmean(1 / len(v) for v in by.values()), 0.0)
    return statistics.fmean(means), sigma2, tau2, k


def between_sources(records: Sequence[ErrorRecord], metric: str) -> tuple[float, float] | None:
    """The one-way random-effects 80% prediction interval of a row from a source not among ``records``' (mean,
    half-width, in logs), or None with fewer than two sources (``_components``). A new source's bias varies
    about the sources' mean by tau and that mean's own uncertainty (tau^2 / k), its row about its bias by
    sigma: half-width 1.2816 x sqrt(tau^2 (1 + 1/k) + sigma^2). Row deciles alone count 23 rows of one source
    as 23 checks of how a new source errs; this counts the sources."""
    parts = _components(records, metric)
    if parts is None:
        return None
    mu, sigma2, tau2, k = parts
    return mu, Z90 * math.sqrt(tau2 * (1 + 1 / k) + sigma2)


def pooled_between_source_variance(records: Sequence[ErrorRecord], metric: str) -> float | None:
    """tau^2, how much sources' biases differ, pooled over the strata (family x engine x regime) whose rows
    come from two sources or more, each weighed by its sources less one: what rows of a single source cannot
    show. None when no stratum has two sources."""
    strata: dict[tuple[str, str, str], list[ErrorRecord]] = defaultdict(list)
    for r in records:
        strata[(r.family, r.engine, r.regime)].append(r)
    num = den = 0.0
    for rows in strata.values():
        parts = _components(rows, metric)
        if parts is not None:
            num += (parts[3] - 1) * parts[2]
            den += parts[3] - 1
    return num / den if den else None


@dataclass(frozen=True)
class _Rows:
    """The records that have one metric, read as log ratios, and the between-source variance of the kind's
    strata (``pooled_between_source_variance``) for when they all come from one source."""

    records: tuple[ErrorRecord, ...]
    metric: str
    tau2: float | None = None

    def deciles(self) -> tuple[float, float]:
        """Where a new source's log ratio falls with 80% probability: the rows' own deciles (order
        statistics), widened to the random-effects prediction interval when the rows come from two sources
        or more (``between_sources``). Rows of one source show its noise but not how a second source's bias
        differs from its own (variance 2 tau^2, both drawn about the same mean): they widen by the kind's
        tau^2."""
        logs = [math.log(r.ratio(self.metric) or 1.0) for r in self.records]
        lo, hi = deciles(logs)
        re = between_sources(self.records, self.metric)
        if re is None:
            if not logs or not self.tau2:
                return lo, hi
            noise = statistics.variance(logs) if len(logs) > 1 else 0.0
            re = statistics.fmean(logs), Z90 * math.sqrt(2 * self.tau2 + noise)
        mu, half = re
        return min(lo, mu - half), max(hi, mu + half)

    @property
    def sources(self) -> int:
        return len({r.source for r in self.records})

    def where(self, **match: str) -> _Rows:
        rows = tuple(r for r in self.records if all(getattr(r, k) == v for k, v in match.items()))
        return _Rows(rows, self.metric, self.tau2)

    def count(self) -> str:
        return f"{len(self.records)} rows, {self.sources} source{'s' if self.sources != 1 else ''}"


def describe_stratum(family: str, engine: str, regime: str | None) -> str:
    return f"{family} x {engine}" + (f" x {regime}" if regime else "")


def _widened(lo: float, hi: float, groups: int) -> tuple[float, float, float]:
    """lo, hi (logs) widened about their centre by sqrt(1 + 1/groups), and the factor."""
    w = math.sqrt(1 + 1 / max(groups, 1))
    mid, half = (lo + hi) / 2, (hi - lo) / 2 * w
    return mid - half, mid + half, w


def _own(rows: _Rows, pool: _Rows, label: str, pool_label: str) -> tuple[float, float, str]:
    """A stratum's deciles weighed against its pool by its sources (one source: the pool's, widened to hold
    its own), as logs, with the basis."""
    (lo, hi), (plo, phi) = rows.deciles(), pool.deciles()
    k = rows.sources
    what = f"out-of-source error on {label}: {rows.count()}"
    pooled = f"the pooled {pool_label} error ({pool.count()})"
    if k < 2:
        return (
            min(lo, plo),
            max(hi, phi),
            f"{what}, not validated out of source: {pooled}, widened to hold it",
        )
    z = (k - 1) / k
    return z * lo + (1 - z) * plo, z * hi + (1 - z) * phi, f"{what}, weighed {z:.2f} against {pooled}"


def interval_for(
    records: Sequence[ErrorRecord],
    metric: str,
    *,
    family: str,
    engine: str,
    regime: str,
    kind: str,
    scales: Mapping[str, float] | None = None,
) -> Interval | None:
    """The 80% interval of measured / predicted for ``metric`` on the stratum, or None when the kind has fewer
    than ``MIN_ROWS`` records of the metric: the rules below, its width in logs times the factor of the
    family's group in ``scales`` (``scale_group``; the out-of-source calibration shipped with the records,
    ``shipped_range_scales``; 1 when absent)."""
    iv = _rule_interval(records, metric, family=family, engine=engine, regime=regime, kind=kind)
    group = scale_group(family)
    return None if iv is None else iv.scaled((scales or {}).get(group, 1.0), group)


def _rule_interval(
    records: Sequence[ErrorRecord], metric: str, *, family: str, engine: str, regime: str, kind: str
) -> Interval | None:
    """``interval_for`` before its scale: the stratum's own records, weighed against its kind's pool, or
    borrowed and widened."""
    # a dense model's range owes nothing to mixture-of-experts rows (their misses are the MoE layers'); an MoE
    # model's borrows from every row of its kind when its own stratum has too few
    dense = not is_moe_family(family)
    kind_rows = tuple(
        r for r in records if r.kind == kind and r.ratio(metric) and not (dense and is_moe_family(r.family))
    )
    every = _Rows(kind_rows, metric, pooled_between_source_variance(kind_rows, metric))
    if len(every.records) < MIN_ROWS:
        return None
    label = KIND_LABEL.get(kind, kind)
    pool, pool_label = every.where(regime=regime), f"{label} {regime}"
    if len(pool.records) < MIN_ROWS:
        pool, pool_label = every, f"{label} every-regime"
    own = every.where(family=family, engine=engine, regime=regime)
    if len(own.records) >= MIN_ROWS:
        lo, hi, basis = _own(own, pool, describe_stratum(family, engine, regime), pool_label)
        return Interval(math.exp(lo), math.exp(hi), basis, one_source=own.sources < 2)
    same = every.where(family=family, engine=engine)
    if (
        len(same.records) >= MIN_ROWS
    ):  # another regime's error is not this one's (queueing TTFT is not decode's)
        lo, hi, basis = _own(
            same, every, describe_stratum(family, engine, "every regime"), f"{label} every-regime"
        )
        lo, hi, w = _widened(lo, hi, len({r.regime for r in same.records}))
        basis = f"too few rows {regime} on {family}: borrows the {basis}; widened {w:.2f}x"
        return Interval(math.exp(lo), math.exp(hi), basis, one_source=same.sources < 2)
    strata = sorted({(r.family, r.engine, r.regime) for r in pool.records})
    lo, hi, w = _widened(*pool.deciles(), len(strata))
    listed = "; ".join(describe_stratum(*s) for s in strata)
    with_engine = " with this engine" if every.where(family=family).records else ""
    basis = (
        f"not validated on {family}{with_engine}: borrows the pooled {pool_label} out-of-source error "
        f"({listed}: {pool.count()}), widened {w:.2f}x"
    )
    return Interval(math.exp(lo), math.exp(hi), basis, validated=False)


def pooled_interval(records: Sequence[ErrorRecord], metric: str, kind: str) -> Interval | None:
    """The kind's pooled 80% interval of measured / predicted (its basis: rows and sources), or None with
    fewer than ``MIN_ROWS`` rows or a single source."""
    pool = _Rows(tuple(r for r in records if r.kind == kind and r.ratio(metric)), metric)
    if len(pool.records) < MIN_ROWS or pool.sources < 2:
        return None
    lo, hi = pool.deciles()
    return Interval(math.exp(lo), math.exp(hi), pool.count())


@dataclass(frozen=True)
class FigureIntervals:
    """The multiplicative 80% intervals of one estimate's figures (None: no range)."""

    tpot: Interval | None
    ttft: Interval | None
    e2e: Interval | None = None
    tps: Interval | None = None


def figure_intervals(
    records: Sequence[ErrorRecord],
    where: dict[str, str],
    ttft_share: float | None,
    tpot_interval: Interval | None = None,
    scales: Mapping[str, float] | None = None,
) -> FigureIntervals:
    """TPOT's and TTFT's intervals on the stratum ``where`` (family, engine, regime, kind); E2E's mixed from
    them by the share of E2E that is TTFT; tokens/s from its own stratum when the family has rows of it, else
    E2E's inverted (tokens/s = requests in flight x output tokens / E2E). ``tpot_interval`` replaces TPOT's (a
    calibration's own, never scaled). ``scales`` multiply the public records' widths (``interval_for``).
    What estimates show and what ``range_grading.coverage`` grades."""
    tpot = tpot_interval or interval_for(records, "tpot", **where, scales=scales)
    ttft = interval_for(records, "ttft", **where, scales=scales)
    if tpot is None or ttft is None or ttft_share is None:
        return FigureIntervals(tpot, ttft)
    share = min(max(ttft_share, 0.0), 1.0)
    e2e = Interval(
        share * ttft.lo + (1 - share) * tpot.lo,
        share * ttft.hi + (1 - share) * tpot.hi,
        "from the TTFT and TPOT ranges",
    )
    inverted = Interval(
        1 / e2e.hi,
        1 / e2e.lo if e2e.lo > 0 else math.inf,
        "from the E2E range (tokens/s = requests in flight x output tokens / E2E)",
    )
    tps = interval_for(records, "tps", **where, scales=scales)
    if tps is None or not tps.validated:
        tps = inverted
    elif tps.one_source:
        # One source's tokens/s rows say nothing of how a second source differs; the E2E range, inverted,
        # is another 80% range of the same figure (requests in flight x output tokens / E2E) resting on the
        # TPOT and TTFT rows: the range holds both
        tps = Interval(
            min(tps.lo, inverted.lo),
            max(tps.hi, inverted.hi),
            f"{tps.basis}; held with the E2E range inverted (one source of tokens/s)",
            one_source=True,
        )
    return FigureIntervals(tpot, ttft, e2e, tps)


def _scaled(value: float | None, iv: Interval | None, basis: str | None = None) -> PredictionRange | None:
    if iv is None or value is None or not math.isfinite(value):
        return None
    a, b = sorted((value * iv.lo, value * iv.hi))
    return PredictionRange(p10=a, p90=b, basis=basis or iv.basis)


def point_ranges(
    point: dict[str, float | None],
    *,
    family: str,
    engine: str,
    regime: str,
    kind: str,
    records: Sequence[ErrorRecord] | None = None,
    tpot_interval: Interval | None = None,
    scales: Mapping[str, float] | None = None,
) -> dict[str, PredictionRange]:
    """Ranges for an estimate's figures (keys as its fields: ttft_ms, tpot_ms, e2e_ms, output_tokens_per_s,
    total_tokens_per_s, requests_per_s, usd_per_million_output_tokens, usd_per_request). ``tpot_interval``
    replaces the public data's TPOT interval (a calibration's own). ``scales``: the widths' factors by group; by
    default the shipped ones with the shipped records, none with records given."""
    recs = shipped_records() if records is None else records
    if scales is None and records is None:
        scales = shipped_range_scales()
    ttft, e2e = point.get("ttft_ms"), point.get("e2e_ms")
    share = ttft / e2e if ttft is not None and e2e and e2e > 0 else None
    where = {"family": family, "engine": engine, "regime": regime, "kind": kind}
    ivs = figure_intervals(recs, where, share, tpot_interval, scales)
    keyed = {"tpot_ms": ivs.tpot, "ttft_ms": ivs.ttft, "e2e_ms": ivs.e2e}
    keyed |= dict.fromkeys(("output_tokens_per_s", "total_tokens_per_s", "requests_per_s"), ivs.tps)
    out = {k: r for k, iv in keyed.items() if (r := _scaled(point.get(k), iv)) is not None}
    if ivs.tps is not None:  # cost = hourly price / tokens per hour
        cost = Interval(1 / ivs.tps.hi, 1 / ivs.tps.lo if ivs.tps.lo > 0 else math.inf, "")
        for key in ("usd_per_million_output_tokens", "usd_per_request"):
            if (r := _scaled(point.get(key), cost, "hourly price over the tokens/s range")) is not None:
                out[key] = r
    return out


POINT_KEYS = (
    "ttft_ms",
    "tpot_ms",
    "e2e_ms",
    "output_tokens_per_s",
    "total_tokens_per_s",
    "requests_per_s",
    "usd_per_million_output_tokens",
    "usd_per_request",
)


# one-sided 90% quantile of Student's t by degrees of freedom (tables); the normal's 1.2816 beyond 60
_T90 = {1: 3.078, 2: 1.886, 3: 1.638, 4: 1.533, 5: 1.476, 6: 1.440, 7: 1.415, 8: 1.397, 9: 1.383, 10: 1.372,
        12: 1.356, 15: 1.341, 20: 1.325, 30: 1.310, 60: 1.296}  # fmt: skip


def _t90(df: int) -> float:
    if df >= 120:
        return 1.2816
    keys = [k for k in _T90 if k <= df]
    return _T90[max(keys)] if keys else _T90[1]


def calibrated_interval(ref: CalibrationRef | None) -> Interval | None:
    """The TPOT interval of a stored calibration, which keeps only its mean absolute error and point count (no
    errors to read deciles from): that error read as a normal spread (sd = MAPE x sqrt(pi / 2)) and turned
    into a prediction interval over its points; None without an error or with fewer than 3 points."""
    if ref is None or ref.tpot_error_after_pct is None or ref.n_points < 3:
        return None
    sd = max(ref.tpot_error_after_pct, 0.5) / 100 * math.sqrt(math.pi / 2)
    half = _t90(ref.n_points - 1) * sd * math.sqrt(1 + 1 / ref.n_points)
    basis = (
        f"calibrated on your runs ({ref.accelerator} with {ref.engine}, calibration {ref.id}): {ref.n_points} "
        f"points, TPOT error {ref.tpot_error_after_pct:.1f}% after the fit"
    )
    return Interval(math.exp(-half), math.exp(half), basis)


def ranges_of(
    est: EstimateRow,
    regime: str,
    isa: Sequence[str] = (),
    calibration: CalibrationRef | None = None,
    moe: bool = False,
) -> dict[str, PredictionRange]:
    """The 80% ranges of an estimate's figures, from the stratum its accelerator, engine and regime fall in,
    a mixture-of-experts model's apart (TPOT from the calibration applied, when it says its error)."""
    kind = est.accelerator_type.value
    return point_ranges(
        {k: getattr(est, k) for k in POINT_KEYS},
        family=family_of(est.accelerator_name, kind, isa, moe=moe),
        engine=engine_group(est.engine),
        regime=regime,
        kind=kind,
        tpot_interval=calibrated_interval(calibration),
    )


def capacity_range(
    slo: SLO, ranges: dict[str, PredictionRange], est: EstimateRow, search: Callable[[SLO], int]
) -> PredictionRange | None:
    """The range of the highest concurrency meeting ``slo``: a measurement at the range's top meets a target
    T where the prediction meets T / (p90 / predicted), so the low end is the search for the tightened SLO
    and the high end the search for the loosened one."""
    factors: dict[str, tuple[float, float]] = {}
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        point, r = getattr(est, key), ranges.get(key)
        if point and r is not None:
            factors[key] = (r.p10 / point, r.p90 / point)
    if not factors:
        return None

    def scaled(pick: int) -> SLO:
        return SLO(
            **{
                k: (
                    getattr(slo, k) / factors[k][pick]
                    if getattr(slo, k) is not None and k in factors
                    else getattr(slo, k)
                )
                for k in ("ttft_ms", "tpot_ms", "e2e_ms")
            }
        )

    low, high = search(scaled(1)), search(scaled(0))
    return PredictionRange(
        p10=float(min(low, high)),
        p90=float(max(low, high)),
        basis="the SLO search with latencies at their range's ends",
    )


def with_ranges(
    est: E,
    regime: str,
    isa: Sequence[str],
    slo: SLO | None,
    search: Callable[[SLO], int] | None,
    calibration: CalibrationRef | None = None,
    moe: bool = False,
) -> E:
    """``est`` with its ranges: every figure's, and the capacity's when an SLO was searched."""
    est.ranges = ranges_of(est, regime, isa, calibration, moe=moe)
    if slo is not None and search is not None and est.max_concurrency_meeting_slo is not None:
        cap = capacity_range(slo, est.ranges, est, search)
        if cap is not None:
            est.ranges = est.ranges | {"max_concurrency_meeting_slo": cap}
    return est


def throughput_interval(
    accelerator: str,
    kind: str,
    engine: str,
    isa: Sequence[str] = (),
    regime: str = "decode-bound",
    moe: bool = False,
) -> Interval | None:
    """measured / predicted of a throughput (tokens/s, requests/s, a capacity in requests/s) at the 10th and
    90th percentile for an accelerator and engine (a mixture-of-experts model's apart), with its basis: the
    stratum's own tokens/s records, else the TPOT interval inverted (a decode-bound throughput is batch / TPOT).
    For callers that size on a predicted capacity (the fleet planner)."""
    where = {
        "family": family_of(accelerator, kind, isa, moe=moe),
        "engine": engine_group(engine),
        "regime": regime,
    }
    recs, scales = shipped_records(), shipped_range_scales()
    tps = interval_for(recs, "tps", **where, kind=kind, scales=scales)
    if tps is not None and tps.validated:
        return tps
    tpot = interval_for(recs, "tpot", **where, kind=kind, scales=scales)
    if tpot is None:
        return tps
    return Interval(1 / tpot.hi, 1 / tpot.lo, f"the TPOT range inverted ({tpot.basis})")


def mark_overlaps(ranked: Sequence[EstimateRow], key: str = "usd_per_million_output_tokens") -> None:
    """Name, on each ranked row, its neighbours whose ``key`` range overlaps its own: the ranking between
    them is not certain."""
    for a, b in itertools.pairwise(ranked):
        ra, rb = a.ranges.get(key), b.ranges.get(key)
        if ra is None or rb is None or ra.p90 < rb.p10 or rb.p90 < ra.p10:
            continue
        a.range_overlaps = [*a.range_overlaps, b.instance]
        b.range_overlaps = [*b.range_overlaps, a.instance]
