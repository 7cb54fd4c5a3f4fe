"""Fleet plans: a day of traffic into servers per interval and $/day per candidate instance type
(``services.fleet.plan_fleet``, the same answer as ``accelbench fleet --format json``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from accelbench.api.auth import Principal, require_read
from accelbench.api.deps import StoreDep
from accelbench.api.errors import ERROR_RESPONSES
from accelbench.services.fleet_plan import FleetRequest, plan_fleet
from accelbench.services.paths import confine, resolve_file

router = APIRouter(tags=["fleet"], responses=ERROR_RESPONSES)


@router.post("/fleet", summary="Size, price and rank a fleet per instance type for a traffic file")
def fleet(body: FleetRequest, store: StoreDep, _: Principal = Depends(require_read)) -> dict[str, Any]:
    """Reads the traffic file (under the data roots), writes nothing: ``candidates`` ranked cheapest first, each
    with ``instance, hourly_usd, usd_per_day, usd_per_million_tokens, idle_share, capacity_source`` and its
    ``intervals`` (``start_s, seconds, requests_per_s, servers``), cold starts, reserved split and SLO risk."""
    traffic = resolve_file(body.traffic, "traffic")
    confine(body.model, "model")
    return plan_fleet(store, body.model_copy(update={"traffic": traffic})).public_json()
