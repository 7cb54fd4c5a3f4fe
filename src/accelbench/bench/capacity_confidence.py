"""How sure a capacity answer is: the chance that the SLO holds at each level measured, and the range of levels
the answer lies in with 90% confidence.

A level's confidence (``slo_confidence``) is the bootstrap probability, over its requests, that a rerun of the
same requests would meet the SLO: for each target, that the chosen percentile stays within it (the resample's
count of requests within the target is binomial, so the chance is exact: ``betainc``), and that the attainment
stays at or above its floor; the SLO needs all of them, and the product of their chances is taken (a lower
bound, the conditions moving together). Repeats of a level are averaged.

The range (``confidence_range``): its low end is the highest level at or below the answer where the SLO holds
with at least 90% confidence; its high end is the highest load below the first level above the answer where it
fails with at least 90% confidence (one user below it for concurrency, the highest level measured below it for
a request rate), so "15 users (14-16 with 90% confidence)" means 14 surely holds and 17 surely does not.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

from accelbench.domain.capacity import LoadKind, Probe

LEVEL = 0.9


def _at_least(n: int, k: int, p: float) -> float:
    """P(Binomial(n, p) >= k)."""
    from scipy.special import betainc

    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return float(betainc(k, n - k + 1, min(max(p, 0.0), 1.0)))


def slo_confidence(
    values: Mapping[str, Sequence[float]],
    targets: Mapping[str, float],
    percentile: float,
    meeting: int,
    total: int,
    attainment: float,
) -> float:
    """The chance the SLO holds on a resample of the requests: ``values`` per metric (ms, the requests that
    have one), ``targets`` in ms at ``percentile``, and ``meeting`` of ``total`` requests meeting every target
    against the ``attainment`` floor."""
    chance = 1.0
    for metric, target in targets.items():
        vals = values.get(metric) or []
        n = len(vals)
        if n == 0:
            continue
        # the percentile (linear interpolation) is within the target when the order statistic at or above its
        # position is: at least ceil((n - 1) q) + 1 of the n values within the target
        need = math.ceil((n - 1) * percentile / 100.0 - 1e-9) + 1
        within = sum(1 for v in vals if v <= target)
        chance *= _at_least(n, need, within / n)
    if total > 0:
        chance *= _at_least(total, math.ceil(attainment * total - 1e-9), meeting / total)
    return chance


def level_confidence(probes: Sequence[Probe]) -> dict[float, float]:
    """Each measured level's confidence that the SLO holds (its repeats averaged; probes without one left out)."""
    by_level: dict[float, list[float]] = defaultdict(list)
    for p in probes:
        if p.confidence is not None:
            by_level[p.level].append(p.confidence)
    return {level: sum(c) / len(c) for level, c in sorted(by_level.items())}


def confidence_range(
    probes: Sequence[Probe], answer: float | None, load: LoadKind, level: float = LEVEL
) -> list[float | None] | None:
    """[low, high] around the answer at ``level`` confidence (see the module docstring); an end is None when no
    measured level settles it; None without an answer or confidences."""
    conf = level_confidence(probes)
    if answer is None or not conf:
        return None
    sure = [lv for lv, c in conf.items() if lv <= answer and c >= level]
    low = max(sure) if sure else None
    failing = [lv for lv, c in conf.items() if lv > answer and c <= 1 - level]
    high: float | None = None
    if failing:
        first = min(failing)
        below = [lv for lv in conf if answer <= lv < first]
        high = first - 1 if load == "concurrency" else max(below, default=answer)
        high = max(high, answer)
    return [low, high]


def range_phrase(rng: Sequence[float | None] | None, unit: str = "") -> str:
    """``"14-16 with 90% confidence"``, ``"at least 14 with 90% confidence"`` or empty."""
    if not rng:
        return ""
    low, high = rng
    pct = f"{LEVEL:.0%}"
    if low is not None and high is not None:
        return f"{low:g}-{high:g}{unit} with {pct} confidence"
    if low is not None:
        return f"at least {low:g}{unit} with {pct} confidence; no level above is a sure miss"
    if high is not None:
        return f"at most {high:g}{unit} with {pct} confidence; no level measured is a sure pass"
    return ""
