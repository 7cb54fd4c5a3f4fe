"""The answer of a fleet plan: one entry per candidate instance type, ranked cheapest first, and its JSON.

``FleetPlan.public_json`` is what ``accelbench fleet --format json``, ``POST /api/v1/fleet`` and a stored plan
carry: the keys ``candidates[].instance, hourly_usd, usd_per_day, usd_per_million_tokens, idle_share,
capacity_source, intervals[].start_s, seconds, requests_per_s, servers`` and, beside them, the figures every
surface shows (reserved split, utilisation, SLO risk, cold starts)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from accelbench.domain.strict import StrictModel
from accelbench.fleet.cold_start import ColdStart
from accelbench.fleet.sizing import FleetInterval, SloRisk

CapacitySource = Literal["measured", "predicted"]


class ServerCapacity(StrictModel):
    """One server's capacity at the SLO for the traffic's length mix."""

    requests_per_s: float = Field(gt=0)
    low: float | None = Field(default=None, description="Low end of its range, when it has one.")
    high: float | None = Field(default=None, description="High end of its range, when it has one.")
    source: CapacitySource
    detail: str = Field(description="Where the figure comes from, in words.")
    run_id: str | None = Field(default=None, description="The measured capacity run.")


class Candidate(StrictModel):
    instance: str
    tier: str
    hourly_usd: float | None
    reserved_hourly_usd: float | None = None
    reserved_price_source: str | None = None
    capacity: ServerCapacity
    intervals: list[FleetInterval]
    min_servers: int
    max_servers: int
    server_hours_per_day: float
    usd_per_day: float | None
    reserved_base_servers: int | None = None
    usd_per_day_reserved: float | None = None
    usd_per_million_tokens: float | None
    utilisation: float
    idle_share: float
    slo_risk: SloRisk | None = None
    cold_start: ColdStart


class Skipped(StrictModel):
    instance: str
    reason: str


class TrafficSummary(StrictModel):
    source: str
    format: str
    intervals: int
    seconds: float
    requests: float
    mean_requests_per_s: float
    peak_requests_per_s: float
    input_tokens: float
    output_tokens: float
    burstiness: float = Field(description="Request-weighted mean burstiness (1: Poisson).")


class FleetPlan(StrictModel):
    model: str
    slo: str = Field(description="The SLO, in words.")
    peak_rule: str = Field(description="How the within-interval peak is derived.")
    traffic: TrafficSummary
    candidates: list[Candidate] = Field(description="Ranked cheapest first (on-demand $/day).")
    skipped: list[Skipped] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def public_json(self) -> dict[str, Any]:
        out = self.model_dump(mode="json")
        for c, raw in zip(self.candidates, out["candidates"], strict=True):
            raw["capacity_source"] = c.capacity.source
            raw["capacity_requests_per_s"] = c.capacity.requests_per_s
        return out


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """Cheapest first by on-demand $/day (unpriced last), then by name."""
    return sorted(candidates, key=lambda c: (c.usd_per_day is None, c.usd_per_day or 0.0, c.instance))
