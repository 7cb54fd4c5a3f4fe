"""The model server's Deployment and Service, per accelerator tier, from the runtime's own argv and env.

Tier differences (each asserted by the tests):
- GPU: ``nvidia.com/gpu`` requests/limits, the ``nvidia.com/gpu`` toleration, /dev/shm in memory.
- Neuron: ``aws.amazon.com/neuron`` requests/limits and toleration, a much longer start-up allowance
  (the model is compiled before it serves).
- CPU: no device resource; ``kubernetes.io/arch`` node selector; the ``accelbench.io/cpu`` and
  ``accelbench.io/dedicated`` tolerations (the taints of our CPU node pools); ``SYS_NICE`` and an unconfined
  seccomp profile (vLLM binds threads and memory to NUMA nodes with sched_setaffinity / set_mempolicy, which
  the default profile refuses); CPU and memory requests equal to limits; /dev/shm; VLLM_CPU_KVCACHE_SPACE.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from accelbench.deploy.manifests.sizing import PodSize, probes, size_pod
from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.strict import StrictModel
from accelbench.runtimes.runtime import Runtime, ServeParams

CPU_TAINT = "accelbench.io/cpu"
DEDICATED_TAINT = "accelbench.io/dedicated"
GPU_RESOURCE = "nvidia.com/gpu"
NEURON_RESOURCE = "aws.amazon.com/neuron"
CACHE_DIR = "/cache"
MANAGED_BY = "accelbench"

#: kubernetes.io/arch values (Go's GOARCH names, not uname's)
K8S_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


class EnginePlan(StrictModel):
    """Everything the engine manifests are rendered from."""

    name: str = Field(description="Name of the Deployment and Service (DNS-1035 label).")
    namespace: str = Field(description="Kubernetes namespace.")
    runtime: str = Field(description="Runtime name.")
    engine_version: str = Field(description="Runtime version (from the tool versions).")
    image: str = Field(description="Container image of the engine.")
    command: list[str] = Field(description="Full container argv, exactly what the runtime produced.")
    env: dict[str, str] = Field(description="Engine environment from the runtime.")
    params: ServeParams = Field(description="The serving parameters the argv was built from.")
    instance: InstanceType = Field(description="Instance type the pod is pinned to.")
    run_id: str | None = Field(default=None, description="accelbench run id, as a label.")
    hf_token_secret: str | None = Field(default=None, description="Secret with key HF_TOKEN.")
    tensor_parallel: int = Field(default=1, ge=1, description="Ranks of the engine (sizes /dev/shm).")

    @property
    def tier(self) -> AcceleratorType:
        return self.instance.accelerator_type

    @property
    def size(self) -> PodSize:
        return size_pod(self.instance, self.tensor_parallel, self.params.model_size_gib)

    @property
    def port(self) -> int:
        return self.params.port

    def labels(self) -> dict[str, str]:
        labels = {
            "app.kubernetes.io/name": "accelbench-engine",
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/component": "engine",
            "app.kubernetes.io/managed-by": MANAGED_BY,
            "accelbench.io/tier": self.tier.value,
            "accelbench.io/runtime": self.runtime,
        }
        if self.run_id:
            labels["accelbench.io/run-id"] = self.run_id
        return labels

    def selector(self) -> dict[str, str]:
        return {"app.kubernetes.io/instance": self.name, "app.kubernetes.io/component": "engine"}

    @property
    def service_url(self) -> str:
        return f"http://{self.name}.{self.namespace}.svc.cluster.local:{self.port}"


def plan_engine(
    params: ServeParams,
    runtime: Runtime,
    *,
    name: str,
    namespace: str,
    version: str,
    registry: str | None = None,
    environ: dict[str, str] | None = None,
    run_id: str | None = None,
) -> EnginePlan:
    if params.instance is None:
        raise ValueError("manifests need the instance type in the serving parameters")
    params = params.model_copy(update={"host": "0.0.0.0", "port": runtime.container_port})
    env = runtime.env(params)
    env.setdefault("HF_HOME", f"{CACHE_DIR}/huggingface")
    tp_of = getattr(runtime, "tensor_parallel", None)
    tensor_parallel = int(tp_of(params)) if callable(tp_of) else 1
    return EnginePlan(
        name=name,
        namespace=namespace,
        runtime=runtime.name,
        engine_version=version,
        image=runtime.image(version, registry, params.arch, environ=environ),
        command=runtime.command(params, python="python3"),
        env=env,
        params=params,
        instance=params.instance,
        run_id=run_id,
        hf_token_secret=params.hf_token_secret,
        tensor_parallel=tensor_parallel,
    )


def tolerations(tier: AcceleratorType) -> list[dict[str, str]]:
    if tier == AcceleratorType.cpu:
        keys = [CPU_TAINT, DEDICATED_TAINT]
    elif tier == AcceleratorType.gpu:
        keys = [GPU_RESOURCE]
    else:
        keys = [NEURON_RESOURCE]
    return [{"key": k, "operator": "Exists", "effect": "NoSchedule"} for k in keys]


def _resources(plan: EnginePlan) -> dict[str, Any]:
    size = plan.size
    compute = {"cpu": str(size.cpus), "memory": f"{size.memory_mib}Mi"}
    requests: dict[str, str] = {**compute, "ephemeral-storage": f"{size.cache_gib}Gi"}
    limits: dict[str, str] = dict(compute)
    if plan.tier == AcceleratorType.gpu:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = str(plan.instance.accelerator_count)
    elif plan.tier == AcceleratorType.neuron:
        requests[NEURON_RESOURCE] = limits[NEURON_RESOURCE] = str(plan.instance.accelerator_count)
    return {"requests": requests, "limits": limits}


def _env(plan: EnginePlan) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(plan.env.items())]
    if plan.hf_token_secret:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": plan.hf_token_secret, "key": "HF_TOKEN"}},
            }
        )
    return env


def engine_deployment(plan: EnginePlan, *, sidecar: dict[str, Any] | None = None) -> dict[str, Any]:
    """``sidecar``: a device exporter container beside the engine (``telemetry.sidecar_container``)."""
    size = plan.size
    container: dict[str, Any] = {
        "name": "engine",
        "image": plan.image,
        "imagePullPolicy": "IfNotPresent",
        "command": plan.command,
        "env": _env(plan),
        "ports": [{"name": "http", "containerPort": plan.port, "protocol": "TCP"}],
        "resources": _resources(plan),
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "cache", "mountPath": CACHE_DIR},
        ],
        **probes(plan.tier, size),
    }
    pod_spec: dict[str, Any] = {
        "nodeSelector": {
            "node.kubernetes.io/instance-type": plan.instance.name,
            "kubernetes.io/arch": K8S_ARCH[plan.instance.arch],
        },
        "tolerations": tolerations(plan.tier),
        # Service links would put <SERVICE>_PORT variables in the engine's environment; vLLM reads
        # VLLM_PORT itself and fails on "tcp://..." when a service happens to be named "vllm".
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 30,
        "containers": [container, *([sidecar] if sidecar else [])],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{size.shm_mib}Mi"}},
            {"name": "cache", "emptyDir": {"sizeLimit": f"{size.cache_gib}Gi"}},
        ],
    }
    if plan.tier == AcceleratorType.cpu:
        container["securityContext"] = {
            "capabilities": {"add": ["SYS_NICE"]},
            "seccompProfile": {"type": "Unconfined"},
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": plan.name, "namespace": plan.namespace, "labels": plan.labels()},
        "spec": {
            "replicas": 1,
            # one pod holds the whole node (and its devices): a rolling update could never schedule
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": plan.selector()},
            "template": {
                "metadata": {
                    "labels": plan.labels(),
                    # Karpenter must not replace the node while a benchmark runs on it
                    "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                },
                "spec": pod_spec,
            },
        },
    }


def engine_service(plan: EnginePlan, *, extra_ports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``extra_ports``: the Service's ports onto a sidecar (a device exporter's metrics)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": plan.name, "namespace": plan.namespace, "labels": plan.labels()},
        "spec": {
            "type": "ClusterIP",
            "selector": plan.selector(),
            "ports": [
                {"name": "http", "port": plan.port, "targetPort": "http", "protocol": "TCP"},
                *(extra_ports or []),
            ],
        },
    }
