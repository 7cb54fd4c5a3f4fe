"""A fleet plan as something to deploy (``accelbench fleet --export DIR``): the Kubernetes objects for one
candidate, validated strictly before anything is written.

- The model server's Deployment and Service: exactly ``accelbench export``'s (``services.runs.export_bundle``:
  the same preflight, runtime argv, pod sizing), with ``replicas`` the plan's fewest servers; the in-cluster
  load generator is left out.
- A HorizontalPodAutoscaler (``autoscaling/v2``) between the plan's fewest and most servers on the engine's
  waiting-requests gauge per pod (vLLM ``vllm:num_requests_waiting``, SGLang ``sglang:num_queue_reqs``,
  llama.cpp ``llamacpp:requests_deferred``), read through the custom metrics API under the name with ``:``
  turned into ``_``: ``prometheus-adapter.yaml`` holds the adapter rule that serves it. Scaling up is immediate,
  scaling down waits ten minutes (a cold start costs more than an idle server). An HPA cannot go below one
  replica, so a plan that scales to zero keeps one, and says so.
- The Karpenter NodePool of the candidate's tier and its EC2NodeClass, the pool's ``limits`` the most servers
  x one node's resource (vCPUs on CPU, GPUs, Neuron devices), so the cluster never buys more than the plan.
- ``fleet-plan.json``: servers per interval, the capacity, the cold-start lead (scale ahead of each rise by it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from accelbench.deploy.manifests import ExportOptions, KarpenterOptions, bundle_files, validate_objects
from accelbench.deploy.manifests.karpenter import pool_for
from accelbench.deploy.manifests.render import Bundle
from accelbench.domain.run import RunSpec
from accelbench.errors import UserInputError
from accelbench.fleet.result import Candidate, FleetPlan
from accelbench.services.run_checks import export_bundle

WAITING_METRIC = {
    "vllm": "vllm:num_requests_waiting",
    "vllm-cpu": "vllm:num_requests_waiting",
    "vllm-neuron": "vllm:num_requests_waiting",
    "sglang": "sglang:num_queue_reqs",
    "llamacpp": "llamacpp:requests_deferred",
}
#: waiting requests per server the autoscaler holds to: more than one queued request means the SLO is at risk
TARGET_WAITING = "1"
SCALE_DOWN_WINDOW_S = 600


def choose(plan: FleetPlan, instance: str | None) -> Candidate:
    """The candidate to deploy: ``instance`` when given (it must be in the plan), else the cheapest."""
    if instance is None:
        return plan.candidates[0]
    for c in plan.candidates:
        if c.instance == instance:
            return c
    raise UserInputError(
        f"{instance} is not among the plan's candidates.",
        hint="Choose one of: " + ", ".join(c.instance for c in plan.candidates[:10]),
    )


def autoscaler(
    name: str, namespace: str, labels: dict[str, str], metric: str, c: Candidate
) -> dict[str, Any]:
    low = max(1, c.min_servers)
    high = max(low, c.max_servers)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": metric.replace(":", "_")},
                        "target": {"type": "AverageValue", "averageValue": TARGET_WAITING},
                    },
                }
            ],
            "behavior": {
                "scaleUp": {
                    "stabilizationWindowSeconds": 0,
                    "policies": [{"type": "Pods", "value": max(1, high - low), "periodSeconds": 60}],
                },
                "scaleDown": {
                    "stabilizationWindowSeconds": SCALE_DOWN_WINDOW_S,
                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}],
                },
            },
        },
    }


def pool_limits(pool: dict[str, Any], c: Candidate, vcpus: int, devices: int) -> None:
    """Cap the pool at the plan's most servers of this instance type."""
    tier = pool["spec"]["template"]["metadata"]["labels"]["accelbench.io/tier"]
    (key,) = pool["spec"]["limits"]
    per_node = vcpus if tier == "cpu" else devices
    pool["spec"]["limits"] = {key: str(max(1, per_node) * max(1, c.max_servers))}


def adapter_rule(metric: str) -> str:
    rule = {
        "rules": [
            {
                "seriesQuery": f'{metric}{{namespace!="",pod!=""}}',
                "resources": {
                    "overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
                },
                "name": {"matches": metric, "as": metric.replace(":", "_")},
                "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
            }
        ]
    }
    head = "# prometheus-adapter rule (its chart's rules.custom) serving the autoscaler's metric per pod\n"
    return head + yaml.safe_dump(rule, sort_keys=False)


def fleet_files(
    plan: FleetPlan, *, instance: str | None = None, namespace: str = "accelbench", k8s_version: str = "1.33"
) -> tuple[dict[str, str], list[str]]:
    """(file name -> text, warnings) for the chosen candidate; every object validated strictly."""

    c = choose(plan, instance)
    spec = RunSpec(model=plan.model, instance_type=c.instance)
    options = ExportOptions(namespace=namespace, karpenter=KarpenterOptions(), run_id="fleet")
    bundle = export_bundle(spec, options, k8s_version=k8s_version)
    inst = bundle.engine.instance
    pool_name = pool_for(inst)
    pool = next(o for o in bundle.of_kind("NodePool") if o["metadata"]["name"] == pool_name)
    node_class = pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]
    pool_limits(pool, c, inst.vcpus, inst.accelerator_count)
    objects: list[dict[str, Any]] = [
        o for o in bundle.of_kind("EC2NodeClass") if o["metadata"]["name"] == node_class
    ]
    objects.append(pool)
    deployment = bundle.one("Deployment", "engine")
    deployment["spec"]["replicas"] = max(1, c.min_servers)
    objects += [deployment, bundle.one("Service", "engine")]
    metric = WAITING_METRIC.get(bundle.engine.runtime)
    warnings = list(bundle.warnings)
    if metric is None:
        raise UserInputError(f"No waiting-requests metric is known for the runtime {bundle.engine.runtime}.")
    labels = dict(deployment["metadata"].get("labels", {}))
    objects.append(autoscaler(deployment["metadata"]["name"], namespace, labels, metric, c))
    if c.min_servers < 1:
        warnings.append("The plan scales to zero but an HPA keeps at least one replica: minReplicas is 1.")
    validate_objects(objects, k8s_version)
    files = bundle_files(Bundle(engine=bundle.engine, objects=objects, warnings=warnings))
    files["prometheus-adapter.yaml"] = adapter_rule(metric)
    files["fleet-plan.json"] = json.dumps(
        {
            "model": plan.model,
            "slo": plan.slo,
            "instance": c.instance,
            "min_servers": c.min_servers,
            "max_servers": c.max_servers,
            "capacity": c.capacity.model_dump(mode="json"),
            "scale_ahead_s": c.cold_start.lead_s,
            "scale_ahead": [x.model_dump(mode="json") for x in c.cold_start.steps],
            "intervals": [i.model_dump(mode="json") for i in c.intervals],
            "warnings": warnings,
        },
        indent=2,
    )
    return files, warnings


def write_fleet_files(files: dict[str, str], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
