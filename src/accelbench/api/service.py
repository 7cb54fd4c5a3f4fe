"""The glue between the API (and the pages) and the library: every function here calls the same code the CLI
calls, adding only what a service needs (secrets kept in memory, the worker notified).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from accelbench.domain.catalog import AcceleratorType, InstanceType
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import RunSpec
from accelbench.errors import NotFoundError, UserInputError
from accelbench.store import Store
from accelbench.store.repo import jsonable

if TYPE_CHECKING:
    from accelbench.api.worker import RunWorker
    from accelbench.report.tables import CellAggregate

log = logging.getLogger("accelbench.api")


@contextmanager
def model_lookup(model: str) -> Iterator[None]:
    """Reading a model spec touches the file system (the name may be a path): a name the OS cannot even stat
    (too long, bad bytes, ``~user`` of an unknown user) is bad input, not a server error."""
    import os

    if model.startswith("~") and os.path.expanduser(model).startswith("~"):
        raise UserInputError(
            f"Model {model[:80]!r}: no home directory for {model.split('/', 1)[0]!r}.",
            hint="Give a preset name, a prepared model, a hub id (org/name) or an existing path.",
        )
    try:
        yield
    except OSError as exc:
        raise UserInputError(
            f"Model {model[:80]!r}{'...' if len(model) > 80 else ''} cannot be read: {exc.strerror or exc}.",
            hint="Give a preset name, a prepared model, a hub id (org/name) or an existing path.",
        ) from None


def load_model(model: str, **kwargs: Any) -> Any:
    from accelbench.modelspec import load_model_spec

    with model_lookup(model):
        return load_model_spec(model, **kwargs)


def as_input_error(exc: NotFoundError, what: str) -> UserInputError:
    """A name in a request body that does not exist is bad input (400), not a missing resource (404)."""
    return UserInputError(f"{what}: {exc.message}", hint=exc.hint)


def resolve_instance(spec: RunSpec) -> InstanceType | None:
    """The catalog row of the run's instance type; None for a local run that describes this machine."""
    if not spec.instance_type:
        if spec.target.kind in ("kubernetes", "ec2"):
            raise UserInputError(
                f"A {spec.target.kind} run needs an instance_type: the node or instance to run on.",
                hint="GET /api/v1/instance-types lists them.",
            )
        return None
    from accelbench.catalog import get_catalog

    try:
        return get_catalog().instance(spec.instance_type)
    except NotFoundError as exc:
        raise as_input_error(exc, "instance_type") from None


def tier_of(instance: InstanceType | None) -> AcceleratorType:
    # A local run without an instance type runs on this machine, which the local target serves with CPU engines.
    return instance.accelerator_type if instance is not None else AcceleratorType.cpu


def with_default_runtime(spec: RunSpec, instance: InstanceType | None) -> RunSpec:
    """The runtime follows the instance's tier unless the spec names one (one table decides: DEFAULT_RUNTIME)."""
    from accelbench.runtimes.base import DEFAULT_RUNTIME

    if "name" in spec.engine.model_fields_set:
        return spec
    engine = spec.engine.model_copy(update={"name": DEFAULT_RUNTIME[tier_of(instance)]})
    return spec.model_copy(update={"engine": engine})


def this_machine_numa_nodes() -> int:
    from accelbench.telemetry.host import cpu_info

    return int(cpu_info().get("numa_nodes") or 1)


def model_facts(model: str) -> tuple[float | None, bool, str | None]:
    """(parameters, is MoE, pre-quantization method) of a local run's model for the CPU ceiling guard; unknown
    when the model is neither a preset nor readable here (the guard then cannot judge its size)."""
    try:
        spec = load_model(model)
    except NotFoundError:
        return None, False, None
    quant = spec.quantization.method if spec.quantization else None
    return float(spec.parameters.total), spec.is_moe, quant


def local_model_path(spec: RunSpec) -> str:
    """What the local engine will load for the spec's model: the prepared model's file or directory for the
    chosen runtime (the GGUF for llama.cpp), as the local target resolves it; the name itself when the model is
    not prepared yet (the run then prepares or fails with its own message)."""
    from accelbench.deploy.model_store import resolve_model

    try:
        return resolve_model(spec.model).path_for(spec.engine.name)
    except NotFoundError:
        return spec.model


def check_guards(spec: RunSpec, instance: InstanceType | None) -> list[str]:
    """The checks ``accelbench run`` and ``accelbench export`` make, before anything is queued: the model's
    facts, the planner's recommendation for the spec's settings and sweep (which fills what the spec leaves
    unset, e.g. the CPU KV budget, exactly as the deployment will), then the runtime layer's guards
    (GuardError -> 400). A model that cannot fit the instance is refused with the planner's reason and way
    forward rather than failing after a long deployment.

    Returns the warnings (e.g. a slow 8-13B dense model on CPU). A run against an existing endpoint deploys
    nothing, so there is nothing to guard."""
    if spec.target.kind == "endpoint":
        return []
    from accelbench.errors import GuardError
    from accelbench.runtimes import guards
    from accelbench.runtimes.base import ServeParams
    from accelbench.runtimes.params import params_for

    rec = None
    if instance is not None:
        from accelbench.deploy.manifests.render import load_model_facts, recommend_for

        try:
            with model_lookup(spec.model):
                facts, model_spec = load_model_facts(spec)
        except NotFoundError as exc:
            raise as_input_error(exc, "model") from None
        rec = recommend_for(spec, model_spec, instance)
        params = params_for(
            model=facts.source,
            served_model_name=facts.served_name,
            instance=instance,
            settings=spec.engine.settings,
            recommendation=rec if rec.fits else None,
            model_size_gib=facts.size_gib,
            parameters=facts.parameters,
            moe=facts.moe,
            pre_quantized=facts.pre_quantized,
            isa_trace=spec.isa_trace,
        )
    else:
        parameters, moe, pre_quantized = model_facts(spec.model)
        params = ServeParams(
            model=local_model_path(spec),
            served_model_name=spec.model,
            accelerator_type=AcceleratorType.cpu,
            numa_nodes=this_machine_numa_nodes(),
            settings=spec.engine.settings,
            parameters=parameters,
            moe=moe,
            pre_quantized=pre_quantized,
            isa_trace=spec.isa_trace,
        )
    report = guards.evaluate(params, spec.engine.name)
    if report.errors:
        guards.check(params, spec.engine.name)  # raises with every problem listed, in the guards' words
    if rec is not None and not rec.fits:
        refusal = rec.refusal
        raise GuardError(
            refusal.reason if refusal else f"{spec.model} does not fit {instance.name if instance else ''}.",
            hint=" ".join(w if w.endswith(".") else w + "." for w in refusal.way_forward)
            if refusal and refusal.way_forward
            else None,
        )
    warnings = list(report.warnings)
    if rec is not None:
        warnings += [w for w in rec.warnings if w not in warnings]
    return warnings


def submit_run(store: Store, spec: RunSpec, *, worker: RunWorker | None, actor: str | None = None) -> RunInfo:
    """Validate, guard and store a run as pending; the worker executes it. Nothing is stored on refusal."""
    if spec.hf_token and worker is None:
        raise UserInputError(
            "This server runs without a worker, so a secret sent with the run (hf_token) could not reach "
            "the process that executes it: secrets are never stored.",
            hint="Send the run to a server started with its worker, or give the engine HF_TOKEN in its "
            "own environment.",
        )
    instance = resolve_instance(spec)
    if instance is not None:
        spec = spec.model_copy(update={"instance_type": instance.name})  # the catalog's spelling
    spec = with_default_runtime(spec, instance)
    from accelbench.runtimes import get_runtime

    try:
        get_runtime(spec.engine.name)
    except NotFoundError as exc:
        raise as_input_error(exc, "engine.name") from None
    warnings = check_guards(spec, instance)
    from accelbench.deploy.orchestrator import create_run

    run = create_run(store, spec, extra={"submitted_by": actor, "guard_warnings": warnings})
    run = store.update_run(
        run.id,
        accelerator_type=tier_of(instance).value,
        accelerator_name=instance.accelerator_name if instance else None,
        accelerator_count=instance.accelerator_count if instance else None,
    )
    if worker is not None:
        if spec.hf_token:
            worker.keep_secrets(run.id, {"hf_token": spec.hf_token})
        worker.notify()
    log.info("run %s queued (%s on %s) by %s", run.id, spec.model, run.instance_type or "local", actor)
    return run


def aggregate(results: Sequence[ResultInfo]) -> list[CellAggregate]:
    from accelbench.report.tables import aggregate_results

    return aggregate_results(results)


def run_comparison(store: Store, run_id: str) -> Any:
    """The report layer's comparison of one run with itself: its cells, scaling and findings."""
    from accelbench.report.compare import compare_runs

    return compare_runs(store, [run_id], min_runs=1)


def run_findings(store: Store, run: RunInfo, results: Sequence[ResultInfo]) -> list[dict[str, Any]]:
    """Findings about one run (sentences with the figures they quote), computed by the report layer."""
    if not results:
        return []
    return [f.model_dump(mode="json") for f in run_comparison(store, run.id).findings]


def render_report(store: Store, run_ids: Sequence[str], tier: Any = None) -> str:
    """The offline HTML report of ``run_ids`` (the same file ``accelbench report`` writes)."""
    from accelbench.domain.catalog import PriceTier
    from accelbench.report.document import load_report
    from accelbench.report.html import render_html

    return render_html(load_report(store, list(run_ids), tier=tier or PriceTier.on_demand))


def export_manifests(store: Store, run: RunInfo) -> dict[str, str]:
    """Manifests (file name -> text) for the run's recorded spec, as ``accelbench export`` writes them, with
    the store's tool versions."""
    from accelbench.deploy.manifests.render import ExportOptions, render_for_spec
    from accelbench.runtimes.versions import effective_tool_versions

    spec = RunSpec.model_validate(run.spec)
    return render_for_spec(
        spec,
        options=ExportOptions(run_id=run.id),
        tool_versions=effective_tool_versions(store),
    )


# ------------------------------------------------------------------------------------------ models
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


# -------------------------------------------------------------------------------------------- plan
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


# ----------------------------------------------------------------------------------------- compare
def compare_json(store: Store, run_ids: Sequence[str], tier: Any) -> dict[str, Any]:
    from accelbench.report.compare import compare_runs, comparison_json

    return comparison_json(compare_runs(store, list(run_ids), tier=tier))


def compare_csv(store: Store, run_ids: Sequence[str], tier: Any) -> str:
    from accelbench.report.compare import compare_runs
    from accelbench.report.compare_csv import write_compare_csv

    return write_compare_csv(compare_runs(store, list(run_ids), tier=tier))
