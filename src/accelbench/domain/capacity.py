"""Capacity at an SLO: the targets a search judges against, one measured level (a probe) and the answer.

Shared by the search (``bench.capacity``), run specs, the store's readers, the report and the pages.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from accelbench.domain.base import StrictModel
from accelbench.errors import UserInputError

METRICS = ("ttft", "tpot", "itl", "e2el")
LoadKind = Literal["concurrency", "request_rate"]


class CapacitySLO(StrictModel):
    """Latency targets (ms) judged at one percentile, and the share of requests that must meet all of them."""

    targets: dict[str, float] = Field(description="metric -> ms: ttft, tpot, itl, e2el.")
    percentile: float = Field(default=90.0, gt=0, lt=100, description="Percentile the targets are judged at.")
    attainment: float = Field(
        default=0.95, gt=0, le=1, description="Share of requests that must meet every target (goodput)."
    )

    def label(self) -> str:
        return f"p{self.percentile:g} " + ", ".join(f"{k} <= {v:g} ms" for k, v in self.targets.items())


def parse_slo(text: str, *, percentile: float = 90.0, attainment: float = 0.95) -> CapacitySLO:
    """``tpot:50,ttft:1000`` (ms; ``e2el`` and ``itl`` too) into an SLO; a clear error for anything else."""
    if not 0 < percentile < 100:
        raise UserInputError(
            f"Percentile {percentile:g} is outside (0, 100).", hint="Give e.g. --percentile 90 or 99."
        )
    if not 0 < attainment <= 1:
        raise UserInputError(
            f"Attainment {attainment:g} is outside (0, 1].", hint="Give e.g. --attainment 0.95."
        )
    targets: dict[str, float] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, val = part.partition(":")
        key = key.strip().lower().removesuffix("_ms")
        if key == "e2e":
            key = "e2el"
        if not sep or key not in METRICS:
            raise UserInputError(
                f"Unknown SLO metric in {part.strip()!r}.",
                hint="Use ttft, tpot, itl or e2el with milliseconds, e.g. --slo tpot:50,ttft:1000.",
            )
        try:
            ms = float(val.strip().removesuffix("ms"))
        except ValueError:
            raise UserInputError(f"Bad SLO value {val.strip()!r} for {key}: give milliseconds.") from None
        if not ms > 0 or not math.isfinite(ms):
            raise UserInputError(f"SLO {key} must be a positive number of milliseconds, not {val.strip()!r}.")
        targets[key] = ms
    if not targets:
        raise UserInputError("Empty SLO.", hint="Write e.g. --slo tpot:50,ttft:1000.")
    return CapacitySLO(targets=targets, percentile=percentile, attainment=attainment)


class Probe(StrictModel):
    """One measured level."""

    level: float = Field(description="Concurrency (users) or request rate (requests/s).")
    repeat: int = Field(
        default=1, description="1 for the first measurement of this level, 2 for a re-measure."
    )
    requests: int = Field(default=0, description="Requests judged (steady state).")
    failed: int = 0
    percentiles: dict[str, float] = Field(default_factory=dict, description="metric -> ms at the percentile.")
    attainment: float | None = Field(default=None, description="Share of requests meeting every target.")
    output_tokens_per_s: float = 0.0
    total_tokens_per_s: float = 0.0
    requests_per_s: float = 0.0
    achieved_rate: float | None = Field(
        default=None, description="Request rate load: the rate actually sent."
    )
    oversaturated: bool = Field(default=False, description="The server fell behind: the queue kept growing.")
    met: bool | None = Field(default=None, description="Whether the SLO is met (None without an SLO).")
    why: str = Field(default="", description="Which target failed, or why the level could not be judged.")


class CapacityResult(StrictModel):
    load: LoadKind
    slo: CapacitySLO | None = None
    max_load: float | None = Field(default=None, description="Highest level meeting the SLO.")
    reason: str | None = Field(default=None, description="Why there is no max_load.")
    knee: float | None = Field(default=None, description="Where adding load stops adding throughput.")
    probes: list[Probe] = Field(default_factory=list)
    output_tokens_per_s_at_max: float | None = None
    total_tokens_per_s_at_max: float | None = None
    requests_per_s_at_max: float | None = None
    hourly_usd: float | None = None
    usd_per_million_output_tokens: float | None = None
    usd_per_million_total_tokens: float | None = None
    predicted_max_load: float | None = Field(default=None, description="The planner's capacity for the SLO.")
    notes: list[str] = Field(default_factory=list)
