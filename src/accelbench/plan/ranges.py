"""80% ranges for every predicted figure, from the planner's out-of-source error on the matching stratum.

The shipped records (``plan/data/accuracy.yaml``, written by ``benchmarks/estimate_accuracy.py --write`` from
``plan/error_records.py``) hold measured / predicted for each published measurement, predicted with factors
fitted without its source. For a question on family F, engine E, regime R the range of a metric is a
prediction interval of the log ratio over the records of the first stratum that has ``MIN_ROWS`` of them:

1. F x E x R, 2. F x E (every regime: borrowed from other regimes, widened), 3. F with another engine
   (borrowed, widened),
4. the nearest family (``error_records.NEAREST``: "not validated on F", borrowed, widened), in the same
   regime first,
5. every family of the tier (borrowed, widened).

The interval is mean +- t(0.90, n-1) x sd x sqrt(1 + 1/n) of the log ratios (a prediction interval for one
new measurement, wider when the rows are few), widened ``WIDEN`` times when borrowed and when every row
comes from one source (rows of one source are not independent of each other). ``coverage`` grades it the
way it is used: each source's records against the ranges built without that source.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from accelbench.domain.estimate import SLO, CalibrationRef, EstimateRow, PredictionRange
from accelbench.plan.error_records import NEAREST, ErrorRecord, engine_group, family_of
from accelbench.plan.measured_error import shipped_accuracy

E = TypeVar("E", bound=EstimateRow)
MIN_ROWS = 5  # records a stratum needs before its own error is used
WIDEN = 1.5  # a borrowed or single-source error's interval, widened
# one-sided 90% quantile of Student's t by degrees of freedom (tables); the normal's 1.2816 beyond 60
_T90 = {1: 3.078, 2: 1.886, 3: 1.638, 4: 1.533, 5: 1.476, 6: 1.440, 7: 1.415, 8: 1.397, 9: 1.383, 10: 1.372,
        12: 1.356, 15: 1.341, 20: 1.325, 30: 1.310, 60: 1.296}  # fmt: skip


def _t90(df: int) -> float:
    if df >= 120:
        return 1.2816
    keys = [k for k in _T90 if k <= df]
    return _T90[max(keys)] if keys else _T90[1]


@dataclass(frozen=True)
class Interval:
    """measured / predicted at the 10th and 90th percentile, and what it rests on."""

    lo: float
    hi: float
    basis: str


def _interval(logs: Sequence[float], sources: int, widen: bool) -> tuple[float, float]:
    n = len(logs)
    mean = statistics.fmean(logs)
    sd = statistics.stdev(logs) if n > 1 else abs(mean) or 0.3
    half = _t90(n - 1) * sd * math.sqrt(1 + 1 / n)
    if widen:
        half *= WIDEN
    if sources < 2:
        half *= WIDEN
    return math.exp(mean - half), math.exp(mean + half)


def _describe(family: str, engine: str, regime: str | None) -> str:
    return f"{family} x {engine}" + (f" x {regime}" if regime else "")


def _tiers(family: str, engine: str, regime: str, kind: str) -> Iterable[tuple[str, dict[str, str], str]]:
    """(stratum label, record filter, what is borrowed: "" none, "regime", "engine" or "family") in the order
    the strata are tried."""
    yield _describe(family, engine, regime), {"family": family, "engine": engine, "regime": regime}, ""
    yield _describe(family, engine, "every regime"), {"family": family, "engine": engine}, "regime"
    yield f"{family} with other engines", {"family": family}, "engine"
    for near in NEAREST.get(family, ()):
        yield _describe(near, engine, regime), {"family": near, "engine": engine, "regime": regime}, "family"
        yield f"{near} x {engine}", {"family": near, "engine": engine}, "family"
        yield f"{near}", {"family": near}, "family"
    yield f"every {kind} family", {"kind": kind}, "family"


def interval_for(
    records: Sequence[ErrorRecord], metric: str, *, family: str, engine: str, regime: str, kind: str
) -> Interval | None:
    """The 80% interval of measured / predicted for ``metric`` on the stratum, or None without records."""
    own = [r for r in records if r.family == family and r.ratio(metric)]
    for label, where, borrowed in _tiers(family, engine, regime, kind):
        rows = [r for r in records if all(getattr(r, k) == v for k, v in where.items())]
        ratios = [r.ratio(metric) for r in rows]
        logs = [math.log(x) for x in ratios if x]
        if len(logs) < MIN_ROWS:
            continue
        sources = len({r.source for r in rows if r.ratio(metric)})
        lo, hi = _interval(logs, sources, bool(borrowed))
        basis = (
            f"out-of-source error on {label}: {len(logs)} rows, {sources} source{'s' if sources != 1 else ''}"
        )
        if borrowed == "regime":  # another regime's error is not this one's (queueing TTFT is not decode's)
            basis = f"too few rows {regime} on {family}: borrows the {basis}, widened {WIDEN:g}x"
        elif borrowed:
            basis = (
                f"not validated on {family}"
                + (" with this engine" if own else "")
                + f": borrows the {basis}, "
                f"widened {WIDEN:g}x"
            )
        elif sources < 2:
            basis += f" (one source: widened {WIDEN:g}x)"
        return Interval(lo, hi, basis)
    return None


@lru_cache(maxsize=1)
def shipped_records() -> tuple[ErrorRecord, ...]:
    """The out-of-source records ``benchmarks/estimate_accuracy.py --write`` shipped (empty if none)."""
    rows = shipped_accuracy().get("errors") or []
    return tuple(ErrorRecord.from_dict(r) for r in rows if isinstance(r, dict))


def _scaled(value: float | None, lo: float, hi: float, basis: str) -> PredictionRange | None:
    if value is None or not math.isfinite(value):
        return None
    a, b = sorted((value * lo, value * hi))
    return PredictionRange(p10=a, p90=b, basis=basis)


def point_ranges(
    point: dict[str, float | None],
    *,
    family: str,
    engine: str,
    regime: str,
    kind: str,
    records: Sequence[ErrorRecord] | None = None,
    tpot_interval: Interval | None = None,
) -> dict[str, PredictionRange]:
    """Ranges for an estimate's figures (keys as its fields: ttft_ms, tpot_ms, e2e_ms, output_tokens_per_s,
    total_tokens_per_s, requests_per_s, usd_per_million_output_tokens, usd_per_request). ``tpot_interval``
    replaces the public data's TPOT interval (a calibration's own)."""
    recs = shipped_records() if records is None else records
    where = {"family": family, "engine": engine, "regime": regime, "kind": kind}
    tpot_i = tpot_interval or interval_for(recs, "tpot", **where)
    ttft_i = interval_for(recs, "ttft", **where)
    out: dict[str, PredictionRange] = {}
    for key, iv in (("tpot_ms", tpot_i), ("ttft_ms", ttft_i)):
        if iv is not None and (r := _scaled(point.get(key), iv.lo, iv.hi, iv.basis)) is not None:
            out[key] = r
    ttft, tpot, e2e = point.get("ttft_ms"), point.get("tpot_ms"), point.get("e2e_ms")
    if tpot_i is None or ttft_i is None or ttft is None or tpot is None or e2e is None or e2e <= 0:
        return out
    decode = max(e2e - ttft, 0.0)
    e2e_lo, e2e_hi = ttft * ttft_i.lo + decode * tpot_i.lo, ttft * ttft_i.hi + decode * tpot_i.hi
    out["e2e_ms"] = PredictionRange(p10=e2e_lo, p90=e2e_hi, basis="from the TTFT and TPOT ranges")
    tps_i = interval_for(recs, "tps", **where)
    if tps_i is not None and not tps_i.basis.startswith("not validated"):
        lo, hi, basis = tps_i.lo, tps_i.hi, tps_i.basis
    else:  # tokens/s = requests in flight x output / E2E
        lo, hi = e2e / e2e_hi, e2e / e2e_lo if e2e_lo > 0 else math.inf
        basis = "from the E2E range (tokens/s = requests in flight x output tokens / E2E)"
    for key in ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s"):
        if (r := _scaled(point.get(key), lo, hi, basis)) is not None:
            out[key] = r
    cost_basis = "hourly price over the tokens/s range"
    for key in ("usd_per_million_output_tokens", "usd_per_request"):
        if (r := _scaled(point.get(key), 1 / hi, 1 / lo if lo > 0 else math.inf, cost_basis)) is not None:
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


def calibrated_interval(ref: CalibrationRef | None) -> Interval | None:
    """The TPOT interval of a stored calibration: its mean absolute error after the fit on its own runs read as
    a normal spread (sd = MAPE x sqrt(pi / 2)) and turned into a prediction interval over its points; None
    without an error or with fewer than 3 points."""
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
    est: EstimateRow, regime: str, isa: Sequence[str] = (), calibration: CalibrationRef | None = None
) -> dict[str, PredictionRange]:
    """The 80% ranges of an estimate's figures, from the stratum its accelerator, engine and regime fall in
    (TPOT from the calibration applied, when it says its error)."""
    kind = est.accelerator_type.value
    return point_ranges(
        {k: getattr(est, k) for k in POINT_KEYS},
        family=family_of(est.accelerator_name, kind, isa),
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
) -> E:
    """``est`` with its ranges: every figure's, and the capacity's when an SLO was searched."""
    est.ranges = ranges_of(est, regime, isa, calibration)
    if slo is not None and search is not None and est.max_concurrency_meeting_slo is not None:
        cap = capacity_range(slo, est.ranges, est, search)
        if cap is not None:
            est.ranges = est.ranges | {"max_concurrency_meeting_slo": cap}
    return est


def throughput_interval(
    accelerator: str, kind: str, engine: str, isa: Sequence[str] = (), regime: str = "decode-bound"
) -> Interval | None:
    """measured / predicted of a throughput (tokens/s, requests/s, a capacity in requests/s) at the 10th and
    90th percentile for an accelerator and engine, with its basis: the stratum's own tokens/s records, else the
    TPOT interval inverted (a decode-bound throughput is batch / TPOT). For callers that size on a predicted
    capacity (the fleet planner)."""
    where = {"family": family_of(accelerator, kind, isa), "engine": engine_group(engine), "regime": regime}
    recs = shipped_records()
    tps = interval_for(recs, "tps", **where, kind=kind)
    if tps is not None and not tps.basis.startswith("not validated"):
        return tps
    tpot = interval_for(recs, "tpot", **where, kind=kind)
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


# ------------------------------------------------------------------------------------------- grading
@dataclass
class StratumCoverage:
    stratum: str
    metric: str
    n: int
    sources: int
    inside: int
    half_widths_pct: list[float]

    @property
    def share_inside(self) -> float:
        return self.inside / self.n if self.n else math.nan

    @property
    def median_half_width_pct(self) -> float:
        return statistics.median(self.half_widths_pct) if self.half_widths_pct else math.nan


def coverage(records: Sequence[ErrorRecord]) -> list[StratumCoverage]:
    """Per stratum (family x engine x regime) and metric: how many of its records fall inside the 80% range
    built without their own source, and the ranges' median half-width (percent of the prediction)."""
    out: dict[tuple[str, str], StratumCoverage] = {}
    sources_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    for source in sorted({r.source for r in records}):
        others = [r for r in records if r.source != source]
        for r in (x for x in records if x.source == source):
            for metric in ("tpot", "ttft", "tps"):
                ratio = r.ratio(metric)
                if not ratio:
                    continue
                iv = interval_for(
                    others, metric, family=r.family, engine=r.engine, regime=r.regime, kind=r.kind
                )
                if iv is None:
                    continue
                key = (_describe(r.family, r.engine, r.regime), metric)
                cov = out.setdefault(key, StratumCoverage(key[0], metric, 0, 0, 0, []))
                cov.n += 1
                cov.inside += int(iv.lo <= ratio <= iv.hi)
                cov.half_widths_pct.append((iv.hi - iv.lo) / 2 * 100)
                sources_of[key].add(source)
    for key, cov in out.items():
        cov.sources = len(sources_of[key])
    return [out[k] for k in sorted(out)]
