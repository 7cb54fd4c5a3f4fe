"""GPU recommendations: usable memory per GPU, the KV-cache dtype, the tensor-parallel degree and the quantization fallback chain."""

from __future__ import annotations

import math
from typing import Literal

from accelbench.domain.model import ModelSpec
from accelbench.domain.recommendation import (
    Attempt,
    MemoryBudget,
    Recommendation,
    RefusalCode,
    ServingSettings,
)
from accelbench.errors import UserInputError
from accelbench.plan.memory import (
    GIB,
    GPU_MEMORY_UTILIZATION,
    MIN_CONTEXT,
    WeightFormat,
    host_allocatable_share,
    host_load_peak_bytes,
    max_seq_tokens,
    native_format,
    overhead_bytes,
    weight_bytes,
)
from accelbench.plan.recommend.tier_steps import (
    GPU_MAX_NUM_SEQS,
    USEFUL_CONTEXT,
    USEFUL_SEQS,
    Ctx,
    Fit,
    base_fields,
    context_and_batch,
    fit_units,
    fmt_gib,
    formats_to_try,
    gib,
    params_b,
    pow2_upto,
    refuse,
    tp_advice,
    verdict_for,
)


# --------------------------------------------------------------------------------------------- GPU
def valid_gpu_tps(model: ModelSpec, units: int) -> list[int]:
    return [
        t
        for t in pow2_upto(units)
        if model.num_attention_heads % t == 0 and (model.mla is not None or model.num_kv_heads % t == 0)
    ]


def recommend_gpu(ctx: Ctx) -> Recommendation:
    """The GPU answer in named steps: the KV dtype, the valid tensor-parallel degrees, the first weight
    format that fits, then the reasons, the context and batch, host RAM and the settings."""
    hw, spec = ctx.hw, ctx.spec
    util = ctx.gpu_memory_utilization or GPU_MEMORY_UTILIZATION
    usable = hw.unit_memory_gib * GIB * util
    overhead = overhead_bytes(ctx.model)
    fp8_ok = spec.fp8_tflops is not None
    kv_bytes = _kv_bytes(ctx, util, usable, overhead)
    valid = _valid_tps(ctx)
    if isinstance(valid, Recommendation):
        return valid
    formats = formats_to_try(ctx, allow_fallback=ctx.quantization is None, fp8_ok=fp8_ok)
    if isinstance(formats, Recommendation):
        return formats
    chosen = _first_fit(ctx, formats, usable, overhead, valid, kv_bytes)
    if isinstance(chosen, Recommendation):
        return chosen
    fmt, fit = chosen
    _explain_fit(ctx, fmt, fit, usable, valid)
    max_len, seqs, c_max, in_len, out_len, more = context_and_batch(ctx, fit, kv_bytes, GPU_MAX_NUM_SEQS)
    ctx.reasons += more
    memory = _memory_budget(ctx, fmt, fit, util, usable, kv_bytes)
    settings = ServingSettings(
        engine=ctx.engine or "vllm",
        max_num_batched_tokens=ctx.max_num_batched_tokens,
        tensor_parallel_size=fit.tp,
        max_model_len=max_len,
        max_num_seqs=seqs,
        dtype="float16" if fmt.name == "fp16" else "bfloat16",
        quantization=fmt.online,
        checkpoint_quantization=fmt.checkpoint_method,
        weight_format=fmt.name,
        weight_bits=fmt.bits,
        kv_cache_dtype="fp8" if kv_bytes == 1 else "auto",
        gpu_memory_utilization=util,
        concurrency_at_max_len=c_max,
        default_input_len=in_len,
        default_output_len=out_len,
    )
    return accelerator_fit(ctx, settings, memory)


def accelerator_fit(ctx: Ctx, settings: ServingSettings, memory: MemoryBudget) -> Recommendation:
    """A recommendation that fits in accelerator memory (GPU's and Neuron's alike), with the reasons, warnings
    and weight formats tried that ``ctx`` gathered."""
    return Recommendation(
        **base_fields(ctx, fits=True, verdict=verdict_for(ctx, settings.max_model_len)),
        settings=settings,
        memory=memory,
        reasons=ctx.reasons,
        warnings=ctx.warnings,
        attempts=ctx.attempts,
    )


def _as_reported(ctx: Ctx) -> str:
    """Where the GPU's memory figure comes from, when it is CUDA's rather than the part's capacity."""
    spec = ctx.spec
    if spec.memory_reported_gib is None or spec.memory_reported_gib == spec.memory_gib:
        return ""
    return f" (as CUDA reports it; the part lists {spec.memory_gib:g})"


def _kv_bytes(ctx: Ctx, util: float, usable: float, overhead: float) -> float:
    """Bytes per KV element (vLLM's default: the model's dtype, "auto"; FP8 only when asked for), with the
    usable-memory and KV reasons."""
    model, hw, spec = ctx.model, ctx.hw, ctx.spec
    kv_dtype = ctx.kv_cache_dtype or "auto"
    if kv_dtype not in ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16"):
        raise UserInputError(f"Unknown kv_cache_dtype {kv_dtype!r}; use auto or fp8.")
    if kv_dtype.startswith("fp8") and not spec.supports_fp8_kv:
        ctx.warnings.append(
            f"{spec.name} has no FP8 hardware: an FP8 KV cache is stored in FP8 but computed in 16 bits "
            "(slower attention); use kv_cache_dtype auto unless memory is the limit."
        )
    kv_bytes = 1.0 if kv_dtype.startswith("fp8") else 2.0
    kv_label = "FP8" if kv_bytes == 1 else "16-bit"
    ctx.reasons.append(
        f"Usable memory per GPU: {hw.unit_memory_gib:g} GiB{_as_reported(ctx)} x {util:g} "
        f"(gpu_memory_utilization) = {fmt_gib(usable)}; overhead {fmt_gib(overhead)} per GPU "
        "(activations, CUDA graphs, runtime)."
    )
    ctx.reasons.append(
        f"KV cache in {kv_label} ({'auto: the model dtype, vLLM default' if ctx.kv_cache_dtype is None else kv_dtype}): "
        f"{model.kv_bytes_per_token(kv_bytes):,} bytes per token "
        f"({model.attention_kind.value.upper()}, {model.num_layers} layers"
        + (
            f", {model.sliding_window_layers} of them sliding over {model.sliding_window:,} tokens"
            if model.sliding_window
            else ""
        )
        + ")."
    )
    return kv_bytes


def _valid_tps(ctx: Ctx) -> list[int] | Recommendation:
    """The tensor-parallel degrees to try (the given one when valid), or the refusal when none is."""
    model, hw = ctx.model, ctx.hw
    valid = valid_gpu_tps(model, hw.units)
    if ctx.tp is not None:
        if ctx.tp > hw.units:
            return tp_beyond_units(ctx, "GPUs", tp_advice(ctx.instance.name, valid, "GPUs"))
        if ctx.tp not in valid:
            return refuse(
                ctx,
                RefusalCode.no_valid_tensor_parallel,
                f"Tensor parallel {ctx.tp} does not divide {model.num_attention_heads} attention"
                + ("" if model.mla else f" and {model.num_kv_heads} KV")
                + " heads (vLLM needs both to split evenly).",
                [tp_advice(ctx.instance.name, valid, "GPUs")],
            )
        return [ctx.tp]
    if not valid:
        return refuse(
            ctx,
            RefusalCode.no_valid_tensor_parallel,
            f"No tensor-parallel degree up to {hw.units} divides {model.num_attention_heads} attention and "
            f"{model.num_kv_heads} KV heads.",
            ["Choose an instance with a GPU count that divides the heads."],
        )
    return valid


def tp_beyond_units(ctx: Ctx, units: str, way_forward: str) -> Recommendation:
    """The refusal of a tensor-parallel degree above the instance's ``units`` (GPUs, NeuronCores)."""
    return refuse(
        ctx,
        RefusalCode.no_valid_tensor_parallel,
        f"Tensor parallel {ctx.tp} needs {ctx.tp} {units}; {ctx.instance.name} has {ctx.hw.units}.",
        [way_forward],
    )


def _first_fit(
    ctx: Ctx,
    formats: list[WeightFormat],
    usable: float,
    overhead: float,
    valid: list[int],
    kv_bytes: float,
) -> tuple[WeightFormat, Fit] | Recommendation:
    """The first weight format (in the order given) that fits at a valid TP, each try recorded in
    ``ctx.attempts``; the refusal when none does."""
    model, hw, spec = ctx.model, ctx.hw, ctx.spec
    need = ctx.max_model_len or MIN_CONTEXT
    need = min(need, model.max_position_embeddings) if ctx.max_model_len is None else need
    for fmt in formats:
        fit, why = fit_units(ctx, fmt, usable, overhead, valid, kv_bytes, need, "GPU")
        wb_total = weight_bytes(model, fmt).total
        if fit is None:
            ctx.attempts.append(Attempt(weight_format=fmt.name, fits=False, reason=why))
            continue
        ctx.attempts.append(
            Attempt(
                weight_format=fmt.name,
                fits=True,
                tensor_parallel_size=fit.tp,
                max_model_len=min(fit.max_tokens, model.max_position_embeddings),
                reason=f"{fmt_gib(wb_total)} of weights over {fit.tp} GPU(s)",
            )
        )
        return fmt, fit
    native_fit = ctx.attempts[0].reason if ctx.attempts else ""
    code = RefusalCode.does_not_fit
    if ctx.max_model_len is not None:
        code = RefusalCode.context_does_not_fit
    tried = ", ".join(a.weight_format for a in ctx.attempts)
    return refuse(
        ctx,
        code,
        f"{model.name} does not fit {ctx.instance.name} ({hw.units} x {spec.name}, {hw.unit_memory_gib:g} GiB each)"
        + (f" with a {need:,}-token context" if ctx.max_model_len else "")
        + f" in any of: {tried}. {native_fit}.",
        gpu_way_forward(ctx, spec.fp8_tflops is not None),
    )


def _explain_fit(ctx: Ctx, fmt: WeightFormat, fit: Fit, usable: float, valid: list[int]) -> None:
    """The weights, precision and tensor-parallel reasons (and warnings) of the chosen fit."""
    model, hw = ctx.model, ctx.hw
    wb = weight_bytes(model, fmt)
    ctx.reasons.insert(
        0,
        f"Weights: {fmt_gib(wb.total)} in {fmt.label} ({params_b(model.parameters.total)} parameters"
        + (f", {params_b(model.parameters.active)} active per token" if model.is_moe else "")
        + (", size of the checkpoint files" if wb.from_checkpoint else "")
        + ").",
    )
    if fmt.online:
        native_attempt = ctx.attempts[0]
        ctx.warnings.append(
            f"{model.name} does not fit in {native_format(model).label} ({native_attempt.reason}); "
            f"it fits with {fmt.label} weight quantization, which can cost some accuracy."
            if ctx.quantization is None
            else f"Weights quantized to {fmt.label} at load time, as asked."
        )
    min_units = max(1, math.ceil(wb.total / usable))
    if ctx.tp is not None:
        ctx.reasons.append(
            f"Tensor parallel {fit.tp} as given ({min_units} GPU(s) would hold the weights); the KV budget "
            "and max_num_seqs are computed for it."
        )
    else:
        ctx.reasons.append(
            f"Tensor parallel {fit.tp}: the smallest power of two >= ceil({fmt_gib(wb.total)} / "
            f"{fmt_gib(usable)}) = {min_units} that divides {model.num_attention_heads} attention"
            + ("" if model.mla else f" and {model.num_kv_heads} KV")
            + " heads and leaves room for the KV cache"
            + (
                f" of {USEFUL_SEQS} sequences of {min(USEFUL_CONTEXT, model.max_position_embeddings):,} tokens"
                if ctx.max_model_len is None and fit.tp > min_units
                else ""
            )
            + f" (valid on {hw.units} GPU(s): {', '.join(map(str, valid))})."
        )
    if model.mla is not None and fit.tp > 1:
        ctx.reasons.append("MLA's latent KV cache is replicated on every rank, so TP does not split it.")


def _memory_budget(
    ctx: Ctx, fmt: WeightFormat, fit: Fit, util: float, usable: float, kv_bytes: float
) -> MemoryBudget:
    """The memory budget of the chosen fit, with the host-RAM reason or warning for loading."""
    wb = weight_bytes(ctx.model, fmt)
    host = ctx.instance.memory_gib
    share = host_allocatable_share(host)
    peak = host_load_peak_bytes(wb.total)
    if peak > host * share * GIB:
        # A warning, not a refusal: vLLM memory-maps safetensors shards and copies them to the GPU one at a
        # time, so the real peak is far below the seed's weights x 1.08 + 2 GiB (which would refuse, e.g.,
        # an 8B model on g5.xlarge that loads fine in practice).
        ctx.warnings.append(
            f"Host RAM is tight for loading: the conservative peak is {fmt_gib(peak)} (weights x 1.08 + 2 GiB) "
            f"and {host * share:.1f} GiB of {host:g} GiB is allocatable. vLLM loads safetensors shard by shard, "
            "which usually fits; a checkpoint in few large shards or the model streamer may not."
        )
    else:
        ctx.reasons.append(
            f"Host RAM: loading peaks at about {fmt_gib(peak)}, within the {host * share:.1f} GiB allocatable."
        )
    return units_budget(ctx, fit, usable, kv_bytes, unit="gpu", utilization=util, host_peak_gib=gib(peak))


def units_budget(
    ctx: Ctx,
    fit: Fit,
    usable: float,
    kv_bytes: float,
    *,
    unit: Literal["gpu", "neuron_core"],
    utilization: float,
    host_peak_gib: float,
) -> MemoryBudget:
    """The memory budget of a fit over ``fit.tp`` units of accelerator memory (GPUs or NeuronCores, ``usable``
    bytes each): what one unit holds times the units, and the host's RAM."""
    model, host = ctx.model, ctx.instance.memory_gib
    return MemoryBudget(
        unit=unit,
        units=fit.tp,
        unit_memory_gib=ctx.hw.unit_memory_gib,
        utilization=utilization,
        usable_gib=gib(usable * fit.tp),
        weights_gib=gib(fit.weights),
        overhead_gib=gib(fit.overhead_per_unit * fit.tp),
        kv_cache_gib=gib(fit.budget_per_unit * fit.tp),
        free_gib=0.0,
        kv_bytes_per_token=model.kv_bytes_per_token(kv_bytes),
        kv_cache_tokens=max_seq_tokens(model, fit.budget_per_unit, fit.tp, kv_bytes),
        host_memory_gib=host,
        host_allocatable_gib=round(host * host_allocatable_share(host), 2),
        host_peak_gib=host_peak_gib,
    )


def gpu_way_forward(ctx: Ctx, fp8_ok: bool) -> list[str]:
    out = []
    if ctx.quantization not in (None,) and ctx.model.quantization is None:
        chain = "fp8, int8 or int4" if fp8_ok else "int8 or int4"
        out.append(f"Leave quantization unset so the planner can try {chain}.")
    if ctx.max_model_len:
        out.append("Ask for a shorter max_model_len, or leave it unset to get the longest that fits.")
    out.append("Choose a larger instance (more GPUs or more memory per GPU).")
    return out
