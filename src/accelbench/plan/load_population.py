"""The requests of one load level, as a population: the percentile of TTFT, TPOT, ITL and E2EL and the share
of requests meeting every target, read off the performance model (``plan/perf_model.py``) the way the
measurement reads them off its requests. ``plan/capacity_prediction.py`` searches load levels with them; its docstring
says what is modelled (waves, steady arrivals, the closed loop's groups, the Poisson rate's waits)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from accelbench.domain.estimate import EfficiencyFactors
from accelbench.plan.perf_model import PerfModel, Prediction
from accelbench.plan.queueing import Wait, count_quantile, md1, poisson


@dataclass
class Population:
    """How the requests of a level are spread: ``quantile(metric, q)`` in seconds and ``share(targets)``."""

    quantile: Callable[[str, float], float]
    share: Callable[[Mapping[str, float]], float]
    rps: float
    batch: float


def within(value: float, target_ms: float | None) -> bool:
    return target_ms is None or value * 1000 <= target_ms * (1 + 1e-9)


def share_quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of a large sample drawn in equal shares from ``values`` (each value 1/n of it), as numpy's
    linear interpolation takes it: inside a share, that share's value; on the boundary between shares k and
    k + 1 (q x n = k), the point (N - 1) q falls 1 - q of the way from the last of one to the first of the
    next (halfway at p50)."""
    v = sorted(values)
    n = len(v)
    x = q * n
    k = round(x)
    if 1 <= k < n and abs(x - k) < 1e-9:
        return v[k - 1] + (1 - q) * (v[k] - v[k - 1])
    return v[min(n - 1, max(0, math.ceil(x - 1e-9) - 1))]


def wave_population(pm: PerfModel, f: EfficiencyFactors, i: int, o: int, pred: Prediction) -> Population:
    """Closed-loop waves: request k of a wave of B has its own TTFT; the first one's decode stalls."""
    b = pred.batch
    dt = max(o - 1, 0)
    step, queue = pred.decode_step, pred.queue
    p_rest, _ = pm.prefill(f, i, b - 1)
    chunks = max(1, math.ceil((b - 1) * i / pm.chunk))
    stall = max(p_rest - chunks * step, 0.0) / dt if dt else 0.0
    tpot = {1: step + stall if dt else 0.0, 2: step if dt else 0.0}
    itl = {1: max(step, p_rest / chunks) if dt > 1 else tpot[1], 2: tpot[2]}

    def ttft(k: int) -> float:
        return pm.wave_ttft(f, i, k, b) + queue

    def e2e(k: int) -> float:
        return ttft(k) + dt * tpot[min(k, 2)]

    def lastwithin(limit: float, of: Callable[[int], float]) -> int:
        """The highest k in 2..B with of(k) <= limit (of grows with k), or 1 when none."""
        if of(2) > limit:
            return 1
        lo, hi = 2, b
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if of(mid) <= limit:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def quantile(metric: str, q: float) -> float:
        # every wave has one request of each rank k = 1..B, so a level's requests are those B values in equal
        # shares, and its percentile is theirs as the measurement takes it (numpy's linear interpolation: at
        # p50 of a 2-user loop, halfway between the stalled first request and the other)
        if metric == "ttft":
            return share_quantile([ttft(k) for k in range(1, b + 1)], q)
        if metric in ("tpot", "itl"):
            values = tpot if metric == "tpot" else itl
            return share_quantile([values[1]] + [values[2]] * (b - 1), q)
        return share_quantile([e2e(k) for k in range(1, b + 1)], q)

    def share(targets: Mapping[str, float]) -> float:
        def meets(k: int) -> bool:
            c = min(k, 2)
            return (
                within(ttft(k), targets.get("ttft"))
                and within(tpot[c], targets.get("tpot"))
                and within(itl[c], targets.get("itl"))
                and within(e2e(k), targets.get("e2el"))
            )

        n = 1 if meets(1) else 0
        if b > 1 and within(tpot[2], targets.get("tpot")) and within(itl[2], targets.get("itl")):
            limit = min(
                (targets["ttft"] / 1000) if "ttft" in targets else math.inf,
                (targets["e2el"] / 1000 - dt * tpot[2]) if "e2el" in targets else math.inf,
            )
            n += lastwithin(limit * (1 + 1e-9), ttft) - 1
        return n / b

    return Population(quantile=quantile, share=share, rps=pred.rps, batch=float(b))


@dataclass(frozen=True)
class SteadyLoad:
    """What a steady population is read from: the typical request's figures and the waits around them."""

    ttft: float  # the typical TTFT (with the prefill wait's median), before ``shift``
    tpot: float  # the typical TPOT
    step: float  # one decode step
    landing: float  # mean number of other prefills landing in one request's decode
    prefill_wait: tuple[float, float]  # the prefill path's M/D/1 wait (md1)
    rps: float
    batch: float
    shift: float = 0.0  # what every request pays on top (a slot wait in a closed loop, the front end's)
    extra_waits: tuple[tuple[float, float], ...] = ()  # more waits whose spread TTFT carries (slot waits)
    stall: float | None = None  # seconds of prefill each landing brings (None: one prompt's)


def steady_population(pm: PerfModel, f: EfficiencyFactors, i: int, o: int, load: SteadyLoad) -> Population:
    """Steady arrivals: TTFT = the typical one + the prefill wait's spread about its median (+ slot waits and
    ``shift``, which every request pays); TPOT = the typical one + one interference stall per other prefill
    landing in the decode beyond the median count (Poisson with mean ``landing``)."""
    ttft_typ, tpot_typ, step, shift = load.ttft, load.tpot, load.step, load.shift
    dt = max(o - 1, 0)
    p = load.stall if load.stall is not None else pm.prefill(f, i)[0]
    chunks_own = max(1, math.ceil(i / pm.chunk))
    floor = f.request_overhead_ms / 1000 + p
    prefill_only = Wait((load.prefill_wait,))
    med = prefill_only.quantile(0.5)
    wait = Wait((load.prefill_wait, *load.extra_waits))
    base = ttft_typ - med + shift  # TTFT = max(floor, base + wait)
    pmf = poisson(load.landing if dt else 0.0)
    n50 = count_quantile(pmf, 0.5)
    per = f.prefill_interference * p / dt if dt else 0.0
    gap = step + p / chunks_own

    def tpot(k: int) -> float:
        return max(step, tpot_typ + per * (k - n50)) if dt else 0.0

    def itl(k: int) -> float:
        if dt <= 1:
            return tpot(k)
        return max(tpot(k), gap) if k >= 1 else tpot(k)

    def ttft_cdf(t: float) -> float:
        if t < floor - 1e-12:
            return 0.0
        return wait.cdf(t - base)

    def quantile(metric: str, q: float) -> float:
        if metric == "ttft":
            return max(floor, base + wait.quantile(q))
        if metric in ("tpot", "itl"):
            k = count_quantile(pmf, q)
            return tpot(k) if metric == "tpot" else itl(k)

        def cdf(e: float) -> float:
            return sum(w * ttft_cdf(e - dt * tpot(k)) for k, w in pmf)

        lo = floor
        hi = max(floor, base + wait.quantile(q)) + dt * tpot(pmf[-1][0]) + 1e-9
        for _ in range(40):
            mid = (lo + hi) / 2
            if cdf(mid) >= q:
                hi = mid
            else:
                lo = mid
        return hi

    def share(targets: Mapping[str, float]) -> float:
        total = 0.0
        for k, w in pmf:
            if not (within(tpot(k), targets.get("tpot")) and within(itl(k), targets.get("itl"))):
                continue
            limit = min(
                targets["ttft"] / 1000 if "ttft" in targets else math.inf,
                targets["e2el"] / 1000 - dt * tpot(k) if "e2el" in targets else math.inf,
            )
            total += w * (1.0 if math.isinf(limit) else ttft_cdf(limit * (1 + 1e-9)))
        return total

    return Population(quantile=quantile, share=share, rps=load.rps, batch=load.batch)


def slot_count(pm: PerfModel, i: int, o: int) -> int:
    """Requests that run at once: max_num_seqs, or what the KV cache holds at these lengths."""
    return max(1, min(pm.batch_limit, pm.kv_tokens // max(i + o, 1)))


def closed_loop_population(
    pm: PerfModel, f: EfficiencyFactors, i: int, o: int, concurrency: int
) -> Population:
    pred = pm.predict(f, i, o, concurrency, "bursts")
    b = pred.batch
    if b >= 2 and (b - 1) * i <= pm.chunk:
        return wave_population(pm, f, i, o, pred)
    dt = max(o - 1, 0)
    e2e_mean = concurrency / pred.rps - pred.queue if pred.rps > 0 else pred.e2e
    others = 0.0 if b == 1 else (b - 1) / max(e2e_mean, 1e-12)  # the other slots' arrival rate
    cost = pm.prefill_cost(f, i, b)
    # fixed lengths: the prompts one step prefilled come back together, and land in a decode as one
    group, stall = pm.burst_group(f, i, b) if b >= 2 else (1, None)
    load = SteadyLoad(
        ttft=pred.ttft - pred.queue,
        tpot=pred.tpot,
        step=pred.decode_step,
        landing=others / group * dt * pred.tpot_mean,
        prefill_wait=md1(others * cost, cost),
        shift=pred.queue,
        rps=pred.rps,
        batch=float(b),
        stall=stall,
    )
    return steady_population(pm, f, i, o, load)
