"""95% confidence intervals of a benchmark's figures: a bootstrap over its requests, then over its repeats.

One benchmark (one cell and repeat), the successful requests resampled with replacement:

- A percentile (median, p90, p95, p99 of TTFT, TPOT, E2EL) is read from the bootstrap distribution of the order
  statistic it sits on, computed exactly rather than by drawing resamples: the resample's k-th smallest value
  is at most the sample's j-th exactly when at least k of its n draws fall at or below it, a binomial count, so
  the bounds are the order statistics at ``betaincinv(k, n - k + 1, 0.025 / 0.975) * n`` (the classic
  distribution-free interval of a quantile). Numpy's interpolation between two ranks is kept by interpolating
  their bounds.
- ITL pools every request's gaps, and a request's gaps move together, so the request is the unit resampled: a
  pooled percentile's interval is Woodruff's (the bootstrap variance of the share of gaps below it, summed per
  request, mapped back through the pooled distribution).
- A mean uses the bootstrap's exact variance of a resampled sum (n times the per-request variance) with a
  normal 95% band.
- A throughput (requests, output or total tokens, goodput per second of the run) moves with two things a rerun
  changes: what the requests carry, and how long they take, since the streams of a closed loop run back to
  back and the run lasts as long as its requests keep them busy. So a resample's throughput is its tokens
  over its requests' summed latency, scaled to the run's wall time (a ratio estimator: its bootstrap variance
  is n times the variance of ``tokens - R x latency`` per request, R the run's ratio), and the band is the
  wider of that and the plain sum's. A run whose requests all carry the same tokens (a fixed output length)
  still gets a width from its latencies; an open loop's wall time is set by its arrivals rather than its
  latencies, for which this errs wide.

A cell of several repeats (``cell_interval``): the repeats are resampled with replacement, and within each drawn
repeat its own request-level variation is drawn again from that repeat's stored interval (a two-sided normal
matching its lower and upper half-widths); the cell's figure is the mean of its repeats' figures, so each
replicate is the mean of the drawn ones. One repeat has an interval from its requests only, and says so
(``BASIS_REQUESTS``).

Every random draw is seeded (``SEED``): the same data always gives the same interval. Pure numpy and vectorised
(scipy only for the inverse incomplete beta, one call per metric); what dominates is one counting pass over the
pooled ITL gaps per repeat (their percentiles are read from a fine histogram, not a sort).
``benchmarks/interval_cost.py`` times a 64-cell sweep of 3 x 1,000 requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

#: bootstrap resamples of a cell's repeats
REPLICATES = 1000
#: the generator seed: the same data always gives the same interval
SEED = 20260
#: the percentiles stored per latency metric (``MetricStats`` fields ``p50``...)
PERCENTILES = (50, 90, 95, 99)
Z95 = 1.959964
#: what an interval rests on
BASIS_REQUESTS = "requests only"
BASIS_REPEATS = "repeats and requests"
BASIS_REPEATS_ONLY = "repeats only"
METHOD = (
    "bootstrap over the successful requests (exact for percentiles, the bootstrap variance for means and "
    "throughputs, per request for ITL); 95%"
)
#: an interval whose half-width is more than this share of its figure is called wide
WIDE = 0.10
#: bins of the histogram the pooled ITL percentiles are read from
_BINS = 65536


Interval = tuple[float, float]


def _rank_bounds(n: int, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """0-based indices of the sample order statistics bounding the 95% bootstrap interval of a resample's
    ``ranks``-th (0-based) smallest values among ``n`` (one scipy call for all ranks)."""
    from scipy.special import betaincinv  # heavy: scipy, loaded only when this bound is asked for

    k = ranks.astype(np.float64) + 1
    # P(resample's k-th smallest <= x_(j)) = P(Binomial(n, (j+1)/n) >= k) = I_{(j+1)/n}(k, n - k + 1)
    p = betaincinv(k[:, None], (n - k + 1)[:, None], np.array([[0.025, 0.975]]))
    j = np.clip(np.ceil(p * n - 1e-9).astype(np.int64) - 1, 0, n - 1)
    return j[:, 0], j[:, 1]


def percentile_intervals(sorted_values: np.ndarray, qs: Sequence[float]) -> list[Interval]:
    """The 95% bootstrap intervals of the ``qs`` percentiles (numpy's linear interpolation) of a sorted
    sample."""
    n = sorted_values.size
    if n == 1:
        v = float(sorted_values[0])
        return [(v, v) for _ in qs]
    h = (n - 1) * np.asarray(qs, dtype=np.float64) / 100.0
    lo = np.floor(h).astype(np.int64)
    frac = h - lo
    a_lo, a_hi = _rank_bounds(n, lo)
    b_lo, b_hi = _rank_bounds(n, np.minimum(lo + 1, n - 1))
    xs = sorted_values
    low = xs[a_lo] + frac * (xs[b_lo] - xs[a_lo])
    high = xs[a_hi] + frac * (xs[b_hi] - xs[a_hi])
    return [(float(a), float(b)) for a, b in zip(low, high, strict=True)]


def percentile_interval(sorted_values: np.ndarray, q: float) -> Interval:
    """The 95% bootstrap interval of the q-th percentile of a sorted sample."""
    return percentile_intervals(sorted_values, [q])[0]


def sum_interval(values: np.ndarray, scale: float = 1.0) -> Interval:
    """95% interval of ``scale`` times the sum of a resample of ``values`` (its bootstrap variance is n times the
    values' variance)."""
    total = float(values.sum()) * scale
    half = Z95 * math.sqrt(values.size * float(np.var(values))) * abs(scale)
    return total - half, total + half


def throughput_interval(per_request: np.ndarray, latency_s: np.ndarray, duration_s: float) -> Interval:
    """95% interval of ``per_request.sum() / duration_s`` (a throughput) when a resample of the requests also
    moves the run's wall time in proportion to their summed latency: the wider of the ratio estimator's band
    and the plain sum's (see the module's docstring)."""
    n = per_request.size
    total = float(per_request.sum())
    busy = float(latency_s.sum())
    plain = math.sqrt(n * float(np.var(per_request)))
    ratio = 0.0
    if busy > 0:
        resid = per_request - (total / busy) * latency_s
        ratio = math.sqrt(n * float(np.var(resid)))
    half = Z95 * max(plain, ratio) / duration_s
    value = total / duration_s
    return value - half, value + half


def stat_intervals(values: np.ndarray) -> dict[str, Interval]:
    """Intervals of the mean, median and ``PERCENTILES`` of per-request ``values``; keys are ``MetricStats``
    field names."""
    xs = np.sort(values)
    out = dict(zip((f"p{q}" for q in PERCENTILES), percentile_intervals(xs, PERCENTILES), strict=True))
    out["median"] = out["p50"]
    out["mean"] = sum_interval(xs, 1.0 / xs.size)
    return out


class _Histogram:
    """A ``_BINS``-bin histogram over the range of a large sample, to read its percentiles from (to within one
    bin, a 65,536th of the range): one counting pass instead of a sort."""

    def __init__(self, values: np.ndarray) -> None:
        self.n = values.size
        self.lo = float(values.min())
        self.width = (float(values.max()) - self.lo) / _BINS
        if self.width > 0:
            idx = np.minimum(((values - self.lo) / self.width).astype(np.int64), _BINS - 1)
            self.counts = np.bincount(idx, minlength=_BINS)
            self.cum = np.cumsum(self.counts)

    def percentiles(self, qs: Sequence[float] | np.ndarray) -> np.ndarray:
        """numpy's linear-interpolation percentiles, a value spread evenly within its bin."""
        h = (self.n - 1) * np.asarray(qs, dtype=np.float64) / 100.0
        if self.width <= 0:
            return np.full(h.shape, self.lo)
        j = np.minimum(np.searchsorted(self.cum, h, side="right"), _BINS - 1)
        before = np.where(j > 0, self.cum[np.maximum(j - 1, 0)], 0)
        inside = np.maximum(self.counts[j], 1)
        return self.lo + (j + np.clip((h - before + 0.5) / inside, 0.0, 1.0)) * self.width


def pooled_intervals(pooled: np.ndarray, sizes: np.ndarray, scale: float = 1.0) -> dict[str, Interval]:
    """Intervals of the mean, median and percentiles of values pooled from groups (each request's ITL gaps,
    ``pooled`` group after group, ``sizes`` per group), times ``scale``, the group being the unit resampled:
    Woodruff's interval for a percentile, a ratio estimator's bootstrap variance for the mean.

    The pooled percentiles are read from one fine histogram (``_Histogram``): the pooled array is large, and
    counting it once is cheaper than sorting it."""
    if pooled.size == 0:
        return {}
    n, total = sizes.size, float(pooled.size)
    hist = _Histogram(pooled)
    ats = hist.percentiles(PERCENTILES)
    has = sizes > 0
    starts = (np.cumsum(sizes) - sizes)[has]

    def per_group(x: np.ndarray) -> np.ndarray:
        """Each group's sum of ``x`` (groups are contiguous in ``pooled``; an empty group sums to 0)."""
        out = np.zeros(n)
        out[has] = np.add.reduceat(x, starts, dtype=np.float64)
        return out

    bounds: list[float] = []
    for q, at in zip(PERCENTILES, ats, strict=True):
        # each request's gaps at or below the pooled percentile, against its share q of them
        below = per_group((pooled <= at).view(np.int8))
        share_sd = math.sqrt(n * float(np.var(below - (q / 100.0) * sizes))) / total
        bounds += [q / 100.0 - Z95 * share_sd, q / 100.0 + Z95 * share_sd]
    ends = hist.percentiles(100.0 * np.clip(bounds, 0.0, 1.0)) * scale
    out: dict[str, Interval] = {
        f"p{q}": (float(ends[2 * i]), float(ends[2 * i + 1])) for i, q in enumerate(PERCENTILES)
    }
    out["median"] = out["p50"]
    sums = per_group(pooled)
    mean = float(sums.sum()) / total
    half = Z95 * math.sqrt(n * float(np.var(sums - mean * sizes))) / total
    out["mean"] = ((mean - half) * scale, (mean + half) * scale)
    return out


@dataclass(frozen=True)
class RequestColumns:
    """The per-request figures a benchmark's intervals are computed from (successful requests, seconds); ITL
    gaps of every request one after the other, ``itl_counts`` per request."""

    ttft_s: np.ndarray
    e2el_s: np.ndarray
    tpot_s: np.ndarray
    has_tpot: np.ndarray
    itl_s: np.ndarray
    itl_counts: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    good: np.ndarray | None


def benchmark_intervals(cols: RequestColumns, duration_s: float) -> dict[str, dict[str, Interval]]:
    """Every interval of one benchmark: ``{"ttft_ms": {"median": (lo, hi), ...}, ..., "throughput":
    {"output_throughput": (lo, hi), ...}}``; latency intervals in milliseconds. Empty without requests."""
    n = cols.ttft_s.size
    if n == 0:
        return {}
    out: dict[str, dict[str, Interval]] = {
        "ttft_ms": stat_intervals(cols.ttft_s * 1000.0),
        "e2el_ms": stat_intervals(cols.e2el_s * 1000.0),
    }
    if cols.has_tpot.any():
        out["tpot_ms"] = stat_intervals(cols.tpot_s[cols.has_tpot] * 1000.0)
    if cols.itl_s.size:
        out["itl_ms"] = pooled_intervals(cols.itl_s, cols.itl_counts, scale=1000.0)
    if duration_s > 0:
        lat, dur = cols.e2el_s, duration_s
        thr = {
            "request_throughput": throughput_interval(np.ones(n), lat, dur),
            "output_throughput": throughput_interval(cols.output_tokens, lat, dur),
            "total_token_throughput": throughput_interval(cols.input_tokens + cols.output_tokens, lat, dur),
        }
        if cols.good is not None:
            thr["request_goodput"] = throughput_interval(cols.good, lat, dur)
        out["throughput"] = {k: (max(lo, 0.0), hi) for k, (lo, hi) in thr.items()}
    return out


# ------------------------------------------------------------------------------------------ a cell
def _ci(replicates: np.ndarray) -> Interval:
    lo, hi = np.percentile(replicates, (2.5, 97.5))
    return float(lo), float(hi)


@lru_cache(maxsize=64)
def _cell_draws(repeats: int, replicates: int, salt: int) -> tuple[np.ndarray, np.ndarray]:
    """The seeded draws of a cell's bootstrap: which repeat each slot of each replicate takes, and a standard
    normal for its within-repeat variation. Cached: they depend only on the shape (and ``salt``)."""
    rng = np.random.default_rng([SEED, repeats, salt])
    pick = rng.integers(0, repeats, size=(replicates, repeats))
    z = rng.standard_normal((replicates, repeats))
    pick.setflags(write=False)
    z.setflags(write=False)
    return pick, z


def cell_replicates(
    values: Sequence[float], cis: Sequence[Interval | None], replicates: int = REPLICATES, salt: int = 0
) -> np.ndarray:
    """Bootstrap replicates of a cell's figure (the mean of its repeats' figures): repeats resampled with
    replacement, then each drawn repeat's request-level variation drawn from its interval (a two-sided normal).
    Two cells compared take different ``salt`` so that their draws are independent."""
    vals = np.asarray(values, dtype=np.float64)
    lo_sd = np.array([max(v - c[0], 0.0) / Z95 if c else 0.0 for v, c in zip(vals, cis, strict=True)])
    hi_sd = np.array([max(c[1] - v, 0.0) / Z95 if c else 0.0 for v, c in zip(vals, cis, strict=True)])
    pick, z = _cell_draws(vals.size, replicates, salt)
    sd = np.where(z < 0, lo_sd[pick], hi_sd[pick])
    return (vals[pick] + z * sd).mean(axis=1)


def cell_interval(
    values: Sequence[float], cis: Sequence[Interval | None]
) -> tuple[Interval | None, str | None]:
    """A cell's 95% interval and its basis from its repeats' figures and their request-level intervals.

    One repeat: its own interval (``BASIS_REQUESTS``), or none. Several: the two-stage bootstrap
    (``BASIS_REPEATS``, or ``BASIS_REPEATS_ONLY`` when some repeat has no request-level interval); none when no
    repeat has one (results stored before intervals existed)."""
    if not values:
        return None, None
    if len(values) == 1:
        ci = cis[0] if cis else None
        return (ci, BASIS_REQUESTS) if ci is not None else (None, None)
    if all(c is None for c in cis):
        return None, None  # results stored before intervals existed: no request-level evidence to go on
    all_within = all(c is not None for c in cis)
    use = list(cis) if all_within else [None] * len(values)
    ci = _ci(cell_replicates(values, use))
    return ci, BASIS_REPEATS if all_within else BASIS_REPEATS_ONLY


def half_width_pct(value: float | None, ci: Sequence[float] | None) -> float | None:
    """Half the interval's width as a percentage of the figure (the ``+-3%`` shown beside it)."""
    if value is None or ci is None or len(ci) != 2 or value == 0 or not math.isfinite(value):
        return None
    return 100.0 * (float(ci[1]) - float(ci[0])) / 2.0 / abs(value)


def is_wide(value: float | None, ci: Sequence[float] | None) -> bool:
    """True when the interval's half-width is more than ``WIDE`` of the figure."""
    pct = half_width_pct(value, ci)
    return pct is not None and pct > 100.0 * WIDE
