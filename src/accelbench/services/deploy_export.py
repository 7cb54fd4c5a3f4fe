"""``accelbench export`` and ``accelbench loadgen``: a run's Kubernetes manifests written to a directory, from a
spec file, flags, or both (flags win); and one shard of the in-cluster load generator those manifests run."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from accelbench.deploy import incluster
from accelbench.deploy.manifests import Bundle, ExportOptions, KarpenterOptions, LoadgenConfig, write_bundle
from accelbench.domain.run import EngineSettings, EngineSpec, RunSpec
from accelbench.errors import UserInputError
from accelbench.services.run_checks import export_bundle
from accelbench.services.specs import load_run_spec


@dataclass(frozen=True)
class ExportRequest:
    """What ``export`` renders: the run (a spec file and/or the model, instance, runtime and engine settings
    given as flags) and how (namespace, images, load-generator shards, Karpenter pools, the Kubernetes version
    the objects are validated against, whether to render what the planner says does not fit)."""

    out: Path
    model: str | None = None
    instance: str | None = None
    runtime: str | None = None
    spec_file: Path | None = None
    namespace: str = "accelbench"
    max_model_len: int | None = None
    kv_cache_space_gib: float | None = None
    quantization: str | None = None
    registry: str | None = None
    loadgen_image: str | None = None
    shards: int = 1
    karpenter: bool = False
    cluster_name: str = "accelbench"
    hf_token_secret: str | None = None
    k8s_version: str = "1.33"
    force: bool = False


# the request's fields that ``ExportOptions`` takes as they are, by the same name
_AS_OPTIONS = ("namespace", "runtime", "registry", "loadgen_image", "hf_token_secret", "force")


@dataclass(frozen=True)
class ExportResult:
    bundle: Bundle
    files: list[Path]


def _run_spec(req: ExportRequest) -> RunSpec:
    """The spec file's run with the flags laid over it (the runtime left to the instance's tier unless named)."""
    spec = load_run_spec(req.spec_file) if req.spec_file else None
    if spec is None and not req.model:
        raise UserInputError("Give --model (or --spec with a model).")
    updates: dict[str, Any] = {}
    if req.model:
        updates["model"] = req.model
    if req.instance:
        updates["instance_type"] = req.instance
    given = {
        "max_model_len": req.max_model_len,
        "kv_cache_space_gib": req.kv_cache_space_gib,
        "quantization": req.quantization,
    }
    settings = (spec.engine.settings if spec else EngineSettings()).model_copy(
        update={k: v for k, v in given.items() if v is not None}
    )
    engine = spec.engine if spec else EngineSpec()
    engine = engine.model_copy(update={"settings": settings})
    if req.runtime:
        engine = EngineSpec(name=req.runtime, version=engine.version, settings=settings)
    base: dict[str, Any] = (
        spec.model_dump(exclude={"hf_token"}, exclude_unset=True) if spec else {"model": req.model}
    )
    base.update(updates)
    engine_data = engine.model_dump(exclude_unset=True)
    if "name" not in engine.model_fields_set:
        engine_data.pop("name", None)  # let the instance's tier choose the runtime
    base["engine"] = engine_data
    return RunSpec.model_validate(base)


def export_run_manifests(req: ExportRequest) -> ExportResult:
    """Render, validate (strict, against ``k8s_version``) and write the manifests of the run."""
    options = ExportOptions(
        loadgen_shards=req.shards,
        karpenter=KarpenterOptions(cluster_name=req.cluster_name) if req.karpenter else None,
        **{k: getattr(req, k) for k in _AS_OPTIONS},
    )
    bundle = export_bundle(_run_spec(req), options, k8s_version=req.k8s_version)
    return ExportResult(bundle=bundle, files=write_bundle(bundle, req.out))


@dataclass(frozen=True)
class LoadgenRequest:
    """The load-generator config file (the ConfigMap's loadgen.json) and the shard to run (None: the Job's
    completion index, from the environment)."""

    config: Path
    shard: int | None = None


def run_loadgen_shard(req: LoadgenRequest, out: Callable[[str], None]) -> dict[str, Any]:
    """Run one shard of an in-cluster sweep (or the whole capacity search), each framed line to ``out``; its
    payload (``error`` set when it failed)."""
    try:
        cfg = LoadgenConfig.model_validate_json(req.config.read_text())
    except (OSError, ValidationError) as exc:
        raise UserInputError(f"Bad load-generator config {req.config}: {exc}") from exc
    index = req.shard
    if index is None:
        raw = os.environ.get("ACCELBENCH_SHARD_INDEX") or os.environ.get("JOB_COMPLETION_INDEX") or "0"
        index = int(raw)
    if not 0 <= index < cfg.shards:
        raise UserInputError(f"Shard {index} is outside 0..{cfg.shards - 1}.")
    return incluster.run_shard(cfg, index, out=out)
