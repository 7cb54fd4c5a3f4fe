"""Planning as use cases: model presets and prepared models, a model's spec, recommend, estimate (one
instance or the ranked catalog, with the store's calibrations and prices) and the memory breakdown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.domain.plan import Estimate, EstimateQuery, EstimateTable
from accelbench.services.runs import load_model
from accelbench.store import Store
from accelbench.store.repo import jsonable

if TYPE_CHECKING:
    from accelbench.plan.query import PlanContext


def presets() -> list[dict[str, Any]]:
    """Shipped model presets with the figures a picker needs."""
    from accelbench.modelspec import preset_names
    from accelbench.modelspec.presets import load_preset, preset_document

    out = []
    for name in preset_names():
        spec = load_preset(name)
        out.append(
            {
                "name": name,
                "hf_id": preset_document(name).get("hf_id"),
                "architecture": spec.architecture,
                "parameters": spec.parameters.total,
                "active_parameters": spec.parameters.active,
                "moe": spec.is_moe,
                "max_context": spec.max_position_embeddings,
                "quantization": spec.quantization.scheme if spec.quantization else None,
            }
        )
    return out


def prepared_models() -> list[dict[str, Any]]:
    """Models prepared on this machine (``accelbench model prepare``): what local runs can serve now."""
    from accelbench.deploy.model_store import list_models

    return [
        m.model_dump(
            mode="json", include={"name", "source", "revision", "architecture", "parameters", "dtype"}
        )
        | {"gguf": bool(m.gguf_path), "hf": bool(m.hf_dir or m.hub_id)}
        for m in list_models()
    ]


def model_spec(name: str) -> dict[str, Any]:
    spec = load_model(name, allow_network=False)
    data: dict[str, Any] = spec.model_dump(mode="json")
    data["kv_bytes_per_token_bf16"] = spec.kv_bytes_per_token(2.0)
    data["attention_kind"] = spec.attention_kind.value
    return data


def recommend(model: str, instance_type: str, **options: Any) -> dict[str, Any]:
    """``accelbench recommend``: does the model fit, with which settings, and why (``fits`` false is an
    answer, not an error). ``instance_type`` may be "local" for this machine."""
    from accelbench import plan

    rec = plan.recommend(load_model(model), instance_type, **options)
    return dict(jsonable(rec))


def plan_context(
    store: Store | None, *, use_calibrations: bool = True, region: str | None = None
) -> PlanContext:
    """What the planner takes from a store, in three queries so a catalog-wide estimate stays fast: the
    active calibrations, the best known prices (stored ones win over the snapshot) and the instance types
    with stored runs. No store: the snapshot prices and the cited factors."""
    from accelbench.catalog import price_map
    from accelbench.plan.calibrations import CalibrationSet
    from accelbench.plan.query import PlanContext

    if store is None:
        return PlanContext()
    prices: dict[str, Any] = dict(price_map(store=store, region=region) if region else price_map(store=store))
    return PlanContext(
        calibrations=CalibrationSet.from_store(store) if use_calibrations else None,
        prices=prices,
        benchmarked=store.benchmarked_instance_types(),
    )


def estimate_result(store: Store | None, query: EstimateQuery) -> Estimate | EstimateTable:
    """``accelbench estimate``: one instance (``query.instance_type``, or "local" for this machine) or the
    ranked catalog, with the store's calibrations, prices and benchmarked instances when there is a store."""
    from accelbench.plan.query import answer

    return answer(
        query, load_model(query.model), plan_context(store, use_calibrations=not query.no_calibration)
    )


def estimate(store: Store | None, query: EstimateQuery) -> dict[str, Any]:
    """The estimate as JSON (the API, the pages and `estimate --format json`)."""
    return estimate_json(estimate_result(store, query), query)


def estimate_json(result: Estimate | EstimateTable, query: EstimateQuery) -> dict[str, Any]:
    """One instance's row and estimate, or the ranked table's first ``query.limit`` rows with the total."""
    if isinstance(result, EstimateTable):
        data: dict[str, Any] = jsonable(result)
        data["total_rows"] = len(result.rows)
        data["rows"] = data["rows"][: query.limit]
        return data
    return {
        "model": result.model,
        "input_len": query.input_len,
        "output_len": query.output_len,
        "concurrency": query.concurrency,
        "rows": [jsonable({k: getattr(result, k) for k in _row_fields()})],
        "total_rows": 1,
        "summary": None,
        "estimate": jsonable(result),
    }


def _row_fields() -> list[str]:
    from accelbench.domain.plan import EstimateRow

    return list(EstimateRow.model_fields)


def memory_breakdown(model: str, instance_type: str, **options: Any) -> dict[str, Any]:
    """Where accelerator memory goes (GPU, Neuron); the planner refuses CPU instances (GuardError, 400)."""
    from accelbench import plan

    return dict(jsonable(plan.memory_breakdown(load_model(model), instance_type, **options)))


def capacity_plan(
    instance: str | None,
    model_ref: str,
    input_len: int,
    output_len: int,
    slo: Any,
    load: str,
) -> tuple[float | None, float | None]:
    """``accelbench capacity``'s planning side: (hourly price, the planner's predicted capacity at the SLO) for a
    named instance ("local": this machine, unpriced), when the model can be read offline; a rate load or an SLO
    without TTFT/TPOT targets gets no prediction."""
    if not instance:
        return None, None
    from accelbench.catalog import get_catalog
    from accelbench.domain.plan import SLO
    from accelbench.errors import AccelbenchError
    from accelbench.modelspec import load_model_spec
    from accelbench.plan import estimate
    from accelbench.plan.hardware import is_local, local_machine

    spec_of = None
    if is_local(instance):  # this machine: predicted from its probe, not priced
        inst, spec_of = local_machine()
    else:
        inst = get_catalog().instance(instance)
    hourly = inst.on_demand_usd
    if slo is None or load != "concurrency":
        return hourly, None
    known = {k: v for k, v in slo.targets.items() if k in ("ttft", "tpot")}
    if not known:
        return hourly, None
    try:
        spec = load_model_spec(model_ref, allow_network=False)
        e = estimate(
            spec,
            inst,
            spec=spec_of,
            input_len=input_len,
            output_len=output_len,
            concurrency=1,
            slo=SLO(**{f"{k}_ms": v for k, v in known.items()}),
        )
    except AccelbenchError:
        return hourly, None
    return hourly, float(e.max_concurrency_meeting_slo) if e.max_concurrency_meeting_slo else None
