"""Sizing of the model pod per accelerator tier: CPU and memory, /dev/shm, start-up allowance, probes.

CPU and memory are sized so the pod fits on the one node of the requested type *as Karpenter sees it*, and
requests equal limits (Guaranteed QoS). The seed platform requested 75% of the vCPUs and 85% of the memory;
we compute from the node's real reservations instead:

- memory: Karpenter assumes 7.5% of an instance's memory goes to the hypervisor/OS (its
  ``vmMemoryOverheadPercent``), then subtracts kube-reserved (EKS: 255 MiB + 11 MiB per pod; our node classes
  pin ``maxPods`` to 110), the 100 MiB eviction threshold and what daemonsets request. A flat 85% asks for
  more than that on a 16 GiB node (the pod would never schedule) and wastes ~7 GiB on a 128 GiB one.
- CPU: whole cores (with the static CPU manager our CPU node class enables, a Guaranteed pod with an integer
  CPU count gets exclusive cores, which vLLM's OpenMP binding then uses), leaving one vCPU per 16 for the
  kubelet and daemonsets; on x86 an even count so no physical core is shared with another pod.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelbench.domain.instance_types import AcceleratorType, InstanceType

MIB = 1
GIB_MIB = 1024

KARPENTER_VM_OVERHEAD = 0.075
NODE_MAX_PODS = 110
EVICTION_MIB = 100
#: what daemonsets (CNI, kube-proxy, CSI, pod identity; device plugin and DCGM on accelerator nodes) request
DAEMONSET_MIB = {AcceleratorType.cpu: 1024, AcceleratorType.gpu: 1536, AcceleratorType.neuron: 1536}

#: start-up floors (seconds): the seed's probe budgets (GPU/CPU 120 x 10 s, Neuron 540 x 10 s for compilation)
STARTUP_FLOOR_S = {AcceleratorType.gpu: 1200, AcceleratorType.cpu: 1200, AcceleratorType.neuron: 5400}
#: start-up per GiB of weights (download + load; Neuron: compilation grows with the model)
STARTUP_PER_GIB_S = {AcceleratorType.gpu: 20, AcceleratorType.cpu: 30, AcceleratorType.neuron: 120}
STARTUP_BASE_S = {AcceleratorType.gpu: 300, AcceleratorType.cpu: 300, AcceleratorType.neuron: 1800}
#: scheduling allowance on top of start-up: Karpenter launching a node and pulling a multi-GB image
SCHEDULING_ALLOWANCE_S = 900
PROBE_PERIOD_S = 10


def kube_reserved_mib(max_pods: int = NODE_MAX_PODS) -> int:
    """EKS AMI kube-reserved memory: 255 MiB + 11 MiB per pod."""
    return 255 + 11 * max_pods


def pod_memory_mib(instance: InstanceType) -> int:
    total = instance.memory_gib * GIB_MIB
    allocatable = total * (1 - KARPENTER_VM_OVERHEAD) - kube_reserved_mib() - EVICTION_MIB
    usable = allocatable - DAEMONSET_MIB[instance.accelerator_type]
    return max(512, int(usable // 256 * 256))  # 256 MiB steps, easier to read in the manifest


def pod_cpus(instance: InstanceType) -> int:
    reserve = max(1, math.ceil(instance.vcpus / 16))
    cpus = instance.vcpus - reserve
    if instance.arch == "x86_64" and cpus > 2 and cpus % 2:
        cpus -= 1  # whole physical cores (two hyperthreads each)
    return max(1, cpus)


def shm_mib(instance: InstanceType, tensor_parallel: int, memory_mib: int) -> int:
    """/dev/shm (memory-backed, counted against the pod's memory): NCCL / vLLM's shared-memory broadcast.

    Multi-rank runs move activations through it, so they get more; never above 10% of the pod memory.
    """
    want = 8 * GIB_MIB if tensor_parallel > 1 else 2 * GIB_MIB
    return max(256, min(want, memory_mib // 10))


def cache_gib(model_size_gib: float | None) -> int:
    """Local disk for the model download (and Neuron's compiled graphs): weights x 1.5 + 10 GiB, >= 50."""
    if not model_size_gib:
        return 100
    return max(50, math.ceil(model_size_gib * 1.5 + 10))


def startup_allowance_s(tier: AcceleratorType, model_size_gib: float | None) -> int:
    size = model_size_gib or 0.0
    sized = STARTUP_BASE_S[tier] + size * STARTUP_PER_GIB_S[tier]
    return int(max(STARTUP_FLOOR_S[tier], math.ceil(sized)))


def ready_timeout_s(tier: AcceleratorType, model_size_gib: float | None) -> int:
    """How long the Kubernetes target waits for the model pod to become ready."""
    return startup_allowance_s(tier, model_size_gib) + SCHEDULING_ALLOWANCE_S


@dataclass(frozen=True)
class PodSize:
    cpus: int
    memory_mib: int
    shm_mib: int
    cache_gib: int
    startup_s: int

    @property
    def startup_failure_threshold(self) -> int:
        return math.ceil(self.startup_s / PROBE_PERIOD_S)


def size_pod(instance: InstanceType, tensor_parallel: int, model_size_gib: float | None) -> PodSize:
    mem = pod_memory_mib(instance)
    return PodSize(
        cpus=pod_cpus(instance),
        memory_mib=mem,
        shm_mib=shm_mib(instance, tensor_parallel, mem),
        cache_gib=cache_gib(model_size_gib),
        startup_s=startup_allowance_s(instance.accelerator_type, model_size_gib),
    )


def probes(tier: AcceleratorType, size: PodSize) -> dict[str, dict[str, object]]:
    """Start-up covers weight loading (and Neuron compilation); liveness is lenient on CPU, where a loaded
    server answers /health between decode steps that share the same cores."""

    def health() -> dict[str, object]:
        return {"path": "/health", "port": "http"}

    live_period, live_timeout, live_failures = (30, 10, 6) if tier == AcceleratorType.cpu else (15, 5, 4)
    return {
        "startupProbe": {
            "httpGet": health(),
            "periodSeconds": PROBE_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": size.startup_failure_threshold,
        },
        "readinessProbe": {
            "httpGet": health(),
            "periodSeconds": 5,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": health(),
            "periodSeconds": live_period,
            "timeoutSeconds": live_timeout,
            "failureThreshold": live_failures,
        },
    }
