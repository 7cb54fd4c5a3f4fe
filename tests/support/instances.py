"""Instance types for tests that must not depend on the shipped catalog's exact rows."""

from __future__ import annotations

from typing import Any

from accelbench.domain.instance_types import AcceleratorType, InstanceType


def instance(name: str, **overrides: Any) -> InstanceType:
    """A few realistic rows (vCPU, memory, devices as on AWS); ``overrides`` replace fields."""
    rows: dict[str, dict[str, Any]] = {
        "g6.2xlarge": dict(
            vcpus=8,
            memory_gib=32,
            arch="x86_64",
            accelerator_type=AcceleratorType.gpu,
            accelerator_name="L4",
            accelerator_count=1,
            accelerator_memory_gib=24,
            network_gbps=10,
        ),
        "g6.12xlarge": dict(
            vcpus=48,
            memory_gib=192,
            arch="x86_64",
            accelerator_type=AcceleratorType.gpu,
            accelerator_name="L4",
            accelerator_count=4,
            accelerator_memory_gib=24,
            network_gbps=40,
        ),
        "p5.48xlarge": dict(
            vcpus=192,
            memory_gib=2048,
            arch="x86_64",
            accelerator_type=AcceleratorType.gpu,
            accelerator_name="H100",
            accelerator_count=8,
            accelerator_memory_gib=80,
            network_gbps=3200,
            numa_nodes=2,
        ),
        "inf2.xlarge": dict(
            vcpus=4,
            memory_gib=16,
            arch="x86_64",
            accelerator_type=AcceleratorType.neuron,
            accelerator_name="Inferentia2",
            accelerator_count=1,
            accelerator_memory_gib=32,
            network_gbps=15,
        ),
        "inf2.48xlarge": dict(
            vcpus=192,
            memory_gib=768,
            arch="x86_64",
            accelerator_type=AcceleratorType.neuron,
            accelerator_name="Inferentia2",
            accelerator_count=12,
            accelerator_memory_gib=32,
            network_gbps=100,
        ),
        "m8i.2xlarge": dict(
            vcpus=8,
            memory_gib=32,
            arch="x86_64",
            accelerator_type=AcceleratorType.cpu,
            accelerator_name="Xeon-GNR",
            cpu_isa=["amx", "avx512", "avx512_bf16"],
            network_gbps=15,
        ),
        "m7i.48xlarge": dict(
            vcpus=192,
            memory_gib=768,
            arch="x86_64",
            accelerator_type=AcceleratorType.cpu,
            accelerator_name="Xeon-SPR",
            numa_nodes=2,
            network_gbps=50,
        ),
        "r8g.4xlarge": dict(
            vcpus=16,
            memory_gib=128,
            arch="arm64",
            accelerator_type=AcceleratorType.cpu,
            accelerator_name="Graviton4",
            network_gbps=15,
        ),
    }
    base = dict(rows[name])
    base.update(overrides)
    return InstanceType(name=name, family=name.split(".")[0], **base)
