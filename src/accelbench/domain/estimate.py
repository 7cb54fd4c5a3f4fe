"""Estimate types: the efficiency factors and the calibration they came from, SLOs, one instance's
predicted figures with their ranges and the ranked table over the catalog."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.recommendation import Recommendation
from accelbench.domain.strict import StrictModel


# ------------------------------------------------------------------------------------------ estimates
class EfficiencyFactors(StrictModel):
    """The knobs of the speed model. Start values come from the cited data file; calibration fits them."""

    bandwidth_efficiency: float = Field(
        gt=0, le=1.5, description="Achieved / peak memory bandwidth in decode (CPU: of min(socket, cores))."
    )
    compute_efficiency: float = Field(gt=0, le=1.5, description="Achieved / peak matrix FLOP/s in prefill.")
    step_overhead_ms: float = Field(
        ge=0, description="Fixed engine time per scheduler step (scheduling, launch)."
    )
    per_sequence_overhead_ms: float = Field(
        ge=0, description="Engine time per sequence per step (sampling, detokenizing, streaming)."
    )
    request_overhead_ms: float = Field(
        ge=0, description="Fixed time to first token outside the model (HTTP, tokenizing, templating)."
    )
    prefill_interference: float = Field(
        ge=0, le=1.5, description="Share of other requests' prefill time a typical request waits in decode."
    )
    allreduce_latency_us: float = Field(ge=0, description="Latency of one tensor-parallel all-reduce.")
    kv_read_efficiency: float = Field(
        default=0.7,
        gt=0,
        le=1.5,
        description="Share of the achieved decode bandwidth paged attention reaches reading the KV cache.",
    )
    weight_only_efficiency: float = Field(
        default=0.3,
        gt=0,
        le=1.5,
        description="Matrix rate of 4-bit weight-only kernels (W4A16, AWQ/GPTQ) relative to plain 16-bit GEMMs "
        "once a step is compute-bound (unpacking and scaling every weight costs compute).",
    )
    fp8_weight_only_efficiency: float = Field(
        default=0.8,
        gt=0,
        le=1.5,
        description="The same for 8-bit weight-only kernels (FP8 on GPUs without FP8 units, W8A16): a "
        "conversion per weight, no unpacking.",
    )
    dot_kernel_efficiency: float = Field(
        default=0.5,
        gt=0,
        le=1.5,
        description="Matrix rate of llama.cpp's per-row integer dot-product kernels relative to its repacked "
        "GEMM kernels (weights interleaved for I8MM / VNNI tiles): quantised weights as downloaded, on builds "
        "that do not repack them at load.",
    )
    request_serial_ms: float = Field(
        default=0.0,
        ge=0,
        description="Server time per request that arrivals wait for in turn (parsing, templating, tokenizing "
        "in one event loop): what a burst of N requests adds to its later requests' TTFT.",
    )
    layer_floor_us: float = Field(
        default=0.0,
        ge=0,
        description="Least time one layer's kernels take per step whatever each rank holds (launch and "
        "synchronisation latency); what keeps TP 8 far from 8x TP 1.",
    )


class CalibrationRef(StrictModel):
    """Which stored calibration an estimate used."""

    id: int = Field(description="Stored calibration id.")
    accelerator: str = Field(description="Accelerator name it was fitted for.")
    engine: str = Field(description="Engine it was fitted for.")
    n_points: int = Field(description="Measured cells it was fitted to.")
    created_at: str | None = Field(default=None, description="When it was stored (ISO).")
    tpot_error_before_pct: float | None = Field(
        default=None, description="Mean absolute TPOT error before the fit, percent."
    )
    tpot_error_after_pct: float | None = Field(default=None, description="The same after the fit.")


class SLO(StrictModel):
    """Latency targets an instance must meet (``--slo ttft:MS,tpot:MS``)."""

    ttft_ms: float | None = Field(
        default=None, gt=0, description="Longest acceptable time to first token, ms."
    )
    tpot_ms: float | None = Field(
        default=None, gt=0, description="Longest acceptable time per output token, ms."
    )
    e2e_ms: float | None = Field(default=None, gt=0, description="Longest acceptable end-to-end latency, ms.")

    def _limits(self) -> tuple[tuple[str, float | None], ...]:
        """Each limit with its name, in the order ``met`` takes the figures: TTFT, TPOT, E2E."""
        return (("TTFT", self.ttft_ms), ("TPOT", self.tpot_ms), ("E2E", self.e2e_ms))

    def met(self, ttft_ms: float, tpot_ms: float, e2e_ms: float) -> bool:
        figures = (ttft_ms, tpot_ms, e2e_ms)
        return all(
            limit is None or figure <= limit
            for (_, limit), figure in zip(self._limits(), figures, strict=True)
        )

    def label(self) -> str:
        return ", ".join(f"{name} <= {limit:g} ms" for name, limit in self._limits() if limit is not None)


class SettingsOption(StrictModel):
    """One feasible (or refused) setting the planner weighed for an instance, with its prediction."""

    tensor_parallel_size: int | None = Field(default=None, description="Tensor-parallel degree.")
    weight_format: str | None = Field(default=None, description="bf16, fp8, int8, int4 ...")
    max_num_seqs: int | None = Field(default=None, description="Batch limit of the option.")
    feasible: bool = Field(description="Whether it fits.")
    batch: int | None = Field(default=None, description="Sequences batched at this concurrency.")
    ttft_ms: float | None = Field(default=None, description="Predicted typical TTFT, ms.")
    tpot_ms: float | None = Field(default=None, description="Predicted typical TPOT, ms.")
    output_tokens_per_s: float | None = Field(default=None, description="Predicted output tokens/s.")
    usd_per_million_output_tokens: float | None = Field(
        default=None, description="Cost per 1M output tokens."
    )
    slo_met: bool | None = Field(default=None, description="Whether the SLO is met (when one is given).")
    chosen: bool = Field(default=False, description="The option the estimate reports.")
    why: str = Field(default="", description="What bounds its speed, or why it does not fit.")


class PredictionRange(StrictModel):
    """Where 80% of measurements of a predicted figure are expected to fall."""

    p10: float = Field(description="10th percentile: 1 in 10 measurements is expected below it.")
    p90: float = Field(description="90th percentile: 1 in 10 measurements is expected above it.")
    basis: str = Field(
        description="The stratum the range rests on (accelerator family x engine x regime), its rows and "
        "sources, and whether it was borrowed from another family (then widened)."
    )


RANGE_BASIS_FIGURES = (("tpot_ms", "TPOT"), ("ttft_ms", "TTFT"))


def range_bases(bases: Mapping[str, str | None]) -> list[tuple[str | None, str]]:
    """What an estimate's ranges rest on, to be said once: one basis (figure None) when TPOT's and TTFT's rest
    on the same rows, else each with its figure's name; empty when neither has one. ``bases``: each range's
    basis by its key (``tpot_ms``, ``ttft_ms``; other keys are ignored)."""
    said: list[tuple[str | None, str]] = [
        (name, b) for key, name in RANGE_BASIS_FIGURES if (b := bases.get(key))
    ]
    if len({b for _, b in said}) == 1:
        return [(None, said[0][1])]
    return said


class EstimateRow(StrictModel):
    """One instance's predicted speed and cost (a row of the catalog table)."""

    instance: str = Field(description="Instance type ('local' for this machine).")
    accelerator_type: AcceleratorType = Field(description="gpu, neuron or cpu.")
    accelerator_name: str = Field(description="GPU / Neuron device / CPU generation.")
    accelerator_count: int = Field(description="GPUs or Neuron devices (0 on CPU).")
    engine: str = Field(description="Runtime the prediction is for.")
    feasible: bool = Field(description="Whether the model can be served here (see reason when not).")
    quantization_required: bool = Field(
        default=False,
        description="The checkpoint's own precision does not fit: only a quantized format does (never true "
        "when quantization was asked for).",
    )
    like_for_like: bool = Field(
        default=True,
        description="False when the weights run at another precision than the checkpoint's (quantized by the "
        "engine): compare the row only with deployments at that precision.",
    )
    weight_format: str | None = Field(
        default=None, description="How the weights are held (bf16, fp8, int8, int4, the checkpoint's format)."
    )
    tensor_parallel_size: int | None = Field(default=None, description="Tensor-parallel degree.")
    max_model_len: int | None = Field(default=None, description="Context length of the settings.")
    weights_gib: float | None = Field(default=None, description="Weights in memory, GiB.")
    available_gib: float | None = Field(default=None, description="Usable serving memory (all units).")
    memory_utilization_pct: float | None = Field(
        default=None, description="(weights + overhead) / usable memory, percent."
    )
    concurrency: int = Field(description="Requests in flight the prediction assumes.")
    arrivals: Literal["bursts", "steady"] = Field(
        default="bursts",
        description="bursts: users re-send at once with fixed lengths (what `accelbench sweep` measures); "
        "steady: arrivals spread out, prefills interleave with decode.",
    )
    batch: int | None = Field(default=None, description="Sequences the engine batches (<= concurrency).")
    ttft_ms: float | None = Field(default=None, description="Predicted typical time to first token, ms.")
    tpot_ms: float | None = Field(default=None, description="Predicted typical time per output token, ms.")
    e2e_ms: float | None = Field(default=None, description="Predicted end-to-end latency per request, ms.")
    output_tokens_per_s: float | None = Field(
        default=None, description="Predicted output tokens per second (all requests)."
    )
    total_tokens_per_s: float | None = Field(default=None, description="Input + output tokens per second.")
    requests_per_s: float | None = Field(default=None, description="Predicted completed requests per second.")
    hourly_usd: float | None = Field(default=None, description="Price per hour used for the costs.")
    price_source: str | None = Field(
        default=None, description="Where the price comes from (snapshot, aws-pricing-api ...)."
    )
    usd_per_million_output_tokens: float | None = Field(
        default=None, description="hourly / (output tokens/s x 3600) x 1e6."
    )
    usd_per_request: float | None = Field(default=None, description="hourly / (requests/s x 3600).")
    calibrated: bool = Field(default=False, description="Whether a measured calibration was applied.")
    has_benchmark_data: bool = Field(
        default=False, description="Whether the store has measured runs of this model on this instance."
    )
    measured_other_models: list[str] = Field(
        default_factory=list,
        description="Other models the store measured on this instance (their runs say nothing of this model).",
    )
    slo_met: bool | None = Field(default=None, description="Whether the SLO is met at this concurrency.")
    max_concurrency_meeting_slo: int | None = Field(
        default=None, description="Highest concurrency that still meets the SLO (0: none does)."
    )
    usd_per_million_output_tokens_at_slo: float | None = Field(
        default=None, description="Cost per 1M output tokens when run at max_concurrency_meeting_slo."
    )
    explanation: str = Field(default="", description="One line: what bounds the speed, or why infeasible.")
    ranges: dict[str, PredictionRange] = Field(
        default_factory=dict,
        description="80% range of each predicted figure, keyed like the point values (ttft_ms, tpot_ms, "
        "e2e_ms, output_tokens_per_s, total_tokens_per_s, requests_per_s, usd_per_million_output_tokens, "
        "usd_per_request, max_concurrency_meeting_slo), from the planner's out-of-source error on the "
        "matching stratum (accelerator family x engine x regime).",
    )
    range_overlaps: list[str] = Field(
        default_factory=list,
        description="Ranked lists: the neighbouring instances whose cost range overlaps this row's (their "
        "order is not certain).",
    )
    topology: str | None = Field(
        default=None,
        description="CPU: the topology the prediction assumed (vCPUs, cores x threads per core, the "
        "threads the engine binds, per-core bandwidth) and whether the catalog or the user described it.",
    )
    alternatives: list[SettingsOption] = Field(
        default_factory=list, description="Every setting weighed, with its prediction (when asked for)."
    )


class TimeBreakdown(StrictModel):
    """The parts of the prediction, ms."""

    decode_step_ms: float = Field(description="One decode step at the predicted batch.")
    decode_weights_ms: float = Field(description="Reading weights in one step (per rank).")
    decode_kv_ms: float = Field(description="Reading the batch's KV cache in one step (per rank).")
    decode_compute_ms: float = Field(description="Matrix math of one step at peak x efficiency.")
    decode_allreduce_ms: float = Field(description="Tensor-parallel all-reduces of one step.")
    decode_overhead_ms: float = Field(description="Engine overhead of one step.")
    decode_layer_floor_ms: float = Field(
        default=0.0, description="The least one step's layers take (launch and sync latency per layer)."
    )
    decode_bound: Literal["memory", "compute", "overhead", "latency"] = Field(
        description="What limits a decode step (latency: the per-layer floor)."
    )
    prefill_ms: float = Field(description="Prefill of one prompt.")
    prefill_bound: Literal["memory", "compute"] = Field(description="What limits the prefill.")
    prefill_interference_ms: float = Field(description="Added to TPOT by other requests' prefills.")
    queue_ms: float = Field(description="Waiting for a batch slot (concurrency above the batch limit).")
    ridge_flops_per_byte: float = Field(description="Compute / bandwidth: below it a phase is memory-bound.")
    achievable_bandwidth_gbps: float = Field(description="Per rank.")
    achievable_tflops: float = Field(description="Per rank, at the weight format's math.")


class Estimate(EstimateRow):
    """The prediction for one instance, with the recommendation and the model behind it."""

    model: str = Field(description="Model name.")
    input_len: int = Field(description="Input tokens per request.")
    output_len: int = Field(description="Output tokens per request.")
    recommendation: Recommendation = Field(description="The settings the prediction assumes (and why).")
    factors: EfficiencyFactors | None = Field(default=None, description="Efficiency factors used.")
    calibration: CalibrationRef | None = Field(
        default=None, description="The stored calibration used, when one applied."
    )
    times: TimeBreakdown | None = Field(default=None, description="The parts of the prediction.")
    notes: list[str] = Field(default_factory=list, description="How the prediction was made, caveats.")
    goal: Literal["cost", "latency"] | None = Field(
        default=None, description="What the settings were chosen for (None: they were given)."
    )


class EstimateSummary(StrictModel):
    feasible_native: int = Field(description="Instances that fit without quantization.")
    feasible_quantized: int = Field(description="Instances that fit only with quantization.")
    infeasible: int = Field(description="Instances that cannot serve the model as asked.")
    cheapest: str | None = Field(default=None, description="Lowest cost per 1M output tokens.")
    fastest: str | None = Field(default=None, description="Lowest TPOT.")
    most_headroom: str | None = Field(default=None, description="Lowest memory utilisation.")
    slo_choice: str | None = Field(
        default=None,
        description="Cheapest instance meeting the SLO (cost per 1M output tokens at the "
        "highest concurrency it sustains).",
    )
    slo_max_concurrency: int | None = Field(
        default=None, description="Highest concurrency slo_choice sustains within the SLO."
    )


class EstimateTable(StrictModel):
    """Estimates over the catalog: feasible rows (meeting the SLO first) ranked by cost, then the rest."""

    model: str = Field(description="Model name.")
    input_len: int = Field(description="Input tokens per request.")
    output_len: int = Field(description="Output tokens per request.")
    concurrency: int = Field(description="Requests in flight.")
    filters: dict[str, str | float | int | None] = Field(
        default_factory=dict, description="The filters applied."
    )
    slo: SLO | None = Field(default=None, description="The SLO searched for, if any.")
    rows: list[EstimateRow] = Field(
        description="Feasible rows (with an SLO, the ones meeting it first) ranked by cost per 1M output "
        "tokens, then $/h; then the infeasible ones."
    )
    summary: EstimateSummary = Field(description="Counts and picks.")
    calibrations_used: list[CalibrationRef] = Field(
        default_factory=list, description="Stored calibrations that applied to some rows."
    )
    elapsed_ms: float = Field(description="Time the estimate took.")
    notes: list[str] = Field(default_factory=list, description="Caveats.")
