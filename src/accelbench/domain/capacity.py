"""Capacity at an SLO: the targets a search judges against, one measured level (a probe) and the answer.

Shared by the search (``bench.capacity``), run specs, the store's readers, the report and the pages.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from accelbench.domain.limits import MAX_CONCURRENCY, MAX_TOKENS
from accelbench.domain.load import BenchConfig, LoadSettings
from accelbench.domain.strict import StrictModel
from accelbench.errors import UserInputError

METRICS = ("ttft", "tpot", "itl", "e2el")
LoadKind = Literal["concurrency", "request_rate"]


#: The percentile an SLO's targets are judged at, and the share of requests that must meet them all
Percentile = Annotated[float, Field(gt=0, lt=100, description="Percentile the targets are judged at.")]
Attainment = Annotated[
    float, Field(gt=0, le=1, description="Share of requests that must meet every target (goodput).")
]


class CapacitySLO(StrictModel):
    """Latency targets (ms) judged at one percentile, and the share of requests that must meet all of them."""

    targets: dict[str, float] = Field(
        description="metric -> ms: ttft, tpot, e2el, and itl (a request's longest gap between tokens)."
    )
    percentile: Percentile = 90.0
    attainment: Attainment = 0.95

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


class SloEvidence(StrictModel):
    """What one measurement of a level says about its SLO, as counts, so that repeats of the level pool: per
    target metric the requests with a value and those within the target, the requests meeting every target of
    all judged, and the percentile and attainment floor they were judged against."""

    percentile: float = Field(gt=0, lt=100, description="Percentile the targets were judged at.")
    attainment: float = Field(ge=0, le=1, description="Share of requests that had to meet every target.")
    valued: dict[str, int] = Field(default_factory=dict, description="metric -> requests with a value.")
    within: dict[str, int] = Field(default_factory=dict, description="metric -> of those, within the target.")
    meeting: int = Field(default=0, ge=0, description="Requests meeting every target.")
    judged: int = Field(default=0, ge=0, description="Requests judged: the successful and the failed.")


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
    confidence: float | None = Field(
        default=None,
        description="The chance (bootstrap over its requests) that the SLO holds at this level; None without an "
        "SLO (bench/capacity_confidence.py).",
    )
    evidence: SloEvidence | None = Field(
        default=None,
        description="The counts the confidence rests on, pooled over a level's repeats; None without an SLO "
        "(and in probes stored before they were kept).",
    )


class LevelEvidence(StrictModel):
    """One level as the search settled it: its repeats pooled."""

    level: float = Field(description="Concurrency (users) or request rate (requests/s).")
    repeats: int = Field(ge=1, description="How many times the level was measured.")
    confidence: float | None = Field(
        default=None, description="The chance that the SLO holds at this level, from every repeat's requests."
    )
    met: bool | None = Field(default=None, description="Whether the pooled requests meet the SLO.")


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
    max_load_range: list[float | None] | None = Field(
        default=None,
        description="[low, high] the capacity lies in with 90% confidence: low holds the SLO surely, high is the "
        "most below the first level that surely misses it (bench/capacity_confidence.py); an end is None when "
        "no level measured settles it.",
    )
    levels: list[LevelEvidence] = Field(
        default_factory=list,
        description="Each level measured, by level: its repeats, the SLO's confidence and verdict over them pooled.",
    )
    notes: list[str] = Field(default_factory=list)

    def prediction_error(self) -> float | None:
        """(predicted / measured - 1) x 100: positive when the planner said more; None unless both are known."""
        if self.predicted_max_load is None or not self.max_load:
            return None
        return (self.predicted_max_load / self.max_load - 1.0) * 100.0


class CapacitySpec(LoadSettings):
    """A run spec's ``capacity:`` section: search for the highest load meeting ``slo`` (or the knee without
    one) instead of sweeping a fixed matrix. The search sets each level's concurrency or rate itself."""

    load: LoadKind = Field(default="concurrency", description="concurrency (closed loop) or request_rate.")
    input_len: int = Field(default=128, ge=1, le=MAX_TOKENS, description="Prompt tokens per request.")
    slo: dict[str, float] | None = Field(
        default=None, description="Targets in ms by metric (ttft, tpot, itl, e2el); none: find the knee."
    )
    percentile: Percentile = 90.0
    attainment: Attainment = 0.95
    start: float | None = Field(
        default=None, ge=1, description="First level; default the planner's prediction, else 1."
    )
    max_load: float = Field(default=256.0, ge=1, le=MAX_CONCURRENCY, description="Highest level to try.")
    max_probes: int = Field(default=12, ge=2, le=64, description="Most levels measured.")
    scrape_metrics: bool = Field(default=False, description="Scrape the server's /metrics during each level.")

    @field_validator("slo")
    @classmethod
    def _known_metrics(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is None:
            return None
        text = ",".join(f"{k}:{ms}" for k, ms in v.items())
        try:
            return parse_slo(text).targets
        except UserInputError as exc:  # the CLI's hint names its flag; a spec names the metrics
            raise ValueError(
                f"{exc.message.rstrip('.')}: give targets in milliseconds by metric, e.g. "
                "{tpot: 50, ttft: 1000} (metrics: ttft, tpot, itl, e2el)"
            ) from None

    @model_validator(mode="after")
    def _search_sets_the_load(self) -> CapacitySpec:
        # by value, not by the fields set: a stored spec (every field dumped) must load again
        unset = {"request_rate": math.inf, "duration_s": None, "goodput": None}
        given = {k for k, default in unset.items() if getattr(self, k) != default}
        if given:
            raise ValueError(
                f"{', '.join(sorted(given))} cannot be set in a capacity search: the search sets each level's "
                "load and judges it against slo; remove them"
            )
        if self.stages:
            raise ValueError("stages cannot be set in a capacity search: the search sets each level's load")
        if self.ramp_up_s and self.load == "request_rate":
            raise ValueError(
                "ramp_up_s staggers a closed loop's streams: give load concurrency, or leave ramp_up_s at 0"
            )
        if self.turns > 1 and self.load == "request_rate":
            raise ValueError(
                "turns > 1 searches concurrency (conversations at once), not a request rate: give load concurrency"
            )
        return self

    def target(self) -> CapacitySLO | None:
        if not self.slo:
            return None
        return CapacitySLO(targets=self.slo, percentile=self.percentile, attainment=self.attainment)

    def bench_config(self, label: str | None = None) -> BenchConfig:
        """The benchmark every level starts from (the search sets concurrency or rate and the prompt count)."""
        fields = self.model_dump(
            exclude={"load", "slo", "percentile", "attainment", "start", "max_load", "max_probes"}
        )
        return BenchConfig(**fields, label=label)
