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

from pydantic import Field

from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.run import EngineSettings
from accelbench.domain.strict import StrictModel
from accelbench.errors import GuardError


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
    measured_read_gbps: float | None = Field(
        default=None,
        description="DRAM read bandwidth measured on the instance type with every vCPU reading (the catalog's "
        "memory_read_gbps); None when not measured.",
    )
    achievable_bandwidth_gbps: float = Field(
        description="min(socket, measured, cores) x the bandwidth efficiency: what decode can expect."
    )
    limited_by: Literal["socket", "measured", "cores"] = Field(
        description="Which limit binds: the sockets' channel peak, the instance's measured read bandwidth, or "
        "what its busy cores pull."
    )
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
