"""Load plans: stages run back to back in one benchmark (``BenchConfig.stages``).

A plan is all concurrency stages or all rate stages:
- rate stages: send times computed up front from the seed, stage after stage, each stage's arrivals a gamma
  process (the config's burstiness) at its rate; a ramp-up makes the rate rise linearly from 0 over the stage's
  first ``ramp_up_s`` (arrivals of the constant-rate process mapped through the inverse of the ramped cumulative
  rate, so the ramp is exact, not stepped);
- concurrency stages: a closed loop whose number of in-flight requests follows the plan (``allowed``): a stage
  with a lower level lets in-flight requests finish without replacing them, a ramp-up adds one slot at a time.

A request belongs to the stage in which the plan let it go (its planned send time: a rate plan's arrival, a
closed loop's free slot); ``stage_metrics`` gives the figures of each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from accelbench.bench.metrics import stats_ms
from accelbench.domain.bench_summary import StageMetrics
from accelbench.domain.load import LoadStage
from accelbench.domain.request_record import RequestRecord


def stage_starts(stages: Sequence[LoadStage]) -> list[float]:
    """Each stage's start, seconds from the benchmark start, and the plan's end last."""
    out = [0.0]
    for st in stages:
        out.append(out[-1] + st.duration_s)
    return out


def _ramped(u: float, ramp: float) -> float:
    """Time at which the ramped process reaches the constant-rate process's arrival ``u`` (rate r either way:
    the cumulative rate is r t^2 / (2 ramp) during the ramp, r (t - ramp / 2) after it)."""
    if ramp <= 0:
        return u
    return math.sqrt(2.0 * ramp * u) if u < ramp / 2 else u + ramp / 2


def rate_offsets(stages: Sequence[LoadStage], burstiness: float, seed: int, cap: int) -> list[float]:
    """Send offsets of a rate plan, at most ``cap`` of them."""
    starts = stage_starts(stages)
    out: list[float] = []
    for k, st in enumerate(stages):
        rate = float(st.request_rate or 0.0)
        span = st.duration_s - st.ramp_up_s / 2  # the constant-rate time the stage's arrivals take
        if math.isinf(burstiness):  # even gaps: exactly rate x span arrivals, the first at the stage's start
            arrivals = np.arange(math.ceil(rate * span - 1e-9)) / rate
        else:
            rng = np.random.default_rng(seed * 1000 + k)
            gaps = rng.gamma(
                shape=burstiness, scale=1.0 / (rate * burstiness), size=int(rate * span * 1.5) + 16
            )
            arrivals = np.concatenate(([0.0], np.cumsum(gaps)[:-1]))
        for u in arrivals:
            if u >= span or len(out) >= cap:
                break
            out.append(starts[k] + _ramped(float(u), st.ramp_up_s))
    return out


def allowed(stages: Sequence[LoadStage], t: float) -> tuple[int, float]:
    """(in-flight requests the plan allows at ``t`` seconds, when that may next change); 0 after the plan."""
    starts = stage_starts(stages)
    for k, st in enumerate(stages):
        begin, end = starts[k], starts[k + 1]
        if t < end:
            c = int(st.concurrency or 1)
            into = t - begin
            if st.ramp_up_s and into < st.ramp_up_s:
                step = st.ramp_up_s / c  # one more slot every step
                slots = min(c, 1 + int(into / step))
                return slots, min(end, begin + slots * step)
            return c, end
    return 0, math.inf


def stage_of(stages: Sequence[LoadStage], t: float) -> int:
    starts = stage_starts(stages)
    for k in range(len(stages)):
        if t < starts[k + 1]:
            return k
    return len(stages) - 1


def describe(st: LoadStage) -> str:
    load = f"concurrency {st.concurrency}" if st.concurrency is not None else f"rate {st.request_rate:g}/s"
    return load + (f" (ramped over {st.ramp_up_s:g} s)" if st.ramp_up_s else "")


def stage_metrics(stages: Sequence[LoadStage], records: Sequence[RequestRecord]) -> list[StageMetrics]:
    """The figures of each stage from the requests sent in it (``RequestRecord.stage``)."""
    starts = stage_starts(stages)
    out: list[StageMetrics] = []
    for k, st in enumerate(stages):
        rs = [r for r in records if r.stage == k]
        ok = [r for r in rs if r.success]
        out.append(
            StageMetrics(
                stage=k,
                load=describe(st),
                start_s=starts[k],
                duration_s=st.duration_s,
                sent=len(rs),
                completed=len(ok),
                failed=len(rs) - len(ok),
                request_throughput=len(ok) / st.duration_s,
                output_throughput=sum(r.output_tokens for r in ok) / st.duration_s,
                ttft_ms=stats_ms([r.ttft_s for r in ok]),
                tpot_ms=stats_ms([t for r in ok if (t := r.tpot_s) is not None]),
                e2el_ms=stats_ms([r.latency_s for r in ok]),
            )
        )
    return out
