"""Kubernetes manifests for a benchmark run: the model server per accelerator tier, the in-cluster load
generator, and Karpenter node pools. Built as plain dicts from the runtimes' own argv and environment, so
deployed flags are never re-encoded here; validated strictly before anything is written or applied.
"""

from accelbench.deploy.manifests.engine import EnginePlan, engine_deployment, engine_service, plan_engine
from accelbench.deploy.manifests.karpenter import KarpenterOptions, karpenter_objects
from accelbench.deploy.manifests.loadgen import LoadgenConfig, loadgen_objects
from accelbench.deploy.manifests.render import (
    Bundle,
    ExportOptions,
    ModelFacts,
    bundle_files,
    facts_from_model_spec,
    load_model_facts,
    plan_bundle,
    recommend_for,
    render_bundle,
    render_for_spec,
    validate_objects,
    write_bundle,
)

__all__ = [
    "Bundle",
    "EnginePlan",
    "ExportOptions",
    "KarpenterOptions",
    "LoadgenConfig",
    "ModelFacts",
    "bundle_files",
    "engine_deployment",
    "engine_service",
    "facts_from_model_spec",
    "karpenter_objects",
    "load_model_facts",
    "loadgen_objects",
    "plan_bundle",
    "plan_engine",
    "recommend_for",
    "render_bundle",
    "render_for_spec",
    "validate_objects",
    "write_bundle",
]
