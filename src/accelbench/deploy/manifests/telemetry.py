"""What a Kubernetes run's manifests carry for device telemetry, per tier and mode.

The accelerators' figures come from a Prometheus exporter on the engine's node, read by the in-cluster load
generator (``deploy/incluster.py``) with the same collectors a local run uses:

- GPU: a DCGM exporter (``nvcr.io/nvidia/k8s/dcgm-exporter``, port 9400).
- Neuron: neuron-monitor piped into its Prometheus exporter (``public.ecr.aws/neuron/neuron-monitor``).

Modes (``KubernetesTelemetry.mode`` of the run spec's target):

- ``node``: the exporter the node already runs, as a DaemonSet: the GPU Operator's (pods labelled
  ``app=nvidia-dcgm-exporter`` in ``gpu-operator``) or AWS's neuron-monitor DaemonSet (``app=neuron-monitor`` in
  ``neuron-monitor``). Its pod on the engine's node is found by label through the Kubernetes API: by the
  Kubernetes target at deploy time (with the caller's credentials), or, in a bundle applied with kubectl, by the
  load generator itself, whose ServiceAccount gets the one permission that needs (list pods, in the run's
  namespace to find the engine's node and in the exporter's namespace).
- ``sidecar``: an exporter container in the engine pod, reached through a port of the engine's Service (no
  lookup, no permission). The DCGM sidecar sees the pod's GPUs through ``NVIDIA_VISIBLE_DEVICES=all`` (the
  engine pod holds every GPU of its node) and refreshes every second; its security context and resources are
  those of NVIDIA's dcgm-exporter manifest (root with ``SYS_ADMIN`` for the profiling fields), the
  neuron-monitor sidecar's those of AWS's DaemonSet (privileged), with requests equal to limits so the pod
  keeps its Guaranteed QoS.
- ``off``: nothing.
- ``auto`` (the default): ``node`` when the cluster runs such an exporter (the Kubernetes target asks it before
  rendering), else ``sidecar``; a bundle rendered without a cluster (``accelbench export``) gets the sidecar.

CPU tiers have no exporter: the load generator runs on another node than the engine (its pods have no
tolerations for the benchmark nodes' taints), so the engine's cgroups and its node's /proc cannot be read; the
results say so once, as an absent source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.run import KubernetesTelemetry
from accelbench.domain.strict import StrictModel

DCGM_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.1-4.8.4-distroless"
NEURON_MONITOR_IMAGE = "public.ecr.aws/neuron/neuron-monitor:1.0.0"
#: the DCGM sidecar's collection interval (ms); the exporter's own default is 30 s, too coarse for a cell
DCGM_SIDECAR_INTERVAL_MS = 1000


@dataclass(frozen=True)
class ExporterKind:
    """One tier's exporter: what it is called, where its DaemonSet runs, and its sidecar."""

    exporter: Literal["dcgm", "neuron"]
    label: str
    namespace: str
    selector: str
    node_port: int
    sidecar_port: int
    port_name: str
    image: str


EXPORTERS: dict[AcceleratorType, ExporterKind] = {
    AcceleratorType.gpu: ExporterKind(
        exporter="dcgm",
        label="DCGM exporter",
        namespace="gpu-operator",
        selector="app=nvidia-dcgm-exporter",
        node_port=9400,
        sidecar_port=9400,
        port_name="dcgm",
        image=DCGM_IMAGE,
    ),
    AcceleratorType.neuron: ExporterKind(
        exporter="neuron",
        label="neuron-monitor exporter",
        namespace="neuron-monitor",
        selector="app=neuron-monitor",
        node_port=8000,
        # 8000 is the engine's port in the same pod
        sidecar_port=8008,
        port_name="neuron-metrics",
        image=NEURON_MONITOR_IMAGE,
    ),
}


def selector_dict(selector: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in selector.split(","))


class LoadgenTelemetry(StrictModel):
    """What the load generator reads for device telemetry (the ConfigMap's ``telemetry``)."""

    tier: AcceleratorType = Field(description="The engine's tier.")
    mode: Literal["node", "sidecar", "off"] = Field(description="Where the exporter runs (resolved).")
    exporter: Literal["dcgm", "neuron"] | None = Field(default=None, description="The exporter's kind.")
    url: str | None = Field(default=None, description="The exporter's /metrics URL, when known.")
    namespace: str | None = Field(default=None, description="The node exporter's namespace.")
    selector: str | None = Field(default=None, description="The node exporter's label selector.")
    port: int | None = Field(default=None, description="The node exporter's port.")
    engine_namespace: str = Field(description="The engine's namespace.")
    engine_selector: dict[str, str] = Field(description="The engine pod's labels.")
    engine_node: str | None = Field(default=None, description="The engine's node, once known.")
    missing: list[str] = Field(
        default_factory=list, description="Absent sources, one sentence each (a lookup that found nothing)."
    )

    @property
    def kind(self) -> ExporterKind | None:
        return EXPORTERS.get(self.tier)


def resolve_mode(
    telemetry: KubernetesTelemetry, tier: AcceleratorType, cluster_has_exporter: bool | None = None
) -> Literal["node", "sidecar", "off"]:
    """The mode a run renders: ``auto`` becomes node when the cluster is known to run the exporter, else sidecar;
    a CPU tier has no exporter either way (off)."""
    if tier not in EXPORTERS or telemetry.mode == "off":
        return "off"
    if telemetry.mode == "auto":
        return "node" if cluster_has_exporter else "sidecar"
    return telemetry.mode


def loadgen_telemetry(
    telemetry: KubernetesTelemetry,
    tier: AcceleratorType,
    *,
    service_host: str,
    engine_namespace: str,
    engine_selector: dict[str, str],
    cluster_has_exporter: bool | None = None,
) -> LoadgenTelemetry | None:
    """The load generator's telemetry settings for a rendered bundle; None when the spec turns it off (nothing
    read, nothing said)."""
    if telemetry.mode == "off":
        return None
    mode = resolve_mode(telemetry, tier, cluster_has_exporter)
    kind = EXPORTERS.get(tier)
    out = LoadgenTelemetry(
        tier=tier, mode=mode, engine_namespace=engine_namespace, engine_selector=dict(engine_selector)
    )
    if kind is None or mode == "off":
        return out
    update: dict[str, Any] = {"exporter": kind.exporter}
    if mode == "sidecar":
        update["url"] = f"http://{service_host}:{kind.sidecar_port}/metrics"
    else:
        update.update(
            namespace=telemetry.namespace or kind.namespace,
            selector=telemetry.selector or kind.selector,
            port=telemetry.port or kind.node_port,
        )
    return out.model_copy(update=update)


def sidecar_container(tier: AcceleratorType, image: str | None = None) -> dict[str, Any]:
    """The exporter container of the engine pod (sidecar mode)."""
    kind = EXPORTERS[tier]
    port = {"name": kind.port_name, "containerPort": kind.sidecar_port, "protocol": "TCP"}
    if kind.exporter == "dcgm":
        return {
            "name": "dcgm-exporter",
            "image": image or kind.image,
            "imagePullPolicy": "IfNotPresent",
            "env": [
                {"name": "DCGM_EXPORTER_LISTEN", "value": f":{kind.sidecar_port}"},
                {"name": "DCGM_EXPORTER_INTERVAL", "value": str(DCGM_SIDECAR_INTERVAL_MS)},
                # the engine container holds the pod's (= the node's) GPUs; the sidecar sees them all
                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
            ],
            "ports": [port],
            # NVIDIA's dcgm-exporter manifest: root, SYS_ADMIN for the profiling fields (DCGM_FI_PROF_*)
            "securityContext": {
                "runAsNonRoot": False,
                "runAsUser": 0,
                "capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]},
                "allowPrivilegeEscalation": False,
            },
            "resources": {
                "requests": {"cpu": "200m", "memory": "256Mi"},
                "limits": {"cpu": "200m", "memory": "256Mi"},
            },
        }
    return {
        "name": "neuron-monitor",
        "image": image or kind.image,
        "imagePullPolicy": "IfNotPresent",
        # AWS's neuron-monitor DaemonSet: neuron-monitor piped into its Prometheus exporter on --port
        "command": ["/opt/bin/entrypoint.sh"],
        "args": ["--port", str(kind.sidecar_port)],
        "env": [{"name": "GOMEMLIMIT", "value": "160MiB"}],
        "ports": [port],
        "securityContext": {"privileged": True},
        "resources": {
            "requests": {"cpu": "500m", "memory": "256Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"},
        },
    }


def service_port(tier: AcceleratorType) -> dict[str, Any]:
    """The engine Service's port onto the sidecar."""
    kind = EXPORTERS[tier]
    return {
        "name": kind.port_name,
        "port": kind.sidecar_port,
        "targetPort": kind.port_name,
        "protocol": "TCP",
    }


def rbac_objects(
    *, name: str, namespace: str, telemetry: LoadgenTelemetry, labels: dict[str, str]
) -> list[dict[str, Any]]:
    """Node mode: the load generator's ServiceAccount and the one permission a lookup needs (list pods) in the
    run's namespace (the engine's node) and in the exporter's."""
    if telemetry.mode != "node" or telemetry.namespace is None:
        return []
    account = f"{name}-loadgen"
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace, "labels": labels},
        }
    ]
    roles = [(namespace, f"{name}-loadgen-pods")]
    if telemetry.namespace != namespace:
        roles.append((telemetry.namespace, f"{name}-exporter"))
    for ns, role in roles:
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": role, "namespace": ns, "labels": labels},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
            }
        )
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": role, "namespace": ns, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            }
        )
    return objects


__all__ = [
    "EXPORTERS",
    "ExporterKind",
    "LoadgenTelemetry",
    "loadgen_telemetry",
    "rbac_objects",
    "resolve_mode",
    "selector_dict",
    "service_port",
    "sidecar_container",
]
