"""Runs as use cases: resolve a spec (instance, default runtime), check it before anything is stored or
started (guards, the planner's fit, a capacity search's limits), export its manifests; storing and submitting
a checked run is ``services.submit``. The CLI, the API, the pages and the worker call these; nothing here
imports typer or FastAPI.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from accelbench.bench.prompts import check_dataset
from accelbench.bench.schedule import SCHEDULES
from accelbench.catalog import get_catalog
from accelbench.deploy.manifests import Bundle, plan_bundle, validate_objects
from accelbench.deploy.manifests.render import ExportOptions, load_model_facts, recommend_for, render_for_spec
from accelbench.deploy.model_store import preset_for, resolve_model
from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.results import RunInfo
from accelbench.domain.run import KubernetesTarget, RunSpec
from accelbench.errors import GuardError, NotFoundError, UserInputError
from accelbench.modelspec import load_model_spec, preset_names
from accelbench.runtimes import get_runtime, guards
from accelbench.runtimes.runtime import DEFAULT_RUNTIME, ServeParams
from accelbench.runtimes.versions import effective_tool_versions
from accelbench.store import Store
from accelbench.telemetry.host import numa_node_count

log = logging.getLogger("accelbench.services")


@contextmanager
def model_lookup(model: str) -> Iterator[None]:
    """Reading a model spec touches the file system (the name may be a path): a name the OS cannot even stat
    (too long, bad bytes, ``~user`` of an unknown user) is bad input, not a server error."""
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

    try:
        return get_catalog().instance(spec.instance_type)
    except NotFoundError as exc:
        raise as_input_error(exc, "instance_type") from None


def tier_of(instance: InstanceType | None) -> AcceleratorType:
    # A local run without an instance type runs on this machine, which the local target serves with CPU engines.
    return instance.accelerator_type if instance is not None else AcceleratorType.cpu


def with_default_runtime(spec: RunSpec, instance: InstanceType | None) -> RunSpec:
    """The runtime follows the instance's tier unless the spec names one (one table decides: DEFAULT_RUNTIME)."""
    if "name" in spec.engine.model_fields_set:
        return spec
    engine = spec.engine.model_copy(update={"name": DEFAULT_RUNTIME[tier_of(instance)]})
    return spec.model_copy(update={"engine": engine})


def this_machine_numa_nodes() -> int:

    return numa_node_count()


def model_facts(model: str) -> tuple[float | None, bool, str | None, int | None]:
    """(parameters, is MoE, pre-quantization method, longest context) of a local run's model for the CPU
    ceiling guard and the context check; unknown when the model is neither a preset nor readable here (the
    guards then cannot judge it)."""
    try:
        spec = load_model(model)
    except (NotFoundError, UserInputError):
        return None, False, None, None
    quant = spec.quantization.method if spec.quantization else None
    return float(spec.parameters.total), spec.is_moe, quant, spec.max_position_embeddings


def check_local_model(spec: RunSpec) -> None:
    """A local run's model must be servable here: prepared (or a preset to prepare), a local path, or a hub id.
    A misspelled name is refused with the names it could have meant."""
    try:
        with model_lookup(spec.model):
            resolve_model(spec.model)
    except (NotFoundError, UserInputError) as exc:
        preparable = preset_for(spec.model) is not None
        if spec.model in preset_names() and not preparable:
            raise UserInputError(
                f"model: {spec.model} is a planning preset (its architecture, no weights); this machine has no "
                "prepared copy of it to serve.",
                hint=f"Prepare a local copy (`accelbench model prepare DIR_OR_GGUF --name {spec.model}`), or run "
                "it on an instance (instance_type with a kubernetes or ec2 target), where the engine downloads it.",
            ) from None
        if not isinstance(exc, NotFoundError):
            raise
        if not preparable:
            raise as_input_error(exc, "model") from None
        raise UserInputError(
            f"model: {exc.message}", hint=exc.hint or f"`accelbench model prepare {spec.model}`"
        ) from None


def measured_lengths(spec: RunSpec) -> tuple[str, list[int], int]:
    """(the spec's section, its input lengths, its output length): what the run will send, a sweep's matrix
    or a capacity search's one length."""
    if spec.capacity is not None:
        return "capacity.input_len", [spec.capacity.input_len], spec.capacity.output_len
    return "sweep.input_lens", list(spec.sweep.input_lens), spec.sweep.output_len


def check_context(
    spec: RunSpec, *, deployment_context: int | None, model_context: int | None, where: str
) -> None:
    """Every request of the sweep or the capacity search (input + output tokens) must fit the context the
    engine will be started with and the model's own, or every request would fail after a long deployment."""
    key, input_lens, out = measured_lengths(spec)
    limits = []
    if deployment_context is not None:
        limits.append((deployment_context, f"the context the engine is started with ({where})"))
    if model_context is not None:
        limits.append((model_context, f"the model's own context ({spec.model})"))
    for limit, what in limits:
        too_long = [n for n in input_lens if n + out > limit]
        if too_long:
            longest = max(too_long)
            raise GuardError(
                f"{key} {', '.join(map(str, too_long))} + output_len {out} = {longest + out} tokens "
                f"at most, which is more than {limit}, {what}.",
                hint=f"Lower {key} to at most {limit - out} (or output_len), or raise "
                "engine.settings.max_model_len"
                + (f" (the model allows {model_context})." if model_context else "."),
            )


def check_capacity(spec: RunSpec) -> None:
    """A capacity search decides each level from the one before, so its load comes from one load generator:
    the in-cluster one cannot be split over several pods."""
    target = spec.target
    if spec.capacity is not None and isinstance(target, KubernetesTarget) and target.loadgen_shards > 1:
        raise UserInputError(
            f"target.loadgen_shards is {target.loadgen_shards}, but a capacity search runs its load generator "
            "in one pod: each level is chosen from the one measured before it, which shards cannot share.",
            hint="Remove loadgen_shards (or set it to 1) for a capacity search; a sweep can split its load "
            "over several pods.",
        )


def _deployment_context(runtime_name: str, params: Any, model_context: int | None) -> int | None:
    """The context the engine will be started with: the setting, else the runtime's own default (llama.cpp's
    2048), else the model's (vLLM takes the model's maximum)."""
    if params.settings.max_model_len:
        return int(params.settings.max_model_len)
    own = getattr(get_runtime(runtime_name), "context", None)
    if callable(own):
        return int(own(params))
    return model_context


def local_model_path(spec: RunSpec) -> str:
    """What the local engine will load for the spec's model: the prepared model's file or directory for the
    chosen runtime (the GGUF for llama.cpp), as the local target resolves it; the name itself when the model is
    not prepared yet (the run then prepares or fails with its own message)."""
    try:
        return resolve_model(spec.model).path_for(spec.engine.name)
    except NotFoundError:
        return spec.model


def check_guards(spec: RunSpec, instance: InstanceType | None) -> list[str]:
    """The warnings of ``guard``; refusals raise."""
    return guard(spec, instance)[0]


def guard(
    spec: RunSpec, instance: InstanceType | None, *, allow_misfit: bool = False
) -> tuple[list[str], ServeParams | None]:
    """The checks ``accelbench run`` and ``accelbench export`` make, before anything is queued: the model's
    facts, the planner's recommendation for the spec's settings and sweep (which fills what the spec leaves
    unset, e.g. the CPU KV budget, exactly as the deployment will), then the runtime layer's guards
    (GuardError -> 400). A model that cannot fit the instance is refused with the planner's reason and way
    forward rather than failing after a long deployment.

    Returns the warnings (e.g. a slow 8-13B dense model on CPU) and the engine's parameters as the guards
    judged them. A run against an existing endpoint deploys nothing, so there is nothing to guard.
    ``allow_misfit`` (``export --force``) turns the planner's refusal into a warning; the guards still apply."""
    if spec.target.kind == "endpoint":
        return [], None

    rec = None
    if instance is not None:
        try:
            with model_lookup(spec.model):
                facts, model_spec = load_model_facts(spec)
        except NotFoundError as exc:
            raise as_input_error(exc, "model") from None
        model_context = model_spec.max_position_embeddings
        rec = recommend_for(spec, model_spec, instance)
        params = facts.serve_params(
            instance,
            settings=spec.engine.settings,
            recommendation=rec if rec.fits else None,
            isa_trace=spec.isa_trace,
        )
    else:
        parameters, moe, pre_quantized, model_context = model_facts(spec.model)
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
    check_context(
        spec,
        deployment_context=_deployment_context(spec.engine.name, params, model_context),
        model_context=model_context,
        where="engine.settings.max_model_len"
        if spec.engine.settings.max_model_len
        else f"{spec.engine.name}'s default",
    )
    warnings = list(report.warnings)
    if rec is not None and not rec.fits:
        refusal = rec.refusal
        reason = (
            refusal.reason if refusal else f"{spec.model} does not fit {instance.name if instance else ''}."
        )
        if not allow_misfit:
            raise GuardError(
                reason,
                hint=" ".join(w if w.endswith(".") else w + "." for w in refusal.way_forward)
                if refusal and refusal.way_forward
                else None,
                misfit=True,
            )
        warnings.append(f"The planner says it does not fit: {reason}")
    if rec is not None:
        warnings += [w for w in rec.warnings if w not in warnings]
    return warnings, params


@dataclass(frozen=True)
class CheckedRun:
    """A run spec that passed preflight: resolved (catalog spelling, default runtime), with its warnings."""

    spec: RunSpec
    instance: InstanceType | None
    warnings: list[str] = field(default_factory=list)
    params: ServeParams | None = None  # the engine's parameters as the guards judged them


def preflight(spec: RunSpec, *, allow_misfit: bool = False) -> CheckedRun:
    """Everything that can be checked before anything is stored, installed or started, on every path (CLI
    ``run``/``rerun``/``demo``, the API, the Run page): the instance, the runtime (the tier's default when the
    spec names none), the load schedule and the dataset (registered names), the model, the guards, the planner's
    fit, every request within its context, a capacity search's one load generator. A refusal raises ``UserInputError``/``GuardError`` saying what to change."""
    check_capacity(spec)
    instance = resolve_instance(spec)
    if instance is not None:
        spec = spec.model_copy(update={"instance_type": instance.name})  # the catalog's spelling
    spec = with_default_runtime(spec, instance)

    try:
        get_runtime(spec.engine.name)
    except NotFoundError as exc:
        raise as_input_error(exc, "engine.name") from None
    try:
        SCHEDULES.get(spec.sweep.schedule)  # refused now, not when the first cell starts
    except NotFoundError as exc:
        raise as_input_error(exc, "sweep.schedule") from None
    check_dataset(spec.sweep.dataset, "sweep.dataset")
    if spec.capacity is not None:
        check_dataset(spec.capacity.dataset, "capacity.dataset")
    warnings, params = guard(
        spec, instance, allow_misfit=allow_misfit
    )  # the settings first: they say most about what to change
    if spec.target.kind == "local":
        check_local_model(spec)
    return CheckedRun(spec=spec, instance=instance, warnings=warnings, params=params)


def export_bundle(spec: RunSpec, options: ExportOptions, *, k8s_version: str) -> Bundle:
    """``accelbench export``: the preflight a Kubernetes run of ``spec`` passes (``options.force``: even if the
    planner says it cannot fit; the guards and the context check still apply), then the manifests, validated
    against Kubernetes ``k8s_version`` in strict mode."""
    try:
        preflight(
            spec.model_copy(update={"target": KubernetesTarget(namespace=options.namespace)}),
            allow_misfit=options.force,
        )
    except GuardError as exc:
        if not exc.misfit:
            raise
        hint = f"{exc.hint} " if exc.hint else ""
        raise GuardError(
            exc.message, hint=hint + "Or give --force to write the manifests anyway.", misfit=True
        ) from None
    bundle = plan_bundle(spec, options=options)
    validate_objects(bundle.objects, k8s_version)
    return bundle


def export_manifests(store: Store, run: RunInfo) -> dict[str, str]:
    """Manifests (file name -> text) for the run's recorded spec, as ``accelbench export`` writes them, with
    the store's tool versions."""
    spec = RunSpec.model_validate(run.spec)
    return render_for_spec(
        spec,
        options=ExportOptions(run_id=run.id),
        tool_versions=effective_tool_versions(store),
    )
