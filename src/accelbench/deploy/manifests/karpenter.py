"""Karpenter (v1) NodePools and EC2NodeClasses for the three tiers, rendered with the model manifests.

Pools:
- ``accelbench-cpu-arm64``: Graviton families (Graviton2 excluded: no BF16/SVE/I8MM kernels);
- ``accelbench-cpu-amx``: Intel AMX families (Sapphire Rapids and Granite Rapids), a separate pool so a
  benchmark of one CPU kind never lands on the other;
- ``accelbench-gpu``: NVIDIA families; ``accelbench-neuron``: Inferentia/Trainium families.

Taints: CPU nodes carry ``accelbench.io/cpu`` and ``accelbench.io/dedicated``, so the GPU/Neuron device
plugins and monitoring daemonsets (which tolerate only their own taints) stay off them, and no stray
workload shares the cores being measured. GPU and Neuron nodes carry only ``nvidia.com/gpu`` /
``aws.amazon.com/neuron``: a taint the device plugin does not tolerate would keep it off, and then no pod
could ever get a device there.

Disruption: empty nodes go after one minute (the seed's rule); nodes are never disrupted for drift or
under-utilisation, and the pods carry ``karpenter.sh/do-not-disrupt``, so a node is not replaced mid-run.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from accelbench.deploy.manifests.engine import CPU_TAINT, DEDICATED_TAINT, GPU_RESOURCE, NEURON_RESOURCE
from accelbench.deploy.manifests.sizing import NODE_MAX_PODS
from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.strict import StrictModel

GRAVITON_FAMILIES = ["c7g", "m7g", "r7g", "c8g", "m8g", "r8g", "c9g", "m9g", "r9g"]
AMX_FAMILIES = ["c7i", "m7i", "r7i", "c8i", "m8i", "r8i"]
GPU_FAMILIES = ["g5", "g6", "g6e", "g7e", "gr6", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300"]
NEURON_FAMILIES = ["inf2", "trn1", "trn1n", "trn2"]

# AL2023 reads this NodeConfig from user data and merges it with Karpenter's own. The static CPU manager
# gives a Guaranteed pod with a whole number of CPUs exclusive cores, which vLLM's OpenMP binding then uses.
CPU_USER_DATA = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    config:
      cpuManagerPolicy: static
--//--
"""


class KarpenterOptions(StrictModel):
    """Cluster-specific values of the node pools."""

    cluster_name: str = Field(default="accelbench", description="EKS cluster (karpenter.sh/discovery tag).")
    node_role: str | None = Field(
        default=None, description="IAM role of the nodes; default KarpenterNodeRole-<cluster>."
    )
    ami_alias: str = Field(
        default="al2023@latest",
        description="EKS-optimised AMI alias (Karpenter picks the arm64/NVIDIA/Neuron variant); pin a version for repeatable runs.",
    )
    root_volume_gib: int = Field(
        default=500, ge=20, description="gp3 root volume: images and model downloads."
    )
    capacity_types: list[str] = Field(
        default_factory=lambda: ["on-demand", "reserved"], description="karpenter.sh/capacity-type values."
    )


def _tier_pools(instance: InstanceType | None) -> list[tuple[str, str, list[str], str]]:
    """(pool name, node class, families, arch) with the run's own family added to its pool."""
    pools = [
        ("accelbench-cpu-arm64", "accelbench-cpu", list(GRAVITON_FAMILIES), "arm64"),
        ("accelbench-cpu-amx", "accelbench-cpu", list(AMX_FAMILIES), "amd64"),
        ("accelbench-gpu", "accelbench-gpu", list(GPU_FAMILIES), "amd64"),
        ("accelbench-neuron", "accelbench-neuron", list(NEURON_FAMILIES), "amd64"),
    ]
    if instance is not None:
        name = pool_for(instance)
        for pool in pools:
            if pool[0] == name and instance.family not in pool[2]:
                pool[2].append(instance.family)
    return pools


def pool_for(instance: InstanceType) -> str:
    """Which NodePool serves an instance type."""
    if instance.accelerator_type == AcceleratorType.gpu:
        return "accelbench-gpu"
    if instance.accelerator_type == AcceleratorType.neuron:
        return "accelbench-neuron"
    return "accelbench-cpu-arm64" if instance.arch == "arm64" else "accelbench-cpu-amx"


def _taints(pool: str) -> list[dict[str, str]]:
    if pool.startswith("accelbench-cpu"):
        return [
            {"key": CPU_TAINT, "value": "true", "effect": "NoSchedule"},
            {"key": DEDICATED_TAINT, "value": "benchmark", "effect": "NoSchedule"},
        ]
    key = GPU_RESOURCE if pool == "accelbench-gpu" else NEURON_RESOURCE
    return [{"key": key, "value": "true", "effect": "NoSchedule"}]


def node_pool(
    pool: str, node_class: str, families: list[str], arch: str, opts: KarpenterOptions
) -> dict[str, Any]:
    tier = "cpu" if pool.startswith("accelbench-cpu") else pool.removeprefix("accelbench-")
    requirements: list[dict[str, Any]] = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": [arch]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": families},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(opts.capacity_types)},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]
    if pool == "accelbench-cpu-amx":
        requirements.append(
            {"key": "karpenter.k8s.aws/instance-cpu-manufacturer", "operator": "In", "values": ["intel"]}
        )
    limits = {"cpu": "2000"} if tier == "cpu" else {GPU_RESOURCE if tier == "gpu" else NEURON_RESOURCE: "64"}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": pool, "labels": {"app.kubernetes.io/managed-by": "accelbench"}},
        "spec": {
            "template": {
                "metadata": {"labels": {"accelbench.io/tier": tier, "accelbench.io/pool": pool}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": node_class,
                    },
                    "requirements": requirements,
                    "taints": _taints(pool),
                    "expireAfter": "720h",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": "1m",
                "budgets": [{"nodes": "0", "reasons": ["Drifted", "Underutilized"]}],
            },
            "limits": limits,
        },
    }


def node_class(name: str, opts: KarpenterOptions) -> dict[str, Any]:
    discovery = {"karpenter.sh/discovery": opts.cluster_name}
    spec: dict[str, Any] = {
        "role": opts.node_role or f"KarpenterNodeRole-{opts.cluster_name}",
        "amiSelectorTerms": [{"alias": opts.ami_alias}],
        "subnetSelectorTerms": [{"tags": discovery}],
        "securityGroupSelectorTerms": [{"tags": discovery}],
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/xvda",
                "ebs": {
                    "volumeSize": f"{opts.root_volume_gib}Gi",
                    "volumeType": "gp3",
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        # pinned so the pod sizing (which subtracts kube-reserved = 255 MiB + 11 MiB x maxPods) holds
        "kubelet": {"maxPods": NODE_MAX_PODS},
        "tags": {"accelbench.io/managed": "true", "accelbench.io/node-class": name},
    }
    if name == "accelbench-cpu":
        spec["userData"] = CPU_USER_DATA
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "accelbench"}},
        "spec": spec,
    }


def karpenter_objects(
    opts: KarpenterOptions | None = None, instance: InstanceType | None = None
) -> list[dict[str, Any]]:
    """Every node class and node pool (all tiers), the run's instance family included in its pool."""
    opts = opts or KarpenterOptions()
    pools = _tier_pools(instance)
    classes = sorted({p[1] for p in pools})
    return [node_class(c, opts) for c in classes] + [node_pool(*p, opts) for p in pools]
