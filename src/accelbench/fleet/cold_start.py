"""Cold starts priced in: how long a new server takes to serve, how much earlier each rise must be met, what
that costs, and the requests that would miss the SLO if scaling reacted only after the rise (each rise a
``ScaleStep``: when to start the servers, how many, what reacting late would lose).

Time to serve = instance provisioning + engine start and model load (+ compile on Neuron). Provisioning is
not in the catalog and is never measured here: ``PROVISION_S`` holds a stated planning assumption per tier
(boot of an instance from a launch call to a running OS with the image cached), which ``--provision-s``
replaces. Engine start and model load are the ``ready_s`` of stored deployments on the same instance type
(the median; the same model's preferred) when there are any, else ``READY_S``, again a stated assumption.

A rise is an interval planned with more servers than the one before (the first interval is taken as already
served). For each rise, the added servers must be started ``lead_s`` earlier: their cost is added servers x
lead (at most the previous interval's length) x the on-demand price. If scaling reacted only after the rise,
the old fleet serves the new interval's first ``lead_s`` seconds: when the new mean rate is above what the old
fleet carries at the SLO, the servers' queues grow and every request arriving in that time is counted as
missing the SLO; when it is not, none is.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from statistics import median

from pydantic import Field

from accelbench.domain.strict import StrictModel
from accelbench.fleet.sizing import DAY_S, FleetInterval

#: Planning assumptions (seconds), not measurements: instance launch to a running OS, by tier.
PROVISION_S = {"gpu": 180.0, "neuron": 180.0, "cpu": 90.0}
#: Engine start and model load when no stored deployment says (Neuron includes graph compilation).
READY_S = {"gpu": 120.0, "neuron": 900.0, "cpu": 90.0}


class ScaleStep(StrictModel):
    """One rise: when to start the new servers, how many, and what reacting late would cost."""

    start_at_s: float = Field(
        description="When to start them: the rise's start less the lead (from the start)."
    )
    rise_at_s: float = Field(description="When the interval that needs them starts.")
    add: int = Field(description="Servers added.")
    late_misses: float = Field(
        description="Requests that would miss the SLO if they were started at the rise."
    )


class ColdStart(StrictModel):
    """What cold starts cost one candidate's fleet."""

    provision_s: float = Field(description="Instance provisioning (an assumption unless given).")
    provision_source: str
    ready_s: float = Field(description="Engine start and model load (+ compile on Neuron).")
    ready_source: str
    lead_s: float = Field(description="How much earlier than a rise new servers must be started.")
    rises: int = Field(description="Intervals that add servers.")
    servers_added: int = Field(description="Servers added over all rises.")
    usd_per_day: float | None = Field(description="What starting them early costs per day (on demand).")
    late_misses_per_day: float = Field(
        description="Requests per day that would miss the SLO if scaling reacted only after each rise."
    )
    steps: list[ScaleStep] = Field(default_factory=list, description="Each rise, in order.")


def ready_from(values: Sequence[float], same_model: Sequence[float], tier: str) -> tuple[float, str]:
    """(engine start + model load, where the figure comes from)."""
    if same_model:
        return median(
            same_model
        ), f"median ready_s of {len(same_model)} stored deployment(s) of this model here"
    if values:
        return median(values), f"median ready_s of {len(values)} stored deployment(s) on this instance type"
    return READY_S.get(
        tier, READY_S["gpu"]
    ), f"assumed for {tier} (no stored deployment on this instance type)"


def provision_from(given: float | None, tier: str) -> tuple[float, str]:
    if given is not None:
        return given, "given"
    return PROVISION_S.get(tier, PROVISION_S["gpu"]), f"assumed for {tier} (the catalog has no launch time)"


def cold_start_cost(
    plan: Sequence[FleetInterval],
    capacity: float,
    *,
    hourly: float | None,
    provision: tuple[float, str],
    ready: tuple[float, str],
) -> ColdStart:
    """The cold-start figures of one plan (see the module docstring)."""
    lead = provision[0] + ready[0]
    steps: list[ScaleStep] = []
    early_h = 0.0
    for prev, cur in pairwise(plan):
        up = cur.servers - prev.servers
        if up <= 0:
            continue
        early_h += up * min(lead, prev.seconds) / 3600.0
        late = (
            cur.requests_per_s * min(lead, cur.seconds)
            if cur.requests_per_s > prev.servers * capacity
            else 0.0
        )
        steps.append(
            ScaleStep(
                start_at_s=cur.start_s - min(lead, prev.seconds),
                rise_at_s=cur.start_s,
                add=up,
                late_misses=late,
            )
        )
    per_day = DAY_S / sum(p.seconds for p in plan)
    return ColdStart(
        provision_s=provision[0],
        provision_source=provision[1],
        ready_s=ready[0],
        ready_source=ready[1],
        lead_s=lead,
        rises=len(steps),
        servers_added=sum(x.add for x in steps),
        usd_per_day=early_h * hourly * per_day if hourly is not None else None,
        late_misses_per_day=sum(x.late_misses for x in steps) * per_day,
        steps=steps,
    )
