"""Types of the measurement engine: what to send (BenchConfig), what happened to each request
(RequestRecord), what the server said meanwhile (TelemetrySample) and the result (BenchmarkSummary).

Units follow ``vllm bench serve``: per-request times are seconds, summary statistics are milliseconds.
"""

from __future__ import annotations

import enum
import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from accelbench.domain.device import DeviceTelemetry
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
from accelbench.redact import MASK, is_secret_name, redact_url


class EndpointKind(enum.StrEnum):
    chat = "chat"
    completions = "completions"


class DatasetKind(enum.StrEnum):
    random = "random"
    jsonl = "jsonl"
    sharegpt = "sharegpt"
    trace = "trace"


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


class Endpoint(StrictModel):
    """What the benchmark sees of a deployment: where to send, which served model name, how to tokenize."""

    base_url: str = Field(description="Server root, e.g. http://127.0.0.1:8000 (no /v1).")
    served_model: str = Field(
        description="The model name the server answers to (the `model` field of requests)."
    )
    tokenizer: str | None = Field(
        default=None,
        description="Local tokenizer directory; None asks the server's /tokenize endpoint.",
    )
    api_key: str | None = Field(default=None, description="Bearer token for the server.", repr=False)
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra HTTP headers sent with every request."
    )
    engine_pids: list[int] = Field(
        default_factory=list,
        description="Process ids of an engine running on this machine (a local target): the benchmark samples "
        "this machine's devices and the CPU time and memory of these processes' cgroups. Empty otherwise.",
    )

    def record(self) -> dict[str, Any]:
        """What a stored run keeps of the endpoint: no API key, secret headers and a URL's password as ***."""
        return {
            "base_url": redact_url(self.base_url),
            "served_model": self.served_model,
            "tokenizer": self.tokenizer,
            "headers": {k: (MASK if is_secret_name(k) else v) for k, v in self.headers.items()},
        }


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
    dataset: DatasetKind = Field(
        default=DatasetKind.random,
        description="Where prompts come from: random makes them; the others read dataset_path.",
    )
    dataset_path: str | None = Field(
        default=None, description='The file every dataset but random reads (jsonl: {"prompt": ...} rows).'
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
            if self.turns > 1 or DatasetKind(self.dataset) == DatasetKind.trace:
                raise ValueError("stages set the load themselves: not with turns > 1 or a trace")
            if self.duration_s is not None or not math.isinf(self.request_rate):
                raise ValueError("stages set the load and the time: leave duration_s and request_rate unset")
        if self.ramp_up_s:
            if not math.isinf(self.request_rate) or self.stages:
                raise ValueError(
                    "ramp_up_s staggers the streams of a closed loop: leave request_rate at inf and give no "
                    "stages (a stage has its own ramp_up_s, whose requests are measured)"
                )
            if self.turns > 1 or DatasetKind(self.dataset) == DatasetKind.trace:
                raise ValueError("ramp_up_s staggers single requests: not with turns > 1 or a trace")
        if DatasetKind(self.dataset) == DatasetKind.trace and not self.dataset_path:
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


class RequestRecord(StrictModel):
    """One request as the client saw it. Times in seconds, relative to the benchmark start."""

    index: int
    session: int | None = Field(default=None, description="Multi-turn: the conversation it belongs to.")
    turn: int | None = Field(default=None, description="Multi-turn: its turn in the conversation, from 1.")
    prefix_group: int | None = Field(default=None, description="Shared prefixes: its prefix group.")
    stage: int | None = Field(default=None, description="Load plans: the stage it was sent in.")
    ramp: bool = Field(
        default=False,
        description="Started within the staggered start (LoadSettings.ramp_up_s): left out of the figures.",
    )
    prompt_len: int = Field(description="Input tokens as counted by the client's tokenizer.")
    server_prompt_tokens: int | None = Field(
        default=None, description="usage.prompt_tokens reported by the server."
    )
    max_tokens: int | None = None
    output_tokens: int = 0
    output_tokens_source: Literal["usage", "tokenizer", "chunks", "none"] = "none"
    planned_send_s: float = Field(
        default=0.0,
        description="When it became due: its scheduled time, or when a concurrency slot freed up if that was "
        "later. start_s minus this is the scheduling lag, the client's own delay.",
    )
    queue_s: float = Field(
        default=0.0,
        description="Time it waited for a concurrency slot after its scheduled time (vLLM's client queue time).",
    )
    start_s: float = Field(default=0.0, description="When it was actually sent.")
    ttft_s: float = Field(
        default=0.0,
        description="Time to first token: sent -> first chunk carrying generated text (content, reasoning or "
        "a tool-call delta; a role-only chunk does not count). With metrics_definition 'vllm': sent -> first "
        "chunk with a non-empty choices list, whatever it carries.",
    )
    itl_s: list[float] = Field(
        default_factory=list,
        description="Gaps between consecutive text-carrying chunks (metrics_definition 'vllm': between "
        "consecutive chunks with choices).",
    )
    latency_s: float = Field(
        default=0.0,
        description="End-to-end latency: sent -> last text-carrying chunk (metrics_definition 'vllm': last "
        "chunk with choices).",
    )
    success: bool = False
    error: str = ""
    generated_text: str = ""
    ttfo_s: float | None = Field(
        default=None,
        description="Time to first output: sent -> first chunk carrying answer content (delta.content for "
        "chat, text for completions); reasoning and tool-call deltas do not count. The same in both metrics "
        "definitions; None when no content came (e.g. tool calls only).",
    )
    reasoning_tokens: int = Field(
        default=0,
        description="Output tokens of reasoning (delta.reasoning_content / delta.reasoning); see "
        "token_split_source.",
    )
    answer_tokens: int = Field(
        default=0,
        description="Output tokens that are not reasoning: content and tool-call arguments.",
    )
    reasoning_chunks: int = Field(default=0, description="Chunks carrying reasoning text.")
    answer_chunks: int = Field(default=0, description="Chunks carrying content or tool-call deltas.")
    token_split_source: Literal["usage", "tokenizer", "chunks", "none"] = Field(
        default="none",
        description="Where reasoning_tokens/answer_tokens came from: usage (completion_tokens_details."
        "reasoning_tokens; answer = completion_tokens minus it), tokenizer (reasoning and answer text counted "
        "separately), chunks (chunks of each). Without reasoning, answer_tokens is output_tokens and this is "
        "output_tokens_source.",
    )

    @property
    def scheduling_lag_s(self) -> float:
        return self.start_s - self.planned_send_s

    @property
    def tpot_s(self) -> float | None:
        if not self.success or self.output_tokens <= 1:
            return None
        return (self.latency_s - self.ttft_s) / (self.output_tokens - 1)


class MetricStats(StrictModel):
    """Statistics of one latency metric, in milliseconds (numpy linear-interpolation percentiles)."""

    count: int = 0
    mean: float = 0.0
    median: float = 0.0
    std: float = 0.0
    min: float = 0.0
    max: float = 0.0
    p50: float = 0.0
    p90: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    mean_ci95: list[float] | None = Field(
        default=None, description="95% interval of the mean, [low, high] (bootstrap over requests)."
    )
    median_ci95: list[float] | None = Field(default=None, description="95% interval of the median.")
    p50_ci95: list[float] | None = Field(default=None, description="95% interval of p50 (the median).")
    p90_ci95: list[float] | None = Field(default=None, description="95% interval of p90.")
    p95_ci95: list[float] | None = Field(default=None, description="95% interval of p95.")
    p99_ci95: list[float] | None = Field(default=None, description="95% interval of p99.")


class TelemetrySample(StrictModel):
    """One scrape of the server's /metrics. ``t_s`` is seconds since the benchmark start."""

    t_s: float
    wall: float = Field(description="Unix time of the scrape.")
    values: dict[str, float] = Field(default_factory=dict)


class TelemetrySummary(StrictModel):
    """Deltas of counters and peaks/means of gauges over the benchmark."""

    available: bool = False
    error: str | None = None
    samples: int = 0
    deltas: dict[str, float] = Field(default_factory=dict, description="Counter increase over the run.")
    peaks: dict[str, float] = Field(default_factory=dict, description="Highest value of each gauge.")
    means: dict[str, float] = Field(default_factory=dict, description="Mean value of each gauge.")
    derived: dict[str, float] = Field(
        default_factory=dict,
        description="Figures derived from the samples: prefix_cache_hit_rate, scrape_ms_mean and scrape_ms_max "
        "(how long one /metrics request took).",
    )


class PromptTokenCheck(StrictModel):
    """Client-counted input tokens against the server's usage.prompt_tokens."""

    checked: int = 0
    mismatched: int = 0
    max_abs_deviation: int = 0
    mean_deviation: float = 0.0


class SummaryMetrics(StrictModel):
    """The figures computed from a benchmark's request records (``bench.metrics.compute_metrics``), with the
    statistics of ``vllm bench serve``; TTFT/ITL/E2EL per request follow ``metrics_definition``."""

    completed: int = Field(default=0, description="Requests that finished successfully.")
    failed: int = Field(default=0, description="Requests that failed (each record says why).")
    errors: dict[str, int] = Field(default_factory=dict, description="Failure reason -> count.")
    total_input_tokens: int = Field(default=0, description="Prompt tokens of the successful requests.")
    total_output_tokens: int = Field(default=0, description="Output tokens of the successful requests.")
    request_throughput: float = Field(default=0.0, description="Completed requests per second of wall time.")
    request_goodput: float | None = Field(
        default=None, description="Requests/s meeting every SLO (None without SLOs)."
    )
    output_throughput: float = Field(default=0.0, description="Output tokens per second.")
    total_token_throughput: float = Field(default=0.0, description="Input + output tokens per second.")
    max_output_tokens_per_s: float = Field(default=0.0, description="Peak output tokens in any one second.")
    max_concurrent_requests: int = Field(
        default=0,
        description="vLLM's peak concurrency: the most requests active in any one-second bucket from the first "
        "send (a request counts in every second it touched, so short requests make it exceed the concurrency "
        "limit); kept for compatibility with vllm bench serve. The true peak is peak_in_flight.",
    )
    peak_in_flight: int = Field(
        default=0, description="The most requests in flight at the same instant (sent and not yet finished)."
    )
    ttft_ms: MetricStats = Field(
        default_factory=MetricStats,
        description="Time to first token (the first generated text, reasoning included; see "
        "RequestRecord.ttft_s for each metrics definition).",
    )
    ttfo_ms: MetricStats = Field(
        default_factory=MetricStats,
        description="Time to first output (the first answer content; reasoning and tool calls excluded), over "
        "the successful requests that produced content.",
    )
    total_reasoning_tokens: int = Field(default=0, description="Reasoning tokens of the successful requests.")
    total_answer_tokens: int = Field(
        default=0, description="Answer (non-reasoning) output tokens of the successful requests."
    )
    tpot_ms: MetricStats = Field(
        default_factory=MetricStats, description="Time per output token after the first."
    )
    itl_ms: MetricStats = Field(default_factory=MetricStats, description="Inter-token (inter-chunk) latency.")
    e2el_ms: MetricStats = Field(default_factory=MetricStats, description="End-to-end latency.")
    scheduling_lag_ms: MetricStats = Field(
        default_factory=MetricStats, description="Actual send minus planned send (client-side delay)."
    )
    output_tokens_source: Literal["usage", "tokenizer", "chunks", "mixed", "none"] = Field(
        default="none", description="Where output-token counts came from."
    )
    prompt_token_check: PromptTokenCheck = Field(default_factory=PromptTokenCheck)
    request_throughput_ci95: list[float] | None = Field(
        default=None,
        description="95% interval of request_throughput, [low, high]: a resample of the requests keeps the run's "
        "wall time and request count, so one run's interval is its figure; repeats give it a width.",
    )
    output_throughput_ci95: list[float] | None = Field(
        default=None, description="95% interval of output_throughput (bootstrap over requests)."
    )
    total_token_throughput_ci95: list[float] | None = Field(
        default=None, description="95% interval of total_token_throughput (bootstrap over requests)."
    )
    request_goodput_ci95: list[float] | None = Field(
        default=None, description="95% interval of request_goodput (bootstrap over requests)."
    )
    ci95_method: str | None = Field(
        default=None, description="How the *_ci95 intervals were computed; None when there were none."
    )
    modes: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="Latency metrics (ttft, tpot, e2el) whose distribution has two modes (bench/modes.py): the "
        "share and median (ms) of each and their separation (Ashman's D); absent when unimodal.",
    )


class StageMetrics(StrictModel):
    """One stage of a load plan: the requests sent during it (a request belongs to the stage it was sent in)."""

    stage: int = Field(ge=0, description="Stage index, from 0.")
    load: str = Field(description="concurrency N or rate R/s (ramped over S s).")
    start_s: float = Field(description="When the stage began, seconds from the benchmark start.")
    duration_s: float = Field(description="The stage's planned duration.")
    sent: int = Field(default=0, description="Requests sent during the stage.")
    completed: int = Field(default=0)
    failed: int = Field(default=0)
    request_throughput: float = Field(
        default=0.0, description="Completions of its requests per second of stage."
    )
    output_throughput: float = Field(
        default=0.0, description="Output tokens of its requests per second of stage."
    )
    ttft_ms: MetricStats = Field(default_factory=MetricStats)
    tpot_ms: MetricStats = Field(default_factory=MetricStats)
    e2el_ms: MetricStats = Field(default_factory=MetricStats)


class TurnMetrics(StrictModel):
    """One turn index of multi-turn conversations: its requests' figures (turn 1 is every conversation's first
    request; later turns carry the history, so their prompts and TTFT grow)."""

    turn: int = Field(ge=1, description="Turn index, from 1.")
    completed: int = Field(default=0, description="Requests of this turn that finished successfully.")
    failed: int = Field(default=0, description="Requests of this turn that failed.")
    mean_prompt_tokens: float = Field(
        default=0.0, description="Mean prompt tokens (server's count when given)."
    )
    ttft_ms: MetricStats = Field(default_factory=MetricStats)
    tpot_ms: MetricStats = Field(default_factory=MetricStats)
    e2el_ms: MetricStats = Field(default_factory=MetricStats)


class ClientCertificate(StrictModel):
    """What the load generator sustained against a zero-delay loopback server at a run's load
    (``accelbench.bench.selftest.client_self_test``): the most this client, on these cores, can measure.

    In a closed loop (``request_rate`` infinite) the client ran flat out, so the rates it reached are its ceiling
    (``capacity_* == *_per_s``). At a finite rate it only had to keep the schedule: the rates are the offered
    load, the lag says whether it kept up, and the ceiling is estimated from the CPU it spent,
    ``1e6 / process_cpu_us_per_chunk`` chunks/s for one event loop (the loopback server's CPU included, so an
    underestimate)."""

    requests_per_s: float = Field(ge=0, description="Completed requests per second.")
    chunks_per_s: float = Field(ge=0, description="Text-carrying SSE chunks parsed per second.")
    lag_p50_ms: float | None = Field(
        default=None, description="Median scheduling lag (actual minus planned send) at a finite rate, ms."
    )
    lag_p99_ms: float | None = Field(default=None, description="99th percentile scheduling lag, ms.")
    cpu_us_per_chunk: float = Field(
        ge=0, description="CPU time of the client's event-loop thread per chunk, microseconds."
    )
    process_cpu_us_per_chunk: float = Field(
        default=0.0, ge=0, description="CPU time of the whole process (client and loopback server) per chunk."
    )
    capacity_chunks_per_s: float = Field(
        default=0.0, ge=0, description="The chunk rate the client can sustain (measured or CPU-estimated)."
    )
    capacity_requests_per_s: float = Field(
        default=0.0, ge=0, description="The request rate the client can sustain at this output length."
    )
    completed: int = Field(default=0, ge=0, description="Requests completed in the measurement.")
    failed: int = Field(default=0, ge=0, description="Requests that failed (should be 0).")
    concurrency: int | None = Field(default=None, description="Requests in flight at most.")
    request_rate: float = Field(
        default=math.inf, description="Planned requests per second; inf = closed loop."
    )
    output_len: int = Field(default=0, ge=0, description="Tokens (one per chunk) per response.")
    duration_s: float = Field(default=0.0, ge=0, description="Wall time of the measurement.")
    cores: list[int] = Field(default_factory=list, description="CPUs the client was allowed to run on.")

    def headroom(self, observed_chunks_per_s: float) -> float:
        """How many times a run's chunk rate the client can sustain (inf for a run that needed none)."""
        if observed_chunks_per_s <= 0:
            return math.inf
        return self.capacity_chunks_per_s / observed_chunks_per_s

    def verdict(
        self,
        observed_chunks_per_s: float,
        observed_requests_per_s: float,
        *,
        margin: float = 3.0,
        max_lag_ms: float = 10.0,
    ) -> tuple[bool, str]:
        """(ok, one sentence): whether the client can sustain at least ``margin`` times the chunk and request
        rates the finished run needed (and, at a finite rate, kept its schedule to ``max_lag_ms`` at p99), with
        the figures; when not, by how much it was short."""
        h_chunks = self.headroom(observed_chunks_per_s)
        h_req = (
            math.inf
            if observed_requests_per_s <= 0
            else self.capacity_requests_per_s / observed_requests_per_s
        )
        where = f" on {len(self.cores)} core{'s' if len(self.cores) != 1 else ''}" if self.cores else ""
        can = (
            f"the client can sustain {self.capacity_chunks_per_s:,.0f} chunks/s and "
            f"{self.capacity_requests_per_s:,.1f} requests/s{where}"
        )
        needed = f"the {observed_chunks_per_s:,.0f} chunks/s and {observed_requests_per_s:,.1f} requests/s the run needed"
        if self.lag_p99_ms is not None and self.lag_p99_ms > max_lag_ms:
            return False, (
                f"The client could not keep its own schedule against a zero-delay server: p99 scheduling lag "
                f"{self.lag_p99_ms:,.1f} ms (p50 {self.lag_p50_ms or 0:,.1f} ms) at {self.request_rate:g} requests/s, "
                f"over {max_lag_ms:g} ms; measured latencies include the load generator's own delay."
            )
        if h_chunks >= margin and h_req >= margin:
            return (
                True,
                f"The client had headroom: {can}, {min(h_chunks, h_req):,.1f}x {needed} (>= {margin:g}x).",
            )
        if h_chunks <= h_req:
            gap = margin * observed_chunks_per_s - self.capacity_chunks_per_s
            short = f"{h_chunks:,.1f}x the chunk rate, {gap:,.0f} chunks/s short of {margin:g}x"
        else:
            gap = margin * observed_requests_per_s - self.capacity_requests_per_s
            short = f"{h_req:,.1f}x the request rate, {gap:,.1f} requests/s short of {margin:g}x"
        return False, (
            f"The client had too little headroom: {can}, only {short} {needed}; measured latencies may include "
            "the load generator's own delay."
        )


class CoreOverlap(StrictModel):
    """The CPUs the load generator may run on against those the engine is bound to."""

    client_cpus: list[int] = Field(default_factory=list)
    engine_cpus: list[int] | None = Field(default=None, description="None: the engine's binding is unknown.")
    shared: int | None = Field(
        default=None, description="CPUs in both sets; None when the engine's are unknown."
    )
    sentence: str = ""


ITL_COUNTING = {
    "accelbench": "one gap per text-carrying SSE chunk; a chunk carrying several tokens counts as one gap",
    "vllm": "vllm bench serve's: one gap per SSE chunk with choices after the first (empty ones included)",
}


class BenchmarkSummary(SummaryMetrics):
    """The result of one benchmark (one sweep cell and repeat), per-request records included."""

    label: str | None = None
    date: str = Field(description="ISO time the benchmark started.")
    base_url: str = ""
    model_id: str = ""
    tokenizer_id: str = ""
    config: BenchConfig
    started_at: float = Field(default=0.0, description="Unix time of the first send.")
    finished_at: float = Field(default=0.0, description="Unix time of the last completion.")
    duration_s: float = 0.0
    num_prompts: int = 0
    itl_counting: str = Field(
        default=ITL_COUNTING["accelbench"], description="How ITL was counted (by metrics_definition)."
    )
    client_certificate: ClientCertificate | None = Field(
        default=None,
        description="The client's loopback self-test before the run (self_test): what it sustained at this load.",
    )
    client_verdict: str | None = Field(
        default=None,
        description="Whether the client had headroom for what this run needed, with the figures.",
    )
    ramp_requests: int = Field(
        default=0,
        ge=0,
        description="Requests that started within the staggered start (config.ramp_up_s), left out of every "
        "figure; they are in requests, marked ramp.",
    )
    per_stage: list[StageMetrics] = Field(
        default_factory=list, description="Load plans: the figures of each stage (empty otherwise)."
    )
    per_turn: list[TurnMetrics] = Field(
        default_factory=list, description="Multi-turn runs: the figures of each turn index (empty otherwise)."
    )
    telemetry: TelemetrySummary = Field(default_factory=TelemetrySummary)
    expected_prefix_hit_rate: float | None = Field(
        default=None,
        description="The prefix-cache hit ratio the prompts should give a server that caches every full shared "
        "block (16-token blocks; warmups warm the groups they cover), to compare with "
        "telemetry.derived.prefix_cache_hit_rate; None when the dataset cannot say.",
    )
    telemetry_samples: list[TelemetrySample] = Field(default_factory=list)
    device_telemetry: DeviceTelemetry | None = Field(
        default=None,
        description="What this machine's devices (CPU, GPUs, Neuron) did during the benchmark, sampled when the "
        "engine ran here: samples, a summary per device, energy, and the sources that were absent; None when the "
        "engine was elsewhere or sampling was off (and in results stored before it existed).",
    )
    requests: list[RequestRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="Caveats, e.g. the client could not keep up.")
    interrupted: bool = Field(
        default=False,
        description="The benchmark was cancelled or stopped early; the summary covers the requests sent.",
    )
