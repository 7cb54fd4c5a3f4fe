"""A refusal's way forward, priced: the one refusal model ``recommend``, ``estimate`` and the Estimate page
show. The reason is said once (``Refusal.reason``); the cheapest catalog instances that serve the model with
the caller's settings (``Recommendation.alternatives``, the kind asked for first) each carry the predicted
TTFT, TPOT, output tokens/s and $ per 1M output tokens at the caller's traffic; the changes of the caller's
own settings that would make the instance asked for work (``Refusal.changes``) carry theirs, offered as the
caller's choice."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from accelbench.domain.estimate import Estimate
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan_query import PlanQuery
from accelbench.domain.quant import parse_quantization
from accelbench.domain.recommendation import Alternative, Recommendation, SettingChange
from accelbench.domain.run import EngineSettings
from accelbench.errors import AccelbenchError
from accelbench.plan.context import PlanContext
from accelbench.plan.estimate import estimate
from accelbench.plan.recommend import replace_alternatives, resolve_hardware, with_alternatives, with_changes
from accelbench.plan.recommend.tier_steps import ENGINES

#: the traffic a recommendation's alternatives are predicted at when it names none (the estimate's defaults)
DEFAULT_TRAFFIC = (512, 128, 1)


@dataclass(frozen=True)
class Question:
    """What the caller asked, as the refusal's alternatives and changes are predicted for it: the question
    (its traffic and the settings the caller fixed) and what the caller knows."""

    query: PlanQuery
    context: PlanContext = field(default_factory=PlanContext)

    @property
    def predicted_for(self) -> str:
        q = self.query
        return f"{q.input_len:,} in / {q.output_len:,} out tokens, {q.concurrency} in flight"

    def predict(self, model: ModelSpec, instance: str, **over: Any) -> Estimate | None:
        """The estimate on ``instance`` for this question with the ``PlanQuery`` fields in ``over`` changed;
        None when it cannot be made."""
        try:
            return estimate(model, instance, replace(self.query, **over), self.context)
        except AccelbenchError:
            return None


def portable(settings: EngineSettings | None) -> EngineSettings | None:
    """The caller's settings that mean the same on another instance: the batch limits, not the TP degree,
    threads or KV space of the one asked for."""
    if settings is None:
        return None
    return settings.model_copy(
        update={"tensor_parallel_size": None, "threads": None, "kv_cache_space_gib": None}
    )


def priced_alternative(alt: Alternative, model: ModelSpec, q: Question) -> Alternative | None:
    """The instance offered instead with its settings and predictions at the caller's traffic; None where the
    request does not fit it after all (its context is shorter than the request)."""
    asked = q.query
    same_kind_engine = asked.engine if _serves(asked.engine, alt.accelerator_type) else None
    est = q.predict(
        model,
        alt.instance,
        engine_settings=portable(asked.engine_settings),
        engine=same_kind_engine,
        kv_cache_dtype=asked.kv_cache_dtype if alt.accelerator_type == AcceleratorType.gpu else None,
    )
    if est is None or not est.feasible or est.tensor_parallel_size is None:
        return None
    settings = est.recommendation.settings
    price = est.hourly_usd if est.hourly_usd is not None else alt.hourly_usd
    reason = (
        f"fits with {est.weight_format} on {est.tensor_parallel_size} unit(s), {est.max_model_len or 0:,}-token "
        "context" + (f", ${price:.2f}/h" if price is not None else ", price unknown")
    )
    return alt.model_copy(
        update={
            "reason": reason,
            "quantization": settings.quantization if settings is not None else None,
            "tensor_parallel_size": est.tensor_parallel_size,
            "max_model_len": est.max_model_len or alt.max_model_len,
            "ttft_ms": est.ttft_ms,
            "tpot_ms": est.tpot_ms,
            "output_tokens_per_s": est.output_tokens_per_s,
            "usd_per_million_output_tokens": est.usd_per_million_output_tokens,
            "hourly_usd": price,
            "predicted_for": q.predicted_for,
        }
    )


def _serves(engine: str | None, kind: AcceleratorType) -> bool:
    """Whether the engine the caller named can serve an instance of ``kind`` ("vllm" is every tier's)."""
    e = (engine or "").strip().lower()
    return bool(e) and (e == "vllm" or e in ENGINES[kind])


def change_overrides(change: SettingChange, q: Question) -> dict[str, Any]:
    """The question's fields one setting change sets."""
    s = q.query.engine_settings or EngineSettings()
    if change.setting == "quantization":
        return {"quantization": change.value}
    if change.setting == "max_model_len":
        return {"max_model_len": int(change.value)}
    if change.setting == "kv_cache_dtype":
        return {"kv_cache_dtype": change.value}
    if change.setting == "tensor_parallel_size":
        return {"engine_settings": s.model_copy(update={"tensor_parallel_size": int(change.value)})}
    return {"engine_settings": s.model_copy(update={change.setting: None})}


def priced_change(change: SettingChange, model: ModelSpec, instance: str, q: Question) -> SettingChange:
    """A setting change with the instance's predictions once it is made (unpriced when the request does not
    fit even then)."""
    est = q.predict(model, instance, **change_overrides(change, q))
    if est is None or not est.feasible:
        return change
    return change.model_copy(
        update={
            "tpot_ms": est.tpot_ms,
            "output_tokens_per_s": est.output_tokens_per_s,
            "usd_per_million_output_tokens": est.usd_per_million_output_tokens,
        }
    )


def priced_refusal(
    rec: Recommendation, model: ModelSpec, q: Question, *, search: bool = False
) -> Recommendation:
    """A refused recommendation with its way forward priced: the instances offered instead and the setting
    changes, each predicted for ``q``; with ``search`` they are found here first (the planner was asked not
    to search the catalog, as an estimate asks it)."""
    if rec.fits or rec.refusal is None:
        return rec
    try:
        instance, spec, catalog = resolve_hardware(rec.instance, None, q.context.catalog)
    except AccelbenchError:  # this machine, or a row the catalog does not hold: nothing to search beside it
        return rec
    if search:
        pq = q.query
        asked_q = parse_quantization(pq.quantization)
        rec = with_alternatives(rec, model, instance, asked_q, pq.max_model_len, catalog)
        fixed = replace(
            pq.fit_query(), quantization=asked_q, engine_settings=pq.engine_settings or EngineSettings()
        )
        rec = with_changes(rec, model, instance, fixed, spec, catalog)
    alts = [a for alt in rec.alternatives if (a := priced_alternative(alt, model, q)) is not None]
    assert rec.refusal is not None
    changes = [priced_change(c, model, rec.instance, q) for c in rec.refusal.changes]
    rec = replace_alternatives(rec, alts)
    assert rec.refusal is not None
    return rec.model_copy(update={"refusal": rec.refusal.model_copy(update={"changes": changes})})


def priced_estimate(est: Estimate, model: ModelSpec, q: Question) -> Estimate:
    """An infeasible estimate with its refusal's way forward priced at the estimate's own traffic."""
    if est.feasible:
        return est
    return est.model_copy(
        update={"recommendation": priced_refusal(est.recommendation, model, q, search=True)}
    )
