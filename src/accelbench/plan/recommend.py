"""Recommendations: does a model fit an instance, with which engine settings, and why (GPU, Neuron, CPU).

``recommend(model, instance)`` answers with a ``Recommendation``: ``fits``, the settings a deployment uses,
the memory budget, every decision in plain words (``reasons``), ``warnings``, and for a refusal its cause and
a way forward (quantization, a larger instance found in the catalog).

Rules follow the seed platform (SEED-SYSTEM-FACTS, Recommender); where we differ, the comment says why:
- GPU: TP is the smallest power of two >= ceil(weights / usable) that divides the attention and KV heads and
  leaves room for at least the requested (or 512-token) context; quantization fallback fp8 (GPUs with FP8)
  then int8 then int4, pre-quantized checkpoints keep their method; then the cheapest larger instance.
- Neuron: per-NeuronCore memory x 0.85, power-of-two TP dividing the heads (>= 2 when kv_heads > 1), BF16
  only, supported architectures, host RAM minimum.
- CPU: host RAM is the serving memory; the KV-cache space is the exact VLLM_CPU_KVCACHE_SPACE; TP = NUMA
  nodes; BF16; dense unquantized > 13e9 parameters refused with W8A8 / W4A8 alternatives; every answer
  carries a memory-bandwidth advisory.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accelbench.domain.catalog import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.domain.limits import CPU_DENSE_CEILING, CPU_DENSE_WARN
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan import (
    Alternative,
    Attempt,
    BandwidthAdvisory,
    EfficiencyFactors,
    MemoryBudget,
    Recommendation,
    Refusal,
    RefusalCode,
    ServingSettings,
    Verdict,
)
from accelbench.domain.quant import parse_quantization as normalize_quantization
from accelbench.errors import UserInputError
from accelbench.plan.hardware import Hardware, default_factors, hardware_for
from accelbench.plan.memory import (
    GIB,
    GPU_MEMORY_UTILIZATION,
    MIN_CONTEXT,
    NEURON_MEMORY_UTILIZATION,
    WeightFormat,
    default_lengths,
    host_allocatable_share,
    host_load_peak_bytes,
    max_seq_tokens,
    native_format,
    neuron_min_host_gib,
    neuron_overhead_bytes,
    online_format,
    overhead_bytes,
    round_down_length,
    seed_cpu_kv_space_gib,
    seq_kv_bytes_per_rank,
    weight_bytes,
)

if TYPE_CHECKING:
    from accelbench.catalog import Catalog

USEFUL_CONTEXT = 8192  # a context worth choosing a larger TP for
USEFUL_SEQS = 4
CPU_KV_MIN = 4  # GiB: the seed's floor, used to judge whether a W8A8 / W4A8 alternative would fit
GPU_MAX_NUM_SEQS = 256  # vLLM's default on most GPUs; KV capacity lowers it
CPU_MAX_NUM_SEQS = 64  # seed clamp: CPU throughput saturates early, larger batches only raise TPOT
NEURON_MAX_NUM_SEQS = 64
NEURON_ARCHITECTURES = ("llama", "mistral", "mixtral", "qwen2", "gemma", "gemma2", "phi", "phi3")
CPU_FAMILY_NAMES = {
    "9g": "Graviton5",
    "8g": "Graviton4",
    "7g": "Graviton3",
    "7i": "Xeon-SPR",
    "8i": "Xeon-GNR",
}


def gib(x: float) -> float:
    return round(x / GIB, 2)


def _fmt_gib(x: float) -> str:
    return f"{x / GIB:,.2f} GiB"


@dataclass
class _Ctx:
    model: ModelSpec
    instance: InstanceType
    spec: AcceleratorSpec
    hw: Hardware
    quantization: str | None
    max_model_len: int | None
    kv_cache_dtype: str | None
    input_len: int | None
    output_len: int | None
    factors: EfficiencyFactors | None
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)


def accelerator_name(instance: InstanceType) -> str:
    """The instance's accelerator name; for CPU rows without one, the generation from the family suffix."""
    if instance.accelerator_name:
        return instance.accelerator_name
    for suffix, name in CPU_FAMILY_NAMES.items():
        if instance.family.endswith(suffix):
            return name
    return instance.family


def _base(ctx: _Ctx, *, fits: bool, verdict: Verdict) -> dict[str, object]:
    return {
        "model": ctx.model.name,
        "model_ref": ctx.model.ref,
        "instance": ctx.instance.name,
        "accelerator_type": ctx.instance.accelerator_type,
        "accelerator_name": accelerator_name(ctx.instance),
        "accelerator_count": ctx.instance.accelerator_count,
        "fits": fits,
        "verdict": verdict,
        "parameters": ctx.model.parameters.total,
        "active_parameters": ctx.model.parameters.active,
    }


def _refuse(
    ctx: _Ctx,
    code: RefusalCode,
    reason: str,
    way_forward: list[str],
    *,
    bandwidth: BandwidthAdvisory | None = None,
) -> Recommendation:
    return Recommendation(
        **_base(ctx, fits=False, verdict=Verdict.refused),
        reasons=[*ctx.reasons, reason],
        warnings=ctx.warnings,
        refusal=Refusal(code=code, reason=reason, way_forward=way_forward),
        attempts=ctx.attempts,
        bandwidth=bandwidth,
    )


def _pow2_upto(n: int) -> list[int]:
    out, t = [], 1
    while t <= n:
        out.append(t)
        t *= 2
    return out


def _params_b(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.0f} M"


# --------------------------------------------------------------------------------------------- public
def resolve_instance(
    instance: InstanceType | str, catalog: Catalog | None = None
) -> tuple[InstanceType, Catalog]:
    """An instance row from a name (catalog lookup with did-you-mean) or the row itself, and the catalog."""
    if catalog is None:
        from accelbench.catalog import get_catalog

        catalog = get_catalog()
    if isinstance(instance, str):
        return catalog.instance(instance), catalog
    return instance, catalog


def recommend(
    model: ModelSpec,
    instance: InstanceType | str,
    *,
    quantization: str | None = None,
    max_model_len: int | None = None,
    kv_cache_dtype: str | None = None,
    input_len: int | None = None,
    output_len: int | None = None,
    spec: AcceleratorSpec | None = None,
    catalog: Catalog | None = None,
    suggest_alternatives: bool = True,
    factors: EfficiencyFactors | None = None,
) -> Recommendation:
    """Whether ``model`` fits ``instance`` and with which settings.

    ``quantization``: None/"auto" tries the fallback chain (GPU); "none" keeps the checkpoint's format;
    "fp8"/"int8"/"int4" asks for one. ``max_model_len`` asks for a context length (refused if it cannot
    fit). ``kv_cache_dtype``: "auto" or "fp8" (GPU). ``input_len``/``output_len`` size the batch (default:
    the seed's lengths for the max length). ``spec`` defaults to the catalog's spec of the instance's
    accelerator. ``suggest_alternatives`` searches the catalog for instances that fit when this one does not.
    ``factors`` are the efficiency factors of the CPU bandwidth advisory (default: the cited ones).
    """
    if max_model_len is not None and max_model_len < 16:
        raise UserInputError(f"max_model_len {max_model_len} is too small; give at least 16 tokens.")
    q = normalize_quantization(quantization)
    cat = catalog
    if isinstance(instance, str):
        from accelbench.plan.hardware import LOCAL_INSTANCE, local_machine

        if instance.strip().lower() == LOCAL_INSTANCE:
            instance, spec = local_machine()
        else:
            instance, cat = resolve_instance(instance, cat)
    if spec is None:
        if cat is None:
            from accelbench.catalog import get_catalog

            cat = get_catalog()
        spec = cat.accelerator(instance.accelerator_name)
    ctx = _Ctx(
        model=model,
        instance=instance,
        spec=spec,
        hw=hardware_for(instance, spec),
        quantization=q,
        max_model_len=max_model_len,
        kv_cache_dtype=(kv_cache_dtype or None),
        input_len=input_len,
        output_len=output_len,
        factors=factors,
    )
    if not model.is_generative:
        rec = _refuse(
            ctx,
            RefusalCode.non_generative,
            f"{model.name} is not a text-generation model: {model.task_reason or model.task.value}. "
            "accelbench plans LLM serving (token generation).",
            [
                "Serve embedding or classification models with an engine's pooling mode "
                "(e.g. vLLM --task embed / classify); accelbench does not size those.",
                "Pick a generative model (a ...ForCausalLM checkpoint or a preset: `accelbench model presets`).",
            ],
        )
        return rec
    longest = (input_len or 0) + (output_len or 0)
    if longest > model.max_position_embeddings:
        return _refuse(
            ctx,
            RefusalCode.context_does_not_fit,
            f"A request of {input_len or 0:,} input"
            + (f" + {output_len:,} output" if output_len else "")
            + " tokens is longer than "
            f"{model.name}'s context of {model.max_position_embeddings:,} tokens: no instance can serve it.",
            [
                f"Keep input + output within {model.max_position_embeddings:,} tokens (for example input "
                f"{max(model.max_position_embeddings - (output_len or 0), 1):,} with this output).",
                "Or pick a model with a longer context.",
            ],
        )
    kind = instance.accelerator_type
    if kind == AcceleratorType.gpu:
        rec = _recommend_gpu(ctx)
    elif kind == AcceleratorType.neuron:
        rec = _recommend_neuron(ctx)
    else:
        rec = _recommend_cpu(ctx)
    if not rec.fits and suggest_alternatives and rec.refusal is not None:
        rec = _with_alternatives(rec, model, instance, q, max_model_len, cat)
    return rec


# --------------------------------------------------------------------------------------------- shared
def _formats(ctx: _Ctx, *, allow_fallback: bool, fp8_ok: bool) -> list[WeightFormat] | Recommendation:
    """Weight formats to try, in order, or a refusal when the request contradicts the checkpoint."""
    model, q = ctx.model, ctx.quantization
    native = native_format(model, "fp16" if q == "fp16" else None)
    pre = model.quantization
    if pre is not None:
        if q in (None, "native") or q == pre.method or (q in ("int8", "int4", "fp8") and _matches(pre, q)):
            ctx.reasons.append(
                f"The checkpoint is already quantized ({pre.scheme}); it is served in its own format."
            )
            return [native]
        return _refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"Quantization {q} was asked for, but the checkpoint is already quantized ({pre.scheme}); "
            "a quantized checkpoint cannot be re-quantized at load time.",
            [
                "Leave quantization unset to serve the checkpoint as it is.",
                f"Or start from the unquantized (BF16) checkpoint of {model.name} to quantize it to {q}.",
            ],
        )
    if q in ("awq", "gptq", "compressed-tensors"):
        return _refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"Quantization {q} needs a checkpoint quantized with {q}; {model.name} is a plain "
            f"{model.torch_dtype} checkpoint.",
            [f"Use a {q} checkpoint of this model, or ask for fp8 / int8 / int4 instead."],
        )
    if q in ("fp8", "int8", "int4"):
        return [online_format(q)]
    if q in ("native", "fp16"):
        return [native]
    chain = [native]
    if allow_fallback:
        if fp8_ok:
            chain.append(online_format("fp8"))
        chain += [online_format("int8"), online_format("int4")]
    return chain


def _matches(pre: object, q: str) -> bool:
    bits = getattr(pre, "bits", 16)
    method = getattr(pre, "method", "")
    return (q == "fp8" and method == "fp8") or (q == "int8" and bits == 8) or (q == "int4" and bits == 4)


@dataclass
class _Fit:
    tp: int
    weights: float  # all ranks
    overhead_per_unit: float
    budget_per_unit: float  # KV bytes per rank
    max_tokens: int  # longest single sequence that fits


def _fit_units(
    ctx: _Ctx,
    fmt: WeightFormat,
    usable_per_unit: float,
    overhead_per_unit: float,
    valid_tps: list[int],
    kv_bytes: float,
    need_ctx: int,
    unit_word: str,
) -> tuple[_Fit | None, str]:
    """The smallest valid TP whose per-unit memory holds its share of the weights, the overhead and the KV
    cache of one ``need_ctx``-token sequence.

    When no context was asked for, a TP that also leaves room for USEFUL_SEQS sequences of USEFUL_CONTEXT
    tokens is preferred over a smaller one that does not: the seed's plain "smallest TP" put a 70B model on
    4 of p4d's 8 GPUs with a 2,048-token context, when 8 GPUs give it 10x the KV cache.
    """
    wb = weight_bytes(ctx.model, fmt).total
    min_units = max(1, math.ceil(wb / usable_per_unit))
    if ctx.max_model_len is None:
        useful = min(USEFUL_CONTEXT, ctx.model.max_position_embeddings)
        for tp in valid_tps:
            if tp < min_units:
                continue
            budget = usable_per_unit - wb / tp - overhead_per_unit
            want = USEFUL_SEQS * seq_kv_bytes_per_rank(ctx.model, useful, tp, kv_bytes)
            if budget > 0 and budget * 0.9 >= want:
                tokens = max_seq_tokens(ctx.model, budget, tp, kv_bytes)
                return _Fit(tp, wb, overhead_per_unit, budget, tokens), ""
    tried: list[str] = []
    for tp in valid_tps:
        if tp < min_units:
            continue
        budget = usable_per_unit - wb / tp - overhead_per_unit
        if budget <= 0:
            tried.append(
                f"TP {tp}: weights and overhead need {_fmt_gib(wb / tp + overhead_per_unit)} per {unit_word}"
            )
            continue
        tokens = max_seq_tokens(ctx.model, budget, tp, kv_bytes)
        if tokens >= need_ctx:
            return _Fit(tp, wb, overhead_per_unit, budget, tokens), ""
        tried.append(f"TP {tp}: KV room for {tokens:,} tokens < {need_ctx:,}")
    largest = max(valid_tps) if valid_tps else 0
    if min_units > largest:
        why = (
            f"{fmt.label} weights ({_fmt_gib(wb)}) need at least {min_units} x {_fmt_gib(usable_per_unit)} "
            f"usable {unit_word}s; the instance offers {largest} valid"
        )
    else:
        why = "; ".join(tried) or "no valid tensor-parallel degree"
    return None, why


def _context_and_batch(
    ctx: _Ctx, fit: _Fit, kv_bytes: float, seq_cap: int
) -> tuple[int, int, int, int, int, list[str]]:
    """(max_model_len, max_num_seqs, concurrency_at_max_len, input_len, output_len, reasons)."""
    model = ctx.model
    reasons: list[str] = []
    model_max = model.max_position_embeddings
    requested = ctx.max_model_len
    if requested is not None:
        max_len = min(requested, model_max)
        if requested > model_max:
            ctx.warnings.append(
                f"max_model_len {requested:,} is beyond what {model.name} supports ({model_max:,}); "
                f"using {model_max:,}."
            )
    elif fit.max_tokens >= model_max:
        # The model's own length when it fits (the seed rounded this down too, e.g. 163840 -> 131072, which
        # throws away context the memory can hold).
        max_len = model_max
        reasons.append(f"Max model len {max_len:,}: the model's full context fits in the KV budget.")
    else:
        max_len = round_down_length(fit.max_tokens)
        reasons.append(
            f"Max model len {max_len:,}: the KV budget holds {fit.max_tokens:,} tokens of one sequence "
            f"(model supports {model_max:,}); rounded down to a standard length."
        )

    def conc(length: int) -> int:
        per_seq = seq_kv_bytes_per_rank(model, length, fit.tp, kv_bytes)
        return int(0.9 * fit.budget_per_unit / per_seq) if per_seq > 0 else seq_cap

    c_max = conc(max_len)
    if requested is None and c_max < 4:
        start = max_len
        while c_max < 4 and max_len > MIN_CONTEXT:
            max_len = round_down_length(max_len // 2) or MIN_CONTEXT
            c_max = conc(max_len)
        if max_len != start:
            reasons.append(
                f"Max model len halved from {start:,} to {max_len:,} so that at least 4 full-length "
                f"sequences fit ({c_max} do)."
            )
    d_in, d_out = default_lengths(max_len)
    in_len = ctx.input_len or d_in
    out_len = ctx.output_len or d_out
    typical = min(in_len + out_len, max_len)
    per_typical = seq_kv_bytes_per_rank(model, typical, fit.tp, kv_bytes)
    capacity = int(0.9 * fit.budget_per_unit / per_typical) if per_typical > 0 else seq_cap
    max_num_seqs = max(1, min(seq_cap, capacity))
    reasons.append(
        f"max_num_seqs {max_num_seqs}: the KV cache holds {capacity:,} requests of {in_len:,} + {out_len:,} "
        f"tokens (capped at {seq_cap}); {max(c_max, 0):,} at the full {max_len:,} tokens."
    )
    return max_len, max_num_seqs, max(0, c_max), in_len, out_len, reasons


def _verdict(ctx: _Ctx, max_len: int) -> Verdict:
    target = ctx.max_model_len or ctx.model.max_position_embeddings
    return Verdict.fits if max_len >= min(target, ctx.model.max_position_embeddings) else Verdict.clamped


# --------------------------------------------------------------------------------------------- GPU
def _valid_gpu_tps(model: ModelSpec, units: int) -> list[int]:
    return [
        t
        for t in _pow2_upto(units)
        if model.num_attention_heads % t == 0 and (model.mla is not None or model.num_kv_heads % t == 0)
    ]


def _recommend_gpu(ctx: _Ctx) -> Recommendation:
    model, hw, spec = ctx.model, ctx.hw, ctx.spec
    usable = hw.unit_memory_gib * GIB * GPU_MEMORY_UTILIZATION
    overhead = overhead_bytes(model)
    fp8_ok = spec.fp8_tflops is not None
    kv_dtype = ctx.kv_cache_dtype or ("fp8" if spec.supports_fp8_kv else "auto")
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
        f"Usable memory per GPU: {hw.unit_memory_gib:g} GiB x {GPU_MEMORY_UTILIZATION} "
        f"(gpu_memory_utilization) = {_fmt_gib(usable)}; overhead {_fmt_gib(overhead)} per GPU "
        "(activations, CUDA graphs, runtime)."
    )
    ctx.reasons.append(
        f"KV cache in {kv_label} ({'default on ' + spec.name + ', which has FP8 hardware' if ctx.kv_cache_dtype is None and kv_bytes == 1 else kv_dtype}): "
        f"{model.kv_bytes_per_token(kv_bytes):,} bytes per token "
        f"({model.attention_kind.value.upper()}, {model.num_layers} layers"
        + (
            f", {model.sliding_window_layers} of them sliding over {model.sliding_window:,} tokens"
            if model.sliding_window
            else ""
        )
        + ")."
    )
    valid = _valid_gpu_tps(model, hw.units)
    if not valid:
        return _refuse(
            ctx,
            RefusalCode.no_valid_tensor_parallel,
            f"No tensor-parallel degree up to {hw.units} divides {model.num_attention_heads} attention and "
            f"{model.num_kv_heads} KV heads.",
            ["Choose an instance with a GPU count that divides the heads."],
        )
    formats = _formats(ctx, allow_fallback=ctx.quantization is None, fp8_ok=fp8_ok)
    if isinstance(formats, Recommendation):
        return formats
    need = ctx.max_model_len or MIN_CONTEXT
    need = min(need, model.max_position_embeddings) if ctx.max_model_len is None else need
    chosen: tuple[WeightFormat, _Fit] | None = None
    for fmt in formats:
        fit, why = _fit_units(ctx, fmt, usable, overhead, valid, kv_bytes, need, "GPU")
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
                reason=f"{_fmt_gib(wb_total)} of weights over {fit.tp} GPU(s)",
            )
        )
        chosen = (fmt, fit)
        break
    if chosen is None:
        native_fit = ctx.attempts[0].reason if ctx.attempts else ""
        code = RefusalCode.does_not_fit
        if ctx.max_model_len is not None:
            code = RefusalCode.context_does_not_fit
        tried = ", ".join(a.weight_format for a in ctx.attempts)
        return _refuse(
            ctx,
            code,
            f"{model.name} does not fit {ctx.instance.name} ({hw.units} x {spec.name}, {hw.unit_memory_gib:g} GiB each)"
            + (f" with a {need:,}-token context" if ctx.max_model_len else "")
            + f" in any of: {tried}. {native_fit}.",
            _gpu_way_forward(ctx, fp8_ok),
        )
    fmt, fit = chosen
    wb = weight_bytes(model, fmt)
    ctx.reasons.insert(
        0,
        f"Weights: {_fmt_gib(wb.total)} in {fmt.label} ({_params_b(model.parameters.total)} parameters"
        + (f", {_params_b(model.parameters.active)} active per token" if model.is_moe else "")
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
    ctx.reasons.append(
        f"Tensor parallel {fit.tp}: the smallest power of two >= ceil({_fmt_gib(wb.total)} / "
        f"{_fmt_gib(usable)}) = {min_units} that divides {model.num_attention_heads} attention"
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
    max_len, seqs, c_max, in_len, out_len, more = _context_and_batch(ctx, fit, kv_bytes, GPU_MAX_NUM_SEQS)
    ctx.reasons += more
    host = ctx.instance.memory_gib
    share = host_allocatable_share(host)
    peak = host_load_peak_bytes(wb.total)
    if peak > host * share * GIB:
        # A warning, not a refusal: vLLM memory-maps safetensors shards and copies them to the GPU one at a
        # time, so the real peak is far below the seed's weights x 1.08 + 2 GiB (which would refuse, e.g.,
        # an 8B model on g5.xlarge that loads fine in practice).
        ctx.warnings.append(
            f"Host RAM is tight for loading: the conservative peak is {_fmt_gib(peak)} (weights x 1.08 + 2 GiB) "
            f"and {host * share:.1f} GiB of {host:g} GiB is allocatable. vLLM loads safetensors shard by shard, "
            "which usually fits; a checkpoint in few large shards or the model streamer may not."
        )
    else:
        ctx.reasons.append(
            f"Host RAM: loading peaks at about {_fmt_gib(peak)}, within the {host * share:.1f} GiB allocatable."
        )
    kv_total = fit.budget_per_unit * fit.tp
    memory = MemoryBudget(
        unit="gpu",
        units=fit.tp,
        unit_memory_gib=hw.unit_memory_gib,
        utilization=GPU_MEMORY_UTILIZATION,
        usable_gib=gib(usable * fit.tp),
        weights_gib=gib(wb.total),
        overhead_gib=gib(fit.overhead_per_unit * fit.tp),
        kv_cache_gib=gib(kv_total),
        free_gib=0.0,
        kv_bytes_per_token=model.kv_bytes_per_token(kv_bytes),
        kv_cache_tokens=max_seq_tokens(model, fit.budget_per_unit, fit.tp, kv_bytes),
        host_memory_gib=host,
        host_allocatable_gib=round(host * share, 2),
        host_peak_gib=gib(peak),
    )
    settings = ServingSettings(
        engine="vllm",
        tensor_parallel_size=fit.tp,
        max_model_len=max_len,
        max_num_seqs=seqs,
        dtype="float16" if fmt.name == "fp16" else "bfloat16",
        quantization=fmt.online,
        checkpoint_quantization=fmt.checkpoint_method,
        weight_format=fmt.name,
        weight_bits=fmt.bits,
        kv_cache_dtype="fp8" if kv_bytes == 1 else "auto",
        gpu_memory_utilization=GPU_MEMORY_UTILIZATION,
        concurrency_at_max_len=c_max,
        default_input_len=in_len,
        default_output_len=out_len,
    )
    verdict = _verdict(ctx, max_len)
    return Recommendation(
        **_base(ctx, fits=True, verdict=verdict),
        settings=settings,
        memory=memory,
        reasons=ctx.reasons,
        warnings=ctx.warnings,
        attempts=ctx.attempts,
    )


def _gpu_way_forward(ctx: _Ctx, fp8_ok: bool) -> list[str]:
    out = []
    if ctx.quantization not in (None,) and ctx.model.quantization is None:
        chain = "fp8, int8 or int4" if fp8_ok else "int8 or int4"
        out.append(f"Leave quantization unset so the planner can try {chain}.")
    if ctx.max_model_len:
        out.append("Ask for a shorter max_model_len, or leave it unset to get the longest that fits.")
    out.append("Choose a larger instance (more GPUs or more memory per GPU); candidates are listed below.")
    return out


# --------------------------------------------------------------------------------------------- Neuron
def _recommend_neuron(ctx: _Ctx) -> Recommendation:
    model, hw, spec = ctx.model, ctx.hw, ctx.spec
    mt = model.model_type
    if mt not in NEURON_ARCHITECTURES:
        return _refuse(
            ctx,
            RefusalCode.unsupported_architecture,
            f"{model.name} ({model.architecture}, model type {mt}) is not among the architectures vLLM on "
            f"Neuron serves here ({', '.join(NEURON_ARCHITECTURES)}).",
            ["Choose a GPU or CPU instance, or a model of a supported architecture."],
        )
    if model.quantization is not None:
        return _refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"Neuron serves BF16 only; this checkpoint is quantized ({model.quantization.scheme}).",
            [f"Use the unquantized BF16 checkpoint of {model.name}.", "Or choose a GPU instance."],
        )
    if ctx.quantization not in (None, "native"):
        return _refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"Quantization {ctx.quantization} was asked for, but Neuron serves BF16 only here.",
            ["Leave quantization unset (BF16).", "Or choose a GPU instance for fp8 / int8 / int4."],
        )
    if ctx.kv_cache_dtype and ctx.kv_cache_dtype != "auto":
        ctx.warnings.append("kv_cache_dtype is ignored on Neuron: the KV cache is BF16.")
    cores_per_device = spec.neuron_logical_cores or spec.neuron_cores or 2
    per_core = hw.unit_memory_gib * GIB
    usable = per_core * NEURON_MEMORY_UTILIZATION
    overhead = neuron_overhead_bytes(model)
    ctx.reasons.append(
        f"Neuron memory: {hw.units} NeuronCores ({ctx.instance.accelerator_count} x {spec.name}, "
        f"{cores_per_device} cores each) of {hw.unit_memory_gib:g} GiB; usable {_fmt_gib(usable)} per core "
        f"(x {NEURON_MEMORY_UTILIZATION}); overhead {_fmt_gib(overhead)} per core."
    )
    ctx.reasons.append("BF16 weights and KV cache: Neuron serves BF16 only here.")
    valid = [
        t
        for t in _pow2_upto(hw.units)
        if model.num_attention_heads % t == 0 and (t >= 2 or model.num_kv_heads == 1)
    ]
    if not valid:
        return _refuse(
            ctx,
            RefusalCode.no_valid_tensor_parallel,
            f"No power-of-two TP up to {hw.units} NeuronCores divides {model.num_attention_heads} heads "
            "(and Neuron needs TP >= 2 for grouped KV heads).",
            ["Choose an instance with more NeuronCores, or a GPU instance."],
        )
    fmt = native_format(model)
    kv_bytes = 2.0
    need = ctx.max_model_len or MIN_CONTEXT
    fit, why = _fit_units(ctx, fmt, usable, overhead, valid, kv_bytes, need, "NeuronCore")
    wb = weight_bytes(model, fmt)
    if fit is None:
        ctx.attempts.append(Attempt(weight_format=fmt.name, fits=False, reason=why))
        return _refuse(
            ctx,
            RefusalCode.context_does_not_fit if ctx.max_model_len else RefusalCode.does_not_fit,
            f"{model.name} ({_fmt_gib(wb.total)} in BF16) does not fit {ctx.instance.name}: {why}.",
            ["Choose a Neuron instance with more NeuronCores (candidates below), or a GPU instance."],
        )
    ctx.attempts.append(
        Attempt(weight_format=fmt.name, fits=True, tensor_parallel_size=fit.tp, reason="BF16")
    )
    weights_gib = wb.total / GIB
    min_host = neuron_min_host_gib(weights_gib)
    if ctx.instance.memory_gib < min_host:
        return _refuse(
            ctx,
            RefusalCode.host_memory,
            f"Neuron compiles and loads the model through host RAM: {weights_gib:.1f} GiB of weights need at "
            f"least {min_host:.0f} GiB of host memory (max(64, size x 10 / log2(size + 2) + 32)); "
            f"{ctx.instance.name} has {ctx.instance.memory_gib:g} GiB.",
            ["Choose a larger Neuron instance (more host memory); candidates below."],
        )
    ctx.reasons.insert(
        0, f"Weights: {_fmt_gib(wb.total)} in BF16 ({_params_b(model.parameters.total)} parameters)."
    )
    ctx.reasons.append(
        f"Tensor parallel {fit.tp}: the smallest power of two that divides {model.num_attention_heads} "
        f"heads, is >= 2 for grouped KV heads and holds the weights ({', '.join(map(str, valid))} valid)."
    )
    ctx.reasons.append(
        f"Host RAM {ctx.instance.memory_gib:g} GiB >= the {min_host:.0f} GiB Neuron needs to compile and load."
    )
    max_len, seqs, c_max, in_len, out_len, more = _context_and_batch(ctx, fit, kv_bytes, NEURON_MAX_NUM_SEQS)
    ctx.reasons += more
    host = ctx.instance.memory_gib
    memory = MemoryBudget(
        unit="neuron_core",
        units=fit.tp,
        unit_memory_gib=hw.unit_memory_gib,
        utilization=NEURON_MEMORY_UTILIZATION,
        usable_gib=gib(usable * fit.tp),
        weights_gib=gib(wb.total),
        overhead_gib=gib(overhead * fit.tp),
        kv_cache_gib=gib(fit.budget_per_unit * fit.tp),
        free_gib=0.0,
        kv_bytes_per_token=model.kv_bytes_per_token(kv_bytes),
        kv_cache_tokens=max_seq_tokens(model, fit.budget_per_unit, fit.tp, kv_bytes),
        host_memory_gib=host,
        host_allocatable_gib=round(host * host_allocatable_share(host), 2),
        host_peak_gib=round(min_host, 2),
    )
    settings = ServingSettings(
        engine="vllm-neuron",
        tensor_parallel_size=fit.tp,
        max_model_len=max_len,
        max_num_seqs=seqs,
        dtype="bfloat16",
        weight_format="bf16",
        weight_bits=16,
        neuron_cores=fit.tp,
        concurrency_at_max_len=c_max,
        default_input_len=in_len,
        default_output_len=out_len,
    )
    return Recommendation(
        **_base(ctx, fits=True, verdict=_verdict(ctx, max_len)),
        settings=settings,
        memory=memory,
        reasons=ctx.reasons,
        warnings=ctx.warnings,
        attempts=ctx.attempts,
    )


# --------------------------------------------------------------------------------------------- CPU
CPU_QUANT = {"int8": "W8A8", "int4": "W4A8"}


def bandwidth_advisory(
    model: ModelSpec,
    hw: Hardware,
    weights: float,
    kv_tokens: int,
    factors: EfficiencyFactors,
) -> BandwidthAdvisory:
    """Bytes one decode step reads at batch 1 over what the CPU can stream: a floor under TPOT."""
    active_share = model.parameters.active / model.parameters.total if model.parameters.total else 1.0
    per_step = weights * active_share + model.kv_bytes_for_tokens(kv_tokens, 2)
    achievable = factors.bandwidth_efficiency * min(hw.socket_bandwidth_gbps, hw.cores_bandwidth_gbps)
    floor_ms = per_step / (achievable * 1e9) * 1000 if achievable > 0 else math.inf
    limited = "cores" if hw.cores_bandwidth_gbps < hw.socket_bandwidth_gbps else "socket"
    why = (
        f"its {hw.physical_cores} cores pull about {hw.cores_bandwidth_gbps:,.0f} GB/s, less than the "
        f"{hw.sockets} socket(s)' {hw.socket_bandwidth_gbps:,.0f} GB/s"
        if limited == "cores"
        else f"the {hw.sockets} socket(s) peak at {hw.socket_bandwidth_gbps:,.0f} GB/s, less than its "
        f"{hw.physical_cores} cores could pull ({hw.cores_bandwidth_gbps:,.0f} GB/s)"
    )
    message = (
        f"Decode on a CPU is memory-bandwidth-bound: every output token reads {per_step / 1e9:.2f} GB "
        f"({'active ' if model.is_moe else ''}weights + one KV cache of {kv_tokens:,} tokens). "
        f"This instance reaches about {achievable:,.0f} GB/s ({factors.bandwidth_efficiency:.0%} of "
        f"{min(hw.socket_bandwidth_gbps, hw.cores_bandwidth_gbps):,.0f} GB/s: {why}), so TPOT cannot go "
        f"below {floor_ms:.1f} ms (at most {1000 / floor_ms:.1f} tokens/s per sequence)."
    )
    return BandwidthAdvisory(
        bytes_per_token=int(per_step),
        socket_bandwidth_gbps=round(hw.socket_bandwidth_gbps, 1),
        cores_bandwidth_gbps=round(hw.cores_bandwidth_gbps, 1),
        achievable_bandwidth_gbps=round(achievable, 1),
        limited_by=limited,
        tpot_floor_ms=round(floor_ms, 3),
        tokens_per_s_ceiling=round(1000 / floor_ms, 2),
        message=message,
    )


def _recommend_cpu(ctx: _Ctx) -> Recommendation:
    model, hw, inst = ctx.model, ctx.hw, ctx.instance
    factors = ctx.factors or default_factors("cpu", "vllm-cpu")
    host = inst.memory_gib
    share = host_allocatable_share(host)
    allocatable = host * share * GIB
    overhead = overhead_bytes(model)
    q, pre = ctx.quantization, model.quantization
    ctx.reasons.append(
        f"CPU instance: host RAM is the serving memory. Allocatable: {host:g} GiB x {share} = "
        f"{host * share:.2f} GiB (0.92 of hosts >= 64 GiB, else 0.85)."
    )
    if ctx.kv_cache_dtype and ctx.kv_cache_dtype != "auto":
        ctx.warnings.append("kv_cache_dtype is GPU-only and is not set on CPU (the KV cache is BF16).")
    # ---- weight format
    if pre is not None:
        method = pre.method
        if method == "compressed-tensors" and not pre.scheme.startswith("FP"):
            fmt = native_format(model)
            ctx.reasons.append(f"Pre-quantized {pre.scheme} checkpoint: compressed-tensors has CPU kernels.")
        elif method in ("awq", "gptq") and inst.arch == "x86_64":
            fmt = native_format(model)
            ctx.warnings.append(
                f"{pre.scheme} on CPU runs on x86 weight-only kernels that are slower than W8A8; a "
                "compressed-tensors W8A8 checkpoint is the better CPU format."
            )
        else:
            return _refuse(
                ctx,
                RefusalCode.unsupported_quantization,
                f"vLLM on CPU has no kernels for this checkpoint's quantization ({pre.scheme}"
                + (f" on {inst.arch}" if method in ("awq", "gptq") else "")
                + ").",
                [
                    f"Use the BF16 checkpoint of {model.name}, or a compressed-tensors W8A8 / W4A8 one.",
                    "GGUF files serve on CPUs with the llamacpp runtime."
                    if method == "gguf"
                    else "Or choose a GPU instance.",
                ],
            )
        if q not in (None, "native") and not _matches(pre, q):
            return _refuse(
                ctx,
                RefusalCode.unsupported_quantization,
                f"Quantization {q} was asked for, but the checkpoint is already {pre.scheme}.",
                ["Leave quantization unset to serve the checkpoint as it is."],
            )
    elif q == "fp8":
        return _refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            "FP8 weights have no CPU kernels in vLLM.",
            [
                "Use int8 (a compressed-tensors W8A8 checkpoint) or int4 (W4A8) on CPU.",
                "Or choose a GPU with FP8 (L4, L40S, H100, H200, B200).",
            ],
        )
    elif q in ("int8", "int4"):
        fmt = online_format(q)
        ctx.reasons.append(
            f"{q} on CPU means a compressed-tensors {CPU_QUANT[q]} checkpoint (vLLM has CPU kernels for it); "
            f"the runtime passes --quantization compressed-tensors."
        )
        ctx.warnings.append(
            f"Serve a {CPU_QUANT[q]} compressed-tensors checkpoint of {model.name}; vLLM on CPU does not "
            "quantize BF16 weights at load time."
        )
    elif q in ("awq", "gptq", "compressed-tensors"):
        return _refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"Quantization {q} needs a checkpoint quantized with it; {model.name} is not.",
            ["Use such a checkpoint, or ask for int8 / int4 (compressed-tensors W8A8 / W4A8)."],
        )
    else:
        fmt = native_format(model)
        if q == "fp16":
            ctx.warnings.append("FP16 is unstable on CPU; the weights are served in BF16.")
            fmt = native_format(model)
    wb = weight_bytes(model, fmt)
    ctx.reasons.insert(
        0,
        f"Weights: {_fmt_gib(wb.total)} in {fmt.label} ({_params_b(model.parameters.total)} parameters"
        + (f", {_params_b(model.parameters.active)} active per token" if model.is_moe else "")
        + ").",
    )
    ctx.reasons.append("dtype bfloat16: the CPU kernels are BF16 ones (FP16 is unstable on CPU).")
    # ---- the dense-model ceiling: speed, not memory
    size_params = model.parameters.active if model.is_moe else model.parameters.total
    if not fmt.quantized and size_params > CPU_DENSE_CEILING:
        adv = bandwidth_advisory(model, hw, wb.total, 1024, factors)
        alts = []
        for qq in ("int8", "int4"):
            b = weight_bytes(model, online_format(qq)).total
            fits_mem = b + overhead + CPU_KV_MIN * GIB <= allocatable
            alts.append(
                f"Serve a compressed-tensors {CPU_QUANT[qq]} checkpoint (quantization {qq}): weights "
                f"{_fmt_gib(b)}, {'fits' if fits_mem else 'does not fit'} this instance's memory."
            )
        alts.append("Or choose a GPU instance (candidates below).")
        what = "active parameters per token" if model.is_moe else "parameters"
        return _refuse(
            ctx,
            RefusalCode.dense_too_large_for_cpu,
            f"{model.name} has {_params_b(size_params)} {what} unquantized: above 13 B, CPU decode reads "
            f"{wb.total * (size_params / model.parameters.total) / 1e9:.0f} GB per token and is too slow to "
            f"serve ({adv.tpot_floor_ms:.0f} ms per token at best here).",
            alts,
            bandwidth=adv,
        )
    if not fmt.quantized and size_params >= CPU_DENSE_WARN:
        ctx.warnings.append(
            f"{_params_b(size_params)} parameters unquantized is heavy for a CPU: expect low tokens/s per "
            "request; a W8A8 (int8) checkpoint halves the bytes read per token."
        )
    # ---- tensor parallel = NUMA nodes
    tp = max(1, inst.numa_nodes)
    if tp > 1 and (model.num_attention_heads % tp or (model.mla is None and model.num_kv_heads % tp)):
        ctx.warnings.append(
            f"{model.num_attention_heads} attention / {model.num_kv_heads} KV heads do not split over "
            f"{tp} NUMA nodes: serving on one node (TP 1); the other socket's bandwidth stays unused."
        )
        tp = 1
    ctx.reasons.append(
        f"Tensor parallel {tp} = NUMA nodes ({inst.numa_nodes}): one rank per socket keeps its weights in local "
        "memory; threads inside a node come from OpenMP (VLLM_CPU_OMP_THREADS_BIND=auto)."
    )
    # ---- KV-cache space (exact VLLM_CPU_KVCACHE_SPACE)
    seed_kv = seed_cpu_kv_space_gib(host)
    left = allocatable - wb.total - overhead * tp
    # vLLM's CPU worker reserves VLLM_CPU_KVCACHE_SPACE per tensor-parallel rank (per NUMA node), so with
    # TP > 1 the host holds TP times that value.
    left_per_rank_gib = int(left / GIB / tp) if left > 0 else 0
    kv_space = min(seed_kv, left_per_rank_gib)
    adv = bandwidth_advisory(model, hw, wb.total, 1024, factors)
    if kv_space < 1:
        return _refuse(
            ctx,
            RefusalCode.does_not_fit,
            f"{model.name} does not fit {inst.name}: weights {_fmt_gib(wb.total)} + overhead "
            f"{_fmt_gib(overhead * tp)} "
            + (
                f"leave {left / GIB:.2f} GiB of the {host * share:.2f} GiB allocatable, less than the 1 GiB "
                "minimum KV cache per rank."
                if left > 0
                else f"exceed the {host * share:.2f} GiB allocatable by {-left / GIB:.2f} GiB."
            ),
            [
                "Choose a CPU instance with more memory (candidates below).",
                "Or serve a compressed-tensors W8A8 (int8) / W4A8 (int4) checkpoint.",
            ],
            bandwidth=adv,
        )
    ctx.reasons.append(
        f"KV-cache space {kv_space} GiB (VLLM_CPU_KVCACHE_SPACE, per rank): clamp(int({host:g} x {share} x "
        f"0.35), 4, 128) = {seed_kv} GiB"
        + (
            f", lowered to the {left_per_rank_gib} GiB the weights and overhead leave"
            if kv_space < seed_kv
            else ""
        )
        + "."
    )
    if kv_space < seed_kv:
        ctx.warnings.append(
            f"Only {kv_space} GiB is left for the KV cache after the weights (the rule gives {seed_kv}); "
            "long contexts and high concurrency will be limited."
        )
    kv_bytes_budget = kv_space * GIB
    fit = _Fit(tp, wb.total, overhead, kv_bytes_budget, max_seq_tokens(model, kv_bytes_budget, tp, 2.0))
    if ctx.max_model_len and fit.max_tokens < ctx.max_model_len:
        return _refuse(
            ctx,
            RefusalCode.context_does_not_fit,
            f"A {ctx.max_model_len:,}-token context needs {_fmt_gib(model.kv_bytes_for_tokens(ctx.max_model_len))} "
            f"of KV cache; {kv_space} GiB holds {fit.max_tokens:,} tokens.",
            ["Ask for a shorter max_model_len, or choose a CPU instance with more memory."],
            bandwidth=adv,
        )
    max_len, seqs, c_max, in_len, out_len, more = _context_and_batch(ctx, fit, 2.0, CPU_MAX_NUM_SEQS)
    # The seed's CPU concurrency: KV space / (KV per token x (input + output)), clamped 1..64.
    ctx.reasons += more
    adv = bandwidth_advisory(model, hw, wb.total, in_len + out_len, factors)
    ctx.warnings.append(adv.message)
    used = wb.total + overhead * tp + kv_bytes_budget * tp
    memory = MemoryBudget(
        unit="host",
        units=1,
        unit_memory_gib=host,
        utilization=share,
        usable_gib=round(host * share, 2),
        weights_gib=gib(wb.total),
        overhead_gib=gib(overhead * tp),
        kv_cache_gib=float(kv_space * tp),
        free_gib=gib(allocatable - used),
        kv_bytes_per_token=model.kv_bytes_per_token(2),
        kv_cache_tokens=fit.max_tokens,
        host_memory_gib=host,
        host_allocatable_gib=round(host * share, 2),
        host_peak_gib=gib(used),
    )
    settings = ServingSettings(
        engine="vllm-cpu",
        tensor_parallel_size=tp,
        max_model_len=max_len,
        max_num_seqs=seqs,
        dtype="bfloat16",
        quantization=fmt.online,
        checkpoint_quantization=fmt.checkpoint_method,
        weight_format=fmt.name,
        weight_bits=fmt.bits,
        kv_cache_space_gib=kv_space,
        omp_threads_bind="auto",
        concurrency_at_max_len=c_max,
        default_input_len=in_len,
        default_output_len=out_len,
    )
    return Recommendation(
        **_base(ctx, fits=True, verdict=_verdict(ctx, max_len)),
        settings=settings,
        memory=memory,
        bandwidth=adv,
        reasons=ctx.reasons,
        warnings=ctx.warnings,
        attempts=[
            Attempt(
                weight_format=fmt.name,
                fits=True,
                tensor_parallel_size=tp,
                max_model_len=max_len,
                reason="host RAM",
            )
        ],
    )


# --------------------------------------------------------------------------------------------- alternatives
def find_alternatives(
    model: ModelSpec,
    *,
    exclude: str | None = None,
    kind: AcceleratorType | None = None,
    quantization: str | None = None,
    max_model_len: int | None = None,
    catalog: Catalog | None = None,
    limit: int = 4,
) -> list[Alternative]:
    """Cheapest catalog instances that fit: the cheapest native and quantized ones of ``kind`` first, then the
    cheapest native one of every other kind."""
    if catalog is None:
        from accelbench.catalog import get_catalog

        catalog = get_catalog()
    fitting: list[tuple[float, Alternative]] = []
    for inst in catalog.instances:
        if inst.name == exclude:
            continue
        try:
            r = recommend(
                model,
                inst,
                quantization=quantization,
                max_model_len=max_model_len,
                catalog=catalog,
                suggest_alternatives=False,
            )
        except UserInputError:
            continue
        if not r.fits or r.settings is None:
            continue
        price = inst.on_demand_usd
        alt = Alternative(
            instance=inst.name,
            accelerator_type=inst.accelerator_type,
            accelerator_name=accelerator_name(inst),
            quantization=r.settings.quantization,
            tensor_parallel_size=r.settings.tensor_parallel_size,
            max_model_len=r.settings.max_model_len,
            hourly_usd=price,
            reason=(
                f"fits with {r.settings.weight_format} on {r.settings.tensor_parallel_size} unit(s), "
                f"{r.settings.max_model_len:,}-token context"
                + (f", ${price:.2f}/h" if price is not None else ", price unknown")
            ),
        )
        fitting.append((price if price is not None else math.inf, alt))
    fitting.sort(key=lambda x: x[0])
    picked: list[Alternative] = []

    def take(pred: Callable[[Alternative], bool]) -> None:
        for _, alt in fitting:
            if pred(alt) and alt not in picked:
                picked.append(alt)
                return

    if kind is not None:
        take(lambda a: a.accelerator_type == kind and a.quantization is None)
        take(lambda a: a.accelerator_type == kind and a.quantization is not None)
    for other in AcceleratorType:
        if other != kind:
            take(functools.partial(_native_of, other))
    return picked[:limit]


def _native_of(kind: AcceleratorType, alt: Alternative) -> bool:
    return alt.accelerator_type == kind and alt.quantization is None


def _with_alternatives(
    rec: Recommendation,
    model: ModelSpec,
    instance: InstanceType,
    quantization: str | None,
    max_model_len: int | None,
    catalog: Catalog | None,
) -> Recommendation:
    if rec.refusal is None or rec.refusal.code in (RefusalCode.non_generative,):
        return rec
    # A refusal for size or format on this tier is answered by the fallback chain on other instances;
    # otherwise the alternatives honour what was asked (a fixed quantization stays fixed).
    q: str | None = quantization
    if rec.refusal.code in (RefusalCode.dense_too_large_for_cpu, RefusalCode.unsupported_quantization):
        q = None
    alts = find_alternatives(
        model,
        exclude=instance.name,
        kind=instance.accelerator_type,
        quantization="none" if q == "native" else q,
        max_model_len=max_model_len,
        catalog=catalog,
    )
    way = list(rec.refusal.way_forward)
    if alts:
        way.append(
            "Cheapest instances that fit: " + "; ".join(f"{a.instance} ({a.reason})" for a in alts) + "."
        )
    else:
        way.append("No instance in the catalog fits this model as asked.")
    return rec.model_copy(
        update={"alternatives": alts, "refusal": rec.refusal.model_copy(update={"way_forward": way})}
    )
