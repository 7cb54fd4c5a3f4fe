"""The questions put to the planner: ``EstimateQuery`` (what a user asks `accelbench estimate`, the API and the
Estimate page; its fields carry the bounds and help text) and ``FitQuery`` (what a fit is asked for) and ``PlanQuery`` (what one prediction is for, as the
planner passes it down: the traffic, the settings the caller fixed, the SLO and the goal)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from pydantic import Field

from accelbench.domain.estimate import SLO, EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.quant import QuantizationName
from accelbench.domain.run import EngineSettings
from accelbench.domain.strict import StrictModel


@dataclass(frozen=True)
class Traffic:
    """The traffic point one prediction is for."""

    input_len: int
    output_len: int
    concurrency: int
    arrivals: str


@dataclass(frozen=True)
class FitQuery:
    """What a fit is asked for (``plan.recommend``): the weight format (None/"auto": the fallback chain), the
    context, the KV dtype, the typical lengths that size the batch, the settings a deployment fixes and the
    engine (None: the tier's)."""

    quantization: str | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    input_len: int | None = None
    output_len: int | None = None
    engine_settings: EngineSettings | None = None
    engine: str | None = None


@dataclass(frozen=True)
class PlanQuery:
    """One question to the planner, passed down whole: the traffic; the settings the caller fixed (None: the
    planner chooses; ``engine_defaults``: the engine's own defaults for the ones not given, as a measured
    run had them); ``factors`` that override any calibration; the SLO; and the ``goal`` ("cost" or
    "latency") that chooses the open settings, with ``alternatives`` listing them and ``allow_quantization``
    letting it pick FP8 over the checkpoint's precision."""

    input_len: int
    output_len: int
    concurrency: int = 1
    arrivals: str = "bursts"
    engine: str | None = None
    quantization: str | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    engine_settings: EngineSettings | None = None
    engine_defaults: bool = False
    factors: EfficiencyFactors | None = None
    slo: SLO | None = None
    goal: str | None = None
    alternatives: bool = False
    allow_quantization: bool = False

    @property
    def traffic(self) -> Traffic:
        return Traffic(self.input_len, self.output_len, self.concurrency, self.arrivals)

    @classmethod
    def of_fit(cls, fit: FitQuery, *, input_len: int, output_len: int, concurrency: int) -> PlanQuery:
        """The question a fit was asked, at this traffic: the fit's own lengths where it has them. The
        inverse of ``fit_query``."""
        return cls(
            input_len=fit.input_len or input_len,
            output_len=fit.output_len or output_len,
            concurrency=concurrency,
            quantization=fit.quantization,
            max_model_len=fit.max_model_len,
            kv_cache_dtype=fit.kv_cache_dtype,
            engine_settings=fit.engine_settings,
            engine=fit.engine,
        )

    def fit_query(self) -> FitQuery:
        """What the fit is asked for this question: its settings, with its lengths sizing the batch."""
        return FitQuery(
            quantization=self.quantization,
            max_model_len=self.max_model_len,
            kv_cache_dtype=self.kv_cache_dtype,
            input_len=self.input_len,
            output_len=self.output_len,
            engine_settings=self.engine_settings,
            engine=self.engine,
        )

    def at(self, *, quantization: str | None, engine_settings: EngineSettings | None) -> PlanQuery:
        """This question at one setting, with nothing left for a goal to choose."""
        return replace(
            self,
            quantization=quantization,
            engine_settings=engine_settings,
            goal=None,
            alternatives=False,
            allow_quantization=False,
        )


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
    quantization: QuantizationName = Field(
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
