"""``memory_breakdown``: where each GPU's (or NeuronCore's) memory goes at the recommended settings.

Items per unit: weights, quantization metadata (scales and zero points: int8 +2 B, int4 +4 B per 128
weights, the seed's figures), activations and runtime overhead (CUDA graphs, allocator), block tables
(max_num_seqs x (ceil(len / 16) x 4 + 64) bytes), and the KV cache vLLM preallocates from what is left;
then the headroom outside ``gpu_memory_utilization``. Verdicts follow the seed: fits (full context),
clamps (a shorter context than the model supports), infeasible (weights and overhead alone do not fit).

CPU instances are refused: host RAM is the serving memory there and ``recommend`` explains its budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan_query import FitQuery
from accelbench.domain.recommendation import BreakdownItem, MemoryBreakdown, Recommendation, RefusalCode
from accelbench.errors import GuardError, UserInputError
from accelbench.plan.hardware import Hardware, hardware_for
from accelbench.plan.memory import (
    GIB,
    GPU_MEMORY_UTILIZATION,
    NEURON_MEMORY_UTILIZATION,
    WeightBytes,
    WeightFormat,
    block_table_bytes,
    native_format,
    neuron_overhead_bytes,
    online_format,
    overhead_bytes,
    seq_kv_bytes_per_rank,
    weight_bytes,
)
from accelbench.plan.recommend import accelerator_name, recommend, resolve_instance
from accelbench.plan.recommend.tier_steps import KV_PLAN_SHARE, sequences_fit

if TYPE_CHECKING:
    from accelbench.catalog import Catalog


def _g(x: float) -> float:
    return round(x / GIB, 3)


def memory_breakdown(
    model: ModelSpec,
    instance: InstanceType | str,
    *,
    quantization: str | None = None,
    max_model_len: int | None = None,
    kv_cache_dtype: str | None = None,
    catalog: Catalog | None = None,
) -> MemoryBreakdown:
    """Where accelerator memory goes for ``model`` on ``instance`` (GPU and Neuron)."""
    inst, catalog = resolve_instance(instance, catalog)
    if inst.accelerator_type == AcceleratorType.cpu:
        raise GuardError(
            f"{inst.name} is a CPU instance: it has no accelerator memory to break down (host RAM serves "
            "the weights and the KV cache).",
            hint=f"Run `accelbench recommend --model {model.ref} --instance {inst.name}` for the CPU memory "
            "budget (weights, KV-cache space, overhead) and the bandwidth advisory.",
        )
    spec = catalog.accelerator(inst.accelerator_name)
    rec = recommend(
        model,
        inst,
        FitQuery(quantization=quantization, max_model_len=max_model_len, kv_cache_dtype=kv_cache_dtype),
        spec=spec,
        catalog=catalog,
        suggest_alternatives=False,
    )
    hw = hardware_for(inst, spec)
    gpu = inst.accelerator_type == AcceleratorType.gpu
    unit = "gpu" if gpu else "neuron_core"
    util = GPU_MEMORY_UTILIZATION if gpu else NEURON_MEMORY_UTILIZATION
    per_unit = hw.unit_memory_gib * GIB
    usable = per_unit * util
    overhead = overhead_bytes(model) if gpu else neuron_overhead_bytes(model)
    reasons = list(rec.reasons)
    shape = _shape(model, rec, hw, max_model_len)
    fmt, tp, kv_bytes, max_len, seqs = shape.fmt, shape.tp, shape.kv_bytes, shape.max_len, shape.seqs
    kv_label, verdict = shape.kv_label, shape.verdict
    wb = weight_bytes(model, fmt)
    meta = wb.metadata
    weights_only = wb.total - meta
    blocks = block_table_bytes(seqs, max_len)
    w_unit = weights_only / tp
    m_unit = meta / tp
    b_unit = blocks  # every rank keeps the block tables
    kv_unit = usable - w_unit - m_unit - overhead - b_unit
    per_seq = seq_kv_bytes_per_rank(model, max_len, tp, kv_bytes)
    # the planner's own count (the rule its reasons state), not a second one
    if rec.fits and rec.settings is not None:
        seqs_at_max = rec.settings.concurrency_at_max_len
    else:
        seqs_at_max = sequences_fit(kv_unit, per_seq, 0) if kv_unit > 0 else 0
    room = _Room(unit=unit, per_unit=per_unit, usable=usable, util=util, overhead=overhead, gpu=gpu)
    items = _items(model, shape, room, wb, kv_unit, seqs_at_max)
    used = w_unit + m_unit + overhead + b_unit + max(kv_unit, 0.0)
    if verdict == "infeasible":
        need = math.ceil(wb.total / (usable - overhead)) if usable > overhead else None
        reasons.append(
            f"Infeasible: {_g(wb.total)} GiB of weights need "
            + (f"at least {need} units of {_g(usable - overhead)} GiB free" if need else "more memory")
            + f"; {inst.name} offers {hw.units}."
        )
    return MemoryBreakdown(
        model=model.name,
        instance=inst.name,
        accelerator_type=inst.accelerator_type,
        accelerator_name=accelerator_name(inst),
        unit=unit,
        units=tp,
        unit_memory_gib=hw.unit_memory_gib,
        utilization=util,
        usable_gib_per_unit=_g(usable),
        weight_format=fmt.name,
        kv_cache_dtype=kv_label,
        max_model_len=max_len,
        concurrency=seqs,
        items=items,
        used_gib_per_unit=_g(used),
        free_gib_per_unit=_g(usable - used),
        verdict=verdict,
        reasons=reasons,
        quantization={
            "format": fmt.name,
            "bits": fmt.bits,
            "scale_bytes_per_128": {"int8": 2.0, "int4": 4.0}.get(fmt.name, 0.0),
            "metadata_gib": _g(meta),
            "checkpoint_method": fmt.checkpoint_method,
        },
    )


@dataclass(frozen=True)
class _Shape:
    """What the breakdown is drawn for: the recommended settings, or for a refusal the native weights over
    the most units the instance offers."""

    fmt: WeightFormat
    tp: int
    kv_bytes: float
    kv_label: str
    max_len: int
    seqs: int
    verdict: str


@dataclass(frozen=True)
class _Room:
    """One unit's memory: its kind, size, the share the engine may use and the runtime overhead on it."""

    unit: str
    per_unit: float
    usable: float
    util: float
    overhead: float
    gpu: bool


def _shape(model: ModelSpec, rec: Recommendation, hw: Hardware, max_model_len: int | None) -> _Shape:
    """The settings the breakdown is drawn for (a refusal other than "does not fit" is the user's error)."""
    if rec.fits and rec.settings is not None:
        s = rec.settings
        tp = s.tensor_parallel_size
        fmt = online_format(s.quantization) if s.quantization else native_format(model)
        kv_bytes = 1.0 if (s.kv_cache_dtype or "").startswith("fp8") else 2.0
        kv_label = "fp8" if kv_bytes == 1 else "bf16"
        max_len, seqs = s.max_model_len, s.max_num_seqs
        verdict = "fits" if rec.verdict.value == "fits" else "clamps"
    else:
        if rec.refusal is not None and rec.refusal.code not in (
            RefusalCode.does_not_fit,
            RefusalCode.context_does_not_fit,
        ):
            raise UserInputError(rec.refusal.reason, hint="; ".join(rec.refusal.way_forward) or None)
        # Infeasible: show the native weights spread over the most units the instance offers.
        fmt = native_format(model)
        tp = 1
        while tp * 2 <= hw.units and model.num_attention_heads % (tp * 2) == 0:
            tp *= 2
        kv_bytes = 2.0
        kv_label = "bf16"
        max_len = max_model_len or min(model.max_position_embeddings, 512)
        seqs = 1
        verdict = "infeasible"
    return _Shape(fmt, tp, kv_bytes, kv_label, max_len, seqs, verdict)


def _items(
    model: ModelSpec, shape: _Shape, room: _Room, wb: WeightBytes, kv_unit: float, seqs_at_max: int
) -> list[BreakdownItem]:
    """The items per unit: weights, quantization metadata, overhead, block tables, KV cache, headroom."""
    fmt, tp, kv_bytes, kv_label, max_len, seqs = (
        shape.fmt,
        shape.tp,
        shape.kv_bytes,
        shape.kv_label,
        shape.max_len,
        shape.seqs,
    )
    unit, per_unit, usable, util, overhead, gpu = (
        room.unit,
        room.per_unit,
        room.usable,
        room.util,
        room.overhead,
        room.gpu,
    )
    meta = wb.metadata
    weights_only = wb.total - meta
    w_unit, m_unit, b_unit = weights_only / tp, meta / tp, block_table_bytes(seqs, max_len)
    return [
        BreakdownItem(
            name="weights",
            gib_per_unit=_g(w_unit),
            gib_total=_g(weights_only),
            detail=f"{model.parameters.total / 1e9:.2f} B parameters in {fmt.label}"
            + (" (checkpoint size)" if wb.from_checkpoint else "")
            + f", split over {tp} {unit.replace('_', ' ')}(s)",
        ),
        BreakdownItem(
            name="quantization_metadata",
            gib_per_unit=_g(m_unit),
            gib_total=_g(meta),
            detail=(
                f"scales/zero points: {'+2 B' if fmt.name == 'int8' else '+4 B'} per 128 quantized weights"
                if meta > 0
                else "none (unquantized, or scales counted in the checkpoint size)"
            ),
        ),
        BreakdownItem(
            name="activations_and_overhead",
            gib_per_unit=_g(overhead),
            gib_total=_g(overhead * tp),
            detail=(
                "1.5 GiB + 3400 x (4 x hidden + intermediate) x 2 B: activations, CUDA graphs, allocator"
                if gpu
                else "2 GiB + clamp(hidden x 2048 x 2 B, 1-2 GiB): compiled graphs and scratch"
            ),
        ),
        BreakdownItem(
            name="block_table",
            gib_per_unit=_g(b_unit),
            gib_total=_g(b_unit * tp),
            detail=f"{seqs} sequences x (ceil({max_len:,} / 16) x 4 + 64) B",
        ),
        BreakdownItem(
            name="kv_cache",
            gib_per_unit=_g(max(kv_unit, 0.0)),
            gib_total=_g(max(kv_unit, 0.0) * tp),
            detail=(
                f"{kv_label} KV, {model.kv_bytes_per_token(kv_bytes):,} B per token for the whole model; "
                f"holds {seqs_at_max} sequence(s) of {max_len:,} tokens (counting {KV_PLAN_SHARE:.0%} of it, "
                "the planner's margin)"
                if kv_unit > 0
                else f"no room: weights and overhead exceed the usable memory by {_g(-kv_unit)} GiB per unit"
            ),
        ),
        BreakdownItem(
            name="headroom",
            gib_per_unit=_g(per_unit - usable),
            gib_total=_g((per_unit - usable) * tp),
            detail=f"outside the {util:.0%} the engine may use",
        ),
    ]
