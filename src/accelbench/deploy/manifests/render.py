"""Render every object of a Kubernetes benchmark run, validate it, and write it out.

``render_bundle`` is shared by ``accelbench export`` and the Kubernetes target, so what a user exports is
exactly what the target applies. Built-in kinds are validated against the Kubernetes OpenAPI schema in
strict mode (``kubernetes-validate``: unknown fields are errors); Karpenter's kinds are custom resources,
validated against their CRD schemas in the tests.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from pydantic import Field

from accelbench.catalog import get_catalog
from accelbench.deploy.manifests.engine import EnginePlan, engine_deployment, engine_service, plan_engine
from accelbench.deploy.manifests.karpenter import KarpenterOptions, karpenter_objects
from accelbench.deploy.manifests.loadgen import LoadgenConfig, LoadgenResources, loadgen_objects
from accelbench.deploy.manifests.sizing import ready_timeout_s
from accelbench.deploy.manifests.telemetry import loadgen_telemetry, service_port, sidecar_container
from accelbench.domain.instance_types import InstanceType
from accelbench.domain.plan_query import FitQuery
from accelbench.domain.run import EngineSettings, KubernetesTarget, KubernetesTelemetry, RunSpec
from accelbench.domain.strict import StrictModel
from accelbench.errors import GuardError, UserInputError
from accelbench.modelspec import load_model_spec
from accelbench.plan.recommend import recommend
from accelbench.runtimes.guards import check
from accelbench.runtimes.params import params_for
from accelbench.runtimes.runtime import (
    Runtime,
    ServedModel,
    ServeParams,
    get_runtime,
    runtime_for_accelerator,
)
from accelbench.runtimes.versions import (
    LOADGEN_IMAGE_ENV,
    LOADGEN_KEY,
    LOADGEN_REPOSITORY,
    effective_tool_versions,
)
from accelbench.store import get_store

#: Kubernetes minor version the manifests are validated against (EKS standard support)
DEFAULT_K8S_VERSION = "1.33"
KARPENTER_KINDS = {"NodePool", "EC2NodeClass"}


class ModelFacts(ServedModel):
    """What the deployment needs to know about the model: what the engine serves (``model`` is a hub id or
    an s3:// URI), and the hub revision to pin."""

    revision: str | None = Field(default=None, description="Hub revision to pin.")

    def serve_params(
        self,
        instance: InstanceType,
        *,
        settings: EngineSettings | None = None,
        recommendation: Any | None = None,
        **serve: Any,
    ) -> ServeParams:
        """The engine's ``ServeParams`` for this model on ``instance`` (``params_for`` with these facts);
        ``serve``: the other ``ServeParams`` fields the target sets (isa_trace, port, hf_token_secret)."""
        served = self.model_dump(include=set(ServedModel.model_fields))
        return params_for(
            instance=instance, settings=settings, recommendation=recommendation, **served, **serve
        )


class ExportOptions(StrictModel):
    """Choices of the rendered bundle that are not part of the run spec."""

    namespace: str = Field(default="accelbench", description="Namespace of every namespaced object.")
    name: str | None = Field(
        default=None, description="Base name of the objects; default from model and runtime."
    )
    runtime: str | None = Field(default=None, description="Runtime; default the tier's.")
    registry: str | None = Field(default=None, description="Pull-through registry prefix for engine images.")
    loadgen_image: str | None = Field(default=None, description="accelbench image for the load generator.")
    loadgen_shards: int = Field(default=1, ge=1, le=64, description="Load-generator pods.")
    loadgen_timeout_s: float = Field(default=7200.0, gt=0, description="Deadline of the load-generator Job.")
    loadgen_resources: LoadgenResources = Field(default_factory=LoadgenResources)
    karpenter: KarpenterOptions | None = Field(
        default=None, description="Render Karpenter pools (off when None)."
    )
    hf_token_secret: str | None = Field(
        default=None, description="Secret with key HF_TOKEN for gated models."
    )
    run_id: str = Field(
        default="export", description="Run id written into the load-generator config and labels."
    )
    telemetry: KubernetesTelemetry | None = Field(
        default=None,
        description="Device telemetry (node exporter, sidecar, off); default the spec's Kubernetes target's.",
    )
    cluster_has_exporter: bool | None = Field(
        default=None,
        description="Whether the cluster runs the tier's node exporter (asked by the Kubernetes target); resolves "
        "telemetry auto (unknown: sidecar).",
    )
    force: bool = Field(
        default=False,
        description="Render even when the planner says the model does not fit (e.g. Neuron artefacts "
        "compiled on a larger instance); the refusal is kept as a warning.",
    )


@dataclass
class Bundle:
    """Everything one run applies, in apply order."""

    engine: EnginePlan
    objects: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    ready_timeout_s: int = 0
    # why the planner filled the settings the spec left open (max_model_len, max_num_seqs), for which lengths
    planner_notes: list[str] = field(default_factory=list)
    loadgen: LoadgenConfig | None = None

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, component: str | None = None) -> dict[str, Any]:
        found = [
            o
            for o in self.of_kind(kind)
            if component is None
            or o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
        ]
        if len(found) != 1:
            raise KeyError(f"{len(found)} objects of kind {kind} ({component})")
        return found[0]


class _PlainDumper(yaml.SafeDumper):
    """Writes shared sub-objects in full instead of YAML anchors (kubectl users read these files)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dns_name(*parts: str, limit: int = 40) -> str:
    """A DNS-1035 label from ``parts``: lower case, [a-z0-9-], starting with a letter, at most ``limit``.

    40 leaves room for the suffixes (``-loadgen``, ``-0`` pod index) within Kubernetes' 63.
    """
    raw = "-".join(p for p in parts if p)
    name = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)
    if not name or not name[0].isalpha():
        name = "ab-" + name
    return name[:limit].rstrip("-")


def loadgen_image(
    tool_versions: Mapping[str, str], options: ExportOptions, environ: Mapping[str, str]
) -> str:
    if options.loadgen_image:
        return options.loadgen_image
    if environ.get(LOADGEN_IMAGE_ENV):
        return environ[LOADGEN_IMAGE_ENV]
    version = tool_versions.get(LOADGEN_KEY, "latest")
    repo = f"{options.registry.rstrip('/')}/{LOADGEN_REPOSITORY}" if options.registry else LOADGEN_REPOSITORY
    return f"{repo}:{version}"


def select_runtime(spec: RunSpec, instance: InstanceType, explicit: str | None = None) -> Runtime:
    """The runtime comes from the instance's tier unless one was named explicitly (a named runtime that does
    not serve the tier is refused by the guards, never silently swapped)."""
    if explicit:
        return get_runtime(explicit)
    if "name" in spec.engine.model_fields_set:
        return get_runtime(spec.engine.name)
    return runtime_for_accelerator(instance.accelerator_type)


def render_bundle(
    spec: RunSpec,
    instance: InstanceType,
    facts: ModelFacts,
    *,
    options: ExportOptions | None = None,
    tool_versions: Mapping[str, str] | None = None,
    recommendation: Any | None = None,
    environ: Mapping[str, str] | None = None,
) -> Bundle:
    """The engine Deployment and Service, the load-generator objects and (optionally) Karpenter pools.

    Raises ``GuardError`` when the settings cannot work on the instance (the same guards as the API).
    """
    options = options or ExportOptions()
    env = dict(os.environ if environ is None else environ)
    versions = dict(tool_versions or {})
    runtime = select_runtime(spec, instance, options.runtime)
    version = spec.engine.version or runtime.resolve_version(versions)
    params = facts.serve_params(
        instance,
        settings=spec.engine.settings,
        recommendation=recommendation,
        isa_trace=spec.isa_trace,
        hf_token_secret=options.hf_token_secret,
    )
    if facts.revision:
        params = _with_revision(params, facts.revision)
    warnings = _planner_warnings(recommendation, check(params, runtime), force=options.force)
    _require_kv_budget(params, runtime, instance, facts.served_model_name)
    name = options.name or dns_name("ab", runtime.name, facts.served_model_name)
    plan = plan_engine(
        params,
        runtime,
        name=name,
        namespace=options.namespace,
        version=version,
        registry=options.registry,
        environ=env,
        run_id=options.run_id,
    )
    objects: list[dict[str, Any]] = []
    if options.karpenter is not None:
        objects += karpenter_objects(options.karpenter, instance)
    telemetry = options.telemetry or (
        spec.target.telemetry if isinstance(spec.target, KubernetesTarget) else KubernetesTelemetry()
    )
    device_telemetry = loadgen_telemetry(
        telemetry,
        instance.accelerator_type,
        service_host=f"{plan.name}.{plan.namespace}.svc.cluster.local",
        engine_namespace=plan.namespace,
        engine_selector=plan.selector(),
        cluster_has_exporter=options.cluster_has_exporter,
    )
    objects += _engine_objects(plan, instance, telemetry, device_telemetry)
    _require_one_shard_for_capacity(spec, options)
    config = LoadgenConfig(
        run_id=options.run_id,
        base_url=plan.service_url,
        served_model=facts.served_model_name,
        sweep=spec.sweep,
        shards=options.loadgen_shards,
        capacity=spec.capacity,
        telemetry=device_telemetry,
    )
    lg = loadgen_objects(
        name=name,
        namespace=options.namespace,
        image=loadgen_image(versions, options, env),
        config=config,
        timeout_s=options.loadgen_timeout_s,
        resources=options.loadgen_resources,
        labels={"accelbench.io/run-id": options.run_id},
    )
    objects += lg
    stored_config = LoadgenConfig.model_validate_json(lg[0]["data"]["loadgen.json"])
    return Bundle(
        engine=plan,
        objects=objects,
        warnings=warnings,
        ready_timeout_s=ready_timeout_s(instance.accelerator_type, facts.model_size_gib),
        loadgen=stored_config,
        planner_notes=planner_notes(spec, recommendation, instance),
    )


def _with_revision(params: Any, revision: str) -> Any:
    """The serve parameters with the checkpoint's pinned revision passed to the engine."""
    settings = params.settings.model_copy(
        update={"extra_args": [*params.settings.extra_args, "--revision", revision]}
    )
    return params.model_copy(update={"settings": settings})


def _require_one_shard_for_capacity(spec: RunSpec, options: ExportOptions) -> None:
    if spec.capacity is not None and options.loadgen_shards > 1:
        raise UserInputError(
            f"{options.loadgen_shards} load-generator shards were asked for, but a capacity search runs its "
            "load generator in one pod: each level is chosen from the one measured before it.",
            hint="Use one shard (loadgen_shards: 1, --shards 1) for a capacity search.",
        )


def _planner_warnings(recommendation: Any | None, guard_warnings: list[str], *, force: bool) -> list[str]:
    """The planner's warnings before the runtime guards'. A planner that says the model does not fit stops the
    render with its reason and way forward, unless ``force``; then its reason leads the warnings."""
    if recommendation is not None and getattr(recommendation, "fits", True) is False:
        refusal = getattr(recommendation, "refusal", None)
        reason = getattr(refusal, "reason", None) or "the planner says the model does not fit this instance"
        way = "; ".join(getattr(refusal, "way_forward", None) or [])
        if not force:
            raise GuardError(f"{reason}", hint=(way + "\n" if way else "") + "Use --force to render anyway.")
        return [f"planner: {reason}", *guard_warnings]
    return [*(getattr(recommendation, "warnings", None) or []), *guard_warnings]


def _require_kv_budget(params: Any, runtime: Any, instance: InstanceType, served_name: str) -> None:
    """vLLM CPU's 4 GiB default KV budget would leave most of a benchmark node's memory unused: be explicit."""
    if (
        instance.accelerator_type == "cpu"
        and runtime.name == "vllm-cpu"
        and params.settings.kv_cache_space_gib is None
        and "VLLM_CPU_KVCACHE_SPACE" not in params.settings.env
    ):
        raise UserInputError(
            f"No KV-cache budget for {served_name} on {instance.name}: the planner gave none.",
            hint="Set engine.settings.kv_cache_space_gib (whole GiB); `accelbench recommend` suggests one.",
        )


def _engine_objects(
    plan: Any, instance: InstanceType, telemetry: Any, device_telemetry: Any
) -> list[dict[str, Any]]:
    """The engine's Deployment and Service, with the device exporter as a sidecar when telemetry runs so."""
    if device_telemetry is not None and device_telemetry.mode == "sidecar":
        tier = instance.accelerator_type
        return [
            engine_deployment(plan, sidecar=sidecar_container(tier, telemetry.image)),
            engine_service(plan, extra_ports=[service_port(tier)]),
        ]
    return [engine_deployment(plan), engine_service(plan)]


def planner_notes(spec: RunSpec, recommendation: Any | None, instance: InstanceType) -> list[str]:
    """The planner's reasons for the context and batch limit it chose where the spec left them open, and the
    `accelbench recommend` command that gives the same values: the planner is asked with the benchmark's
    lengths, so its max_num_seqs can differ from a plain `recommend` (which assumes longer requests)."""
    if recommendation is None or not getattr(recommendation, "fits", False):
        return []
    s = spec.engine.settings
    wanted = [] if s.max_model_len else ["Max model len"]
    wanted += [] if s.max_num_seqs else ["max_num_seqs "]
    notes = [r for r in getattr(recommendation, "reasons", []) if any(r.startswith(w) for w in wanted)]
    if notes:
        in_len = spec.capacity.input_len if spec.capacity else max(spec.sweep.input_lens)
        out_len = spec.capacity.output_len if spec.capacity else spec.sweep.output_len
        flags = [("--quantization", s.quantization), ("--max-model-len", s.max_model_len),
                 ("--kv-cache-dtype", s.kv_cache_dtype)]  # fmt: skip
        given = "".join(f" {flag} {value}" for flag, value in flags if value)
        notes.append(
            f"Asked for the benchmark's requests ({in_len:,} + {out_len:,} tokens): `accelbench recommend "
            f"--model {spec.model} --instance {instance.name}{given} --input-len {in_len} --output-len "
            f"{out_len}` gives the same settings."
        )
    return notes


def validate_objects(objects: list[dict[str, Any]], k8s_version: str = DEFAULT_K8S_VERSION) -> None:
    """Strict schema validation of every built-in object; raises ``UserInputError`` listing the failures."""
    problems = []
    for obj in objects:
        if obj["kind"] in KARPENTER_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, k8s_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = "/".join(str(p) for p in exc.path)
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {path}: {exc.message}")
    if problems:
        raise UserInputError("Rendered manifests fail schema validation:\n" + "\n".join(problems))


def bundle_files(bundle: Bundle) -> dict[str, str]:
    """File name -> text: one YAML file per group (karpenter, engine, loadgen) and ``plan.json`` (what was
    decided: runtime, image, argv, environment, pod size, timeouts, warnings)."""
    groups: dict[str, list[dict[str, Any]]] = {"karpenter": [], "engine": [], "loadgen": []}
    for obj in bundle.objects:
        if obj["kind"] in KARPENTER_KINDS:
            groups["karpenter"].append(obj)
        elif obj["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "loadgen":
            groups["loadgen"].append(obj)
        else:
            groups["engine"].append(obj)
    files: dict[str, str] = {}
    for i, (group, objs) in enumerate(groups.items()):
        if objs:
            files[f"{i:02d}-{group}.yaml"] = yaml.dump_all(
                objs, Dumper=_PlainDumper, sort_keys=False, width=120
            )
    plan = bundle.engine
    summary = {
        "runtime": plan.runtime,
        "engine_version": plan.engine_version,
        "image": plan.image,
        "command": plan.command,
        "env": plan.env,
        "instance": plan.instance.name,
        "tier": plan.tier.value,
        "service_url": plan.service_url,
        "pod": {
            "cpus": plan.size.cpus,
            "memory_mib": plan.size.memory_mib,
            "shm_mib": plan.size.shm_mib,
            "startup_allowance_s": plan.size.startup_s,
        },
        "ready_timeout_s": bundle.ready_timeout_s,
        "warnings": bundle.warnings,
    }
    tel = bundle.loadgen.telemetry if bundle.loadgen is not None else None
    if tel is not None:
        summary["device_telemetry"] = tel.model_dump(
            include={"mode", "exporter", "url", "namespace", "selector", "port"}
        )
    files["plan.json"] = json.dumps(summary, indent=2) + "\n"
    return files


def write_bundle(bundle: Bundle, out_dir: Path) -> list[Path]:
    """Write ``bundle_files`` into ``out_dir``; returns the paths in apply order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in bundle_files(bundle).items():
        path = out_dir / name
        path.write_text(text)
        written.append(path)
    return written


def facts_from_model_spec(model: Any, source: str | None = None, revision: str | None = None) -> ModelFacts:
    """``ModelFacts`` from a ``ModelSpec`` (``accelbench.modelspec.load_model_spec``).

    ``source`` is what the engine loads: an s3:// URI or hub id given by the user, else the spec's hub id.
    Weights: the checkpoint's size when known, else parameters x bytes per parameter of its dtype/quantization.
    """
    params = model.parameters.total
    if model.checkpoint_bytes:
        size = model.checkpoint_bytes / 1024**3
    else:
        if model.quantization is not None:
            bytes_per = model.quantization.bits / 8
        else:
            bytes_per = 4.0 if str(model.torch_dtype) in ("float32", "fp32") else 2.0
        size = params * bytes_per / 1024**3
    return ModelFacts(
        model=source or model.hf_id or model.ref,
        served_model_name=model.name,
        revision=revision or model.revision,
        model_size_gib=round(size, 3),
        parameters=float(params),
        moe=bool(model.is_moe),
        pre_quantized=model.quantization.method if model.quantization else None,
    )


def load_model_facts(spec: RunSpec) -> tuple[ModelFacts, Any]:
    """(facts, ModelSpec) for a run spec's model (a preset, a local directory, the hub cache or the hub)."""

    source = spec.model if spec.model.startswith("s3://") else None
    model_spec = load_model_spec(spec.model, revision=spec.revision)
    return facts_from_model_spec(model_spec, source=source, revision=spec.revision), model_spec


def recommend_for(spec: RunSpec, model_spec: Any, instance: InstanceType) -> Any:
    """The planner's recommendation, asked with what the spec already fixed (quantization, context, KV
    dtype) and the sweep's (or the capacity search's) lengths, so the settings it fills in fit the benchmark
    that will run."""

    s = spec.engine.settings
    return recommend(
        model_spec,
        instance,
        FitQuery(
            quantization=s.quantization,
            max_model_len=s.max_model_len,
            kv_cache_dtype=s.kv_cache_dtype,
            input_len=spec.capacity.input_len if spec.capacity else max(spec.sweep.input_lens),
            output_len=spec.capacity.output_len if spec.capacity else spec.sweep.output_len,
        ),
    )


def plan_bundle(
    spec: RunSpec,
    *,
    options: ExportOptions | None = None,
    tool_versions: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    instance: InstanceType | None = None,
) -> Bundle:
    """Everything for a run spec: catalog instance, model facts, the planner's settings, rendered and
    validated. ``tool_versions`` default to the store's (with environment overrides)."""
    if instance is None:
        if not spec.instance_type:
            raise UserInputError(
                "Manifests need an instance type: the node the model server is pinned to.",
                hint="Give --instance (or instance_type in the spec), e.g. g6.2xlarge or r8g.4xlarge.",
            )
        instance = get_catalog().instance(spec.instance_type)
    if tool_versions is None:
        tool_versions = effective_tool_versions(get_store(), environ)
    facts, model_spec = load_model_facts(spec)
    recommendation = recommend_for(spec, model_spec, instance)
    bundle = render_bundle(
        spec,
        instance,
        facts,
        options=options,
        tool_versions=tool_versions,
        recommendation=recommendation,
        environ=environ,
    )
    validate_objects(bundle.objects)
    return bundle


def render_for_spec(
    spec: RunSpec,
    *,
    options: ExportOptions | None = None,
    tool_versions: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """File name -> text of the manifests for ``spec`` (what ``accelbench export`` writes)."""
    return bundle_files(plan_bundle(spec, options=options, tool_versions=tool_versions, environ=environ))
