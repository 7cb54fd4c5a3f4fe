"""Neuron recommendations: per-NeuronCore memory, power-of-two TP over the heads, BF16, supported architectures and the host RAM minimum."""

from __future__ import annotations

from accelbench.domain.model import ModelSpec
from accelbench.domain.recommendation import (
    Attempt,
    Recommendation,
    RefusalCode,
    ServingSettings,
)
from accelbench.plan.memory import (
    GIB,
    MIN_CONTEXT,
    NEURON_MEMORY_UTILIZATION,
    WeightFormat,
    native_format,
    neuron_min_host_gib,
    neuron_overhead_bytes,
    online_format,
    weight_bytes,
)
from accelbench.plan.recommend.gpu import accelerator_fit, tp_beyond_units, units_budget
from accelbench.plan.recommend.tier_steps import (
    NEURON_ARCHITECTURES,
    NEURON_MAX_NUM_SEQS,
    Ctx,
    Fit,
    context_and_batch,
    fit_units,
    fmt_gib,
    params_b,
    pow2_upto,
    refuse,
)


# --------------------------------------------------------------------------------------------- Neuron
def whole_instance_tp_ok(model: ModelSpec, units: int) -> bool:
    """TP over every NeuronCore: attention heads are padded to a multiple of it, and the KV heads are
    replicated to it, which needs one to divide the other."""
    kv = model.num_kv_heads
    return units >= 2 and (units % kv == 0 or kv % units == 0)


def recommend_neuron(ctx: Ctx) -> Recommendation:
    """vLLM on Neuron: the architectures and formats it serves, the TP degree over NeuronCores, the fit per
    core, the host RAM compiling needs, then the context and batch."""
    model, hw, spec = ctx.model, ctx.hw, ctx.spec
    refused = _unservable(ctx)
    if refused is not None:
        return refused
    if ctx.kv_cache_dtype and ctx.kv_cache_dtype != "auto":
        ctx.warnings.append("kv_cache_dtype is ignored on Neuron: the KV cache is BF16.")
    cores_per_device = spec.neuron_logical_cores or spec.neuron_cores or 2
    per_core = hw.unit_memory_gib * GIB
    usable = per_core * NEURON_MEMORY_UTILIZATION
    overhead = neuron_overhead_bytes(model)
    ctx.reasons.append(
        f"Neuron memory: {hw.units} NeuronCores ({ctx.instance.accelerator_count} x {spec.name}, "
        f"{cores_per_device} cores each) of {hw.unit_memory_gib:g} GiB; usable {fmt_gib(usable)} per core "
        f"(x {NEURON_MEMORY_UTILIZATION}); overhead {fmt_gib(overhead)} per core."
    )
    int8 = ctx.quantization == "int8"
    if int8:
        ctx.warnings.append(
            "INT8 weights on Neuron are predicted here, not deployed: accelbench's Neuron runtime serves BF16."
        )
    ctx.reasons.append(
        "INT8 weights, BF16 math and KV cache: NxD Inference's weight-only quantization stores the weights in "
        "INT8 and dequantises them per layer."
        if int8
        else "BF16 weights and KV cache."
    )
    valid = _tp_degrees(ctx)
    if isinstance(valid, Recommendation):
        return valid
    fmt = online_format("int8") if int8 else native_format(model)
    kv_bytes = 2.0
    need = ctx.max_model_len or MIN_CONTEXT
    fit, why = fit_units(ctx, fmt, usable, overhead, valid, kv_bytes, need, "NeuronCore")
    wb = weight_bytes(model, fmt)
    if fit is None:
        ctx.attempts.append(Attempt(weight_format=fmt.name, fits=False, reason=why))
        return refuse(
            ctx,
            RefusalCode.context_does_not_fit if ctx.max_model_len else RefusalCode.does_not_fit,
            f"{model.name} ({fmt_gib(wb.total)} in {fmt.label}) does not fit {ctx.instance.name}: {why}.",
            ["Choose a Neuron instance with more NeuronCores (candidates below), or a GPU instance."],
        )
    ctx.attempts.append(
        Attempt(weight_format=fmt.name, fits=True, tensor_parallel_size=fit.tp, reason=fmt.label)
    )
    weights_gib = wb.total / GIB
    min_host = neuron_min_host_gib(weights_gib)
    if ctx.instance.memory_gib < min_host:
        return refuse(
            ctx,
            RefusalCode.host_memory,
            f"Neuron compiles and loads the model through host RAM: {weights_gib:.1f} GiB of weights need at "
            f"least {min_host:.0f} GiB of host memory (max(64, size x 10 / log2(size + 2) + 32)); "
            f"{ctx.instance.name} has {ctx.instance.memory_gib:g} GiB.",
            ["Choose a larger Neuron instance (more host memory); candidates below."],
        )
    ctx.reasons.insert(
        0, f"Weights: {fmt_gib(wb.total)} in BF16 ({params_b(model.parameters.total)} parameters)."
    )
    pad = model.num_attention_heads % fit.tp != 0
    ctx.reasons.append(
        (
            f"Tensor parallel {fit.tp} as given."
            if ctx.tp is not None
            else f"Tensor parallel {fit.tp}: all {hw.units} NeuronCores of the instance, as Neuron deployments "
            "run (give --tensor-parallel-size for fewer)."
        )
        + (
            f" {model.num_attention_heads} attention heads are padded to "
            f"{-(-model.num_attention_heads // fit.tp) * fit.tp} to split over {fit.tp} cores."
            if pad
            else ""
        )
    )
    ctx.reasons.append(
        f"Host RAM {ctx.instance.memory_gib:g} GiB >= the {min_host:.0f} GiB Neuron needs to compile and load."
    )
    return _fitted(ctx, fit, fmt, usable, min_host)


def _unservable(ctx: Ctx) -> Recommendation | None:
    """The refusal for what vLLM on Neuron does not serve: the architecture, a quantized checkpoint, a format
    other than BF16 or INT8."""
    model = ctx.model
    mt = model.model_type
    if mt not in NEURON_ARCHITECTURES:
        return refuse(
            ctx,
            RefusalCode.unsupported_architecture,
            f"{model.name} ({model.architecture}, model type {mt}) is not among the architectures vLLM on "
            f"Neuron serves here ({', '.join(NEURON_ARCHITECTURES)}).",
            ["Choose a GPU or CPU instance, or a model of a supported architecture."],
        )
    if model.quantization is not None:
        return refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"Neuron serves BF16 only; this checkpoint is quantized ({model.quantization.scheme}).",
            [f"Use the unquantized BF16 checkpoint of {model.name}.", "Or choose a GPU instance."],
        )
    if ctx.quantization not in (None, "native", "int8"):
        return refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"Quantization {ctx.quantization} was asked for, but Neuron serves BF16, or INT8 weights "
            "(weight-only), here.",
            ["Leave quantization unset (BF16), or ask for int8.", "Or choose a GPU instance for fp8 / int4."],
        )
    return None


def _tp_degrees(ctx: Ctx) -> list[int] | Recommendation:
    """The TP degrees to try: the given one, else the largest valid one (every NeuronCore of the instance)."""
    model, hw = ctx.model, ctx.hw
    # NxD Inference pads attention heads to a multiple of the TP degree, so every instance's full NeuronCore
    # count is a valid degree (e.g. TP 24 on inf2.48xlarge for 32 heads); powers of two split them evenly.
    valid = sorted(
        {
            t
            for t in pow2_upto(hw.units)
            if model.num_attention_heads % t == 0 and (t >= 2 or model.num_kv_heads == 1)
        }
        | ({hw.units} if whole_instance_tp_ok(model, hw.units) else set())
    )
    if ctx.tp is not None:
        if ctx.tp > hw.units:
            way_forward = f"Give --tensor-parallel-size {hw.units} or less, or a larger Neuron instance."
            return tp_beyond_units(ctx, "NeuronCores", way_forward)
        if ctx.tp < 2 and model.num_kv_heads > 1:
            return refuse(
                ctx,
                RefusalCode.no_valid_tensor_parallel,
                "Neuron needs tensor parallel >= 2 for grouped KV heads.",
                [f"Use one of {', '.join(map(str, valid))}."],
            )
        valid = [ctx.tp]
    else:
        # What Neuron deployments run: every NeuronCore of the instance (the weights and the KV cache
        # spread over all of them, and each core's bandwidth adds up); the largest valid degree
        valid = valid[-1:]
    if not valid:
        return refuse(
            ctx,
            RefusalCode.no_valid_tensor_parallel,
            f"No power-of-two TP up to {hw.units} NeuronCores divides {model.num_attention_heads} heads "
            "(and Neuron needs TP >= 2 for grouped KV heads).",
            ["Choose an instance with more NeuronCores, or a GPU instance."],
        )
    return valid


def _fitted(ctx: Ctx, fit: Fit, fmt: WeightFormat, usable: float, min_host: float) -> Recommendation:
    """The fitting recommendation: context and batch, the memory per NeuronCore and the settings."""
    kv_bytes = 2.0
    max_len, seqs, c_max, in_len, out_len, more = context_and_batch(ctx, fit, kv_bytes, NEURON_MAX_NUM_SEQS)
    ctx.reasons += more
    memory = units_budget(
        ctx,
        fit,
        usable,
        kv_bytes,
        unit="neuron_core",
        utilization=NEURON_MEMORY_UTILIZATION,
        host_peak_gib=round(min_host, 2),
    )
    settings = ServingSettings(
        engine="vllm-neuron",
        max_num_batched_tokens=ctx.max_num_batched_tokens,
        tensor_parallel_size=fit.tp,
        max_model_len=max_len,
        max_num_seqs=seqs,
        dtype="bfloat16",
        weight_format=fmt.name,
        weight_bits=fmt.bits,
        quantization=fmt.online,
        neuron_cores=fit.tp,
        concurrency_at_max_len=c_max,
        default_input_len=in_len,
        default_output_len=out_len,
    )
    return accelerator_fit(ctx, settings, memory)
