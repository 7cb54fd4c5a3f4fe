"""What a comparison of runs is made of (the runs, their cells, the ratios, the findings) and how its figures
are written; ``report/compare_runs.py`` builds one, ``report/findings.py`` reads one, ``report/side_by_side.py``
lays one out as a table."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from accelbench.domain.capacity import CapacitySLO, LoadKind, Probe
from accelbench.domain.instance_types import PriceTier
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.strict import StrictModel
from accelbench.report.formatting import fmt_num, fmt_usd
from accelbench.report.verdicts import MetricVerdict

# Telemetry gauges that carry accelerator utilisation (percent) and memory in use, by the names the scrapers
# may store them under (accelbench's own names first, then DCGM's and neuron-monitor's). Memory values are
# converted to GiB with the factor given.
ACCEL_UTIL_KEYS: tuple[str, ...] = (
    "accelerator_util_pct",
    "gpu_util_pct",
    "DCGM_FI_DEV_GPU_UTIL",
    "neuroncore_utilization_pct",
)
ACCEL_MEMORY_KEYS: tuple[tuple[str, float], ...] = (
    ("accelerator_memory_used_gib", 1.0),
    ("gpu_memory_used_gib", 1.0),
    ("DCGM_FI_DEV_FB_USED", 1.0 / 1024.0),  # MiB
    ("neuron_memory_used_bytes", 1.0 / 2**30),
)

#: the latency metrics a cell holds (its ``<metric>_p<N>_ms`` fields), with the names the tables give them
LatencyMetric = Literal["ttft", "tpot", "itl", "e2e"]
LATENCY_METRICS: tuple[tuple[LatencyMetric, str], ...] = (
    ("ttft", "TTFT"),
    ("tpot", "TPOT"),
    ("itl", "ITL"),
    ("e2e", "E2E"),
)

TIER_LABELS: dict[PriceTier, str] = {
    PriceTier.on_demand: "on-demand",
    PriceTier.reserved_1yr: "1-year reserved",
    PriceTier.reserved_3yr: "3-year reserved",
}


# --------------------------------------------------------------------------------------------- models
class HourlyPrice(StrictModel):
    """The hourly price a run's cost is computed from."""

    usd_per_hour: float = Field(ge=0, description="USD per instance-hour.")
    tier: PriceTier = Field(description="Pricing tier of the figure.")
    region: str | None = Field(default=None, description="Region the price applies to.")
    source: str = Field(description="Where the price comes from: catalog, store, or the run's own record.")


class ComparedRun(StrictModel):
    """One run as the comparison shows it: identity, hardware, engine, price."""

    id: str = Field(description="Run id.")
    name: str = Field(description="Display name: the label, or the id; made unique among the runs.")
    label: str | None = Field(default=None, description="The run's label.")
    kind: str = Field(description="bench, sweep, run, capacity or import.")
    status: str = Field(description="Run status.")
    created_at: datetime = Field(description="When the run was created.")
    model: str | None = Field(default=None, description="Model name or path.")
    engine: str | None = Field(default=None, description="Serving engine (framework).")
    engine_version: str | None = Field(default=None, description="Engine version.")
    target: str | None = Field(default=None, description="Where it ran: local, endpoint, kubernetes, ec2.")
    instance_type: str | None = Field(
        default=None, description="Cloud instance type; None for a local machine."
    )
    machine: str | None = Field(default=None, description="The CPU model (and accelerators) measured on.")
    accelerator_type: str | None = Field(default=None, description="gpu, neuron or cpu.")
    accelerator_name: str | None = Field(default=None, description="e.g. H100-SXM, Graviton4.")
    accelerator_count: int | None = Field(
        default=None, description="Accelerators (the run's, else its instance type's); 0 on CPU instances."
    )
    tp_degree: int | None = Field(default=None, description="Tensor-parallel degree.")
    quantization: str | None = Field(default=None, description="Quantization of the served weights.")
    cpu_flags: list[str] = Field(
        default_factory=list, description="Serving-relevant CPU instruction sets of the machine."
    )
    cpu_matrix_engine: str | None = Field(
        default=None, description="Best matrix path the CPU offers (AMX, AVX512-BF16, SVE2 ...)."
    )
    isa_trace: str | None = Field(
        default=None, description="Verdict of the oneDNN ISA trace, when the run recorded one."
    )
    price: HourlyPrice | None = Field(default=None, description="Hourly price used for cost; None when none.")
    price_note: str | None = Field(default=None, description="Why there is no price, when there is none.")


class CellResult(StrictModel):
    """One (input length, concurrency) cell of one run, repeats aggregated as the mean of their medians."""

    run_id: str = Field(description="Run id.")
    input_len: int = Field(description="Input tokens per prompt.")
    concurrency: int = Field(description="Requests in flight.")
    output_len: int | None = Field(default=None, description="Output tokens asked per request.")
    repeats: int = Field(description="Repeats with metrics that were aggregated.")
    result_ids: list[int] = Field(default_factory=list, description="Stored results of the cell.")
    status: str = Field(description="completed, partial (some repeat interrupted) or failed (no metrics).")
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p90_ms: float | None = None
    e2e_p95_ms: float | None = None
    e2e_p99_ms: float | None = None
    tpot_p50_min_ms: float | None = Field(default=None, description="Lowest repeat median TPOT.")
    tpot_p50_max_ms: float | None = Field(default=None, description="Highest repeat median TPOT.")
    output_throughput: float | None = Field(default=None, description="Output tokens per second.")
    total_throughput: float | None = Field(default=None, description="Input + output tokens per second.")
    total_throughput_min: float | None = Field(default=None, description="Lowest repeat total tok/s.")
    total_throughput_max: float | None = Field(default=None, description="Highest repeat total tok/s.")
    throughput_per_accelerator: float | None = Field(
        default=None, description="Total tok/s per accelerator; None when the run has 0 or unknown."
    )
    request_throughput: float | None = Field(default=None, description="Requests per second.")
    successful: int = Field(default=0, description="Requests completed, over all repeats.")
    failed: int = Field(default=0, description="Requests failed, over all repeats.")
    success_rate: float | None = Field(default=None, description="successful / (successful + failed).")
    accelerator_util_avg_pct: float | None = Field(default=None, description="None when not collected.")
    accelerator_util_peak_pct: float | None = Field(default=None, description="None when not collected.")
    accelerator_memory_avg_gib: float | None = Field(default=None, description="None when not collected.")
    accelerator_memory_peak_gib: float | None = Field(default=None, description="None when not collected.")
    accelerator_telemetry: str | None = Field(
        default=None,
        description="What the utilisation and memory columns describe: gpu, neuron, cpu (the host's CPU and "
        "memory, a CPU run) from the device telemetry, or metrics (the server's /metrics); None when not collected.",
    )
    energy_j: float | None = Field(
        default=None, description="Energy of the serving devices per repeat (mean); None when unknown."
    )
    tokens_per_joule: float | None = Field(
        default=None, description="Output tokens per joule over the repeats; None when the energy is unknown."
    )
    joules_per_output_token: float | None = Field(
        default=None, description="Joules per output token over the repeats; None when the energy is unknown."
    )
    hourly_usd: float | None = Field(default=None, description="Price used; None without an instance type.")
    cost_per_request_usd: float | None = Field(default=None, description="hourly / req/s / 3600.")
    cost_per_1m_tokens_usd: float | None = Field(
        default=None, description="hourly / output tok/s / 3600 x 1e6 (per million output tokens)."
    )
    cost_per_1m_total_tokens_usd: float | None = Field(
        default=None, description="hourly / total tok/s / 3600 x 1e6 (input and output tokens)."
    )
    ci95: dict[str, list[float]] = Field(
        default_factory=dict,
        description="95% intervals of the cell's table figures, [low, high], by metric (ttft_p50_ms, tpot_p50_ms, "
        "itl_p50_ms, e2el_p50_ms, output_throughput, total_token_throughput); absent without one.",
    )

    def latency(self, metric: LatencyMetric, p: int) -> float | None:
        """One latency percentile of the cell (the mean over its repeats), e.g. ``latency("tpot", 99)``; None
        when it was not measured (or the percentile is not one a cell holds: 50, 90, 95, 99)."""
        value = getattr(self, f"{metric}_p{p}_ms", None)
        return None if value is None else float(value)


class Growth(StrictModel):
    """How one metric of one run changes from the lowest to the highest concurrency."""

    run_id: str
    from_concurrency: int
    to_concurrency: int
    from_ms: float
    to_ms: float
    growth_pct: float = Field(description="(to / from - 1) x 100.")


class RunScaling(StrictModel):
    """One run at one input length, from its lowest to its highest concurrency (a given set of them)."""

    run_id: str
    input_len: int
    concurrencies: list[int] = Field(description="Concurrencies used, ascending.")
    lowest_concurrency: int
    highest_concurrency: int
    tpot_growth: Growth | None = Field(default=None, description="None with a single concurrency.")
    ttft_growth: Growth | None = Field(default=None, description="None with a single concurrency.")
    per_request_output_tps: float | None = Field(
        default=None,
        description="Output tok/s of one request at the lowest concurrency (aggregate / concurrency).",
    )
    aggregate_output_tps: float | None = Field(
        default=None, description="Aggregate output tok/s at the highest concurrency."
    )
    total_throughput_low: float | None = Field(default=None, description="Total tok/s at the lowest.")
    total_throughput_high: float | None = Field(default=None, description="Total tok/s at the highest.")
    throughput_scaling: float | None = Field(
        default=None, description="Total tok/s at the highest concurrency over that at the lowest."
    )


class ThroughputGap(StrictModel):
    """Total throughput of A and B at one concurrency."""

    concurrency: int
    a_tok_s: float
    b_tok_s: float
    ratio_a_over_b: float = Field(description="A's total tok/s over B's (> 1: A ahead).")


class PairRatios(StrictModel):
    """Run B against run A (the baseline) at one input length, over the concurrencies both measured."""

    input_len: int
    a: str = Field(description="Run id of A (the baseline).")
    b: str = Field(description="Run id of B.")
    concurrencies: list[int] = Field(description="Concurrencies both measured, ascending.")
    lowest_concurrency: int
    highest_concurrency: int
    tpot_a_ms: float | None = Field(default=None, description="A's TPOT p50 at the lowest concurrency.")
    tpot_b_ms: float | None = Field(default=None, description="B's TPOT p50 at the lowest concurrency.")
    decode_speedup_a_over_b: float | None = Field(
        default=None,
        description="TPOT of B over TPOT of A at the lowest concurrency (> 1: A decodes faster).",
    )
    throughput_gaps: list[ThroughputGap] = Field(default_factory=list)
    throughput_gap_trend: Literal["widens", "narrows", "holds", "reverses"] | None = Field(
        default=None,
        description="How the leader's throughput advantage moves from the lowest to the highest concurrency "
        "(judged on the ratios as printed, one decimal); None with a single concurrency.",
    )
    a_scaling: RunScaling
    b_scaling: RunScaling
    output_len_differs: bool = Field(
        default=False, description="The runs asked for different output lengths in these cells."
    )


class Finding(StrictModel):
    """One sentence made from the data, with the figures it quotes as fields."""

    kind: str = Field(
        description="decode_speedup, tpot_growth, throughput_gap, ttft_growth, stream_and_aggregate, cost, "
        "throughput_scaling, failures, cost_coverage, no_match, capacity, capacity_mismatch, capacity_prediction"
    )
    text: str = Field(description="The sentence; every number in it is one of ``figures``, rounded.")
    input_len: int | None = Field(default=None, description="Input length the finding is about.")
    runs: list[str] = Field(default_factory=list, description="Run ids the finding is about.")
    figures: dict[str, float | int | str | None] = Field(
        default_factory=dict, description="The figures quoted in the sentence, unrounded."
    )


class DeviceAtCapacity(StrictModel):
    """What one serving device did at a search's answer (the highest load meeting the SLO, else the knee): read
    from the device telemetry stored with that probe (``report/capacity_results.py`` ``devices_at_capacity``)."""

    device: str = Field(description="Device id (cpu, gpu0, neuron0 ...).")
    kind: str = Field(description="gpu, neuron or cpu.")
    util_mean_pct: float | None = Field(default=None, description="Mean utilisation over the probe, %.")
    util_peak_pct: float | None = Field(default=None, description="Peak utilisation over the probe, %.")
    memory_used_peak_gib: float | None = Field(default=None, description="Peak memory in use, GiB.")
    memory_total_gib: float | None = Field(default=None, description="Memory of the device, GiB.")
    power_mean_w: float | None = Field(default=None, description="Mean power, W; None: no power source.")
    tokens_per_joule: float | None = Field(
        default=None, description="Output tokens per joule of the serving devices; None: energy unknown."
    )
    joules_per_output_token: float | None = Field(default=None, description="Joules per output token.")


class CapacityRun(StrictModel):
    """A compared run's capacity search (its ``extra["capacity"]``): the SLO, the highest load meeting it, the
    throughput and cost there, the planner's prediction beside it, the knee and every probe."""

    run_id: str = Field(description="Run id.")
    name: str = Field(description="The run's display name in the comparison.")
    hardware: str = Field(
        description="What the sentences call the run: its instance type (with the run name when two runs "
        "share one), else the run name."
    )
    instance_type: str | None = Field(
        default=None, description="Cloud instance type; None for a local machine."
    )
    engine: str | None = Field(default=None, description="Serving engine.")
    engine_version: str | None = Field(default=None, description="Engine version.")
    load: LoadKind = Field(description="concurrency (users, closed loop) or request_rate (requests/s).")
    slo: CapacitySLO | None = Field(default=None, description="The targets; None: a knee search.")
    slo_label: str | None = Field(default=None, description='e.g. "p90 TPOT <= 50 ms"; None without an SLO.')
    finished: bool = Field(description="False while the search is running or was interrupted.")
    max_load: float | None = Field(default=None, description="Highest level meeting the SLO.")
    reason: str | None = Field(default=None, description="Why there is no max_load.")
    output_tokens_per_s_at_max: float | None = None
    total_tokens_per_s_at_max: float | None = None
    requests_per_s_at_max: float | None = None
    hourly_usd: float | None = Field(
        default=None, description="Price used (the comparison's tier); None: none."
    )
    usd_per_million_output_tokens: float | None = Field(
        default=None, description="hourly / output tok/s at max_load / 3600 x 1e6."
    )
    usd_per_million_total_tokens: float | None = Field(
        default=None, description="hourly / total tok/s at max_load / 3600 x 1e6."
    )
    predicted_max_load: float | None = Field(default=None, description="The planner's capacity for the SLO.")
    prediction_error_pct: float | None = Field(
        default=None, description="(predicted / measured - 1) x 100: positive when the planner said more."
    )
    knee: float | None = Field(default=None, description="Where adding load stops adding throughput.")
    probes: list[Probe] = Field(default_factory=list, description="Every measured level.")
    notes: list[str] = Field(default_factory=list, description="The search's notes.")
    devices_at_max: list[DeviceAtCapacity] = Field(
        default_factory=list,
        description="The serving devices at the answer (max_load, else the knee), where device telemetry was "
        "stored with that probe; empty otherwise.",
    )


class Comparison(StrictModel):
    """Everything a compare shows: runs, cells, matched cells, ratios, findings, notes; and, when some of the
    runs are capacity searches, their capacity (left out of the JSON when none is)."""

    generated_at: datetime = Field(description="When the comparison was made.")
    accelbench_version: str = Field(description="Version of the tool that made it.")
    tier: PriceTier = Field(description="Pricing tier the cost figures use.")
    baseline: str = Field(description="Run id every other run is compared with (the first given).")
    runs: list[ComparedRun]
    cells: list[CellResult] = Field(description="Every cell of every run.")
    matched: list[tuple[int, int]] = Field(
        default_factory=list, description="(input_len, concurrency) cells that every run measured."
    )
    scaling: list[RunScaling] = Field(
        default_factory=list, description="Per run and input length, over the run's own concurrencies."
    )
    pairs: list[PairRatios] = Field(default_factory=list, description="Each run against the baseline.")
    findings: list[Finding] = Field(default_factory=list, description="Sentences made from these figures.")
    notes: list[str] = Field(default_factory=list, description="Caveats: unmatched cells, missing prices ...")
    capacity: list[CapacityRun] = Field(
        default_factory=list, description="The capacity searches among the runs, in the runs' order."
    )
    like_for_like: bool = Field(
        default=True,
        description="No run differs from the baseline in what it served (model, precision, lengths, engine "
        "features, sampling) or in quality beyond the intervals; unknown fields are said in the notes.",
    )
    mismatches: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Each difference from the baseline: run, field, baseline, value, and the sentence (text).",
    )
    like_for_like_notes: list[str] = Field(
        default_factory=list,
        description="What like for like found, in words: mismatches, unverified fields, greedy agreement.",
    )
    left_out: list[str] = Field(
        default_factory=list,
        exclude=True,
        description="Runs kept out of the ratios, findings and headline: not like for like, no allow_mismatch.",
    )
    verdicts: list[MetricVerdict] = Field(
        default_factory=list,
        description="Each run's matched cells against the baseline's, metric by metric: ratio, its 95% interval "
        "and whether the difference is real (report/verdicts.py); findings, headline, page and CSV read these.",
    )

    @model_serializer(mode="wrap")
    def _without_empty_capacity(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a comparison of sweeps serializes exactly as it did before capacity runs existed
        data: dict[str, Any] = handler(self)
        if not self.capacity:
            data.pop("capacity", None)
        return data

    def run(self, run_id: str) -> ComparedRun:
        for r in self.runs:
            if r.id == run_id:
                return r
        raise KeyError(run_id)

    def cell(self, run_id: str, input_len: int, concurrency: int) -> CellResult | None:
        for c in self.cells:
            if c.run_id == run_id and c.input_len == input_len and c.concurrency == concurrency:
                return c
        return None

    def cells_of(self, run_id: str) -> list[CellResult]:
        return [c for c in self.cells if c.run_id == run_id]

    def input_lens(self) -> list[int]:
        return sorted({c.input_len for c in self.cells})


# --------------------------------------------------------------------------------------------- input
@dataclass
class RunData:
    """A run and its stored results, as read from the store (or built by a test)."""

    run: RunInfo
    results: list[ResultInfo]
    price: HourlyPrice | None = None
    price_note: str | None = None
    extra_notes: list[str] = field(default_factory=list)


def lead(ratio: float) -> float:
    """The leader's advantage of an A/B ratio: 0.5 and 2.0 are both a 2.0x lead."""
    return max(ratio, 1.0 / ratio)


# ------------------------------------------------------------------------------- how ratios are said
# One way everywhere (the CLI, the compare page, the report, the findings): a run is set against the baseline
# with a factor of at least 1 and the direction in words ("2.50x faster", "1.30x slower"), never a ratio below 1
# beside its inverse. The JSON keeps the plain ratios (``decode_speedup_a_over_b``, ``ratio_a_over_b``).
ON_PAR = "on par"

#: how a throughput lead moves from the lowest to the highest concurrency (``PairRatios.throughput_gap_trend``),
#: in words
TREND_WORDS: dict[str, str] = {
    "widens": "grows",
    "narrows": "shrinks",
    "holds": "holds",
    "reverses": "changes hands",
}


@dataclass(frozen=True)
class Versus:
    """One run's figure against the baseline's: ``factor`` >= 1 and the direction in words."""

    factor: float
    better: bool | None  # None: on par at the digits shown
    word: str
    digits: int = 2
    text: str | None = None  # a verdict's words ("25% faster (22-28%)"), said instead of the factor

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        return ON_PAR if self.better is None else f"{self.factor:.{self.digits}f}x {self.word}"


def versus(
    value: float | None,
    baseline: float | None,
    *,
    higher_is_better: bool,
    better: str,
    worse: str,
    digits: int = 2,
) -> Versus | None:
    """``value`` (the run's) against ``baseline`` (the baseline run's) as a factor >= 1 and a word: TPOT 10 ms
    against 25 ms, lower being better, is ``2.50x faster``; 25 against 10 is ``2.50x slower``. A factor that
    rounds to 1 at ``digits`` is "on par". None without both figures (or with one that is not positive)."""
    if value is None or baseline is None or value <= 0 or baseline <= 0:
        return None
    ratio = value / baseline
    factor = lead(ratio)
    if round(factor, digits) <= 1.0:
        return Versus(factor=factor, better=None, word=ON_PAR, digits=digits)
    is_better = (ratio > 1.0) == higher_is_better
    return Versus(factor=factor, better=is_better, word=better if is_better else worse, digits=digits)


def decode_versus(tpot: float | None, baseline_tpot: float | None, digits: int = 2) -> Versus | None:
    """Decode speed from TPOT (lower is faster): "2.50x faster" / "1.30x slower" than the baseline."""
    return versus(tpot, baseline_tpot, higher_is_better=False, better="faster", worse="slower", digits=digits)


def throughput_versus(tok_s: float | None, baseline_tok_s: float | None, digits: int = 2) -> Versus | None:
    """Throughput (higher is better): "2.50x higher" / "1.30x lower" than the baseline."""
    return versus(tok_s, baseline_tok_s, higher_is_better=True, better="higher", worse="lower", digits=digits)


def cost_versus(usd: float | None, baseline_usd: float | None, digits: int = 2) -> Versus | None:
    """Cost (lower is better): "2.50x cheaper" / "1.30x more expensive" than the baseline."""
    return versus(
        usd, baseline_usd, higher_is_better=False, better="cheaper", worse="more expensive", digits=digits
    )


def advantage_phrase(p: PairRatios, baseline: str, run: str) -> str:
    """How the total-throughput advantage moves from the lowest to the highest concurrency both runs measured,
    with its figures, e.g. "gpu ahead; its lead grows from 2.0x (c1) to 4.1x (c16)". One decimal, as
    ``throughput_gap_trend`` is judged. Empty with fewer than two concurrencies."""
    gaps = p.throughput_gaps
    if p.throughput_gap_trend is None or len(gaps) < 2:
        return ""
    first, last = gaps[0], gaps[-1]
    lo, hi = f"c{first.concurrency}", f"c{last.concurrency}"
    lo_x, hi_x = f"{lead(first.ratio_a_over_b):.1f}x", f"{lead(last.ratio_a_over_b):.1f}x"

    def ahead(ratio: float) -> str:
        return baseline if ratio >= 1.0 else run

    if p.throughput_gap_trend == "reverses":
        return (
            f"lead changes hands: {ahead(first.ratio_a_over_b)} ahead {lo_x} ({lo}), "
            f"{ahead(last.ratio_a_over_b)} ahead {hi_x} ({hi})"
        )
    if p.throughput_gap_trend == "holds":
        if round(lead(first.ratio_a_over_b), 1) <= 1.0:
            return f"{ON_PAR} from {lo} to {hi}"
        return f"{ahead(first.ratio_a_over_b)} ahead; its lead holds at {hi_x} from {lo} to {hi}"
    # the leader is the one ahead where the lead is larger: at the end if it grows, at the start if it shrinks
    ref = last if p.throughput_gap_trend == "widens" else first
    word = TREND_WORDS[p.throughput_gap_trend]
    return f"{ahead(ref.ratio_a_over_b)} ahead; its lead {word} from {lo_x} ({lo}) to {hi_x} ({hi})"


__all__ = [
    "fmt_num",
    "fmt_usd",
]  # written by report/formatting.py; importable here for the comparison's users
