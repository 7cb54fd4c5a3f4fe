"""Capacity at an SLO, predicted: the highest concurrency (closed loop) or Poisson request rate at which the
chosen percentile of TTFT, TPOT, ITL and E2EL stays within its target and the share of requests meeting every
target reaches the attainment; the question ``accelbench capacity`` measures (``bench/capacity_search.py``), asked
of the performance model (``plan/perf_model.py``) with no factor of its own; the populations of one level
are built in ``plan/load_population.py``.

What is modelled. A load level is a population of requests, not one typical request: the percentile of each
metric and the share meeting every target are read off that population, as the measurement reads them off
its requests.

- Closed loop (``concurrency``: C users, each re-sending at once with fixed lengths; the measurement leaves the
  first wave out, and so does this). While the other prefills of a wave fit one scheduler step
  (``max_num_batched_tokens``), requests travel in waves of B = min(C, max_num_seqs, what the KV cache holds):
  the k-th of a wave waits for the prefill chunks and the front-end work (``request_serial_ms``) of the k - 1
  before it (``PerfModel.wave_ttft``), so TTFT spreads uniformly over the ranks of a wave; the first
  request's decode stalls while the others prefill (its TPOT and its longest gap are the wave's worst), the
  others decode together. Longer waves spread out into the steady regime below, in groups: the prompts one
  step prefilled come back together (``PerfModel.burst_group``), so other prefills land in a decode a group
  at a time, each stalling it by the group's prefill. Above B users every request
  also waits for a slot, the same (C / B - 1) cycles each (fixed lengths, work conservation).
- Steady arrivals (a closed loop whose waves spread out, and every Poisson rate). TTFT is the typical one
  (``PerfModel.predict``, "steady") plus the spread of the wait for the prefills ahead: an M/D/1 queue on
  the prefill path, utilisation = arrival rate x the prefill cost per sequence when one step's token budget
  batches them. TPOT is the typical one plus the spread of the number of other prefills landing in the
  request's decode: Poisson, with the mean the model's interference uses, each stalling the decode by the
  ``prefill_interference`` share of a prefill (chunked prefill shares the steps). The longest gap (ITL, the
  measurement's per-request worst inter-token latency) is a decode step carrying one chunk of a newcomer's
  prefill when at least one lands, else the request's TPOT. The prefill wait and the landings are taken as
  independent; E2EL = TTFT + (output tokens - 1) x TPOT.
- Poisson rate (``request_rate``). The mean number running b solves Little's law, b = rate x E2E(b), on the
  model's steady E2E at b (linear between whole batches). Requests wait for a slot as in an M/D/c queue with
  c = the slots and the service time of a full batch (Erlang C, halved for deterministic service: the
  Allen-Cunneen approximation); the front end's serial work adds its M/D/1 mean wait. The rate is stable below
  the saturation throughput, the smallest of slots / E2E at a full batch, 1 / the prefill cost per sequence
  and 1 / ``request_serial_ms``: a predicted capacity is always below it.

Not modelled: varying lengths (the measurement sends fixed ones), the batch's own fluctuation during a
request's decode (averaged over its tokens), the host's jitter and a client that cannot keep up.

The search is the measurement's: grow geometrically from the bottom until a level misses, then bisect, so a
tighter SLO or a higher percentile (each misses wherever the looser one does) never predicts more capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accelbench.domain.capacity import METRICS, CapacitySLO, LoadKind
from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.limits import MAX_CONCURRENCY
from accelbench.errors import UserInputError
from accelbench.plan.load_population import (
    Population,
    SteadyLoad,
    closed_loop_population,
    slot_count,
    steady_population,
)
from accelbench.plan.perf_model import PerfModel, Prediction
from accelbench.plan.queueing import WAIT_CAP, erlang_c, md1

if TYPE_CHECKING:
    pass

MIN_RATE = 1e-3  # requests/s: the lowest rate the measurement tries
RATE_TOLERANCE = 1e-3  # a predicted rate is bisected to within 0.1%
FINITE_RUN = 0.9  # share of saturation above which a probe's TTFT is not the stationary queue's
SATURATION_MARGIN = 0.99  # the highest rate tried: just below saturation (a queue at 100% never drains)


# --------------------------------------------------------------------------------------------- one level
@dataclass
class Level:
    """One predicted level: the percentile of each metric (ms), the share of requests meeting every target,
    and whether the SLO is met there (what a measured ``Probe`` says of a measured level)."""

    level: float
    percentiles: dict[str, float]
    attainment: float | None
    met: bool | None
    why: str
    requests_per_s: float
    output_tokens_per_s: float
    oversaturated: bool = False
    batch: float = 0.0


@dataclass
class RateModel:
    """The open-loop view of one (model, hardware, lengths, factors): the steady prediction at every whole
    batch (computed when first asked), the saturation throughput, and the population at a rate."""

    pm: PerfModel
    f: EfficiencyFactors
    input_len: int
    output_len: int
    _at: dict[int, Prediction] = field(default_factory=dict)
    slots: int = field(init=False)
    prefill_cost: float = field(init=False)
    saturation: float = field(init=False)

    def __post_init__(self) -> None:
        self.slots = slot_count(self.pm, self.input_len, self.output_len)
        self.prefill_cost = self.pm.prefill_cost(self.f, self.input_len, self.slots)
        limits = [self.slots / self.e2e(self.slots)]
        if self.prefill_cost > 0:
            limits.append(1 / self.prefill_cost)
        if self.f.request_serial_ms > 0:
            limits.append(1000 / self.f.request_serial_ms)
        self.saturation = min(limits)

    def at(self, b: int) -> Prediction:
        b = min(max(b, 1), self.slots)
        if b not in self._at:
            self._at[b] = self.pm.predict(self.f, self.input_len, self.output_len, b, "steady")
        return self._at[b]

    def e2e(self, b: int) -> float:
        """Mean time a request holds a slot at a batch of ``b`` (what a closed loop of b users cycles in)."""
        p = self.at(b)
        return b / p.rps if p.rps > 0 else p.e2e

    def running(self, rate: float) -> float:
        """The mean number running: b = rate x E2E(b), E2E linear between whole batches."""
        if rate * self.e2e(1) <= 1:
            return max(rate * self.e2e(1), 0.0)
        if rate * self.e2e(self.slots) >= self.slots:
            return float(self.slots)
        lo, hi = 1, self.slots  # g(lo) > 0 >= g(hi), g(b) = rate x E2E(b) - b
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if rate * self.e2e(mid) - mid > 0:
                lo = mid
            else:
                hi = mid
        e_lo, d = self.e2e(lo), self.e2e(hi) - self.e2e(lo)
        if 1 - rate * d <= 0:
            return float(hi)
        return min(max((rate * e_lo - rate * lo * d) / (1 - rate * d), lo), hi)

    def typical(self, rate: float) -> tuple[Prediction, float]:
        """The model's steady prediction at the mean batch (interpolated) and that batch."""
        b = self.running(rate)
        lo = max(1, math.floor(b))
        hi = min(lo + 1, self.slots)
        t = min(max(b - lo, 0.0), 1.0) if hi > lo else 0.0
        a, c = self.at(lo), self.at(hi)
        mix = {
            name: getattr(a, name) * (1 - t) + getattr(c, name) * t
            for name in ("ttft", "tpot", "tpot_mean", "decode_step", "interference")
        }
        pred = Prediction(
            ttft=mix["ttft"],
            tpot=mix["tpot"],
            tpot_mean=mix["tpot_mean"],
            e2e=mix["ttft"] + max(self.output_len - 1, 0) * mix["tpot"],
            rps=rate,
            out_tps=rate * self.output_len,
            total_tps=rate * (self.input_len + self.output_len),
            batch=max(1, round(b)),
            decode_step=mix["decode_step"],
            d_weights=a.d_weights,
            d_kv=a.d_kv,
            d_compute=a.d_compute,
            d_allreduce=a.d_allreduce,
            d_overhead=a.d_overhead,
            prefill=a.prefill,
            prefill_bound=a.prefill_bound,
            interference=mix["interference"],
            queue=0.0,
            d_floor=a.d_floor,
        )
        return pred, b

    def _waits(self, rate: float) -> tuple[tuple[float, float], float]:
        """(slot wait, the front end's mean serial wait) at ``rate``."""
        service = self.e2e(self.slots)
        offered = rate * service
        waiting = erlang_c(self.slots, offered)
        slot = (waiting, 0.5 * service / max(self.slots - offered, 1e-12)) if waiting > 1e-9 else (0.0, 0.0)
        s = self.f.request_serial_ms / 1000
        rho_s = min(rate * s, WAIT_CAP)
        serial = rho_s * s / (2 * (1 - rho_s)) if s > 0 else 0.0
        return slot, serial

    def population(self, rate: float) -> Population:
        pred, b = self.typical(rate)
        slot, serial = self._waits(rate)
        dt = max(self.output_len - 1, 0)
        load = SteadyLoad(
            ttft=pred.ttft,
            tpot=pred.tpot,
            step=pred.decode_step,
            landing=rate * dt * pred.tpot_mean,
            prefill_wait=md1(rate * self.prefill_cost, self.prefill_cost),
            extra_waits=(slot,) if slot[0] > 0 else (),
            shift=serial,
            rps=rate,
            batch=b,
        )
        return steady_population(self.pm, self.f, self.input_len, self.output_len, load)

    def predict(self, rate: float) -> Prediction:
        """The median request at ``rate`` as a ``Prediction`` (what calibration compares with a rate probe's
        medians). Past saturation throughput is the saturation throughput and TTFT unbounded; so is TTFT
        within ``FINITE_RUN`` of saturation, where the stationary queue is longer than a probe of a few
        hundred requests can build (calibration learns nothing from it, as from any unbounded figure)."""
        if rate >= FINITE_RUN * self.saturation:
            pred, _ = self.typical(min(rate, SATURATION_MARGIN * self.saturation))
            if rate < self.saturation:
                pred.ttft = pred.e2e = math.inf
                return pred
        if rate >= self.saturation:
            full = self.at(self.slots)
            return Prediction(
                **{
                    **full.__dict__,
                    "ttft": math.inf,
                    "e2e": math.inf,
                    "rps": self.saturation,
                    "out_tps": self.saturation * self.output_len,
                    "total_tps": self.saturation * (self.input_len + self.output_len),
                }
            )
        pred, _ = self.typical(rate)
        pop = self.population(rate)
        ttft = pop.quantile("ttft", 0.5)
        tpot = pop.quantile("tpot", 0.5) if self.output_len > 1 else pred.tpot
        pred.ttft, pred.tpot = ttft, tpot
        pred.e2e = ttft + max(self.output_len - 1, 0) * tpot
        return pred


def judge(pop: Population, level: float, slo: CapacitySLO, output_len: int) -> Level:
    """A predicted level judged as the measurement judges a measured one: the percentile of every named metric
    within its target, and the share of requests meeting all of them at least the attainment."""
    q = slo.percentile / 100
    pct = {m: pop.quantile(m, q) * 1000 for m in METRICS if m in slo.targets or m in ("ttft", "tpot")}
    share = pop.share(slo.targets)
    misses = [
        f"p{slo.percentile:g} {m} {pct[m]:.1f} ms > {t:g} ms"
        for m, t in slo.targets.items()
        if m in pct and pct[m] > t * (1 + 1e-9) and not (m in ("tpot", "itl") and output_len <= 1)
    ]
    if share < slo.attainment - 1e-9:
        misses.append(f"attainment {share:.0%} < {slo.attainment:.0%}")
    return Level(
        level=level,
        percentiles=pct,
        attainment=share,
        met=not misses,
        why="; ".join(misses) or "meets the SLO",
        requests_per_s=pop.rps,
        output_tokens_per_s=pop.rps * output_len,
        batch=pop.batch,
    )


# --------------------------------------------------------------------------------------------- the search
@dataclass
class CapacityPrediction:
    """The planner's capacity for an SLO: ``max_load`` (None, with ``reason``, when even the lowest level
    misses), the level there, the saturation (slots for a closed loop, requests/s for a rate) and every level
    the search judged."""

    load: LoadKind
    max_load: float | None
    reason: str | None = None
    at_max: Level | None = None
    saturation: float | None = None
    levels: list[Level] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def predict_capacity(
    pm: PerfModel,
    f: EfficiencyFactors,
    *,
    input_len: int,
    output_len: int,
    slo: CapacitySLO,
    load: LoadKind | str = "concurrency",
    max_load: float | None = None,
) -> CapacityPrediction:
    """The highest level (users, or requests/s) meeting ``slo`` at its percentile and attainment; see the
    module's docstring for what is modelled. ``max_load`` bounds the search (default: the most users a
    benchmark may ask for; for a rate, just below saturation)."""
    if input_len < 1 or output_len < 1:
        raise UserInputError("input_len and output_len must be at least 1.")
    if not slo.targets:
        raise UserInputError("An SLO needs at least one target.")
    if load == "concurrency":
        return _search_concurrency(pm, f, input_len, output_len, slo, max_load)
    if load == "request_rate":
        return _search_rate(pm, f, input_len, output_len, slo, max_load)
    raise UserInputError(f"Unknown load {load!r}: use concurrency or request_rate.")


def _search_concurrency(
    pm: PerfModel, f: EfficiencyFactors, i: int, o: int, slo: CapacitySLO, max_load: float | None
) -> CapacityPrediction:
    cap = int(min(max_load or MAX_CONCURRENCY, MAX_CONCURRENCY))
    cap = max(cap, 1)
    full = slot_count(pm, i, o)
    out = CapacityPrediction(load="concurrency", max_load=None, saturation=float(full))
    seen: dict[int, Level] = {}

    def level(c: int) -> Level:
        if c not in seen:
            seen[c] = judge(closed_loop_population(pm, f, i, o, c), float(c), slo, o)
            out.levels.append(seen[c])
        return seen[c]

    if not level(1).met:
        out.reason = f"even one user misses the SLO: {seen[1].why}"
        return out
    lo, hi = 1, None
    while hi is None:
        nxt = min(lo * 2, cap)
        if nxt == lo:
            break
        if level(nxt).met:
            lo = nxt
        else:
            hi = nxt
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if level(mid).met:
            lo = mid
        else:
            hi = mid
    out.max_load = float(lo)
    out.at_max = seen[lo]
    if hi is None:
        out.notes.append(f"The SLO is still met at {cap} users: the capacity may be higher.")
    elif lo >= full:
        out.notes.append(
            f"Above {full} users requests queue for a slot; the TTFT/E2EL targets set the limit."
        )
    return out


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def _sig_floor(x: float) -> float:
    """``x`` to four significant digits (the measurement's rate levels), never above ``x``."""
    if x <= 0:
        return x
    scale = 10.0 ** (3 - math.floor(math.log10(x)))
    return math.floor(x * scale * (1 + 1e-12)) / scale


def _search_rate(
    pm: PerfModel, f: EfficiencyFactors, i: int, o: int, slo: CapacitySLO, max_load: float | None
) -> CapacityPrediction:
    rm = RateModel(pm, f, i, o)
    top = SATURATION_MARGIN * rm.saturation
    if max_load is not None:
        top = min(top, max_load)
    out = CapacityPrediction(load="request_rate", max_load=None, saturation=rm.saturation)
    seen: dict[float, Level] = {}

    def level(r: float) -> Level:
        if r not in seen:
            seen[r] = judge(rm.population(r), r, slo, o)
            out.levels.append(seen[r])
        return seen[r]

    # the bracket's points depend on the hardware only, never on the SLO: a tighter SLO cannot find more
    lo: float | None = None
    hi: float | None = top
    if level(top).met:
        lo, hi = top, None
    else:
        r = top
        while r / 2 >= MIN_RATE:
            r /= 2
            if level(r).met:
                lo = r
                break
            hi = r
    if lo is None:
        lowest = min(seen)
        out.reason = f"even {_sig(lowest):g} requests/s misses the SLO: {seen[lowest].why}"
        return out
    while hi is not None and hi / lo > 1 + RATE_TOLERANCE:
        mid = math.sqrt(lo * hi)
        if level(mid).met:
            lo = mid
        else:
            hi = mid
    at = seen[lo]
    out.max_load = _sig_floor(lo)
    out.at_max = at
    if hi is None:
        out.notes.append(
            f"The SLO holds up to saturation ({rm.saturation:.4g} requests/s): the throughput sets the capacity."
        )
    return out


def level_prediction(
    pm: PerfModel,
    f: EfficiencyFactors,
    *,
    input_len: int,
    output_len: int,
    level: float,
    load: LoadKind | str,
    slo: CapacitySLO,
) -> Level:
    """One level judged against ``slo`` (what a measured probe of that level would be predicted to show)."""
    if load == "concurrency":
        return judge(closed_loop_population(pm, f, input_len, output_len, int(level)), level, slo, output_len)
    rm = RateModel(pm, f, input_len, output_len)
    if level >= rm.saturation:
        return Level(
            level=level,
            percentiles={},
            attainment=0.0,
            met=False,
            why=f"over-saturated: {level:g} requests/s is above the {rm.saturation:.4g} the engine sustains",
            requests_per_s=rm.saturation,
            output_tokens_per_s=rm.saturation * output_len,
            oversaturated=True,
            batch=float(rm.slots),
        )
    return judge(rm.population(level), level, slo, output_len)
