"""How sure a capacity answer is: the chance that the SLO holds at each level measured, and the range of levels
the answer lies in with 90% confidence.

A level's confidence (``evidence_confidence`` of its ``evidence_of``) is the bootstrap probability, over its requests, that a rerun of the
same requests would meet the SLO: for each target, that the chosen percentile stays within it (the resample's
count of requests within the target is binomial, so the chance is exact: ``betainc``), and that the attainment
stays at or above its floor; the SLO needs all of them, and the product of their chances is taken (a lower
bound, the conditions moving together). It rests on counts alone (``SloEvidence``: per metric the requests within
the target, and those meeting every target), so the repeats of a level pool: their counts are summed and judged
as one sample (``pooled_confidence``, ``pooled_met``). A level with a repeat whose server fell behind is a sure
miss; levels stored without counts average their repeats' confidences.

The product is a lower bound on the chance the SLO holds, fit to call a level a sure pass; the weakest single
condition's chance is an upper bound (the conditions moving together), and only a level below 10% on that bound
is called a sure miss: with the product, one target judged twice (a percentile and an attainment floor on the
same requests) makes a miss look sure on half the evidence, and the range's high end falls below the true
capacity too often.

The range (``confidence_range``): its low end is the highest level at or below the answer where the SLO holds
with at least 90% confidence; its high end is the highest load below the first level above the answer where it
fails with at least 90% confidence (on the upper bound) (one user below it for concurrency, the highest level measured below it for
a request rate), so "15 users (14-16 with 90% confidence)" means 14 surely holds and 17 surely does not.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

from accelbench.domain.capacity import LevelEvidence, LoadKind, Probe, SloEvidence

LEVEL = 0.9
#: below this the SLO surely fails; between it and ``LEVEL`` the evidence is thin
SURE_MISS = 1 - LEVEL


def _at_least(n: int, k: int, p: float) -> float:
    """P(Binomial(n, p) >= k)."""
    from scipy.special import betainc  # heavy: scipy, loaded only when this bound is asked for

    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    return float(betainc(k, n - k + 1, min(max(p, 0.0), 1.0)))


def evidence_of(
    values: Mapping[str, Sequence[float]],
    targets: Mapping[str, float],
    percentile: float,
    meeting: int,
    total: int,
    attainment: float,
) -> SloEvidence:
    """The counts a level's confidence rests on: ``values`` per metric (ms, the requests that have one),
    ``targets`` in ms at ``percentile``, and ``meeting`` of ``total`` requests meeting every target against the
    ``attainment`` floor."""
    present = {m: values.get(m) or [] for m in targets}
    return SloEvidence(
        percentile=percentile,
        attainment=attainment,
        valued={m: len(v) for m, v in present.items() if v},
        within={m: sum(1 for x in v if x <= targets[m]) for m, v in present.items() if v},
        meeting=meeting,
        judged=total,
    )


def _needed(n: int, percentile: float) -> int:
    """Values within the target for the percentile (linear interpolation) to be: the order statistic at or
    above its position must be, so at least ceil((n - 1) q) + 1 of the n."""
    return math.ceil((n - 1) * percentile / 100.0 - 1e-9) + 1


def _attainment_needed(e: SloEvidence) -> int:
    return math.ceil(e.attainment * e.judged - 1e-9)


def evidence_confidence(e: SloEvidence, *, upper: bool = False) -> float:
    """The chance the SLO holds on a resample of the requests the counts ``e`` describe: the product of each
    condition's chance (a lower bound), or with ``upper`` the weakest condition's (an upper bound)."""
    chances = [
        _at_least(n, _needed(n, e.percentile), e.within.get(metric, 0) / n)
        for metric, n in e.valued.items()
        if n > 0
    ]
    if e.judged > 0:
        chances.append(_at_least(e.judged, _attainment_needed(e), e.meeting / e.judged))
    return min(chances, default=1.0) if upper else math.prod(chances)


def pooled(evidence: Sequence[SloEvidence]) -> SloEvidence | None:
    """The repeats of one level as one sample: their counts summed (None without any)."""
    if not evidence:
        return None
    first = evidence[0]
    metrics = {m for e in evidence for m in e.valued}
    return SloEvidence(
        percentile=first.percentile,
        attainment=first.attainment,
        valued={m: sum(e.valued.get(m, 0) for e in evidence) for m in sorted(metrics)},
        within={m: sum(e.within.get(m, 0) for e in evidence) for m in sorted(metrics)},
        meeting=sum(e.meeting for e in evidence),
        judged=sum(e.judged for e in evidence),
    )


def _counts(probes: Sequence[Probe]) -> list[SloEvidence] | None:
    """Every repeat's counts, or None when a repeat has none (stored before they were kept)."""
    found = [p.evidence for p in probes]
    return None if any(e is None for e in found) else [e for e in found if e is not None]


def pooled_confidence(probes: Sequence[Probe], *, upper: bool = False) -> float | None:
    """The chance the SLO holds at one level, from every repeat ``probes`` (all of one level) measured: 0 when
    the server fell behind in one; the counts pooled (``upper``: its upper bound); else (probes without counts)
    their confidences averaged; None when no repeat has a confidence."""
    if any(p.oversaturated and p.met is not None for p in probes):
        return 0.0
    counts = _counts(probes)
    if counts:
        e = pooled(counts)
        assert e is not None
        return evidence_confidence(e, upper=upper)
    known = [p.confidence for p in probes if p.confidence is not None]
    return sum(known) / len(known) if known else None


def pooled_met(probes: Sequence[Probe]) -> bool:
    """Whether the SLO is met at one level on every repeat ``probes`` measured: a single measurement's own
    verdict; pooled counts for several (each percentile's order statistic within its target, the attainment
    at its floor; a repeat whose server fell behind fails the level); probes without counts: the majority of
    their verdicts (a tie is not a pass)."""
    if len(probes) == 1:
        return bool(probes[0].met)
    if any(p.oversaturated for p in probes):
        return False
    counts = _counts(probes)
    if not counts:
        return sum(1 for p in probes if p.met) * 2 > len(probes)
    e = pooled(counts)
    assert e is not None
    percentiles = all(e.within.get(m, 0) >= _needed(n, e.percentile) for m, n in e.valued.items() if n > 0)
    return percentiles and e.meeting >= _attainment_needed(e)


def by_level(probes: Sequence[Probe]) -> dict[float, list[Probe]]:
    """The probes of each level, by level."""
    out: dict[float, list[Probe]] = defaultdict(list)
    for p in sorted(probes, key=lambda p: (p.level, p.repeat)):
        out[p.level].append(p)
    return dict(out)


def level_evidence(probes: Sequence[Probe]) -> list[LevelEvidence]:
    """Each level measured, by level: how many repeats, the SLO's confidence and verdict over them pooled."""
    return [
        LevelEvidence(
            level=level,
            repeats=len(at),
            confidence=pooled_confidence(at),
            met=pooled_met(at) if any(p.met is not None for p in at) else None,
        )
        for level, at in by_level(probes).items()
    ]


def level_confidence(probes: Sequence[Probe], *, upper: bool = False) -> dict[float, float]:
    """Each measured level's confidence that the SLO holds (its repeats pooled, ``pooled_confidence``, its upper
    bound with ``upper``; levels without one left out)."""
    out = {level: pooled_confidence(at, upper=upper) for level, at in by_level(probes).items()}
    return {level: c for level, c in out.items() if c is not None}


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
    at_most = level_confidence(probes, upper=True)
    failing = [lv for lv, c in at_most.items() if lv > answer and c <= 1 - level]
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
