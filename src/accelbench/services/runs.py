"""Runs as use cases: resolve a spec (instance, default runtime), check it before anything is stored or
started (guards, the planner's fit), submit it for the worker, export its manifests. The CLI, the API, the
pages and the worker call these; nothing here imports typer or FastAPI.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from accelbench.domain.catalog import AcceleratorType, InstanceType
from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunSpec
from accelbench.errors import NotFoundError, UserInputError
from accelbench.store import Store

log = logging.getLogger("accelbench.services")


class RunNotifier(Protocol):
    """What submitting a run needs of the process that executes runs (the API's worker)."""

    def keep_secrets(self, run_id: str, secrets: dict[str, str]) -> None: ...

    def notify(self) -> None: ...


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


def submit_run(
    store: Store, spec: RunSpec, *, worker: RunNotifier | None, actor: str | None = None
) -> RunInfo:
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
