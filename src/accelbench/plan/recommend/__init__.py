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
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from accelbench.catalog import get_catalog
from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan_query import FitQuery
from accelbench.domain.quant import parse_quantization as normalize_quantization
from accelbench.domain.recommendation import Alternative, Recommendation, RefusalCode
from accelbench.domain.run import EngineSettings
from accelbench.errors import UserInputError
from accelbench.plan.hardware import hardware_for, is_local, local_machine
from accelbench.plan.recommend.changes import setting_changes
from accelbench.plan.recommend.cpu import CPU_QUANT, bandwidth_advisory, recommend_cpu
from accelbench.plan.recommend.degrees import tp_degrees
from accelbench.plan.recommend.gpu import recommend_gpu
from accelbench.plan.recommend.llamacpp import recommend_llamacpp
from accelbench.plan.recommend.neuron import recommend_neuron
from accelbench.plan.recommend.tier_steps import Ctx, accelerator_name, check_engine, refuse, tp_advice

if TYPE_CHECKING:
    from accelbench.catalog import Catalog


# --------------------------------------------------------------------------------------------- public
def resolve_instance(
    instance: InstanceType | str, catalog: Catalog | None = None
) -> tuple[InstanceType, Catalog]:
    """An instance row from a name (catalog lookup with did-you-mean) or the row itself, and the catalog."""
    if catalog is None:
        catalog = get_catalog()
    if isinstance(instance, str):
        return catalog.instance(instance), catalog
    return instance, catalog


def resolve_hardware(
    instance: InstanceType | str, spec: AcceleratorSpec | None, catalog: Catalog | None
) -> tuple[InstanceType, AcceleratorSpec, Catalog | None]:
    """The instance row and accelerator spec a plan is for: "local" (or "this", "localhost") is this machine
    (``local_machine``), a name is looked up in the catalog (with did-you-mean), a row is taken as it is; the
    spec defaults to the catalog's spec of the row's accelerator. Returns the catalog it used, if any."""
    if isinstance(instance, str):
        if is_local(instance):
            instance, spec = local_machine()
        else:
            instance, catalog = resolve_instance(instance, catalog)
    if spec is None:
        if catalog is None:
            catalog = get_catalog()
        spec = catalog.accelerator(instance.accelerator_name)
    return instance, spec, catalog


def recommend(
    model: ModelSpec,
    instance: InstanceType | str,
    query: FitQuery | None = None,
    *,
    spec: AcceleratorSpec | None = None,
    catalog: Catalog | None = None,
    suggest_alternatives: bool = True,
    factors: EfficiencyFactors | None = None,
) -> Recommendation:
    """Whether ``model`` fits ``instance`` and with which settings.

    ``query`` holds what was asked (``FitQuery``; None: nothing fixed). Its ``engine_settings`` fix what a deployment
    (or a published measurement) set: tensor_parallel_size, max_num_seqs, max_num_batched_tokens,
    kv_cache_space_gib (CPU), threads (CPU), gpu_memory_utilization, and (unless the query's own fields give
    them) quantization, kv_cache_dtype and max_model_len; every memory figure is
    recomputed for them, and a setting that cannot work is refused with the reason. ``engine`` names the
    engine (default: the tier's); one that cannot serve the tier is an input error.

    ``quantization``: None/"auto" tries the fallback chain (GPU); "none" keeps the checkpoint's format;
    "fp8"/"int8"/"int4" asks for one. ``max_model_len`` asks for a context length (refused if it cannot
    fit). ``kv_cache_dtype``: "auto" or "fp8" (GPU). ``input_len``/``output_len`` size the batch (default:
    the seed's lengths for the max length). ``spec`` defaults to the catalog's spec of the instance's
    accelerator. ``suggest_alternatives`` searches the catalog for instances that fit when this one does not.
    ``factors`` are the efficiency factors of the CPU bandwidth advisory (default: the cited ones).
    """
    query = query or FitQuery()
    if query.max_model_len is not None and query.max_model_len < 16:
        raise UserInputError(f"max_model_len {query.max_model_len} is too small; give at least 16 tokens.")
    s = query.engine_settings or EngineSettings()
    # what the caller fixed: the query's own fields, else the settings' values for them
    fixed = replace(
        query,
        quantization=normalize_quantization(
            query.quantization if query.quantization is not None else s.quantization
        ),
        max_model_len=query.max_model_len if query.max_model_len is not None else s.max_model_len,
        kv_cache_dtype=query.kv_cache_dtype or s.kv_cache_dtype,
        engine_settings=s,
    )
    instance, spec, cat = resolve_hardware(instance, spec, catalog)
    ctx = Ctx(
        model=model,
        instance=instance,
        spec=spec,
        hw=hardware_for(instance, spec),
        quantization=fixed.quantization,
        max_model_len=fixed.max_model_len,
        kv_cache_dtype=(fixed.kv_cache_dtype or None),
        input_len=fixed.input_len,
        output_len=fixed.output_len,
        factors=factors,
        tp=s.tensor_parallel_size,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        kv_cache_space_gib=s.kv_cache_space_gib,
        threads=s.threads,
        gpu_memory_utilization=s.gpu_memory_utilization,
        engine=check_engine(fixed.engine, instance.accelerator_type),
    )
    refused = _unanswerable(ctx, fixed.input_len, fixed.output_len)
    if refused is not None:
        return refused
    kind = instance.accelerator_type
    if kind == AcceleratorType.gpu:
        rec = recommend_gpu(ctx)
    elif kind == AcceleratorType.neuron:
        rec = recommend_neuron(ctx)
    elif ctx.engine == "llamacpp":
        rec = recommend_llamacpp(ctx)
    else:
        rec = recommend_cpu(ctx)
    rec = with_tp_advice(rec, model, instance, spec)
    if not rec.fits and suggest_alternatives and rec.refusal is not None:
        rec = with_alternatives(rec, model, instance, fixed.quantization, fixed.max_model_len, cat)
        rec = with_changes(rec, model, instance, fixed, spec, cat)
    return rec


def _unanswerable(ctx: Ctx, input_len: int | None, output_len: int | None) -> Recommendation | None:
    """The refusal for a question no instance answers: a model that does not generate text, or a request
    longer than the model's context."""
    model = ctx.model
    if not model.is_generative:
        return refuse(
            ctx,
            RefusalCode.non_generative,
            f"{model.name} is not a text-generation model: {model.task_reason or model.task.value}. "
            "accelbench plans LLM serving (token generation).",
            [
                "Serve embedding or classification models with an engine's pooling mode "
                "(e.g. vLLM --task embed / classify); accelbench does not size those.",
                "Pick a generative model (a ...ForCausalLM checkpoint or a preset: `accelbench model list`).",
            ],
        )
    longest = (input_len or 0) + (output_len or 0)
    if longest > model.max_position_embeddings:
        return refuse(
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
    return None


def with_tp_advice(
    rec: Recommendation, model: ModelSpec, instance: InstanceType, spec: AcceleratorSpec
) -> Recommendation:
    """A refused tensor-parallel size is told the sizes this instance can run the model at (every tier's
    from ``tp_degrees``), not a bound such as "1 or less"."""
    if rec.refusal is None or rec.refusal.code != RefusalCode.no_valid_tensor_parallel:
        return rec
    devices = {"gpu": "GPUs", "neuron": "NeuronCores", "cpu": "NUMA nodes"}.get(
        instance.accelerator_type.value
    )
    advice = tp_advice(instance.name, tp_degrees(model, instance, spec), devices or "accelerators")
    return rec.model_copy(update={"refusal": rec.refusal.model_copy(update={"way_forward": [advice]})})


def with_changes(
    rec: Recommendation,
    model: ModelSpec,
    instance: InstanceType,
    asked: FitQuery,
    spec: AcceleratorSpec,
    catalog: Catalog | None,
) -> Recommendation:
    """The refusal with the changes of the caller's settings that would make ``instance`` work: ``asked``
    (what the caller fixed, as ``recommend`` resolved it) changed one setting at a time and planned again."""
    if rec.refusal is None:
        return rec

    def again(**over: Any) -> Recommendation:
        return recommend(
            model, instance, replace(asked, **over), spec=spec, catalog=catalog, suggest_alternatives=False
        )

    changes = setting_changes(rec, instance, asked, again)
    return rec.model_copy(update={"refusal": rec.refusal.model_copy(update={"changes": changes})})


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
    """Cheapest catalog instances that fit: the cheapest native and quantized ones of ``kind`` and the cheapest
    native one of every other kind, in order of price."""
    if catalog is None:
        catalog = get_catalog()
    fitting: list[tuple[float, Alternative]] = []
    for inst in catalog.instances:
        if inst.name == exclude:
            continue
        try:
            r = recommend(
                model,
                inst,
                FitQuery(quantization=quantization, max_model_len=max_model_len),
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
    # chosen one per kind and format, the kind asked for first, each kind cheapest first (an unknown price last)
    picked.sort(
        key=lambda a: (a.accelerator_type != kind, a.hourly_usd if a.hourly_usd is not None else math.inf)
    )
    return picked[:limit]


def _native_of(kind: AcceleratorType, alt: Alternative) -> bool:
    return alt.accelerator_type == kind and alt.quantization is None


def with_alternatives(
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
    return replace_alternatives(rec, alts)


#: how the way forward opens its line on the instances offered instead (replaced when they change)
ALTERNATIVES_LINE = ("Cheapest instances that fit: ", "No instance in the catalog fits ")


def replace_alternatives(rec: Recommendation, alts: list[Alternative]) -> Recommendation:
    """The recommendation offering ``alts`` instead, its way forward naming them in one line (their settings,
    fit and predicted speed are in ``alternatives``)."""
    if rec.refusal is None:
        return rec
    way = [w for w in rec.refusal.way_forward if not w.startswith(ALTERNATIVES_LINE)]
    if alts:
        names = [a.instance for a in alts]
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        way.append(f"{ALTERNATIVES_LINE[0]}{listed} (each with its settings and predicted speed).")
    else:
        way.append(f"{ALTERNATIVES_LINE[1]}this model as asked.")
    return rec.model_copy(
        update={"alternatives": alts, "refusal": rec.refusal.model_copy(update={"way_forward": way})}
    )


__all__ = [
    "CPU_QUANT",
    "accelerator_name",
    "bandwidth_advisory",
    "find_alternatives",
    "recommend",
    "replace_alternatives",
    "resolve_instance",
    "with_alternatives",
    "with_changes",
]
