"""A fleet plan as a use case: the traffic file in, for each candidate instance type one server's capacity at the
SLO (a measured capacity run of the same model there when the store has one, else the planner's prediction with
its range), then servers per interval, $/day, cold starts, ranked cheapest first (``fleet/`` does the
arithmetic). Every shell (``accelbench fleet``, ``POST /api/v1/fleet``, the Fleet page) calls ``plan_fleet``.

A predicted capacity's range: the planner's out-of-source 80% interval of a throughput for the instance's
accelerator and the tier's default engine (``plan/ranges.py`` ``throughput_interval``), applied to the
predicted capacity; without one the prediction has no range and the SLO risk is not stated.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from accelbench.catalog import get_catalog
from accelbench.catalog.pricing import price_for
from accelbench.domain.capacity import CapacitySLO, parse_slo
from accelbench.domain.instance_types import PriceTier
from accelbench.domain.strict import StrictModel
from accelbench.errors import AccelbenchError, UserInputError
from accelbench.fleet.cold_start import cold_start_cost, provision_from, ready_from
from accelbench.fleet.result import Candidate, FleetPlan, ServerCapacity, Skipped, TrafficSummary, rank
from accelbench.fleet.sizing import Rules, size_fleet
from accelbench.fleet.traffic import Traffic, read_traffic
from accelbench.modelspec import load_model_spec
from accelbench.plan.hardware import is_local, local_machine
from accelbench.plan.ranges import throughput_interval
from accelbench.report.capacity_results import capacity_result
from accelbench.runtimes.runtime import DEFAULT_RUNTIME
from accelbench.services.planning import capacity_plan

if TYPE_CHECKING:
    from accelbench.domain.instance_types import InstanceType
    from accelbench.store import Store

log = logging.getLogger("accelbench.services")

#: a measured capacity run counts for this traffic when its lengths are within this share of the mix's means
LENGTH_TOLERANCE = 0.25


class FleetRequest(StrictModel):
    """What a fleet plan is asked (the CLI's flags, the API's body, the page's form)."""

    traffic: str = Field(
        min_length=1, max_length=1000, description="Trace (JSONL, BurstGPT CSV) or profile (YAML/CSV)."
    )
    model: str = Field(min_length=1, max_length=300, description="Model preset name, prepared model or path.")
    slo: str = Field(min_length=1, max_length=200, description="Targets in ms, e.g. ttft:2000,tpot:100.")
    percentile: float = Field(default=90.0, gt=0, lt=100, description="Percentile the targets are judged at.")
    attainment: float = Field(
        default=0.95, gt=0, le=1, description="Share of requests that must meet every target."
    )
    instances: list[str] = Field(
        default_factory=list,
        max_length=200,
        description="Candidate instance types ('local': this machine, unpriced); none: every feasible one.",
    )
    interval_s: float = Field(default=3600.0, gt=0, le=86_400, description="Interval a trace is counted in.")
    peak_window_s: float = Field(
        default=60.0, gt=0, le=86_400, description="Window the within-interval peak is read over."
    )
    peak_quantile: float = Field(
        default=0.99, gt=0, lt=1, description="Quantile of arrivals per window sized for."
    )
    min_servers: int = Field(
        default=1, ge=0, le=10_000, description="Fewest servers at any time (0: scale to zero)."
    )
    provision_s: float | None = Field(
        default=None,
        ge=0,
        le=86_400,
        description="Instance provisioning seconds; default a stated assumption per tier.",
    )
    reserved_discount: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="Where no reserved price is stored: assume reserved = on demand x (1 - this), e.g. 0.4.",
    )

    def target(self) -> CapacitySLO:
        return parse_slo(self.slo, percentile=self.percentile, attainment=self.attainment)

    def rules(self) -> Rules:
        return Rules(window_s=self.peak_window_s, quantile=self.peak_quantile, min_servers=self.min_servers)


def fleet_request(**fields: Any) -> FleetRequest:
    """A ``FleetRequest`` from a shell's fields; a refusal names the field and what to change."""
    try:
        return FleetRequest(**fields)
    except ValidationError as exc:
        said = "; ".join(
            f"{'.'.join(str(x) for x in e.get('loc', ())) or 'request'}: {e.get('msg', '')}"
            for e in exc.errors()
        )
        raise UserInputError(f"Bad fleet request: {said}.") from None


def load_traffic(request: FleetRequest) -> Traffic:
    return read_traffic(Path(request.traffic), interval_s=request.interval_s, window_s=request.peak_window_s)


def summarise(traffic: Traffic) -> TrafficSummary:
    inp, out = traffic.mean_tokens()
    total = traffic.requests
    burst = sum(i.burstiness * i.requests for i in traffic.intervals) / total
    return TrafficSummary(
        source=traffic.source,
        format=traffic.format,
        intervals=len(traffic.intervals),
        seconds=traffic.seconds,
        requests=total,
        mean_requests_per_s=total / traffic.seconds,
        peak_requests_per_s=traffic.peak_rate(),
        input_tokens=inp,
        output_tokens=out,
        burstiness=burst,
    )


# --------------------------------------------------------------------------------------------- capacity
def _near(a: float, b: float) -> bool:
    return abs(a - b) <= LENGTH_TOLERANCE * max(b, 1.0)


def measured_capacity(
    store: Store, model: str, instance: str, slo: CapacitySLO, lengths: tuple[float, float]
) -> ServerCapacity | None:
    """The newest completed capacity run of ``model`` on ``instance`` at this SLO and length mix, as requests/s."""

    runs, _ = store.list_runs(kind="capacity", instance_type=instance, status="completed", limit=200)
    for run in runs:
        if model not in (run.model, run.served_model):
            continue
        result, _why = capacity_result(run)
        if result is None or result.slo is None or result.max_load is None:
            continue
        if result.slo.targets != slo.targets or result.slo.percentile != slo.percentile:
            continue
        section = run.spec.get("capacity") if isinstance(run.spec, dict) else None
        section = section if isinstance(section, dict) else {}
        inp, out = section.get("input_len"), section.get("output_len")
        if not isinstance(inp, int | float) or not isinstance(out, int | float):
            continue
        if not (_near(float(inp), lengths[0]) and _near(float(out), lengths[1])):
            continue
        rps = result.max_load if result.load == "request_rate" else result.requests_per_s_at_max
        if not rps or rps <= 0:
            continue
        low, high = _measured_range(result.max_load_range, result.max_load, rps)
        detail = f"measured by capacity run {run.id} ({inp:g} in / {out:g} out tokens" + (
            ", Poisson arrivals)"
            if result.load == "request_rate"
            else ", a closed loop's requests/s at its capacity: Poisson arrivals may carry less)"
        )
        if low is not None or high is not None:
            detail += "; range: where the capacity lies with 90% confidence from its probes"
        return ServerCapacity(
            requests_per_s=rps, low=low, high=high, source="measured", run_id=run.id, detail=detail
        )
    return None


def _measured_range(
    span: list[float | None] | None, max_load: float | None, rps: float
) -> tuple[float | None, float | None]:
    """A search's 90% confidence range of its capacity, in requests/s (a closed loop's users scaled by the
    requests/s at its capacity)."""
    if not span or len(span) != 2 or not max_load:
        return None, None
    scale = rps / max_load
    low, high = (None if x is None else x * scale for x in span)
    return low, high


def predicted_capacity(
    store: Store | None, model: str, inst: InstanceType, slo: CapacitySLO, lengths: tuple[float, float]
) -> tuple[ServerCapacity | None, str | None]:
    """The planner's capacity at the SLO (Poisson arrivals) with its 80% range, or (None, why not)."""

    inp, out = max(1, round(lengths[0])), max(1, round(lengths[1]))
    try:
        _, rps = capacity_plan(inst.name, model, inp, out, slo, "request_rate", store=store)
    except AccelbenchError as exc:
        return None, exc.message
    if not rps or rps <= 0:
        return None, "the planner predicts no load meeting the SLO here (or the model does not fit)"
    detail = f"predicted by the planner for {inp} in / {out} out tokens at Poisson arrivals"
    engine = DEFAULT_RUNTIME[inst.accelerator_type]
    span = throughput_interval(
        inst.accelerator_name, inst.accelerator_type.value, engine, inst.cpu_isa, moe=_is_moe(model)
    )
    if span is None or not 0 < span.lo <= span.hi:
        return ServerCapacity(
            requests_per_s=rps, source="predicted", detail=detail + "; no range (no out-of-source error here)"
        ), None
    detail += f"; 80% range x{span.lo:.2f} to x{span.hi:.2f}: {span.basis}"
    return ServerCapacity(
        requests_per_s=rps, low=rps * span.lo, high=rps * span.hi, source="predicted", detail=detail
    ), None


@lru_cache(maxsize=16)
def _is_moe(model: str) -> bool:
    """Whether the model is a mixture of experts (its capacity's range comes from the MoE rows); a model that
    cannot be read offline was not predicted either. Read once per model, not once per candidate instance."""
    try:
        return load_model_spec(model, allow_network=False).moe is not None
    except AccelbenchError:
        return False


def ready_seconds(store: Store | None, instance: str, model: str) -> tuple[list[float], list[float]]:
    """Stored deployments' ``ready_s`` on ``instance``: (all, those of ``model``)."""
    if store is None:
        return [], []
    runs, _ = store.list_runs(instance_type=instance, limit=500)
    every: list[float] = []
    mine: list[float] = []
    for run in runs:
        ready = ((run.extra or {}).get("deployment") or {}).get("ready_s")
        if isinstance(ready, int | float) and ready > 0:
            every.append(float(ready))
            if model in (run.model, run.served_model):
                mine.append(float(ready))
    return every, mine


def _reserved(
    store: Store | None, inst: InstanceType, discount: float | None
) -> tuple[float | None, str | None]:
    """The reserved (1 yr) hourly price: stored, else the on-demand price less ``discount`` (said as assumed)."""

    if is_local(inst.name):  # this machine has no price
        return None, None
    price = price_for(inst.name, PriceTier.reserved_1yr, store=store)
    if price is not None:
        return price.usd_per_hour, f"reserved 1 yr ({price.source}, {price.effective_date})"
    if discount is not None and inst.on_demand_usd is not None:
        return inst.on_demand_usd * (
            1 - discount
        ), f"assumed {discount:.0%} below on demand (--reserved-discount)"
    return None, None


# --------------------------------------------------------------------------------------------- the plan
def _candidates(request: FleetRequest) -> list[InstanceType]:

    cat = get_catalog()
    if request.instances:
        return [
            local_machine()[0] if is_local(n) else cat.instance(n.strip())
            for n in request.instances
            if n.strip()
        ]
    return list(cat.instances)


def plan_candidate(
    store: Store | None, request: FleetRequest, traffic: Traffic, inst: InstanceType
) -> Candidate | Skipped:
    """One candidate's fleet, or why it has none."""
    slo, lengths = request.target(), traffic.mean_tokens()
    cap = measured_capacity(store, request.model, inst.name, slo, lengths) if store is not None else None
    if cap is None:
        cap, why = predicted_capacity(store, request.model, inst, slo, lengths)
        if cap is None:
            return Skipped(instance=inst.name, reason=why or "no capacity")
    hourly = inst.on_demand_usd
    reserved, reserved_source = _reserved(store, inst, request.reserved_discount)
    sizing = size_fleet(
        traffic.intervals,
        cap.requests_per_s,
        request.rules(),
        hourly=hourly,
        reserved_hourly=reserved,
        low=cap.low,
    )
    tier = inst.accelerator_type.value
    every, mine = ready_seconds(store, inst.name, request.model)
    cold = cold_start_cost(
        sizing.intervals,
        cap.requests_per_s,
        hourly=hourly,
        provision=provision_from(request.provision_s, tier),
        ready=ready_from(every, mine, tier),
    )
    servers = [p.servers for p in sizing.intervals]
    return Candidate(
        instance=inst.name,
        tier=tier,
        hourly_usd=hourly,
        reserved_hourly_usd=reserved,
        reserved_price_source=reserved_source,
        capacity=cap,
        min_servers=min(servers),
        max_servers=max(servers),
        cold_start=cold,
        **sizing.model_dump(),
    )


def plan_fleet(store: Store | None, request: FleetRequest, traffic: Traffic | None = None) -> FleetPlan:
    """The ranked fleet plan (see the module docstring). Reads, never writes, the store."""
    slo = request.target()
    rules = request.rules()
    traffic = traffic or load_traffic(request)
    found: list[Candidate] = []
    skipped: list[Skipped] = []
    for inst in _candidates(request):
        got = plan_candidate(store, request, traffic, inst)
        if isinstance(got, Candidate):
            found.append(got)
        else:
            skipped.append(got)
    if not found:
        reasons = "; ".join(f"{s.instance}: {s.reason}" for s in skipped[:5])
        raise UserInputError(
            f"No candidate instance can serve {request.model} at {slo.label()}: {reasons}.",
            hint="Loosen the SLO, pick other --instances, or measure one with `accelbench capacity`.",
        )
    notes = list(traffic.notes)
    if any(c.reserved_hourly_usd is None for c in found):
        notes.append(
            "Reserved base + on-demand peak is priced only where the store has a reserved price "
            "(`accelbench catalog refresh-prices`) or a --reserved-discount is assumed."
        )
    inp, out = traffic.mean_tokens()
    notes.append(
        f"Capacities are for the traffic's mean lengths ({inp:.0f} in / {out:.0f} out tokens); the length "
        "distributions' spread is not modelled."
    )
    return FleetPlan(
        model=request.model,
        slo=slo.label() + f", attainment {slo.attainment:.0%}",
        peak_rule=rules.describe(),
        traffic=summarise(traffic),
        candidates=rank(found),
        skipped=skipped,
        notes=notes,
    )
