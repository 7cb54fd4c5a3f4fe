"""The result of one benchmark (BenchmarkSummary): the statistics of ``vllm bench serve`` in milliseconds
(MetricStats, SummaryMetrics), what the server's /metrics said meanwhile (TelemetrySample, TelemetrySummary),
the prompt-token check, and the figures per stage of a load plan and per turn of a conversation."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from accelbench.domain.client_certificate import ClientCertificate
from accelbench.domain.device import DeviceTelemetry
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.strict import StrictModel


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
