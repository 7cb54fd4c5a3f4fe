"""Planning types: recommendations (does it fit, with which settings, and why), memory breakdowns, and
performance/cost estimates, one instance or the whole catalog.

A ``Recommendation`` is what a deployment is built from: ``settings`` carries every engine setting the
runtimes read (``kv_cache_space_gib`` is exactly the ``VLLM_CPU_KVCACHE_SPACE`` a CPU deployment sets), and
``settings.engine_settings()`` converts it to the run spec's ``EngineSettings``. Every decision is explained in
``reasons``; a refusal (``fits`` false) names its cause in ``refusal`` with a way forward.
"""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import Field, field_validator

from accelbench.domain.base import StrictModel
from accelbench.domain.catalog import AcceleratorType
from accelbench.domain.quant import check_quantization
from accelbench.domain.run import EngineSettings


class Verdict(enum.StrEnum):
    """fits: the model fits with its full context; clamped: it fits with a shorter context than the model
    supports (or than asked); refused: it cannot be served on this instance as asked."""

    fits = "fits"
    clamped = "clamped"
    refused = "refused"


class RefusalCode(enum.StrEnum):
    non_generative = "non_generative"
    does_not_fit = "does_not_fit"
    context_does_not_fit = "context_does_not_fit"
    unsupported_architecture = "unsupported_architecture"
    unsupported_quantization = "unsupported_quantization"
    dense_too_large_for_cpu = "dense_too_large_for_cpu"
    host_memory = "host_memory"
    no_valid_tensor_parallel = "no_valid_tensor_parallel"


class ServingSettings(StrictModel):
    """The engine settings a deployment uses. Fields that do not apply to the tier are None."""

    engine: str = Field(description="Runtime that serves this tier: vllm (GPU), vllm-neuron, vllm-cpu.")
    tensor_parallel_size: int = Field(ge=1, description="--tensor-parallel-size (CPU: NUMA nodes).")
    max_model_len: int = Field(ge=1, description="--max-model-len: longest prompt + output, tokens.")
    max_num_seqs: int = Field(ge=1, description="--max-num-seqs: most sequences batched at once.")
    dtype: str = Field(description="--dtype of unquantized tensors (bfloat16 on CPU and Neuron always).")
    quantization: str | None = Field(
        default=None,
        description="Online weight quantization to request (fp8, int8, int4); None for none or when the "
        "checkpoint is already quantized (the engine reads its quantization_config).",
    )
    checkpoint_quantization: str | None = Field(
        default=None,
        description="Method of a pre-quantized checkpoint (awq, gptq, compressed-tensors, fp8 ...).",
    )
    weight_format: str = Field(
        description="What the weights are in memory: bf16, fp8, int8, int4, awq-4bit ..."
    )
    weight_bits: float = Field(description="Bits per weight of the quantized (linear) layers.")
    kv_cache_dtype: str | None = Field(
        default=None,
        description="GPU: 'auto' (the model dtype, vLLM's default) or 'fp8' when asked for. None on CPU/Neuron.",
    )
    gpu_memory_utilization: float | None = Field(
        default=None, description="GPU only: share of each GPU's memory vLLM may use."
    )
    kv_cache_space_gib: int | None = Field(
        default=None,
        description="CPU only: the KV-cache budget in whole GiB; exactly the VLLM_CPU_KVCACHE_SPACE the "
        "deployment sets.",
    )
    omp_threads_bind: str | None = Field(default=None, description="CPU only: VLLM_CPU_OMP_THREADS_BIND.")
    threads: int | None = Field(
        default=None,
        description="CPU only: the OpenMP threads the engine binds (default: one per physical core).",
    )
    max_num_batched_tokens: int | None = Field(
        default=None, description="Tokens per scheduler step, when set (None: the engine's default)."
    )
    neuron_cores: int | None = Field(default=None, description="Neuron only: NeuronCores the model spans.")
    concurrency_at_max_len: int = Field(
        ge=0, description="Sequences that fit in the KV cache when every one is max_model_len long."
    )
    default_input_len: int = Field(description="Input length the concurrency figures assume, tokens.")
    default_output_len: int = Field(description="Output length the concurrency figures assume, tokens.")

    def engine_settings(self) -> EngineSettings:
        """The run spec's ``EngineSettings`` for these settings (what runtimes turn into flags and env)."""
        return EngineSettings(
            max_model_len=self.max_model_len,
            kv_cache_space_gib=float(self.kv_cache_space_gib) if self.kv_cache_space_gib else None,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            threads=self.threads,
            tensor_parallel_size=self.tensor_parallel_size,
            gpu_memory_utilization=self.gpu_memory_utilization,
            kv_cache_dtype=self.kv_cache_dtype if self.kv_cache_dtype not in (None, "auto") else None,
            quantization=self.quantization,
        )


class MemoryBudget(StrictModel):
    """Where the serving memory goes, per unit (GPU, NeuronCore or the host) and in total. GiB."""

    unit: Literal["gpu", "neuron_core", "host"] = Field(description="What one unit of memory is.")
    units: int = Field(ge=1, description="Units used (GPUs or NeuronCores = TP; 1 host).")
    unit_memory_gib: float = Field(description="Memory of one unit.")
    utilization: float = Field(
        description="Share of the unit's memory the engine may use (0.90 GPU, 0.85 Neuron, the allocatable "
        "share of host RAM on CPU)."
    )
    usable_gib: float = Field(description="utilization x memory x units.")
    weights_gib: float = Field(description="Weights, quantization scales included, all units together.")
    overhead_gib: float = Field(description="Activations, CUDA graphs / compiled graphs, runtime, all units.")
    kv_cache_gib: float = Field(description="KV-cache budget, all units together.")
    free_gib: float = Field(description="usable - weights - overhead - KV cache (>= 0 when it fits).")
    kv_bytes_per_token: int = Field(
        description="KV bytes per token of the whole model at the chosen KV dtype."
    )
    kv_cache_tokens: int = Field(description="Tokens the KV budget holds (all sequences together).")
    host_memory_gib: float = Field(description="Host RAM of the instance.")
    host_allocatable_gib: float = Field(
        description="Host RAM a serving pod may use (0.92 >= 64 GiB, else 0.85)."
    )
    host_peak_gib: float | None = Field(
        default=None, description="Peak host RAM while loading (GPU/Neuron) or serving (CPU)."
    )


class BandwidthAdvisory(StrictModel):
    """Why decode on a CPU is bandwidth-bound, with numbers: every output token reads all active weights."""

    bytes_per_token: int = Field(
        description="Bytes one decode step reads at batch 1: weights + one KV cache."
    )
    socket_bandwidth_gbps: float = Field(description="Peak DRAM bandwidth of the sockets the instance spans.")
    cores_bandwidth_gbps: float = Field(
        description="What the instance's own cores can pull (cores x per core)."
    )
    achievable_bandwidth_gbps: float = Field(
        description="min(socket, cores) x the bandwidth efficiency: what decode can expect."
    )
    limited_by: Literal["socket", "cores"] = Field(description="Which of the two limits binds.")
    tpot_floor_ms: float = Field(description="bytes_per_token / achievable bandwidth: no TPOT can be lower.")
    tokens_per_s_ceiling: float = Field(description="1000 / tpot_floor_ms, per sequence.")
    message: str = Field(description="The advisory in plain words.")


class Alternative(StrictModel):
    """Another way to serve the model: a larger (or cheaper) instance, or a quantization."""

    instance: str = Field(description="Instance type.")
    accelerator_type: AcceleratorType = Field(description="gpu, neuron or cpu.")
    accelerator_name: str = Field(description="GPU / Neuron device / CPU generation.")
    quantization: str | None = Field(default=None, description="Weight quantization it needs (None: native).")
    tensor_parallel_size: int = Field(ge=1, description="Tensor-parallel degree it would use.")
    max_model_len: int = Field(ge=0, description="Context length it would allow.")
    hourly_usd: float | None = Field(default=None, description="On-demand price per hour, when known.")
    reason: str = Field(description="Why it is offered.")
    ttft_ms: float | None = Field(default=None, description="Predicted typical TTFT there, ms.")
    tpot_ms: float | None = Field(default=None, description="Predicted typical TPOT there, ms.")
    output_tokens_per_s: float | None = Field(default=None, description="Predicted output tokens/s there.")
    usd_per_million_output_tokens: float | None = Field(
        default=None, description="Predicted cost per 1M output tokens there."
    )
    predicted_for: str | None = Field(
        default=None, description="The traffic the predictions are for (lengths and requests in flight)."
    )


class SettingChange(StrictModel):
    """A change of the caller's own settings that would make the instance asked for work. It is the caller's
    choice (a quantization costs quality, a shorter context refuses longer requests): never applied for them."""

    setting: str = Field(
        description="The setting to change: quantization, max_model_len, tensor_parallel_size ..."
    )
    value: str = Field(description="The value that works ('open' for leaving it to the planner).")
    flag: str = Field(description="How to give it on the command line, e.g. --quantization int4.")
    effect: str = Field(description="What the instance then serves, in words.")
    tpot_ms: float | None = Field(default=None, description="Predicted typical TPOT with the change, ms.")
    output_tokens_per_s: float | None = Field(
        default=None, description="Predicted output tokens/s with the change."
    )
    usd_per_million_output_tokens: float | None = Field(
        default=None, description="Predicted cost per 1M output tokens with the change."
    )


class Attempt(StrictModel):
    """One weight format tried while looking for a fit."""

    weight_format: str = Field(description="bf16, fp8, int8, int4 or the checkpoint's own format.")
    fits: bool = Field(description="Whether this format fits.")
    tensor_parallel_size: int | None = Field(
        default=None, description="TP degree it fits with, when it fits."
    )
    max_model_len: int | None = Field(default=None, description="Longest single sequence it leaves room for.")
    reason: str = Field(description="Why it fits or not, with numbers.")


class Refusal(StrictModel):
    code: RefusalCode = Field(description="Machine-readable cause of the refusal.")
    reason: str = Field(description="Why the model cannot be served here as asked, in plain words.")
    way_forward: list[str] = Field(description="What to do instead, most useful first.")
    changes: list[SettingChange] = Field(
        default_factory=list,
        description="Changes of the caller's settings that make this instance work, each the caller's choice "
        "(the cheaper instances that serve it as asked are the recommendation's alternatives).",
    )


class Recommendation(StrictModel):
    """The answer to "can I serve MODEL on INSTANCE, and how?"."""

    model: str = Field(description="Model name.")
    model_ref: str = Field(description="What the user gave for the model.")
    instance: str = Field(description="Instance type.")
    accelerator_type: AcceleratorType = Field(description="gpu, neuron or cpu.")
    accelerator_name: str = Field(description="GPU / Neuron device / CPU generation (e.g. Graviton4).")
    accelerator_count: int = Field(description="GPUs or Neuron devices (0 on CPU).")
    fits: bool = Field(description="Whether the model can be served here with the settings below.")
    verdict: Verdict = Field(
        description="fits, clamped (shorter context than the model supports or than asked) or refused."
    )
    settings: ServingSettings | None = Field(default=None, description="Engine settings; None when refused.")
    memory: MemoryBudget | None = Field(default=None, description="Memory budget of the chosen settings.")
    bandwidth: BandwidthAdvisory | None = Field(
        default=None, description="CPU only (always present there): the memory-bandwidth advisory."
    )
    reasons: list[str] = Field(default_factory=list, description="Every decision, in plain words.")
    warnings: list[str] = Field(default_factory=list, description="Things that work but deserve attention.")
    refusal: Refusal | None = Field(default=None, description="Why not, and what instead, when refused.")
    attempts: list[Attempt] = Field(default_factory=list, description="Weight formats tried, in order.")
    alternatives: list[Alternative] = Field(
        default_factory=list, description="Other instances that fit (cheapest first), when this one does not."
    )
    parameters: int = Field(description="Model parameters (total).")
    active_parameters: int = Field(description="Parameters per token (== parameters for dense models).")

    def engine_settings(self) -> EngineSettings:
        if self.settings is None:
            from accelbench.errors import GuardError

            raise GuardError(
                self.refusal.reason if self.refusal else "The model does not fit this instance.",
                hint="; ".join(self.refusal.way_forward) if self.refusal else None,
            )
        return self.settings.engine_settings()


class BreakdownItem(StrictModel):
    name: str = Field(description="weights, quantization_metadata, kv_cache, activations, block_table ...")
    gib_per_unit: float = Field(description="GiB on each GPU / NeuronCore.")
    gib_total: float = Field(description="GiB over all units.")
    detail: str = Field(description="How it was computed.")


class MemoryBreakdown(StrictModel):
    """Where accelerator memory goes for one model on one instance (GPU and Neuron)."""

    model: str = Field(description="Model name.")
    instance: str = Field(description="Instance type.")
    accelerator_type: AcceleratorType = Field(description="gpu or neuron.")
    accelerator_name: str = Field(description="GPU or Neuron device.")
    unit: Literal["gpu", "neuron_core"] = Field(
        description="What one unit of memory is: a GPU or a NeuronCore."
    )
    units: int = Field(description="Units used (tensor parallel degree).")
    unit_memory_gib: float = Field(description="Memory of one unit, GiB.")
    utilization: float = Field(description="Share of a unit's memory the engine may use.")
    usable_gib_per_unit: float = Field(description="utilization x unit memory, GiB.")
    weight_format: str = Field(description="How the weights are held.")
    kv_cache_dtype: str = Field(description="KV-cache element type (fp8 or bf16).")
    max_model_len: int = Field(description="Context length of the settings.")
    concurrency: int = Field(description="Sequences the breakdown sizes the KV cache and block table for.")
    items: list[BreakdownItem] = Field(description="Where each unit's memory goes.")
    used_gib_per_unit: float = Field(description="Sum of the items inside the usable share.")
    free_gib_per_unit: float = Field(description="Usable minus used (negative when infeasible).")
    verdict: Literal["fits", "clamps", "infeasible"] = Field(
        description="fits: everything at the model's full context; clamps: fits with a shorter context; "
        "infeasible: weights and overhead alone do not fit."
    )
    reasons: list[str] = Field(description="The recommendation's reasons and the verdict's.")
    quantization: dict[str, float | str | None] = Field(
        description="Quantization metadata: format, bits, scale bytes per 128 weights, metadata GiB."
    )


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

    def met(self, ttft_ms: float, tpot_ms: float, e2e_ms: float) -> bool:
        return (
            (self.ttft_ms is None or ttft_ms <= self.ttft_ms)
            and (self.tpot_ms is None or tpot_ms <= self.tpot_ms)
            and (self.e2e_ms is None or e2e_ms <= self.e2e_ms)
        )

    def label(self) -> str:
        parts = []
        if self.ttft_ms is not None:
            parts.append(f"TTFT <= {self.ttft_ms:g} ms")
        if self.tpot_ms is not None:
            parts.append(f"TPOT <= {self.tpot_ms:g} ms")
        if self.e2e_ms is not None:
            parts.append(f"E2E <= {self.e2e_ms:g} ms")
        return ", ".join(parts)


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


# ------------------------------------------------------------------------------------------ calibration
def error_pct(predicted: float | None, measured: float | None) -> float | None:
    """How far a prediction is from the measurement, in percent of the measurement (positive: it said more);
    None without both (or with a measurement of 0)."""
    if predicted is None or not measured:
        return None
    return (predicted - measured) / measured * 100


class CellComparison(StrictModel):
    """One measured cell (input length x concurrency of a run) against the model's prediction(s)."""

    run_id: str = Field(description="Stored run.")
    label: str | None = Field(default=None, description="Run label.")
    instance: str = Field(description="Instance type, or 'local' for this machine.")
    accelerator: str = Field(
        description="Calibration key: accelerator name (local:<CPU model> for local runs)."
    )
    engine: str = Field(description="Engine of the run.")
    model: str = Field(description="Model name.")
    input_len: int = Field(description="Input tokens of the cell.")
    output_len: int = Field(description="Output tokens of the cell.")
    concurrency: int = Field(description="Concurrency of the cell (0 for a request-rate probe).")
    request_rate: float | None = Field(
        default=None,
        description="Requests/s of a request-rate probe (a capacity search); None for a closed loop.",
    )
    measured_tpot_ms: float = Field(description="Median TPOT measured.")
    measured_ttft_ms: float | None = Field(default=None, description="Median TTFT measured.")
    measured_output_tps: float | None = Field(default=None, description="Output tokens/s measured.")
    predicted_tpot_ms: float = Field(description="Predicted with the factors estimates used before.")
    predicted_ttft_ms: float = Field(description="Predicted median TTFT with the factors used before.")
    predicted_output_tps: float = Field(description="Predicted output tokens/s before.")
    fitted_tpot_ms: float | None = Field(default=None, description="Predicted with the fitted factors.")
    fitted_ttft_ms: float | None = Field(
        default=None, description="Predicted median TTFT with the fitted factors."
    )
    fitted_output_tps: float | None = Field(
        default=None, description="Predicted output tokens/s with the fitted factors."
    )

    @property
    def tpot_error_pct(self) -> float | None:
        return error_pct(self.predicted_tpot_ms, self.measured_tpot_ms)

    @property
    def fitted_tpot_error_pct(self) -> float | None:
        return error_pct(self.fitted_tpot_ms, self.measured_tpot_ms)


class CapacityComparison(StrictModel):
    """A capacity run's measured capacity at its SLO against the planner's, before and after a fit."""

    run_id: str = Field(description="Stored capacity run.")
    label: str | None = Field(default=None, description="Run label.")
    load: str = Field(description="concurrency (users) or request_rate (requests/s).")
    slo: str = Field(description="The SLO searched for, e.g. 'p90 tpot <= 50 ms'.")
    input_len: int = Field(description="Input tokens per request.")
    output_len: int = Field(description="Output tokens per request.")
    measured_max_load: float | None = Field(description="Highest level measured meeting the SLO.")
    predicted_at_run: float | None = Field(
        default=None, description="What the planner predicted when the search ran (stored with the run)."
    )
    predicted_before: float | None = Field(
        default=None, description="Predicted with the factors before the fit."
    )
    predicted_after: float | None = Field(default=None, description="Predicted with the fitted factors.")

    @property
    def error_at_run_pct(self) -> float | None:
        return error_pct(self.predicted_at_run, self.measured_max_load)

    @property
    def error_before_pct(self) -> float | None:
        return error_pct(self.predicted_before, self.measured_max_load)

    @property
    def error_after_pct(self) -> float | None:
        return error_pct(self.predicted_after, self.measured_max_load)


class CalibrationGroup(StrictModel):
    """The fit for one (accelerator, engine)."""

    accelerator: str = Field(description="Accelerator name (calibration key).")
    engine: str = Field(description="Engine (calibration key).")
    kind: AcceleratorType = Field(description="gpu, neuron or cpu.")
    n_points: int = Field(description="Measured cells fitted.")
    runs: list[str] = Field(description="Runs the cells come from.")
    before_source: str = Field(description="'defaults' or 'calibration <id>': what estimates used before.")
    factors_before: EfficiencyFactors = Field(description="Factors estimates used before.")
    factors_after: EfficiencyFactors = Field(description="Fitted factors.")
    error_before: dict[str, float] = Field(
        description="Mean absolute % errors before: tpot, ttft, throughput."
    )
    error_after: dict[str, float] = Field(description="The same after fitting.")
    cells: list[CellComparison] = Field(description="Every cell: measured, predicted before and after.")
    capacity: list[CapacityComparison] = Field(
        default_factory=list, description="Every capacity run used: measured vs predicted capacity."
    )
    saved_id: int | None = Field(default=None, description="Stored calibration id (None in a dry run).")
    note: str | None = Field(default=None, description="Caveat about the fit, if any.")
    held_out_runs: list[str] = Field(
        default_factory=list,
        description="Other stored runs of the same accelerator and engine, not fitted, graded with the factors "
        "before and after the fit.",
    )
    held_out_error_before: dict[str, float] = Field(
        default_factory=dict, description="Mean absolute % errors on the held-out runs before the fit."
    )
    held_out_error_after: dict[str, float] = Field(
        default_factory=dict, description="The same with the fitted factors."
    )


class CalibrationReport(StrictModel):
    groups: list[CalibrationGroup] = Field(description="One fit per (accelerator, engine).")
    skipped: list[str] = Field(default_factory=list, description="Runs not used, with the reason.")
    saved: bool = Field(description="Whether the calibrations were stored (and estimates now use them).")


class EstimateQuery(StrictModel):
    """One estimate request: the same fields, defaults and bounds for `accelbench estimate`, the API's
    ``GET /api/v1/estimate`` and the Estimate page."""

    model: str = Field(min_length=1, max_length=300, description="Model preset name, prepared model or path.")
    instance_type: str | None = Field(
        default=None,
        max_length=64,
        description="One instance type ('local' for this machine).",
    )
    accelerator_type: AcceleratorType | None = Field(default=None, description="Only gpu, neuron or cpu.")
    max_cost: float | None = Field(default=None, gt=0, le=1e6, description="Hourly USD at most.")
    min_context: int | None = Field(
        default=None, ge=16, le=10_000_000, description="Context length the deployment needs."
    )
    quantization: str | None = Field(
        default=None, max_length=32, description="none, fp16, fp8, int8 (w8a8), int4 (w4a8, w4a16)."
    )
    input_len: int = Field(default=512, ge=1, le=10_000_000, description="Input tokens per request.")
    output_len: int = Field(default=128, ge=1, le=10_000_000, description="Output tokens per request.")
    concurrency: int = Field(default=1, ge=1, le=100_000, description="Requests in flight.")
    slo: str | None = Field(
        default=None, max_length=100, description="Latency targets in ms, e.g. ttft:500,tpot:50 (e2e too)."
    )
    arrivals: Literal["bursts", "steady"] = Field(
        default="bursts",
        description="bursts: users re-send at once with fixed lengths (what `accelbench sweep` measures); "
        "steady: arrivals spread out (prefills interleave with decode).",
    )
    limit: int = Field(default=100, ge=1, le=10_000, description="Ranked rows shown (feasible first).")
    no_calibration: bool = Field(default=False, description="Ignore stored calibrations.")
    # the settings a deployment fixes (None: the planner chooses); every memory figure is recomputed for them
    engine: str | None = Field(
        default=None,
        max_length=32,
        description="vllm or sglang (GPU), vllm-neuron, vllm-cpu or llamacpp (CPU).",
    )
    tensor_parallel_size: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Tensor-parallel degree (GPUs, NeuronCores, or NUMA nodes on CPU).",
    )
    max_num_seqs: int | None = Field(
        default=None, ge=1, le=100_000, description="Batch limit (--max-num-seqs)."
    )
    max_num_batched_tokens: int | None = Field(
        default=None,
        ge=16,
        le=10_000_000,
        description="Tokens per scheduler step (--max-num-batched-tokens).",
    )
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] | None = Field(
        default=None, description="auto (the model dtype, vLLM's default) or fp8 (GPU)."
    )
    kv_cache_space_gib: int | None = Field(
        default=None, ge=1, le=100_000, description="CPU: VLLM_CPU_KVCACHE_SPACE, GiB per rank."
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="CPU: OpenMP threads the engine binds.",
    )
    cores: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="CPU: cores the guest exposes (lscpu 'Core(s)'), when it differs from the catalog's "
        "row (a KVM guest often shows each vCPU as a core); one instance only.",
    )
    smt: int | None = Field(
        default=None,
        ge=1,
        le=8,
        description="CPU: threads per core the guest exposes (lscpu 'Thread(s) per core'); one instance only.",
    )
    allow_quantization: bool = Field(
        default=False,
        description="Let the goal choose FP8 weights over the checkpoint's precision where they are cheaper "
        "or faster (near-lossless on most models; the row is then not like for like). Without it the "
        "checkpoint's precision is kept whenever it fits and FP8 is offered as an alternative.",
    )
    goal: Literal["cost", "latency"] = Field(
        default="cost",
        description="What the planner chooses settings for when they are not given: cost (lowest cost per "
        "output token, meeting the SLO when one is given) or latency (lowest TPOT at this concurrency).",
    )
    alternatives: bool = Field(
        default=False, description="List every feasible setting (TP, format) with its prediction."
    )

    @field_validator("quantization")
    @classmethod
    def _known_quantization(cls, v: str | None) -> str | None:
        return check_quantization(v)

    def engine_settings(self) -> EngineSettings | None:
        """The settings this query fixes, or None when it fixes none."""
        values = {
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "kv_cache_dtype": self.kv_cache_dtype if self.kv_cache_dtype != "auto" else None,
            "kv_cache_space_gib": float(self.kv_cache_space_gib) if self.kv_cache_space_gib else None,
            "threads": self.threads,
        }
        given = {k: v for k, v in values.items() if v is not None}
        return EngineSettings(**given) if given else None
