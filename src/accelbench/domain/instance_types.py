"""Catalog types: cloud instance types, the accelerators (or CPUs) they carry, and prices.

Memory convention: ``accelerator_memory_gib`` is per device; CPU instances have 0 accelerators and 0
accelerator memory (host DRAM, ``memory_gib``, is the serving memory).

CPU topology: ``vcpus`` is what the cloud sells; ``physical_cores`` and ``threads_per_core`` say how they are
made (an AWS Xeon vCPU is one of two hyperthreads of a core, a Graviton vCPU is a whole core, another
EC2-compatible cloud may differ). ``InstanceType.cores`` is the one answer the planner uses.
"""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import Field, model_validator

from accelbench.domain.strict import StrictModel


class AcceleratorType(enum.StrEnum):
    gpu = "gpu"
    neuron = "neuron"
    cpu = "cpu"


class PriceTier(enum.StrEnum):
    on_demand = "on_demand"
    reserved_1yr = "reserved_1yr"
    reserved_3yr = "reserved_3yr"


class Source(StrictModel):
    """Where a figure comes from."""

    title: str
    url: str | None = None
    accessed: str | None = Field(default=None, description="ISO date the source was read.")


class AcceleratorSpec(StrictModel):
    """Peak figures of one accelerator device, or of one CPU socket/generation for CPU rows."""

    name: str = Field(
        description="Key used by instance rows, e.g. H100-SXM, L4, Inferentia2, Graviton4, Xeon-SPR."
    )
    kind: AcceleratorType
    vendor: str = ""
    memory_gib: float = Field(default=0.0, ge=0, description="Device memory (0 for CPUs).")
    memory_reported_gib: float | None = Field(
        default=None,
        gt=0,
        description="Device memory as CUDA reports it (torch's total_memory, the figure vLLM's "
        "gpu_memory_utilization multiplies): below memory_gib by what the driver and ECC keep back, and "
        "for parts sold in GB by GB over GiB. None when no engine log gives it (memory_gib is used).",
    )
    memory_bandwidth_gbps: float = Field(
        description="Peak memory bandwidth, GB/s (per device; per socket for CPUs)."
    )
    bf16_tflops: float = Field(description="Dense BF16 peak, TFLOP/s (per device; per socket for CPUs).")
    fp16_tflops: float | None = None
    fp8_tflops: float | None = Field(default=None, description="Dense FP8 peak; None when unsupported.")
    int8_tops: float | None = None
    interconnect_gbps: float | None = Field(
        default=None, description="Device-to-device bandwidth (NVLink, NeuronLink), GB/s."
    )
    pcie_gen: int | None = Field(
        default=None,
        ge=3,
        le=6,
        description="PCIe generation of the device's host link: what an all-reduce between GPUs without "
        "NVLink runs over.",
    )
    supports_fp8_kv: bool = False
    # Neuron
    neuron_cores: int | None = Field(default=None, description="NeuronCores per device.")
    neuron_logical_cores: int | None = Field(
        default=None,
        description="NeuronCores the runtime exposes per device by default (Trainium2 groups two physical "
        "cores into one logical core, LNC=2); None when equal to neuron_cores.",
    )
    # CPU
    cores_per_socket: int | None = None
    isa: list[str] = Field(
        default_factory=list, description="amx, avx512, avx512_bf16, avx512_vnni, sve, sve2, bf16, i8mm ..."
    )
    memory_channels: int | None = None
    per_core_bandwidth_gbps: float | None = Field(
        default=None,
        description="What one core can read from DRAM, GB/s; derived from l2_outstanding_misses and "
        "dram_latency_ns (Little's law) when the row gives those instead.",
    )
    l2_outstanding_misses: int | None = Field(
        default=None,
        ge=1,
        description="L2 misses one core keeps in flight to DRAM (its miss queue); SMT siblings share it.",
    )
    dram_latency_ns: float | None = Field(
        default=None, gt=0, description="Loaded DRAM latency one core sees, ns."
    )
    per_core_bf16_gflops: float | None = Field(default=None, description="BF16 peak of one core, GFLOP/s.")
    sources: list[Source] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _derive_per_core_bandwidth(cls, data: object) -> object:
        """A row that gives a core's miss queue and DRAM latency gets its per-core bandwidth from them."""
        if not isinstance(data, dict):
            return data
        misses, latency = data.get("l2_outstanding_misses"), data.get("dram_latency_ns")
        if misses is None or latency is None:
            return data
        derived = little_law_bandwidth_gbps(float(misses), float(latency))
        given = data.get("per_core_bandwidth_gbps")
        if given is None:
            return {**data, "per_core_bandwidth_gbps": derived}
        if abs(float(given) - derived) > 0.05 * derived:
            raise ValueError(
                f"per_core_bandwidth_gbps {given} disagrees with l2_outstanding_misses x {CACHE_LINE_BYTES} B / "
                f"dram_latency_ns = {derived:g} GB/s; give the inputs or the figure, not both."
            )
        return data

    def sockets_for(self, cores: int) -> int | None:
        """The sockets ``cores`` physical cores of this CPU fill (None without a cores-per-socket figure)."""
        return max(1, -(-cores // self.cores_per_socket)) if self.cores_per_socket else None


CACHE_LINE_BYTES = 64


def little_law_bandwidth_gbps(outstanding_misses: float, latency_ns: float) -> float:
    """What one core can read from DRAM by Little's law: the misses it keeps in flight x one cache line each,
    over the (loaded) latency of one miss, in GB/s (bytes per ns), to 0.1 GB/s.

    This is a read-only stream (LLM decode reads its weights and KV cache): no read-for-ownership and no
    write-back take miss slots, as they do in a STREAM copy or triad."""
    return round(outstanding_misses * CACHE_LINE_BYTES / latency_ns, 1)


class Price(StrictModel):
    instance_type: str
    region: str
    tier: PriceTier = PriceTier.on_demand
    usd_per_hour: float = Field(ge=0)
    effective_date: str = Field(description="ISO date of the price.")
    source: str = Field(description="snapshot, aws-pricing-api, ...")


class InstanceType(StrictModel):
    """One cloud instance type."""

    name: str = Field(description="e.g. g6.2xlarge")
    family: str = Field(description="e.g. g6")
    provider: str = Field(
        default="aws",
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        description="The cloud that sells this type: 'aws', or the name of an EC2-compatible cloud "
        "(default 'ec2-compatible' for rows refreshed from a non-AWS endpoint).",
    )
    vcpus: int = Field(ge=1)
    physical_cores: int | None = Field(
        default=None,
        ge=1,
        description="Physical CPU cores (EC2 VCpuInfo.DefaultCores); None when unknown. Shipped rows derive "
        "it from vcpus / threads_per_core.",
    )
    threads_per_core: int | None = Field(
        default=None,
        ge=1,
        description="Hardware threads per core (EC2 VCpuInfo.DefaultThreadsPerCore): 2 on AWS Intel Xeon "
        "sizes (hyperthreading), 1 on Graviton; None when unknown.",
    )
    memory_gib: float = Field(gt=0)
    arch: Literal["x86_64", "arm64"]
    numa_nodes: int = Field(default=1, ge=1)
    memory_read_gbps: float | None = Field(
        default=None,
        gt=0,
        description="DRAM read bandwidth measured on this instance type with every vCPU reading (GB/s); None "
        "when not measured. A VM that holds part of a socket, or one sub-NUMA cluster of it, reads well below "
        "the socket's channel peak: the planner takes this as the ceiling of what the instance's cores reach.",
    )
    memory_read_source: str | None = Field(
        default=None, description="Who measured memory_read_gbps, and how (None without a measurement)."
    )
    network_gbps: float = Field(default=0.0, ge=0)
    accelerator_type: AcceleratorType
    accelerator_name: str = Field(description="Key into the accelerator specs (a CPU name for CPU rows).")
    accelerator_count: int = Field(default=0, ge=0)
    accelerator_memory_gib: float = Field(default=0.0, ge=0, description="Per device; 0 for CPU.")
    cpu_generation: str | None = Field(
        default=None, description="e.g. Graviton4, Sapphire Rapids (4th gen Xeon)."
    )
    cpu_isa: list[str] = Field(default_factory=list)
    on_demand_usd: float | None = Field(default=None, ge=0, description="Snapshot on-demand price per hour.")
    price_region: str | None = None
    price_date: str | None = None
    price_source: str | None = None
    refreshed_from: str | None = Field(
        default=None,
        max_length=512,
        description="EC2 API endpoint this row was read from by `catalog refresh-instances` (credentials "
        "masked); None for shipped and hand-written rows.",
    )
    refreshed_region: str | None = Field(
        default=None, max_length=64, description="Region of that DescribeInstanceTypes call."
    )
    refreshed_date: str | None = Field(default=None, description="ISO date of that call.")

    @model_validator(mode="after")
    def _topology_adds_up(self) -> InstanceType:
        if self.memory_read_source is not None and self.memory_read_gbps is None:
            raise ValueError("memory_read_source names a measurement but memory_read_gbps is not given")
        if self.physical_cores is not None:
            if self.physical_cores > self.vcpus:
                raise ValueError(f"physical_cores ({self.physical_cores}) exceeds vcpus ({self.vcpus})")
            if (
                self.threads_per_core is not None
                and self.physical_cores * self.threads_per_core != self.vcpus
            ):
                raise ValueError(
                    f"physical_cores x threads_per_core ({self.physical_cores} x {self.threads_per_core}) "
                    f"is not vcpus ({self.vcpus})"
                )
        return self

    @property
    def total_accelerator_memory_gib(self) -> float:
        return self.accelerator_count * self.accelerator_memory_gib

    @property
    def cores(self) -> int:
        """Physical cores: ``physical_cores`` when known, else ``vcpus // threads_per_core``, else the old
        guess (an x86_64 vCPU is a hyperthread, two per core, on sizes above one vCPU; an arm64 vCPU is a
        core)."""
        if self.physical_cores is not None:
            return self.physical_cores
        if self.threads_per_core is not None:
            return max(1, self.vcpus // self.threads_per_core)
        smt = 2 if self.arch == "x86_64" and self.vcpus > 1 else 1
        return max(1, self.vcpus // smt)
