"""Planning as use cases: model presets and prepared models, a model's spec, recommend, estimate (one
instance or the ranked catalog, with the store's calibrations and prices) and the memory breakdown.
"""

from __future__ import annotations

from typing import Any

from accelbench.domain.catalog import AcceleratorType
from accelbench.services.runs import load_model
from accelbench.store import Store
from accelbench.store.repo import jsonable


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


def estimate(
    store: Store,
    *,
    model: str,
    instance_type: str | None,
    accelerator_type: AcceleratorType | None,
    max_cost: float | None,
    min_context: int | None,
    quantization: str | None,
    input_len: int,
    output_len: int,
    concurrency: int,
    slo: str | None,
    limit: int = 100,
    use_calibrations: bool = True,
) -> dict[str, Any]:
    """``accelbench estimate``: one instance (``instance_type``, or "local" for this machine) or the ranked
    catalog, with the store's calibrations, prices and benchmarked instances (``plan.store_context``)."""
    from accelbench.plan.estimate import estimate as estimate_one
    from accelbench.plan.estimate import estimate_catalog, is_local, parse_slo, store_context

    spec = load_model(model)
    slo_v = parse_slo(slo) if slo else None
    calibrations, prices, benchmarked = store_context(store, use_calibrations=use_calibrations)
    common: dict[str, Any] = {
        "input_len": input_len,
        "output_len": output_len,
        "concurrency": concurrency,
        "quantization": quantization,
        "slo": slo_v,
        "calibrations": calibrations,
        "prices": prices,
        "benchmarked": benchmarked,
    }
    if instance_type:
        if is_local(instance_type):
            from accelbench.plan.hardware import local_machine

            inst, accel_spec = local_machine()
        else:
            from accelbench.catalog import get_catalog

            inst, accel_spec = get_catalog().instance(instance_type), None
        est = estimate_one(spec, inst, spec=accel_spec, max_model_len=min_context, **common)
        return {
            "model": spec.name,
            "input_len": input_len,
            "output_len": output_len,
            "concurrency": concurrency,
            "rows": [jsonable({k: getattr(est, k) for k in _row_fields()})],
            "total_rows": 1,
            "summary": None,
            "estimate": jsonable(est),
        }
    table = estimate_catalog(
        spec, accelerator=accelerator_type, max_cost=max_cost, min_context=min_context, **common
    )
    data: dict[str, Any] = jsonable(table)
    data["total_rows"] = len(table.rows)
    data["rows"] = data["rows"][:limit]
    return data


def _row_fields() -> list[str]:
    from accelbench.domain.plan import EstimateRow

    return list(EstimateRow.model_fields)


def memory_breakdown(model: str, instance_type: str, **options: Any) -> dict[str, Any]:
    """Where accelerator memory goes (GPU, Neuron); the planner refuses CPU instances (GuardError, 400)."""
    from accelbench import plan

    return dict(jsonable(plan.memory_breakdown(load_model(model), instance_type, **options)))
