"""What a benchmark sends and how it paces it: the API (EndpointKind) and the prompts' source (a dataset's name),
how lengths vary (LengthDist), load plans (LoadStage), goodput targets (GoodputSLO), the settings every load
command shares (LoadSettings) and one benchmark's (BenchConfig)."""

from __future__ import annotations

import enum
import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from accelbench.domain.limits import (
    MAX_CELL_PROMPT_TOKENS,
    MAX_CONCURRENCY,
    MAX_LABEL_CHARS,
    MAX_PROMPTS,
    MAX_TIMEOUT_S,
    MAX_TOKENS,
    MAX_TURNS,
    MAX_WARMUPS,
)
from accelbench.domain.strict import StrictModel


class EndpointKind(enum.StrEnum):
    chat = "chat"
    completions = "completions"


class LengthDist(StrictModel):
    """How one length (input or output tokens) varies between requests around the cell's length (the mean).
    fixed: every request exactly the mean; uniform: mean x [1 - range_ratio, 1 + range_ratio] (vLLM's random
    dataset); normal: mean and std; lognormal: mean and sigma of the log. Draws are rounded and kept inside
    [min, max]."""

    kind: Literal["fixed", "uniform", "normal", "lognormal"] = Field(default="fixed")
    range_ratio: float = Field(default=0.5, ge=0, lt=1, description="uniform: half-width over the mean.")
    std: float | None = Field(
        default=None, gt=0, description="normal: standard deviation, tokens (default mean/4)."
    )
    sigma: float = Field(default=0.5, gt=0, le=3, description="lognormal: standard deviation of log(length).")
    min: int = Field(default=1, ge=1, description="Shortest length drawn, tokens.")
    max: int | None = Field(
        default=None, ge=1, description="Longest length drawn, tokens (default: no bound)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> LengthDist:
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is more than max {self.max}; give min <= max")
        return self


class LoadStage(StrictModel):
    """One stage of a load plan: a closed loop of ``concurrency`` in-flight requests or Poisson arrivals at
    ``request_rate``, for ``duration_s``; ``ramp_up_s`` raises the load linearly from none to the stage's over
    its first seconds (concurrency one slot at a time, rate as a time-varying Poisson rate)."""

    duration_s: float = Field(gt=0, le=24 * 3600, description="Seconds the stage lasts.")
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY, description="In-flight requests.")
    request_rate: float | None = Field(default=None, gt=0, description="Requests per second (Poisson).")
    ramp_up_s: float = Field(
        default=0.0, ge=0, description="Seconds over which the load rises to the stage's."
    )

    @model_validator(mode="after")
    def _one_load(self) -> LoadStage:
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("a stage has either concurrency or request_rate (one of them)")
        if self.ramp_up_s > self.duration_s:
            raise ValueError(f"ramp_up_s {self.ramp_up_s:g} is longer than the stage's {self.duration_s:g} s")
        return self

    @property
    def level(self) -> float:
        return float(self.concurrency if self.concurrency is not None else self.request_rate or 0.0)


class GoodputSLO(StrictModel):
    """Service-level objectives for goodput (a request counts when it meets all of them)."""

    ttft_ms: float | None = Field(default=None, gt=0, description="Max time to first token, ms.")
    tpot_ms: float | None = Field(default=None, gt=0, description="Max time per output token, ms.")
    e2el_ms: float | None = Field(default=None, gt=0, description="Max end-to-end latency, ms.")

    def is_empty(self) -> bool:
        return self.ttft_ms is None and self.tpot_ms is None and self.e2el_ms is None


def in_ramp(start_s: float, ramp_up_s: float) -> bool:
    """Whether a request sent ``start_s`` seconds after the clock started within a staggered start of
    ``ramp_up_s`` seconds (``LoadSettings.ramp_up_s``): the one rule, used by the runner (bench/ramp.py) and by
    the store, which keeps no column for it."""
    return ramp_up_s > 0 and start_s < ramp_up_s


class LoadSettings(StrictModel):
    """How requests are made and paced. Shared by ``bench`` (one cell) and ``sweep`` (every cell)."""

    endpoint: EndpointKind = Field(default=EndpointKind.chat, description="chat or completions API.")
    #: a name of the dataset registry (bench/prompts.py DATASETS), which this layer cannot see: checked where
    #: specs are read (bench/spec.py, services/run_checks.py preflight) and where a benchmark starts
    dataset: str = Field(
        default="random",
        description="Where prompts come from, a registered dataset: random makes them; jsonl, sharegpt and trace "
        "read dataset_path.",
    )
    dataset_path: str | None = Field(
        default=None,
        description='The file the jsonl, sharegpt and trace datasets read (jsonl: {"prompt": ...} rows).',
    )
    output_len: int = Field(default=128, ge=1, le=MAX_TOKENS, description="max_tokens per request.")
    prefix_len: int = Field(
        default=0, ge=0, le=MAX_TOKENS, description="Tokens of a deliberate prefix shared by every prompt."
    )
    request_rate: float = Field(
        default=math.inf, gt=0, description="Requests per second; inf sends all at once."
    )
    burstiness: float = Field(
        default=1.0, gt=0, description="Gamma shape of inter-arrival times; 1 = Poisson."
    )
    duration_s: float | None = Field(
        default=None, gt=0, description="Stop sending new requests after this many seconds."
    )
    num_warmups: int = Field(
        default=0, ge=0, le=MAX_WARMUPS, description="Requests sent (and discarded) before measuring."
    )
    ignore_eos: bool = Field(
        default=True, description="Ask the server to ignore EOS so every request makes output_len tokens."
    )
    timeout_s: float = Field(
        default=600.0, gt=0, le=MAX_TIMEOUT_S, description="Per-request timeout, seconds."
    )
    seed: int = Field(default=0, description="Seed for prompts and send times.")
    goodput: GoodputSLO | None = Field(default=None, description="SLOs for goodput.")
    scrape_metrics: bool = Field(
        default=True, description="Scrape the server's /metrics while running (every scrape_interval_s)."
    )
    scrape_interval_s: float = Field(default=1.0, ge=0.05, description="Seconds between /metrics scrapes.")
    temperature: float | None = Field(
        default=None, ge=0, description="Sampling temperature sent with requests (server default if unset)."
    )
    # ---- workload shapes
    input_dist: LengthDist = Field(
        default_factory=LengthDist, description="How input lengths vary around input_len (random dataset)."
    )
    output_dist: LengthDist = Field(
        default_factory=LengthDist, description="How max_tokens varies around output_len (every dataset)."
    )
    prefix_groups: int = Field(
        default=1,
        ge=1,
        le=MAX_PROMPTS,
        description="Groups of prompts sharing a prefix: prompt i has group i mod prefix_groups's prefix_len-token "
        "prefix, so the expected prefix-cache hit ratio is known.",
    )
    turns: int = Field(
        default=1,
        ge=1,
        le=MAX_TURNS,
        description="Turns per conversation: each turn sends the whole history (with the answers) plus a new "
        "user message (the first turn's prompt is input_len tokens); max_concurrency counts conversations; "
        "num_prompts counts turns (a sweep's prompts_per_concurrency counts conversations).",
    )
    think_time_s: float = Field(
        default=0.0, ge=0, le=3600, description="Seconds between an answer and the conversation's next turn."
    )
    time_scale: float = Field(
        default=1.0,
        gt=0,
        description="Trace dataset: multiplies the trace's timestamps (0.5 = twice as fast).",
    )
    trace_format: Literal["auto", "mooncake", "burstgpt"] = Field(
        default="auto",
        description="Trace dataset: mooncake (JSONL: timestamp ms, input_length, output_length, hash_ids) or "
        "burstgpt (CSV: Timestamp s, Request tokens, Response tokens); auto by the file's extension.",
    )
    tools: str | None = Field(
        default=None,
        description='Tool definitions sent with each chat request: "builtin" (two small functions) or a JSON file '
        "of OpenAI tools; tool-call deltas count as output.",
    )
    stages: list[LoadStage] | None = Field(
        default=None,
        max_length=100,
        description="A load plan: stages run back to back in one benchmark, all of concurrency or all of rate "
        "(each with its duration and ramp-up); the result has figures per stage. num_prompts caps the requests. "
        "In a sweep every cell runs the plan: concurrency stages replace the concurrency axis (one level, the "
        "plan's peak); with rate stages each concurrency level caps the requests in flight.",
    )
    ramp_up_s: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="A staggered start for a closed loop (an infinite request_rate): its streams start one by one, "
        "evenly over this many seconds (stream k at k x ramp_up_s / streams), and every request that starts "
        "within them is left out of the figures (kept in the records, counted in ramp_requests) so the loop "
        "is measured after its streams have spread out, not in the waves of streams started at once. 0 (the "
        "default) starts every stream at once, as vllm bench serve does.",
    )
    self_test: bool = Field(
        default=False,
        description="Before measuring, drive a zero-delay loopback server at this load with the same client for "
        "about a second; the result carries that certificate and says whether the client had headroom.",
    )
    metrics_definition: Literal["accelbench", "vllm"] = Field(
        default="accelbench",
        description="accelbench: TTFT at the first chunk carrying text, one ITL gap per text chunk; vllm: chunk "
        "for chunk as `vllm bench serve` computes them.",
    )
    max_error_rate: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="The share of failed requests (0-1) above which a cell is judged failed: the command names the "
        "cell, its failed share and the most common reason, and exits 1; 1 accepts any number of failures.",
    )

    @model_validator(mode="after")
    def _workload(self) -> LoadSettings:
        if self.turns > 1 and not math.isinf(self.request_rate):
            raise ValueError(
                "turns > 1 paces conversations by max_concurrency and think_time_s; a request rate does not "
                "apply: leave request_rate at inf"
            )
        if self.turns > 1 and EndpointKind(self.endpoint) != EndpointKind.chat:
            raise ValueError("turns > 1 needs the chat endpoint (a conversation is a list of messages)")
        if self.tools is not None and EndpointKind(self.endpoint) != EndpointKind.chat:
            raise ValueError("tools need the chat endpoint")
        if self.stages:
            kinds = {st.concurrency is None for st in self.stages}
            if len(kinds) > 1:
                raise ValueError("stages are all of concurrency or all of request_rate, not both")
            if self.turns > 1 or self.dataset == "trace":
                raise ValueError("stages set the load themselves: not with turns > 1 or a trace")
            if self.duration_s is not None or not math.isinf(self.request_rate):
                raise ValueError("stages set the load and the time: leave duration_s and request_rate unset")
        if self.ramp_up_s:
            if not math.isinf(self.request_rate) or self.stages:
                raise ValueError(
                    "ramp_up_s staggers the streams of a closed loop: leave request_rate at inf and give no "
                    "stages (a stage has its own ramp_up_s, whose requests are measured)"
                )
            if self.turns > 1 or self.dataset == "trace":
                raise ValueError("ramp_up_s staggers single requests: not with turns > 1 or a trace")
        if self.dataset == "trace" and not self.dataset_path:
            raise ValueError("the trace dataset needs its file: give dataset_path")
        return self


#: what a benchmark's or a sweep's ``schedule`` is (the name is checked where specs are read: bench/spec.py)
SCHEDULE_HELP = (
    "The load schedule that computes send times at a finite request_rate (bench/schedule.py SCHEDULES): gamma "
    "(burstiness 1: Poisson) or one registered of your own."
)


class BenchConfig(LoadSettings):
    """One benchmark: a fixed number of prompts (or a duration) at one input length and concurrency."""

    input_len: int = Field(
        default=128, ge=1, le=MAX_TOKENS, description="Input tokens per prompt (random dataset), exact."
    )
    num_prompts: int = Field(default=100, ge=1, le=MAX_PROMPTS, description="Prompts to send.")
    max_concurrency: int | None = Field(
        default=None, ge=1, le=MAX_CONCURRENCY, description="Most requests in flight; None = unlimited."
    )
    label: str | None = Field(
        default=None, max_length=MAX_LABEL_CHARS, description="Free-form label stored with the result."
    )
    schedule: str = Field(default="gamma", description=SCHEDULE_HELP)

    @model_validator(mode="after")
    def _bounded(self) -> BenchConfig:
        if self.stages and self.max_concurrency is not None and self.stages[0].concurrency is not None:
            raise ValueError(
                "concurrency stages set the requests in flight themselves: leave max_concurrency unset (with "
                "rate stages it caps the requests in flight)"
            )
        if self.turns > 1 and self.num_prompts % self.turns:
            raise ValueError(
                f"num_prompts {self.num_prompts} is not a whole number of {self.turns}-turn conversations; give "
                f"a multiple of {self.turns}"
            )
        tokens = self.num_prompts * self.input_len
        if tokens > MAX_CELL_PROMPT_TOKENS:
            raise ValueError(
                f"{self.num_prompts:,} prompts x {self.input_len:,} tokens is {tokens:,} prompt tokens, more than "
                f"{MAX_CELL_PROMPT_TOKENS:,}; send fewer prompts or shorter ones"
            )
        return self

    @field_validator("dataset_path")
    @classmethod
    def _strip(cls, v: str | None) -> str | None:
        return v.strip() if isinstance(v, str) else v
