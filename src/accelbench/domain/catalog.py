"""Catalog types: cloud instance types, the accelerators (or CPUs) they carry, and prices.

Memory convention: ``accelerator_memory_gib`` is per device; CPU instances have 0 accelerators and 0
accelerator memory (host DRAM, ``memory_gib``, is the serving memory).
"""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import Field

from accelbench.domain.base import StrictModel


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
        default=None, description="What one core can pull from DRAM, GB/s."
    )
    per_core_bf16_gflops: float | None = Field(default=None, description="BF16 peak of one core, GFLOP/s.")
    sources: list[Source] = Field(default_factory=list)


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
    provider: Literal["aws"] = "aws"
    vcpus: int = Field(ge=1)
    memory_gib: float = Field(gt=0)
    arch: Literal["x86_64", "arm64"]
    numa_nodes: int = Field(default=1, ge=1)
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

    @property
    def total_accelerator_memory_gib(self) -> float:
        return self.accelerator_count * self.accelerator_memory_gib
