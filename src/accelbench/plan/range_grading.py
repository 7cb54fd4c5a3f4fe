"""How honest the 80% ranges are: each published source's rows graded against the ranges an estimate of them
would show, built from records that owe nothing to that source (``coverage``); each stratum's share inside with
an interval that counts sources, not rows (``intra_source_correlation``, ``StratumCoverage.share_interval``);
and what the share inside can be asked of a stratum at all, given its sources (``outside_band_by_chance``).

The ranges themselves are built in ``plan/ranges.py``; this module only reads them.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from accelbench.plan.error_records import METRICS, ErrorRecord
from accelbench.plan.ranges import Interval, describe_stratum, figure_intervals

MIN_GRADE = 5  # held-out rows a stratum needs before the share inside its ranges is graded
HONEST_BAND = (0.7, 0.9)  # the share of held-out rows inside an 80% range that is read as honest


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
class BandByChance:
    """How often strata fall outside the honest band when every range holds exactly its share: per stratum
    the probability (in ``graded`` order), and over all strata the expected count outside, its 90% interval
    and the chance of at least the count observed."""

    per_stratum: list[float]
    expected: float
    interval: tuple[int, int]
    observed: int
    p_at_least_observed: float


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
    with that probability. Simulated ``draws`` times: the chance each stratum's share leaves the band, the
    expected number of strata outside and its 90% interval, and how often at least as many strata as
    observed do. A stratum of one or two sources with ten rows leaves 70-90% about half the time even when
    its ranges are exactly right: the band is a test of many strata together, not of each one."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lo, hi = band
    outside = np.zeros((draws, len(graded)), dtype=bool)
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
        eps = 1e-9  # a share on the band's edge is inside it, as the verdict reads it
        outside[:, j] = (got < lo - eps) | (got > hi + eps)
    counts = outside.sum(axis=1)
    observed = sum(1 for c in graded if not lo <= c.share_inside <= hi)
    return BandByChance(
        per_stratum=[float(v) for v in outside.mean(axis=0)],
        expected=float(counts.mean()),
        interval=(int(np.percentile(counts, 5)), int(np.percentile(counts, 95))),
        observed=observed,
        p_at_least_observed=float((counts >= observed).mean()),
    )


def coverage(
    records: Sequence[ErrorRecord], built_without: Callable[[str], Sequence[ErrorRecord]] | None = None
) -> list[StratumCoverage]:
    """Per stratum (family x engine x regime) and metric: how many of its records fall inside the 80% range an
    estimate of the row would show, built from ``built_without(source)`` (default: the other sources'
    records; ``accuracy.held_out_records`` gives records whose fits never saw the source either), and the
    ranges' median half-width. Tokens/s are graded against what estimates show: their own stratum's range,
    or E2E's inverted."""
    out: dict[tuple[str, str], StratumCoverage] = {}
    sources_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    for source in sorted({r.source for r in records}):
        basis = built_without(source) if built_without else [r for r in records if r.source != source]
        for r in (x for x in records if x.source == source):
            where = {"family": r.family, "engine": r.engine, "regime": r.regime, "kind": r.kind}
            ivs = figure_intervals(basis, where, r.ttft_share if r.ttft_share is not None else 0.0)
            for metric in METRICS:
                ratio = r.ratio(metric)
                if not ratio:
                    continue
                key = (describe_stratum(r.family, r.engine, r.regime), metric)
                cov = out.setdefault(key, StratumCoverage(key[0], metric))
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
