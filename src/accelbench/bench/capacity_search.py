"""Capacity at an SLO, measured: the highest load a server sustains within latency targets.

``search(measure, slo, ...)`` drives probes. It starts from a given level (the planner's predicted capacity when
there is one, so few levels are needed), grows geometrically until the SLO breaks, bisects to the boundary,
then measures the answer and the next level up again while the evidence there is thin (the SLO's confidence,
its repeats' requests pooled, between 10% and 90%), and settles the answer and its 90% range on the pooled
evidence; at most ``max_probes`` levels are measured, and the result says when they ran out with the evidence
still thin. A level
meets the SLO when the chosen percentile of every named metric is within its target and the share of requests
meeting all targets (goodput attainment) is at least ``attainment``. Without an SLO the search grows until
adding load stops adding throughput, and reports the knee.

``judge(summary, slo, ...)`` turns one benchmark into a ``Probe``: steady state only (the first wave of a closed
loop and the warm-ups are left out), the percentiles, the attainment, the achieved rate, and over-saturation
(a request-rate level whose sends fell behind or whose TTFT kept growing through the run fails at once).

``knee(points)`` finds where a throughput curve bends: the point farthest from the chord between its ends,
on normalised axes (Kneedle), with throughput still rising by less than a tenth per step after it.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.bench.capacity_confidence import (
    LEVEL,
    SURE_MISS,
    confidence_range,
    evidence_confidence,
    evidence_of,
    level_evidence,
    pooled_confidence,
    pooled_met,
)
from accelbench.bench.recorder import RunRecorder
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.capacity import (
    METRICS,
    CapacityResult,
    CapacitySLO,
    LoadKind,
    Probe,
)
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.run import CellStatus
from accelbench.errors import UserInputError

RATE_TOLERANCE = 0.1  # a rate boundary is found to within 10%


# --------------------------------------------------------------------------------------------- judging
def requests_for(percentile: float, floor: int = 20) -> int:
    """Requests a level needs so its percentile rests on about ten requests beyond it."""
    return max(floor, math.ceil(10 / (1 - percentile / 100)))


def _tpot_s(r: RequestRecord) -> float | None:
    if r.output_tokens <= 1:
        return None
    return (r.latency_s - r.ttft_s) / (r.output_tokens - 1)


def _values_ms(r: RequestRecord) -> dict[str, float | None]:
    tpot = _tpot_s(r)
    return {
        "ttft": r.ttft_s * 1000,
        "tpot": tpot * 1000 if tpot is not None else None,
        "itl": max(r.itl_s) * 1000 if r.itl_s else None,  # a request's worst gap: what a reader sees stall
        "e2el": r.latency_s * 1000,
    }


def steady(records: Sequence[RequestRecord], load: LoadKind, level: float) -> list[RequestRecord]:
    """The requests of the steady state: a closed loop's first wave (sent together) is left out, or, after a
    staggered start, the requests that started within its ramp (which the first streams' requests are)."""
    ok = sorted(records, key=lambda r: r.start_s)
    if any(r.ramp for r in ok):
        return [r for r in ok if not r.ramp]
    if load == "concurrency":
        skip = int(level)
        return ok[skip:] if len(ok) > 2 * skip else ok
    return ok


def ttft_growing(records: Sequence[RequestRecord]) -> bool:
    """TTFT rising through the run (the queue growing): the last third's median is twice the first third's
    and clearly above it."""
    ok = [r for r in sorted(records, key=lambda r: r.start_s) if r.success]
    if len(ok) < 9:
        return False
    third = len(ok) // 3
    first = statistics.median(r.ttft_s for r in ok[:third])
    last = statistics.median(r.ttft_s for r in ok[-third:])
    return last > 2 * first and last - first > 0.05


def _meets(values: dict[str, float | None], targets: dict[str, float]) -> bool:
    return all((x := values.get(m)) is None or x <= t for m, t in targets.items())


def judge(
    summary: BenchmarkSummary,
    *,
    level: float,
    load: LoadKind,
    slo: CapacitySLO | None,
    repeat: int = 1,
) -> Probe:
    records = steady(summary.requests, load, level)
    good = [r for r in records if r.success]
    failed = sum(1 for r in records if not r.success)
    probe = Probe(
        level=level,
        repeat=repeat,
        requests=len(good),
        failed=failed,
        output_tokens_per_s=summary.output_throughput,
        total_tokens_per_s=summary.total_token_throughput,
        requests_per_s=summary.request_throughput,
    )
    if load == "request_rate":
        starts = [r.start_s for r in summary.requests]
        span = (max(starts) - min(starts)) if len(starts) > 1 else 0.0
        probe.achieved_rate = (len(starts) - 1) / span if span > 0 else None
        behind = probe.achieved_rate is not None and probe.achieved_rate < 0.9 * level
        probe.oversaturated = behind or ttft_growing(summary.requests)
    if not good:
        probe.met = False if slo is not None else None
        probe.why = "no request succeeded"
        return probe
    q = slo.percentile if slo is not None else 90.0
    per_request = [_values_ms(r) for r in good]
    for metric in METRICS:
        vals = [x for v in per_request if (x := v[metric]) is not None]
        if vals:
            probe.percentiles[metric] = float(np.percentile(vals, q))
    if slo is None:
        return probe
    meeting = sum(1 for v in per_request if _meets(v, slo.targets))
    probe.attainment = meeting / (len(good) + failed)
    misses = [
        f"p{slo.percentile:g} {m} {probe.percentiles[m]:.1f} ms > {t:g} ms"
        for m, t in slo.targets.items()
        if m in probe.percentiles and probe.percentiles[m] > t
    ]
    if probe.attainment < slo.attainment:
        misses.append(f"attainment {probe.attainment:.0%} < {slo.attainment:.0%}")
    if probe.oversaturated:
        misses.append("over-saturated: the server fell behind the offered rate")
    probe.evidence = evidence_of(
        {m: [x for v in per_request if (x := v[m]) is not None] for m in slo.targets},
        slo.targets,
        slo.percentile,
        meeting,
        len(good) + failed,
        slo.attainment,
    )
    probe.confidence = 0.0 if probe.oversaturated else evidence_confidence(probe.evidence)
    probe.met = not misses
    probe.why = "; ".join(misses) or "meets the SLO"
    return probe


# --------------------------------------------------------------------------------------------- the search
def knee(points: Sequence[tuple[float, float]]) -> float | None:
    """Where adding load stops adding throughput: the point farthest above the chord of the normalised curve
    (Kneedle), at or after which throughput grows by less than 10% per step. None for fewer than 3 points."""
    pts = sorted(points)
    if len(pts) < 3:
        return None
    x = np.array([math.log(p[0]) for p in pts])
    y = np.array([p[1] for p in pts])
    if x[-1] == x[0] or y.max() == y.min():
        return None
    xn = (x - x[0]) / (x[-1] - x[0])
    yn = (y - y.min()) / (y.max() - y.min())
    best = int(np.argmax(yn - xn))
    # later points that still add more than 10% are not past the knee
    while best + 1 < len(pts) and y[best + 1] > 1.1 * y[best]:
        best += 1
    return pts[best][0]


def _next_between(lo: float, hi: float, load: LoadKind) -> float | None:
    if load == "concurrency":
        return float((int(lo) + int(hi)) // 2) if hi - lo > 1 else None
    return math.sqrt(lo * hi) if hi / lo > 1 + RATE_TOLERANCE else None


class _Search:
    """One search's state: the probes (stored ones reused, new ones measured), the levels asked for (the probe
    budget counts them) and the steps: the knee, the bracket, the bisection, the confirmation, the answer."""

    def __init__(
        self,
        measure: Callable[[float, int], Probe],
        *,
        load: LoadKind,
        slo: CapacitySLO | None,
        max_load: float,
        max_probes: int,
        done: Sequence[Probe],
    ) -> None:
        self.measure = measure
        self.load: LoadKind = load
        self.slo = slo
        self.max_load = max_load
        self.max_probes = max_probes
        self.probes: list[Probe] = list(done)
        self.asked: list[tuple[float, int]] = []  # the levels the search has asked for, stored or measured

    def level_of(self, x: float) -> float:
        x = min(max(x, 1.0 if self.load == "concurrency" else 1e-3), self.max_load)
        return float(round(x)) if self.load == "concurrency" else float(f"{x:.4g}")

    def probe(self, level: float, repeat: int = 1) -> Probe:
        if (level, repeat) not in self.asked:
            self.asked.append((level, repeat))
        # a stored probe of an interrupted search is reused: the search replays, nothing is measured twice
        for p in self.probes:
            if p.level == level and p.repeat == repeat:
                return p
        p = self.measure(level, repeat)
        self.probes.append(p)
        return p

    def budget(self) -> bool:
        return len(self.asked) < self.max_probes

    def at(self, level: float) -> list[Probe]:
        """The measurements of ``level`` the search has asked for so far (a resumed search replays its stored
        probes in the order they were asked, so it decides as the interrupted one did)."""
        return [p for p in self.probes if p.level == level and (p.level, p.repeat) in self.asked]

    def holds(self, level: float) -> bool:
        """Whether the SLO holds at ``level`` on every measurement of it pooled."""
        return pooled_met(self.at(level))

    def thin(self, level: float) -> bool:
        """The evidence at ``level`` is thin: the SLO's confidence there is neither sure (``LEVEL``, its lower
        bound) nor a sure miss (``SURE_MISS``, its upper bound)."""
        low, high = pooled_confidence(self.at(level)), pooled_confidence(self.at(level), upper=True)
        return low is not None and high is not None and low < LEVEL and high > SURE_MISS

    def knee_result(self, start: float) -> CapacityResult:
        """Without an SLO: grow until throughput stops growing (or the server falls behind)."""
        level = self.level_of(start)
        last = None
        while self.budget():
            p = self.probe(level)
            if p.oversaturated or (
                last is not None and p.output_tokens_per_s < 1.05 * last.output_tokens_per_s
            ):
                break
            if level >= self.max_load:
                break
            last, level = p, self.level_of(level * 2)
        result = CapacityResult(load=self.load, slo=self.slo)
        result.knee = knee([(p.level, p.output_tokens_per_s) for p in self.probes if p.repeat == 1])
        result.probes = self.probes
        return result

    def bracket(self, start: float) -> tuple[float | None, float | None]:
        """(highest level seen meeting the SLO, lowest seen failing it): grow from ``start`` until it fails,
        or halve until it holds."""
        lo: float | None = None
        hi: float | None = None
        level = self.level_of(start)
        while self.budget():
            self.probe(level)
            if self.holds(level):
                lo = level if lo is None else max(lo, level)
                if hi is not None or level >= self.max_load:
                    break
                level = self.level_of(level * 2)
            else:
                hi = level if hi is None else min(hi, level)
                if lo is not None:
                    break
                if level <= self.level_of(0):
                    break
                level = self.level_of(level / 2)
                if level == hi:
                    break
        return lo, hi

    def bisect(self, lo: float | None, hi: float | None) -> tuple[float | None, float | None]:
        """Narrow the bracket to adjacent levels (concurrency) or within ``RATE_TOLERANCE`` (a rate)."""
        while lo is not None and hi is not None and self.budget():
            mid = _next_between(lo, hi, self.load)
            if mid is None:
                break
            mid = self.level_of(mid)
            if mid in (lo, hi):
                break
            self.probe(mid)
            if self.holds(mid):
                lo = mid
            else:
                hi = mid
        return lo, hi

    def boundary(self) -> tuple[float | None, float | None]:
        """(lo, hi) from every level measured, its repeats pooled: the lowest level failing the SLO and the
        highest holding it below that one."""
        levels = sorted({lv for lv, _ in self.asked})
        hi = min((lv for lv in levels if not self.holds(lv)), default=None)
        lo = max((lv for lv in levels if self.holds(lv) and (hi is None or lv < hi)), default=None)
        return lo, hi

    def refine(self, lo: float, hi: float | None) -> None:
        """Measure the answer ``lo`` and the next level up ``hi`` again (a new repeat each time, the one with
        fewer first) while the SLO's confidence at either is thin and the budget allows."""
        while self.budget():
            thin = [lv for lv in (lo, hi) if lv is not None and self.thin(lv)]
            if not thin:
                return
            level = min(thin, key=lambda lv: len(self.at(lv)))
            repeat = 1 + max(r for lv, r in self.asked if lv == level)
            self.probe(level, repeat)

    def settle(self, lo: float | None, hi: float | None, confirm: bool) -> tuple[float | None, float | None]:
        """Bisect, then measure again where the evidence at the boundary is thin, until the boundary (from the
        pooled evidence) stays put or the budget ends; a moved boundary is bisected again."""
        for _ in range(3 * self.max_probes):  # each pass measures a new level or ends; the bound is a guard
            lo, hi = self.bisect(lo, hi)
            if not confirm or lo is None:
                break
            self.refine(lo, hi)
            moved = self.boundary()
            if moved == (lo, hi):
                break
            lo, hi = self.extend(*moved)
        return lo, hi

    def extend(self, lo: float | None, hi: float | None) -> tuple[float | None, float | None]:
        """A boundary that moved past every level measured on one side: bracket again from there (up from a
        capacity nothing above it fails, down from a lowest level that no longer holds)."""
        if lo is not None and hi is None and lo < self.max_load:
            self.bracket(lo * 2)
        elif lo is None and hi is not None and hi > self.level_of(0):
            self.bracket(hi / 2)
        else:
            return lo, hi
        return self.boundary()

    def thin_note(self, lo: float, hi: float | None) -> str | None:
        """What the budget left unsettled at the boundary, in words; None when the evidence there is clear."""
        thin = [lv for lv in (lo, hi) if lv is not None and self.thin(lv)]
        if not thin:
            return None
        said = " and ".join(
            f"at {lv:g} with {pooled_confidence(self.at(lv)) or 0.0:.0%} confidence ({len(self.at(lv))} "
            f"measurement{'s' if len(self.at(lv)) > 1 else ''})"
            for lv in thin
        )
        return f"The SLO holds {said}; more repeats needed: raise --max-probes (all {self.max_probes} were used)."

    def answer(self, lo: float | None, hi: float | None, confirm: bool = True) -> CapacityResult:
        """The result: the capacity ``lo`` with its range, throughput at it and notes, or why there is none."""
        probes = self.probes
        result = CapacityResult(load=self.load, slo=self.slo, probes=probes, levels=level_evidence(probes))
        result.knee = knee([(p.level, p.output_tokens_per_s) for p in probes if p.repeat == 1])
        if lo is None:
            lowest = min(probes, key=lambda p: p.level) if probes else None
            result.reason = (
                f"even the lowest level measured ({lowest.level:g}) misses the SLO: {lowest.why}"
                if lowest is not None
                else "no level could be measured"
            )
            return result
        result.max_load = lo
        result.max_load_range = confidence_range(probes, lo, self.load)
        at = self.at(lo) or [p for p in probes if p.level == lo]  # the capacity's every repeat, pooled
        result.output_tokens_per_s_at_max = statistics.fmean(p.output_tokens_per_s for p in at)
        result.total_tokens_per_s_at_max = statistics.fmean(p.total_tokens_per_s for p in at)
        result.requests_per_s_at_max = statistics.fmean(p.requests_per_s for p in at)
        if hi is None and lo >= self.max_load:
            result.notes.append(
                f"The SLO is still met at --max-load {self.max_load:g}: the capacity may be higher."
            )
        if len(probes) >= self.max_probes and hi is not None and _next_between(lo, hi, self.load) is not None:
            result.notes.append(
                f"Stopped after {self.max_probes} levels: the boundary lies between {lo:g} and {hi:g}."
            )
        if confirm and not self.budget() and (note := self.thin_note(lo, hi)):
            result.notes.append(note)
        return result


def search(
    measure: Callable[[float, int], Probe],
    *,
    load: LoadKind,
    slo: CapacitySLO | None,
    start: float = 1.0,
    max_load: float = 1024.0,
    max_probes: int = 12,
    done: Sequence[Probe] = (),
    confirm: bool = True,
) -> CapacityResult:
    """Find the capacity (or, without an SLO, the knee). ``measure(level, repeat)`` runs one level; ``done``
    are probes stored by an interrupted search, which are reused rather than measured again."""
    if max_load < 1 and load == "concurrency":
        raise UserInputError("--max-load must be at least 1.")
    if max_load <= 0:
        raise UserInputError("--max-load must be positive.")
    s = _Search(measure, load=load, slo=slo, max_load=max_load, max_probes=max_probes, done=done)
    if slo is None:
        return s.knee_result(start)
    lo, hi = s.settle(*s.bracket(start), confirm)
    return s.answer(lo, hi, confirm)


def price(result: CapacityResult, hourly_usd: float | None) -> CapacityResult:
    """Cost per million tokens at the capacity, from an hourly price."""
    if hourly_usd is None or not result.output_tokens_per_s_at_max:
        return result
    out = result.model_copy()
    out.hourly_usd = hourly_usd
    out.usd_per_million_output_tokens = hourly_usd / (result.output_tokens_per_s_at_max * 3600) * 1e6
    if result.total_tokens_per_s_at_max:
        out.usd_per_million_total_tokens = hourly_usd / (result.total_tokens_per_s_at_max * 3600) * 1e6
    return out


# --------------------------------------------------------------------------------------------- measuring
def level_config(
    base: BenchConfig, *, load: LoadKind, level: float, slo: CapacitySLO | None, min_duration_s: float = 10.0
) -> BenchConfig:
    """One level's benchmark: enough requests for the percentile it is judged at, after the warm-ups; a
    closed loop adds its first wave (left out of the judging); a rate runs at least ``min_duration_s``."""
    need = requests_for(slo.percentile if slo is not None else 90.0)
    if load == "concurrency":
        c = int(level)
        return base.model_copy(
            update={
                "max_concurrency": c,
                "request_rate": math.inf,
                # whole conversations when each is several turns
                "num_prompts": math.ceil((need + c) / base.turns) * base.turns,
                "num_warmups": max(base.num_warmups, min(c, 16)),
            }
        )
    return base.model_copy(
        update={
            "max_concurrency": None,
            "request_rate": level,
            "num_prompts": max(need, math.ceil(level * min_duration_s)),
        }
    )


def cell_key(load: LoadKind, probe_index: int, level: float, repeat: int) -> tuple[int, int]:
    """(concurrency, repeat) a probe is stored under: a concurrency level is its cell, a re-measure its
    second repeat; a request-rate level (its rate in the stored config) is cell 0, one repeat per probe."""
    if load == "concurrency":
        return int(level), repeat
    return 0, probe_index + 1


@dataclass(frozen=True)
class SearchBounds:
    """What a search varies and how far (``search``'s keywords of the same names): the load kind, the SLO to hold
    (None: find the knee), the first level, the highest level it may try and at most how many levels it
    measures."""

    load: LoadKind
    slo: CapacitySLO | None
    start: float
    max_load: float
    max_probes: int = 12


def run_capacity(
    endpoint: Endpoint,
    base: BenchConfig,
    bounds: SearchBounds,
    *,
    tokenizer: Any = None,
    store: RunRecorder | None = None,
    run_id: str | None = None,
    progress: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> CapacityResult:
    """The search against a live server, each probe stored as a cell of ``run_id`` (with the probes so far in
    the run's ``extra["capacity"]``, from which an interrupted search resumes)."""
    # heavy: the client and its telemetry, only when a search runs
    from accelbench.bench.runner import run_benchmark

    load, slo = bounds.load, bounds.slo
    recorder = _ProbeRecorder(store, run_id, input_len=base.input_len, load=load)
    if recorder.done and progress:
        progress(f"resuming from {len(recorder.done)} stored probe(s)")

    def measure(level: float, repeat: int) -> Probe:
        if cancel is not None and cancel.is_set():
            raise KeyboardInterrupt
        config = level_config(base, load=load, level=level, slo=slo)
        if progress:
            progress(
                f"{load} {level:g}" + (" (again)" if repeat > 1 else "") + f": {config.num_prompts} requests"
            )
        summary = run_benchmark(endpoint, config, tokenizer=tokenizer, cancel=cancel)
        if summary.interrupted:
            raise KeyboardInterrupt
        p = judge(summary, level=level, load=load, slo=slo, repeat=repeat)
        recorder.keep(p, summary)
        if progress:
            progress(
                f"  {'meets' if p.met else 'misses' if p.met is False else 'measured'}: {p.why or ''}".rstrip()
            )
        return p

    return search(measure, **vars(bounds), done=recorder.done)  # the bounds are search's own keywords


class _ProbeRecorder:
    """Where a search against a live server keeps its probes: each a cell of the stored run, the probes so far
    in its ``extra["capacity"]``. Without a stored run it keeps nothing."""

    def __init__(
        self, store: RunRecorder | None, run_id: str | None, *, input_len: int, load: LoadKind
    ) -> None:
        stored_run = store is not None and run_id is not None
        self.store: RunRecorder | None = store if stored_run else None
        self.run_id: str | None = run_id if stored_run else None
        self.input_len, self.load = input_len, load
        self.done: list[Probe] = []
        self.new: list[Probe] = []
        if self.store is not None and self.run_id is not None:
            stored = (self.store.get_run(self.run_id).extra or {}).get("capacity") or {}
            self.done = [Probe.model_validate(p) for p in stored.get("probes") or []]

    def keep(self, probe: Probe, summary: BenchmarkSummary) -> None:
        if self.store is None or self.run_id is None:
            return
        conc, rep = cell_key(self.load, len(self.done) + len(self.new), probe.level, probe.repeat)
        self.store.save_result(
            self.run_id,
            input_len=self.input_len,
            concurrency=conc,
            repeat=rep,
            summary=summary,
            status=CellStatus.completed,
        )
        self.new.append(probe)
        self.store.merge_run_extra(
            self.run_id, capacity={"probes": [x.model_dump(mode="json") for x in [*self.done, *self.new]]}
        )
