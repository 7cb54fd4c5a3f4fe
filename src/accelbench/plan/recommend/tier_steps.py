"""What every tier's recommendation shares: the context of one answer, refusals, the weight formats to try, the smallest tensor-parallel degree that fits, and the context length and batch a KV budget gives."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.recommendation import (
    Attempt,
    BandwidthAdvisory,
    Recommendation,
    Refusal,
    RefusalCode,
    Verdict,
)
from accelbench.errors import UserInputError
from accelbench.plan.hardware import Hardware
from accelbench.plan.memory import (
    GIB,
    MIN_CONTEXT,
    WeightFormat,
    default_lengths,
    max_seq_tokens,
    native_format,
    online_format,
    round_down_length,
    seq_kv_bytes_per_rank,
    weight_bytes,
)

USEFUL_CONTEXT = 8192  # a context worth choosing a larger TP for
USEFUL_SEQS = 4
CPU_KV_MIN = 4  # GiB: the seed's floor, used to judge whether a W8A8 / W4A8 alternative would fit
GPU_MAX_NUM_SEQS = 256  # vLLM's default on most GPUs; KV capacity lowers it
CPU_MAX_NUM_SEQS = 64  # seed clamp: CPU throughput saturates early, larger batches only raise TPOT
NEURON_MAX_NUM_SEQS = 64
#: the share of the KV budget the planner counts sequences in (a margin): max_num_seqs, the sequences that
#: fit at the full length, and the memory breakdown's "holds N sequences" all use it
KV_PLAN_SHARE = 0.9
NEURON_ARCHITECTURES = ("llama", "mistral", "mixtral", "qwen2", "gemma", "gemma2", "phi", "phi3")
CPU_FAMILY_NAMES = {
    "9g": "Graviton5",
    "8g": "Graviton4",
    "7g": "Graviton3",
    "7i": "Xeon-SPR",
    "8i": "Xeon-GNR",
}


ENGINES = {
    AcceleratorType.gpu: ("vllm", "sglang"),
    AcceleratorType.neuron: ("vllm-neuron",),
    AcceleratorType.cpu: ("vllm-cpu", "llamacpp"),
}


def check_engine(engine: str | None, kind: AcceleratorType) -> str:
    """The engine a plan is for: the tier's default when unset, plain "vllm" meaning the tier's vLLM build;
    one that cannot serve the tier is an input error that names the ones that can."""
    names = ENGINES[kind]
    if not engine:
        return names[0]
    e = engine.strip().lower()
    if e == "vllm":
        return names[0] if kind != AcceleratorType.gpu else "vllm"
    if e not in names:
        raise UserInputError(
            f"Engine {engine!r} does not serve {kind.value} instances.",
            hint=f"On {kind.value} use {' or '.join(names)}.",
        )
    return e


def gib(x: float) -> float:
    return round(x / GIB, 2)


def fmt_gib(x: float) -> str:
    return f"{x / GIB:,.2f} GiB"


@dataclass
class Ctx:
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
    # settings the caller fixed (a deployment's or a published measurement's); None = the planner chooses
    tp: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_space_gib: float | None = None
    threads: int | None = None
    gpu_memory_utilization: float | None = None
    engine: str | None = None
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


def base_fields(ctx: Ctx, *, fits: bool, verdict: Verdict) -> dict[str, object]:
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


def refuse(
    ctx: Ctx,
    code: RefusalCode,
    reason: str,
    way_forward: list[str],
    *,
    bandwidth: BandwidthAdvisory | None = None,
) -> Recommendation:
    return Recommendation(
        **base_fields(ctx, fits=False, verdict=Verdict.refused),
        reasons=list(
            ctx.reasons
        ),  # the decisions made before the refusal; its reason is said once, in refusal
        warnings=ctx.warnings,
        refusal=Refusal(code=code, reason=reason, way_forward=way_forward),
        attempts=ctx.attempts,
        bandwidth=bandwidth,
    )


def or_list(values: list[int]) -> str:
    """1 -> "1"; [1, 2, 4] -> "1, 2 or 4"."""
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def tp_advice(instance: str, valid: list[int], devices: str = "accelerators") -> str:
    """What to give instead of a tensor-parallel size the instance cannot run: the sizes it can, or, when it can
    run none, an instance with more ``devices`` to split the heads over ("GPUs", "NeuronCores")."""
    if not valid:
        return f"No tensor-parallel size divides the heads on {instance}: choose an instance with more {devices}."
    return (
        f"Give --tensor-parallel-size {or_list(valid)}: "
        + ("the only size" if len(valid) == 1 else "the sizes")
        + f" {instance} can run this model at; or choose a larger instance."
    )


def pow2_upto(n: int) -> list[int]:
    out, t = [], 1
    while t <= n:
        out.append(t)
        t *= 2
    return out


def params_b(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.0f} M"


# --------------------------------------------------------------------------------------------- shared
def formats_to_try(ctx: Ctx, *, allow_fallback: bool, fp8_ok: bool) -> list[WeightFormat] | Recommendation:
    """Weight formats to try, in order, or a refusal when the request contradicts the checkpoint."""
    model, q = ctx.model, ctx.quantization
    native = native_format(model, "fp16" if q == "fp16" else None)
    pre = model.quantization
    if pre is not None:
        if (
            q in (None, "native")
            or q == pre.method
            or (q in ("int8", "int4", "fp8") and matches_checkpoint(pre, q))
        ):
            ctx.reasons.append(
                f"The checkpoint is already quantized ({pre.scheme}); it is served in its own format."
            )
            return [native]
        return refuse(
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
        return refuse(
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


def matches_checkpoint(pre: object, q: str) -> bool:
    bits = getattr(pre, "bits", 16)
    method = getattr(pre, "method", "")
    return (q == "fp8" and method == "fp8") or (q == "int8" and bits == 8) or (q == "int4" and bits == 4)


@dataclass
class Fit:
    tp: int
    weights: float  # all ranks
    overhead_per_unit: float
    budget_per_unit: float  # KV bytes per rank
    max_tokens: int  # longest single sequence that fits


def fit_units(
    ctx: Ctx,
    fmt: WeightFormat,
    usable_per_unit: float,
    overhead_per_unit: float,
    valid_tps: list[int],
    kv_bytes: float,
    need_ctx: int,
    unit_word: str,
) -> tuple[Fit | None, str]:
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
            if budget > 0 and budget * KV_PLAN_SHARE >= want:
                tokens = max_seq_tokens(ctx.model, budget, tp, kv_bytes)
                return Fit(tp, wb, overhead_per_unit, budget, tokens), ""
    tried: list[str] = []
    for tp in valid_tps:
        if tp < min_units:
            continue
        budget = usable_per_unit - wb / tp - overhead_per_unit
        if budget <= 0:
            tried.append(
                f"TP {tp}: weights and overhead need {fmt_gib(wb / tp + overhead_per_unit)} per {unit_word}"
            )
            continue
        tokens = max_seq_tokens(ctx.model, budget, tp, kv_bytes)
        if tokens >= need_ctx:
            return Fit(tp, wb, overhead_per_unit, budget, tokens), ""
        tried.append(f"TP {tp}: KV room for {tokens:,} tokens < {need_ctx:,}")
    largest = max(valid_tps) if valid_tps else 0
    if min_units > largest:
        why = (
            f"{fmt.label} weights ({fmt_gib(wb)}) need at least {min_units} x {fmt_gib(usable_per_unit)} "
            f"usable {unit_word}s; the instance offers {largest} valid"
        )
    else:
        why = "; ".join(tried) or "no valid tensor-parallel degree"
    return None, why


def sequences_fit(kv_budget: float, per_seq: float, cap: int) -> int:
    """Sequences of ``per_seq`` KV bytes the planner counts in ``kv_budget`` (its ``KV_PLAN_SHARE``)."""
    return int(KV_PLAN_SHARE * kv_budget / per_seq) if per_seq > 0 else cap


def request_tokens(ctx: Ctx) -> int:
    """Input + output tokens of the request the caller sizes for (0 when it named no lengths)."""
    return (ctx.input_len or 0) + (ctx.output_len or 0)


def context_reason(kv_tokens: int, model_max: int, start: int, c_start: int, max_len: int, c_max: int) -> str:
    """The one sentence on the context the planner chose (none asked), from the same numbers as the verdict:
    the tokens the KV budget holds, the length memory allows (``start``, ``c_start`` sequences of it at once)
    and the length chosen (``max_len``, ``c_max`` at once)."""
    if max_len == start:
        if start == model_max:
            return (
                f"Max model len {max_len:,}: the model's full context fits in the KV budget ({kv_tokens:,} "
                f"tokens, {c_max} sequence(s) of {max_len:,} at once)."
            )
        return (
            f"Max model len {max_len:,}: the KV budget holds {kv_tokens:,} tokens of one sequence "
            f"(model supports {model_max:,}); rounded down to a standard length."
        )
    room = (
        f"one sequence of the model's full {start:,} tokens fits"
        if start == model_max
        else f"{start:,} would fit"
    )
    return (
        f"Max model len {max_len:,}: the KV budget holds {kv_tokens:,} tokens, so {room} but only {c_start} "
        f"at once; halved to {max_len:,}"
        + (
            f" so that at least 4 full-length sequences fit ({c_max} do)."
            if c_max >= 4
            else f", no shorter than the request, where {c_max} fit at once."
        )
    )


def clamp_cause(max_len: int, target: int, kv_tokens: int | None, at_max: int | None) -> str:
    """Why a context is shorter than the target, from the KV budget's own figures: memory for one sequence,
    or room for fewer than 4 sequences of the target at once."""
    if kv_tokens is not None and kv_tokens >= target:
        return (
            f"the KV cache holds {kv_tokens:,} tokens: one {target:,}-token sequence fits, but fewer than 4 at once"
            + (f"; at {max_len:,} tokens {at_max} do" if at_max else "")
        )
    return "a longer context leaves too little memory for the KV cache"


def context_and_batch(
    ctx: Ctx, fit: Fit, kv_bytes: float, seq_cap: int
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
    else:
        max_len = model_max if fit.max_tokens >= model_max else round_down_length(fit.max_tokens)

    def conc(length: int) -> int:
        per_seq = seq_kv_bytes_per_rank(model, length, fit.tp, kv_bytes)
        return sequences_fit(fit.budget_per_unit, per_seq, seq_cap)

    c_max = conc(max_len)
    if requested is None:
        start, c_start = max_len, c_max
        floor = max(MIN_CONTEXT, request_tokens(ctx))
        while c_max < 4 and max_len > floor:
            max_len = max(round_down_length(max_len // 2) or MIN_CONTEXT, min(floor, max_len))
            c_max = conc(max_len)
        reasons.append(context_reason(fit.max_tokens, model_max, start, c_start, max_len, c_max))
    d_in, d_out = default_lengths(max_len)
    in_len = ctx.input_len or d_in
    out_len = ctx.output_len or d_out
    typical = min(in_len + out_len, max_len)
    per_typical = seq_kv_bytes_per_rank(model, typical, fit.tp, kv_bytes)
    capacity = sequences_fit(fit.budget_per_unit, per_typical, seq_cap)
    if ctx.max_num_seqs is not None:
        max_num_seqs = ctx.max_num_seqs
        reasons.append(
            f"max_num_seqs {max_num_seqs} as given; the KV cache holds {capacity:,} requests of {in_len:,} + "
            f"{out_len:,} tokens ({max(c_max, 0):,} at the full {max_len:,} tokens)."
        )
        if capacity < max_num_seqs:
            ctx.warnings.append(
                f"max_num_seqs {max_num_seqs} is more than the {capacity:,} requests of {in_len:,} + "
                f"{out_len:,} tokens the KV cache holds: above {capacity:,} concurrent requests the rest wait."
            )
    else:
        max_num_seqs = max(1, min(seq_cap, capacity))
        reasons.append(
            f"max_num_seqs {max_num_seqs}: the KV cache holds {capacity:,} requests of {in_len:,} + "
            f"{out_len:,} tokens (capped at {seq_cap}); {max(c_max, 0):,} at the full {max_len:,} tokens."
        )
    return max_len, max_num_seqs, max(0, c_max), in_len, out_len, reasons


def verdict_sentence(
    verdict: str,
    *,
    max_len: int | None,
    model_max: int,
    asked: int | None = None,
    kv_tokens: int | None = None,
    at_max: int | None = None,
) -> str:
    """A verdict (``fits``/``clamped``/``clamps``/``refused``/``infeasible``) in words a person reads; a shorter
    context says why from the KV budget's tokens (``kv_tokens``) and the sequences of ``max_len`` it holds
    (``at_max``), the figures the reasons quote."""
    target = min(asked or model_max, model_max)
    whose = "asked for" if asked and asked < model_max else "the model supports"
    if verdict == "fits":
        return f"fits, with the full context ({target:,} tokens, as {whose})"
    if verdict in ("clamped", "clamps") and max_len is not None:
        return (
            f"fits only with a shorter context: max_model_len {max_len:,} tokens, not the {target:,} {whose} "
            f"({clamp_cause(max_len, target, kv_tokens, at_max)})"
        )
    return "does not fit: the weights, the engine's overhead and the smallest KV cache exceed the memory"


def verdict_for(ctx: Ctx, max_len: int) -> Verdict:
    target = ctx.max_model_len or ctx.model.max_position_embeddings
    return Verdict.fits if max_len >= min(target, ctx.model.max_position_embeddings) else Verdict.clamped
