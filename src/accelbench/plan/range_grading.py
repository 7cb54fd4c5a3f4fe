"""How honest the 80% ranges are: each published source's rows graded against the ranges an estimate of them
would show, built from records that owe nothing to that source (``coverage``); each stratum's share inside with
an interval that counts sources, not rows (``intra_source_correlation``, ``StratumCoverage.share_interval``);
what the share inside can be asked of a stratum at all, given its sources (``outside_band_by_chance``, each side
of the band apart; ``chance_in_band``; ``sources_for_band``); and the one factor per group (dense, mixture of
experts) on the ranges' widths with which 80% of held-out sources' rows fall inside (``range_scale``), which
``benchmarks/estimate_accuracy.py --write`` ships for every estimate.

The ranges themselves are built in ``plan/ranges.py``; this module only reads them.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.plan.error_records import METRICS, ErrorRecord
from accelbench.plan.ranges import (
    DENSE,
    GROUP_LABEL,
    Interval,
    describe_stratum,
    figure_intervals,
    scale_group,
)

MIN_GRADE = 5  # held-out rows a stratum needs before the share inside its ranges is graded
HONEST_BAND = (0.7, 0.9)  # the share of held-out rows inside an 80% range that is read as honest
_EDGE = 1e-9  # a share on the band's edge is inside it, as the verdict reads it


@dataclass
class StratumCoverage:
    """One stratum and metric, graded: held-out rows with a range, those inside it, those the records built
    without their source gave no range, and the ranges' half-widths (percent of the prediction)."""

    stratum: str
    metric: str
    n: int = 0
    sources: int = 0
    inside: int = 0
    no_range: int = 0
    half_widths_pct: list[float] = field(default_factory=list)
    per_source: dict[str, tuple[int, int]] = field(default_factory=dict)  # source: (inside, rows)
    group: str = DENSE  # whose width factor its ranges take (``ranges.scale_group``)

    @property
    def graded(self) -> bool:
        """Enough held-out rows for the share inside to say something."""
        return self.n >= MIN_GRADE

    @property
    def share_inside(self) -> float:
        return self.inside / self.n if self.n else math.nan

    @property
    def median_half_width_pct(self) -> float:
        return statistics.median(self.half_widths_pct) if self.half_widths_pct else math.nan

    def design_effect(self, icc: float) -> float:
        """How many times the rows overstate the independent checks they are, when rows of one source fall
        inside or outside together with intra-source correlation ``icc``: 1 + (m - 1) x icc (Kish), m the
        rows per source weighted by rows (sum m_i^2 / n); 1 when nothing says which row came from which
        source."""
        if not self.n or not self.per_source:
            return 1.0
        m = sum(k * k for _, k in self.per_source.values()) / self.n
        return 1.0 + (m - 1.0) * min(max(icc, 0.0), 1.0)

    def share_interval(self, confidence: float = 0.9, icc: float = 0.0) -> tuple[float, float]:
        """The exact (Clopper-Pearson) interval of the share inside: the shares under which ``inside`` of ``n``
        is no rarer than ``(1 - confidence) / 2`` at either end. With ``icc`` 0 it treats the rows as
        independent draws; rows of one source share its bias, and with the intra-source correlation ``icc``
        (``intra_source_correlation``) the interval is read at the effective count n / design effect, the
        share kept. A share whose interval holds 80% is no evidence that the ranges are too wide or too
        narrow."""
        from scipy.stats import beta  # heavy: scipy, only when the ranges are graded

        if not self.n:
            return (0.0, 1.0)
        n = self.n / self.design_effect(icc)
        x = self.share_inside * n
        tail = (1 - confidence) / 2
        lo = float(beta.ppf(tail, x, n - x + 1)) if self.inside else 0.0
        hi = float(beta.ppf(1 - tail, x + 1, n - x)) if self.inside < self.n else 1.0
        return lo, hi


def intra_source_correlation(graded: Sequence[StratumCoverage]) -> float:
    """The intra-class correlation of "inside the range" among rows of one source in one stratum and metric,
    pooled over every stratum (one-way ANOVA estimator for a binary outcome, clusters of unequal size): 0 when
    a source's rows fall inside or outside independently of each other, 1 when they all fall together (the
    source's bias decides). Clipped to [0, 1]; 0 with fewer than two clusters."""
    clusters = [(x, m) for c in graded for x, m in c.per_source.values() if m]
    k, n = len(clusters), sum(m for _, m in clusters)
    if k < 2 or n <= k:
        return 0.0
    p = sum(x for x, _ in clusters) / n
    msb = sum(m * (x / m - p) ** 2 for x, m in clusters) / (k - 1)
    msw = sum(x * (1 - x / m) for x, m in clusters) / (n - k)
    m0 = (n - sum(m * m for _, m in clusters) / n) / (k - 1)
    denom = msb + (m0 - 1) * msw
    return min(max((msb - msw) / denom, 0.0), 1.0) if denom > 0 else 0.0


@dataclass(frozen=True)
class SideByChance:
    """One side of the band under exact ranges: how many strata fell past it, how many exact ranges would put
    there (expected, and its 90% interval), and the chance of a count at least as far from the expected one
    on the side observed (at most the observed count when it is below the expected, at least it otherwise)."""

    observed: int
    expected: float
    interval: tuple[int, int]
    p_as_far: float


@dataclass(frozen=True)
class BandByChance:
    """How often strata fall outside the honest band when every range holds exactly its share: per stratum
    the probability (in ``graded`` order), and over all strata the expected count outside, its 90% interval,
    the chance of at least the count observed and of every stratum inside at once; and the two sides apart
    (``below``: shares under the band, ranges too narrow; ``above``: over it, too wide). Exact ranges put
    more strata above 90% than below 70% when strata are small (a share cannot pass 100%); a count on one
    side far from what they give says the ranges lean that way, which the total alone hides."""

    per_stratum: list[float]
    expected: float
    interval: tuple[int, int]
    observed: int
    p_at_least_observed: float
    p_all_inside: float
    below: SideByChance
    above: SideByChance


def _side(hits: Any, observed: int) -> SideByChance:
    """Summarise one side's simulated counts (``hits``: draws x strata, booleans) against ``observed``."""
    import numpy as np

    counts = hits.sum(axis=1)
    expected = float(counts.mean())
    far = counts <= observed if observed < expected else counts >= observed
    return SideByChance(
        observed=observed,
        expected=expected,
        interval=(int(np.percentile(counts, 5)), int(np.percentile(counts, 95))),
        p_as_far=float(far.mean()),
    )


def _inside_pmf(rows: int, icc: float, share: float) -> Any:
    """The law of how many of one source's ``rows`` fall inside an exact range: binomial with ``share``,
    beta-binomial (mean ``share``, intra-source correlation ``icc``) when the rows share their source's
    bias."""
    import numpy as np
    from scipy.stats import betabinom, binom

    k = np.arange(rows + 1)
    if icc <= 0:
        return binom.pmf(k, rows, share)
    scale = (1.0 - min(icc, 0.999999)) / min(icc, 0.999999)
    return betabinom.pmf(k, rows, share * scale, (1.0 - share) * scale)


def _pmf_in_band(pmf: Any, rows: int, band: tuple[float, float]) -> float:
    import numpy as np

    shares = np.arange(len(pmf)) / rows
    return float(pmf[(shares >= band[0] - _EDGE) & (shares <= band[1] + _EDGE)].sum())


def chance_in_band(
    sizes: Sequence[int], icc: float, share: float = 0.8, band: tuple[float, float] = HONEST_BAND
) -> float:
    """Exactly (no simulation): the chance that a stratum whose sources bring ``sizes`` rows each holds a
    share inside ``band`` when its ranges hold exactly ``share``, each source's rows drawn together with
    intra-source correlation ``icc`` (the sum of independent beta-binomials, by convolution)."""
    import numpy as np

    pmf = np.array([1.0])
    for m in (m for m in sizes if m):
        pmf = np.convolve(pmf, _inside_pmf(m, icc, share))
    rows = sum(sizes)
    return _pmf_in_band(pmf, rows, band) if rows else 0.0


def sources_for_band(
    rows_per_source: int,
    icc: float,
    confidence: float = 0.9,
    share: float = 0.8,
    band: tuple[float, float] = HONEST_BAND,
    most: int = 200,
) -> int | None:
    """The fewest sources of ``rows_per_source`` rows each from which on a stratum whose ranges are exactly
    right stays inside ``band`` with at least ``confidence`` (``chance_in_band``; from which on, since the
    chance is not monotone in the sources: the shares k rows can take sit on a lattice), or None when
    ``most`` sources are not enough. With the measured intra-source correlation this is how many
    independent publishers a stratum needs before "70-90% inside" is a fair test of its ranges rather than
    of its sources' luck."""
    import numpy as np

    if rows_per_source < 1:
        return None
    one = _inside_pmf(rows_per_source, icc, share)
    pmf, meets = np.array([1.0]), []
    for k in range(1, most + 1):
        pmf = np.convolve(pmf, one)
        meets.append(_pmf_in_band(pmf, k * rows_per_source, band) >= confidence)
    if not meets[-1]:
        return None
    k = most
    while k > 1 and meets[k - 2]:
        k -= 1
    return k


def outside_band_by_chance(
    graded: Sequence[StratumCoverage],
    icc: float,
    share: float = 0.8,
    band: tuple[float, float] = HONEST_BAND,
    draws: int = 20000,
    seed: int = 0,
) -> BandByChance:
    """What "every stratum's share inside within ``band``" can be asked of ranges that are exactly right.

    Each stratum keeps its own rows per source. Under exact ranges each source's rows fall inside with a
    probability of their own, drawn about ``share`` with intra-source correlation ``icc`` (a beta law of mean
    ``share`` and ``1 / (a + b + 1) = icc``; independent rows when ``icc`` is 0), and each row falls inside
    with that probability. Simulated ``draws`` times, strata independent of each other: the chance each
    stratum's share leaves the band, the expected number of strata outside and its 90% interval, how often
    at least as many strata as observed do and how often none does, and the same below and above the band
    apart. A stratum of one or two sources with ten rows leaves 70-90% about half the time even when its
    ranges are exactly right: the band is a test of many strata together, not of each one."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lo, hi = band
    below = np.zeros((draws, len(graded)), dtype=bool)
    above = np.zeros((draws, len(graded)), dtype=bool)
    for j, c in enumerate(graded):
        sizes = np.array([m for _, m in c.per_source.values() if m], dtype=np.int64)
        if not sizes.size:
            continue
        if icc > 0:
            scale = (1.0 - icc) / icc
            p = rng.beta(share * scale, (1.0 - share) * scale, size=(draws, sizes.size))
        else:
            p = np.full((draws, sizes.size), share)
        got = rng.binomial(sizes, p).sum(axis=1) / sizes.sum()
        below[:, j], above[:, j] = got < lo - _EDGE, got > hi + _EDGE
    outside = below | above
    counts = outside.sum(axis=1)
    observed = sum(1 for c in graded if not lo <= c.share_inside <= hi)
    return BandByChance(
        per_stratum=[float(v) for v in outside.mean(axis=0)],
        expected=float(counts.mean()),
        interval=(int(np.percentile(counts, 5)), int(np.percentile(counts, 95))),
        observed=observed,
        p_at_least_observed=float((counts >= observed).mean()),
        p_all_inside=float((counts == 0).mean()),
        below=_side(below, sum(1 for c in graded if c.share_inside < lo - _EDGE)),
        above=_side(above, sum(1 for c in graded if c.share_inside > hi + _EDGE)),
    )


def coverage(
    records: Sequence[ErrorRecord],
    built_without: Callable[[str], Sequence[ErrorRecord]] | None = None,
    scale_for: Callable[[str], Mapping[str, float]] | None = None,
) -> list[StratumCoverage]:
    """Per stratum (family x engine x regime) and metric: how many of its records fall inside the 80% range an
    estimate of the row would show, built from ``built_without(source)`` (default: the other sources'
    records; ``accuracy.held_out_records`` gives records whose fits never saw the source either), and the
    ranges' median half-width. Tokens/s are graded against what estimates show: their own stratum's range,
    or E2E's inverted. ``scale_for(source)``: the widths' factors by group the source's rows are graded with (default
    none; ``RangeScale.without`` gives those chosen without the source)."""
    out: dict[tuple[str, str], StratumCoverage] = {}
    sources_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    for source in sorted({r.source for r in records}):
        basis = built_without(source) if built_without else [r for r in records if r.source != source]
        scales = scale_for(source) if scale_for else None
        for r in (x for x in records if x.source == source):
            where = {"family": r.family, "engine": r.engine, "regime": r.regime, "kind": r.kind}
            ivs = figure_intervals(
                basis, where, r.ttft_share if r.ttft_share is not None else 0.0, scales=scales
            )
            for metric in METRICS:
                ratio = r.ratio(metric)
                if not ratio:
                    continue
                key = (describe_stratum(r.family, r.engine, r.regime), metric)
                cov = out.setdefault(key, StratumCoverage(key[0], metric, group=scale_group(r.family)))
                sources_of[key].add(source)
                iv: Interval | None = getattr(ivs, metric)
                if iv is None:
                    cov.no_range += 1
                    continue
                hit = int(iv.lo <= ratio <= iv.hi)
                cov.n += 1
                cov.inside += hit
                was = cov.per_source.get(source, (0, 0))
                cov.per_source[source] = (was[0] + hit, was[1] + 1)
                cov.half_widths_pct.append((iv.hi - iv.lo) / 2 * 100)
    for key, cov in out.items():
        cov.sources = len(sources_of[key])
    return [out[k] for k in sorted(out)]


SCALE_GRID = tuple(round(0.5 + 0.025 * i, 3) for i in range(41))  # 0.5 to 1.5: the widths' factors tried


@dataclass(frozen=True)
class RangeScale:
    """The out-of-source calibration of the ranges' widths, by group (dense, moe: ``ranges.scale_group``):
    ``scales``, the factor (on the widths in logs) whose ranges hold the share nearest ``target`` of every
    held-out source's rows of the group; the shares at 1 and at that factor; and, per source, the factors
    chosen the same way without that source's rows (``without``), with which the source is graded, so that
    the grading never sees a factor fitted to the rows it grades."""

    scales: dict[str, float]
    target: float
    share_unscaled: dict[str, float]
    share_scaled: dict[str, float]
    per_source: dict[str, dict[str, float]]

    def without(self, source: str) -> dict[str, float]:
        return self.per_source.get(source, self.scales)


def _constant(factor: float) -> Callable[[str], Mapping[str, float]]:
    return lambda _source: dict.fromkeys(GROUP_LABEL, factor)


def range_scale(
    records: Sequence[ErrorRecord],
    built_without: Callable[[str], Sequence[ErrorRecord]] | None = None,
    target: float = 0.8,
    grid: Sequence[float] = SCALE_GRID,
) -> RangeScale:
    """How much the ranges' widths must be scaled for ``target`` of held-out sources' rows to fall inside.

    The rules of ``ranges.interval_for`` each widen for a reason of their own (a new source's bias, one
    source, a borrowed stratum), and together they can hold more than 80%: an 80% range that holds 87%
    claims less than the data know, one that holds 75% more. Every factor of ``grid`` is tried on every
    source's rows (``coverage`` against records that owe nothing to the source); per group the factor whose
    share inside is nearest ``target`` is kept (the wider on a tie). One factor per group, not per stratum:
    a factor per stratum would be fitted to the one to seven sources each has. Dense and mixture-of-experts
    models are apart because their rows are apart everywhere else (an MoE range rests on MoE rows, fitted to
    nothing): one factor for both would narrow the MoE ranges that hold too little to narrow the dense ones
    that hold too much."""
    counts: dict[
        float, dict[tuple[str, str], tuple[int, int]]
    ] = {}  # factor: (group, source): (inside, rows)
    for factor in grid:
        per: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
        for c in coverage(records, built_without, scale_for=_constant(factor)):
            for source, (inside, rows) in c.per_source.items():
                per[(c.group, source)][0] += inside
                per[(c.group, source)][1] += rows
        counts[factor] = {k: (v[0], v[1]) for k, v in per.items()}

    def share(factor: float, group: str, leave_out: str | None = None) -> float:
        kept = [v for (g, s), v in counts[factor].items() if g == group and s != leave_out]
        rows = sum(m for _, m in kept)
        return sum(x for x, _ in kept) / rows if rows else math.nan

    def best(group: str, leave_out: str | None = None) -> float:
        if math.isnan(share(grid[0], group, leave_out)):
            return 1.0
        return min(grid, key=lambda f: (abs(share(f, group, leave_out) - target), -f))

    groups = sorted({g for per in counts.values() for g, _ in per})
    sources = sorted({s for per in counts.values() for _, s in per})
    scales = {g: best(g) for g in groups}
    return RangeScale(
        scales=scales,
        target=target,
        share_unscaled={g: share(1.0, g) if 1.0 in counts else math.nan for g in groups},
        share_scaled={g: share(scales[g], g) for g in groups},
        per_source={s: {g: best(g, s) for g in groups} for s in sources},
    )
