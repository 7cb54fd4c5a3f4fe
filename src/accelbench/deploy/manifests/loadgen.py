"""The in-cluster load generator: a ConfigMap with the sweep, a headless Service, and an Indexed Job.

Each of the Job's N pods runs ``accelbench loadgen`` (the project's own image, see the Dockerfile) with the
same config and its completion index as shard number: every sweep cell's concurrency, prompt count and
request rate are split over the shards, and before each cell the shards meet at a barrier served by shard 0
(reached by its stable DNS name ``<job>-0.<service>``), so all shards send the cell's load at the same
moment. A capacity search (``capacity``) runs in one pod, which chooses each level from the one before. Each pod prints its results (per-request records included) to its log, framed and compressed;
the Kubernetes target reads the logs and merges the shards into one result per cell.

The pods have no tolerations, so they run on the cluster's general nodes, never on the tainted benchmark
nodes whose cores they would steal.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, model_validator

from accelbench.deploy.manifests.telemetry import LoadgenTelemetry, rbac_objects
from accelbench.domain.capacity import CapacitySpec
from accelbench.domain.run import SweepSpec
from accelbench.domain.strict import StrictModel

CONFIG_PATH = "/etc/accelbench/loadgen.json"
BARRIER_PORT = 7070


class LoadgenConfig(StrictModel):
    """What every load-generator pod reads (the ConfigMap's loadgen.json)."""

    run_id: str = Field(description="accelbench run id the results belong to.")
    base_url: str = Field(description="The model Service, e.g. http://engine.ns.svc.cluster.local:8000.")
    served_model: str = Field(description="Model name the server answers to.")
    sweep: SweepSpec = Field(description="The matrix and load settings.")
    shards: int = Field(default=1, ge=1, le=64, description="Pods sharing the load.")
    barrier_host: str | None = Field(default=None, description="Shard 0's DNS name (None with one shard).")
    barrier_port: int = Field(default=BARRIER_PORT, description="Port of the barrier served by shard 0.")
    barrier_timeout_s: float = Field(default=900.0, gt=0, description="Longest wait for the other shards.")
    capacity: CapacitySpec | None = Field(
        default=None, description="A capacity search to run instead of the sweep (one shard only)."
    )
    capacity_start: float | None = Field(
        default=None, gt=0, description="The search's first level (the planner's, set when the run starts)."
    )
    telemetry: LoadgenTelemetry | None = Field(
        default=None, description="Where shard 0 reads the engine's device telemetry (None: nowhere)."
    )

    @model_validator(mode="after")
    def _one_searcher(self) -> LoadgenConfig:
        if self.capacity is not None and self.shards > 1:
            raise ValueError(
                "a capacity search runs in one load-generator pod (each level follows from the one before); "
                "set loadgen_shards to 1"
            )
        return self


class LoadgenResources(StrictModel):
    cpu: str = Field(default="2", description="CPU of one load-generator pod.")
    memory: str = Field(default="4Gi", description="Memory of one load-generator pod.")


def loadgen_names(name: str) -> tuple[str, str, str]:
    """(ConfigMap, Service, Job) names for an engine named ``name``."""
    return f"{name}-loadgen", f"{name}-lg", f"{name}-loadgen"


def loadgen_objects(
    *,
    name: str,
    namespace: str,
    image: str,
    config: LoadgenConfig,
    timeout_s: float,
    resources: LoadgenResources | None = None,
    labels: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    res = resources or LoadgenResources()
    cm_name, svc_name, job_name = loadgen_names(name)
    if config.shards > 1 and config.barrier_host is None:
        config = config.model_copy(
            update={"barrier_host": f"{job_name}-0.{svc_name}.{namespace}.svc.cluster.local"}
        )
    pod_labels = {
        "app.kubernetes.io/name": "accelbench-loadgen",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": "loadgen",
        "app.kubernetes.io/managed-by": "accelbench",
        **(labels or {}),
    }
    selector = {"app.kubernetes.io/instance": name, "app.kubernetes.io/component": "loadgen"}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": cm_name, "namespace": namespace, "labels": pod_labels},
        "data": {"loadgen.json": json.dumps(config.model_dump(mode="json"), indent=2, sort_keys=True)},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": svc_name, "namespace": namespace, "labels": pod_labels},
        "spec": {
            "clusterIP": "None",  # headless: gives each indexed pod a DNS name (<job>-<index>.<service>)
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [{"name": "barrier", "port": config.barrier_port, "targetPort": config.barrier_port}],
        },
    }
    # node telemetry: a ServiceAccount that may list pods (to find the exporter on the engine's node); else no
    # API token in the pods at all
    rbac = (
        rbac_objects(name=name, namespace=namespace, telemetry=config.telemetry, labels=pod_labels)
        if config.telemetry is not None
        else []
    )
    pod_identity: dict[str, Any] = (
        {"serviceAccountName": rbac[0]["metadata"]["name"]}
        if rbac
        else {"automountServiceAccountToken": False}
    )
    container = _loadgen_container(image, config, res)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name, "namespace": namespace, "labels": pod_labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": config.shards,
            "parallelism": config.shards,
            # a retried shard would send its load out of step with the others: fail the run instead
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(timeout_s),
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "metadata": {
                    "labels": pod_labels,
                    "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "subdomain": svc_name,
                    "enableServiceLinks": False,
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": cm_name}}],
                    **pod_identity,
                },
            },
        },
    }
    return [configmap, service, *rbac, job]


def _loadgen_container(image: str, config: LoadgenConfig, res: LoadgenResources) -> dict[str, Any]:
    """The load generator's container: reads its config from the mounted ConfigMap, knows its shard index from
    the indexed Job's annotation, runs unprivileged."""
    return {
        "name": "loadgen",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["accelbench", "loadgen", "--config", CONFIG_PATH],
        "env": [
            {
                "name": "ACCELBENCH_SHARD_INDEX",
                "valueFrom": {
                    "fieldRef": {
                        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                    }
                },
            },
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
        "ports": [{"name": "barrier", "containerPort": config.barrier_port, "protocol": "TCP"}],
        "resources": {
            "requests": {"cpu": res.cpu, "memory": res.memory},
            "limits": {"cpu": res.cpu, "memory": res.memory},
        },
        "volumeMounts": [{"name": "config", "mountPath": "/etc/accelbench", "readOnly": True}],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
