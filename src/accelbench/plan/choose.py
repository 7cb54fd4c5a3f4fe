"""Choosing settings for speed and cost, not only fit.

For one instance, ``setting_options`` lists the settings worth predicting: every valid tensor-parallel degree
of the tier (GPUs dividing the heads; Neuron's power-of-two degrees and the whole instance; CPU one rank or
one per NUMA node) and, for an unquantized checkpoint on a GPU with FP8 units, FP8 weights beside the native
format (near-lossless, and what many deployments use). ``choose`` picks per the goal: "cost" (lowest cost per
output token, among the options meeting the SLO when one is given) or "latency" (lowest TPOT at the
concurrency, then TTFT). Integer formats (int8 / int4) cost accuracy and are only chosen when asked for or
when nothing else fits, as the fallback chain does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from accelbench.domain.estimate import Estimate, SettingsOption
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan_query import PlanQuery
from accelbench.domain.run import EngineSettings
from accelbench.plan.recommend.degrees import tp_degrees

GOALS = ("cost", "latency")


def setting_options(
    model: ModelSpec,
    instance: InstanceType,
    spec: AcceleratorSpec,
    *,
    quantization: str | None,
    given: EngineSettings | None,
) -> list[tuple[EngineSettings, str | None]]:
    """(settings, quantization) pairs to predict; what the caller fixed stays fixed."""
    base = given or EngineSettings()
    tps = [base.tensor_parallel_size] if base.tensor_parallel_size else tp_degrees(model, instance, spec)
    formats: list[str | None] = [quantization]
    if (
        quantization is None
        and instance.accelerator_type == AcceleratorType.gpu
        and spec.fp8_tflops
        and model.quantization is None
    ):
        formats.append("fp8")
    return [
        (base.model_copy(update={"tensor_parallel_size": tp}), q)
        for q in formats
        for tp in tps
        if tp is not None
    ]


def _cost_key(e: Estimate) -> tuple[float, float]:
    usd = e.usd_per_million_output_tokens
    return (usd if usd is not None else math.inf, e.tpot_ms or math.inf)


def _latency_key(e: Estimate) -> tuple[float, float, float]:
    return (round(e.tpot_ms or math.inf, 3), e.ttft_ms or math.inf, _cost_key(e)[0])


def choose(estimates: Sequence[Estimate], goal: str) -> Estimate | None:
    """The best feasible estimate for the goal; with an SLO, one meeting it wins over any that does not."""
    feasible = [e for e in estimates if e.feasible]
    if not feasible:
        return None
    meeting = [e for e in feasible if e.slo_met] or feasible
    if goal == "latency":
        return min(meeting, key=_latency_key)
    return min(meeting, key=_cost_key)


#: the figures an option copies from its estimate: every field the two models share by name
_ESTIMATE_FIGURES = set(SettingsOption.model_fields) & set(Estimate.model_fields)


def option_of(e: Estimate, chosen: bool) -> SettingsOption:
    return SettingsOption(
        **e.model_dump(include=_ESTIMATE_FIGURES),
        max_num_seqs=(e.recommendation.settings.max_num_seqs if e.recommendation.settings else None),
        chosen=chosen,
        why=e.explanation if e.feasible else (e.explanation or "does not fit"),
    )


def estimate_for_goal(
    model: ModelSpec,
    instance: InstanceType,
    spec: AcceleratorSpec,
    query: PlanQuery,
    predict: Callable[[str | None, EngineSettings | None], Estimate],
) -> Estimate:
    """Every open setting predicted; the best for the query's goal reported, the others listed when asked
    (``query.alternatives``), around the quantization and settings the query fixes.

    The checkpoint's own precision is kept whenever it fits: FP8 weights are predicted beside it and offered
    in a note with their gain, but chosen only when the caller allows it (``query.allow_quantization``) or
    asked for a format. When the checkpoint's precision fits nowhere, the fallback chain's answer is reported.
    ``predict(quantization, engine_settings)`` is the estimate of this question at one setting."""
    if query.goal is None:
        raise ValueError("estimate_for_goal needs a query with a goal")
    goal, quantization, engine_settings = query.goal, query.quantization, query.engine_settings
    alternatives = query.alternatives
    options = setting_options(model, instance, spec, quantization=quantization, given=engine_settings)
    predicted = [(q, predict(q, s)) for s, q in options]
    estimates = [e for _, e in predicted]

    def planned() -> Estimate:  # the planner's own answer, the settings left open as recommend leaves them
        return predict(quantization, engine_settings)

    open_format = query.allow_quantization or quantization is not None
    kept = [e for _, e in predicted] if open_format else at_planned_precision(predicted, planned)
    best = choose(kept, goal)
    if best is None:  # nothing fits: the planner's own answer carries the refusal and the way forward
        best = planned()
        return best.model_copy(
            update={
                "goal": goal,
                "alternatives": [option_of(e, False) for e in estimates] if alternatives else [],
            }
        )
    notes = list(best.notes)
    picked = best
    rec = best.recommendation
    if quantization is None and rec.settings is not None and rec.settings.quantization == "fp8":
        # the planner chose FP8 weights because the caller let it
        warnings = [w for w in rec.warnings if "as asked" not in w]
        warnings.append(
            f"FP8 weights chosen for {'cost' if goal == 'cost' else 'latency'} (--allow-quantization): "
            "near-lossless on most models, but check quality; --quantization none keeps the checkpoint's format."
        )
        best = best.model_copy(update={"recommendation": rec.model_copy(update={"warnings": warnings})})
    elif not open_format:
        offer = quantized_offer(best, [e for q, e in predicted if q is not None], goal)
        if offer:
            notes.append(offer)
    feasible = [e for e in kept if e.feasible]
    if len(feasible) > 1:
        notes.append(
            f"Settings chosen for {'lowest cost per output token' if goal == 'cost' else 'lowest TPOT'} among "
            f"{len(feasible)} feasible options (TP "
            + ", ".join(sorted({str(e.tensor_parallel_size) for e in feasible}, key=int))
            + "; formats "
            + ", ".join(sorted({str(e.weight_format) for e in feasible}))
            + ")"
            + ("; --alternatives lists them." if not alternatives else ".")
        )
    return best.model_copy(
        update={
            "goal": goal,
            "notes": notes,
            "alternatives": [option_of(e, e is picked) for e in estimates] if alternatives else [],
        }
    )


def at_planned_precision(
    predicted: Sequence[tuple[str | None, Estimate]], planned: Callable[[], Estimate]
) -> list[Estimate]:
    """The options (format left open) at the precision recommend decides for the instance: the checkpoint's
    wherever it fits at some degree; only where it fits at none, the fallback format of the planner's own
    answer (asked of ``planned`` then, so the common case costs no extra prediction)."""
    open_ = [e for q, e in predicted if q is None]
    natives = [e for e in open_ if e.feasible and e.like_for_like]
    if natives:
        return natives
    answer = planned()
    return [e for e in open_ if same_precision(e, answer)]


def same_precision(option: Estimate, planned: Estimate) -> bool:
    """Whether an option holds the weights as the planner's own answer does: with the format left open, a
    degree where the checkpoint's precision does not fit would fall back to a quantized format, which the
    planner only chooses when the precision fits at no degree (recommend's rule, one decision for both)."""
    return not option.feasible or not planned.feasible or option.weight_format == planned.weight_format


def _change(new: float | None, old: float | None) -> str:
    if new is None or old is None or old == 0:
        return ""
    return f" ({(new / old - 1) * 100:+.0f}%)"


def quantized_offer(native: Estimate, quantized: Sequence[Estimate], goal: str) -> str | None:
    """A sentence offering the best quantized option when it beats the checkpoint's precision for the goal:
    its predicted gain and a quality note; None when none fits or none is better."""
    best = choose(quantized, goal)
    if best is None:
        return None
    better = (
        _latency_key(best) < _latency_key(native)
        if goal == "latency"
        else _cost_key(best) < _cost_key(native)
    )
    if not better:
        return None
    fmt = (best.weight_format or "quantized").upper()
    usd = best.usd_per_million_output_tokens
    return (
        f"Alternative: {fmt} weights would predict TPOT {best.tpot_ms or 0:.1f} ms"
        f"{_change(best.tpot_ms, native.tpot_ms)}"
        + (
            f" and ${usd:.2f} per 1M output tokens{_change(usd, native.usd_per_million_output_tokens)}"
            if usd
            else ""
        )
        + f" on {best.instance}. Quality: {fmt} is near-lossless on most models but not on all; check it on "
        f"your task. The checkpoint's {native.weight_format} is kept; --quantization {best.weight_format} or "
        "--allow-quantization chooses it, and such a row is not like for like with this one."
    )
