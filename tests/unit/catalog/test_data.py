"""The shipped catalog data: complete, internally consistent, and matching the known instance shapes."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import statistics

import pytest

from accelbench.catalog import load_catalog, serving_memory_gib
from accelbench.catalog.loader import Catalog
from accelbench.domain.instance_types import AcceleratorType, InstanceType


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


def by_family(cat: Catalog, family: str) -> dict[str, InstanceType]:
    return {i.name: i for i in cat.instances if i.family == family}


REQUIRED_FAMILIES = {
    AcceleratorType.gpu: ["g5", "g6", "g6e", "gr6", "g7e", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300"],
    AcceleratorType.neuron: ["inf2", "trn1", "trn1n", "trn2"],
    AcceleratorType.cpu: [
        "c7g", "m7g", "r7g", "c8g", "m8g", "r8g", "c9g", "m9g", "c7i", "m7i", "r7i", "c8i", "m8i", "r8i",
    ],
}  # fmt: skip


@pytest.mark.parametrize("kind", list(AcceleratorType))
def test_required_families_present_in_their_tier(cat: Catalog, kind: AcceleratorType) -> None:
    for fam in REQUIRED_FAMILIES[kind]:
        rows = cat.filter(family=fam)
        assert rows, fam
        assert {i.accelerator_type for i in rows} == {kind}, fam


def test_names_other_issues_rely_on(cat: Catalog) -> None:
    for name in ("g6.2xlarge", "inf2.xlarge", "m8i.2xlarge", "r8g.4xlarge"):
        assert cat.instance(name).name == name


def test_every_instance_has_a_matching_accelerator_spec(cat: Catalog) -> None:
    for inst in cat.instances:
        spec = cat.accelerator_for(inst)
        assert spec.kind == inst.accelerator_type, inst.name
        if inst.accelerator_type == AcceleratorType.cpu:
            assert inst.accelerator_count == 0 and inst.accelerator_memory_gib == 0, inst.name
            assert inst.cpu_generation and inst.cpu_isa, inst.name
            assert serving_memory_gib(inst) == inst.memory_gib
        else:
            assert inst.accelerator_count > 0, inst.name
            assert inst.accelerator_memory_gib == spec.memory_gib, inst.name
            assert serving_memory_gib(inst) == inst.accelerator_count * inst.accelerator_memory_gib


def test_names_are_unique_lowercase_and_in_their_family(cat: Catalog) -> None:
    names = cat.names()
    assert len(names) == len(set(names))
    for inst in cat.instances:
        assert inst.name == inst.name.lower()
        assert inst.name.split(".", 1)[0] == inst.family


def test_snapshot_prices_are_positive_dated_and_sourced(cat: Catalog) -> None:
    priced = [i for i in cat.instances if i.on_demand_usd is not None]
    assert len(priced) >= len(cat.instances) - 3  # only p5e / trn2.3xlarge lack an on-demand figure
    for inst in priced:
        assert inst.on_demand_usd and inst.on_demand_usd > 0, inst.name
        assert inst.price_region == "us-east-1", inst.name
        assert inst.price_date is not None
        dt.date.fromisoformat(inst.price_date)
        assert inst.price_source in ("aws-price-list snapshot",) or inst.price_source.startswith(
            "estimate"
        ), inst.name
    # Estimates are only where no published figure existed (Graviton5).
    estimated = {i.family for i in priced if i.price_source != "aws-price-list snapshot"}
    assert estimated <= {"c9g", "m9g"}


def test_prices_grow_with_size_inside_each_family(cat: Catalog) -> None:
    for fam in cat.families():
        rows = [i for i in cat.filter(family=fam) if i.on_demand_usd and "metal" not in i.name]
        rows.sort(key=lambda i: (i.accelerator_count, i.vcpus))
        for a, b in itertools.pairwise(rows):
            assert a.on_demand_usd is not None and b.on_demand_usd is not None
            assert b.on_demand_usd >= a.on_demand_usd, (a.name, b.name)


def test_cpu_prices_are_linear_in_size(cat: Catalog) -> None:
    # AWS prices a CPU family per vCPU; a typo in one row breaks this.
    for fam in REQUIRED_FAMILIES[AcceleratorType.cpu]:
        rows = [i for i in cat.filter(family=fam) if "metal" not in i.name]
        per_vcpu = {round(i.on_demand_usd / i.vcpus, 5) for i in rows if i.on_demand_usd}
        assert max(per_vcpu) / min(per_vcpu) < 1.01, (fam, per_vcpu)


# ----------------------------------------------------------------------------------- shapes (seed facts)
G5_G6_SIZES = {
    "xlarge": (4, 16, 1), "2xlarge": (8, 32, 1), "4xlarge": (16, 64, 1),
    "12xlarge": (48, 192, 4), "48xlarge": (192, 768, 8),
}  # fmt: skip


@pytest.mark.parametrize("family", ["g5", "g6"])
def test_g5_g6_shapes(cat: Catalog, family: str) -> None:
    for size, (vcpu, mem, gpus) in G5_G6_SIZES.items():
        inst = cat.instance(f"{family}.{size}")
        assert (inst.vcpus, inst.memory_gib, inst.accelerator_count) == (vcpu, mem, gpus)
        assert inst.accelerator_memory_gib == 24


def test_gpu_families_per_device_memory_and_counts(cat: Catalog) -> None:
    g6e = by_family(cat, "g6e")
    assert {i.accelerator_memory_gib for i in g6e.values()} == {48}
    assert {i.accelerator_count for i in g6e.values()} == {1, 4, 8}
    g7e = by_family(cat, "g7e")
    assert {i.accelerator_memory_gib for i in g7e.values()} == {96}
    assert min(i.accelerator_count for i in g7e.values()) == 1
    assert max(i.accelerator_count for i in g7e.values()) == 8
    assert cat.instance("g7e.12xlarge").accelerator_count == 2
    assert set(by_family(cat, "gr6")) == {"gr6.4xlarge", "gr6.8xlarge"}
    assert {i.accelerator_name for i in by_family(cat, "gr6").values()} == {"L4"}


@pytest.mark.parametrize(
    ("name", "accel", "total_gib", "vcpus", "memory"),
    [
        ("p4d.24xlarge", "A100-40GB", 320, 96, 1152),
        ("p4de.24xlarge", "A100-80GB", 640, 96, 1152),
        ("p5.48xlarge", "H100-SXM", 640, 192, 2048),
        ("p5e.48xlarge", "H200", 1128, 192, 2048),
        ("p5en.48xlarge", "H200", 1128, 192, 2048),
        ("p6-b200.48xlarge", "B200", 1432, 192, 2048),
        # AWS lists "2.1 TB" of GPU memory (8 x 268 GiB) and 192 vCPUs.
        ("p6-b300.48xlarge", "B300", 2144, 192, 4096),
    ],
)
def test_p_family_shapes(
    cat: Catalog, name: str, accel: str, total_gib: float, vcpus: int, memory: float
) -> None:
    inst = cat.instance(name)
    assert inst.accelerator_name == accel
    assert inst.accelerator_count == 8
    assert inst.total_accelerator_memory_gib == total_gib
    assert (inst.vcpus, inst.memory_gib) == (vcpus, memory)


@pytest.mark.parametrize(
    ("name", "cores"),
    [("inf2.xlarge", 2), ("inf2.8xlarge", 2), ("inf2.24xlarge", 12), ("inf2.48xlarge", 24),
     ("trn1.2xlarge", 2), ("trn1.32xlarge", 32), ("trn1n.32xlarge", 32), ("trn2.48xlarge", 64)],
)  # fmt: skip
def test_neuron_core_counts(cat: Catalog, name: str, cores: int) -> None:
    inst = cat.instance(name)
    spec = cat.accelerator_for(inst)
    per_device = spec.neuron_logical_cores or spec.neuron_cores
    assert per_device is not None
    assert inst.accelerator_count * per_device == cores


def test_trn2_memory_is_per_chip_not_per_core(cat: Catalog) -> None:
    # The seed platform multiplied 96 GiB by 64 cores (6144 GiB); 96 GiB is the HBM of one Trainium2 chip.
    inst = cat.instance("trn2.48xlarge")
    assert inst.accelerator_count == 16
    assert inst.total_accelerator_memory_gib == 1536
    spec = cat.accelerator_for(inst)
    assert spec.neuron_cores == 8 and spec.neuron_logical_cores == 4
    assert spec.memory_gib / spec.neuron_logical_cores == 24


GRAVITON_SHAPES = {
    "r8g.4xlarge": (16, 128), "r8g.8xlarge": (32, 256), "r8g.16xlarge": (64, 512), "r8g.24xlarge": (96, 768),
    "r8g.48xlarge": (192, 1536), "m8g.12xlarge": (48, 192), "m8g.24xlarge": (96, 384), "m8g.48xlarge": (192, 768),
    "c8g.12xlarge": (48, 96), "c8g.24xlarge": (96, 192), "r7g.8xlarge": (32, 256), "r7g.16xlarge": (64, 512),
    "m7g.16xlarge": (64, 256), "c7g.16xlarge": (64, 128), "m9g.16xlarge": (64, 256), "m9g.24xlarge": (96, 384),
    "c9g.16xlarge": (64, 128),
}  # fmt: skip


def test_graviton_shapes_from_the_seed_platform(cat: Catalog) -> None:
    for name, (vcpu, mem) in GRAVITON_SHAPES.items():
        inst = cat.instance(name)
        assert (inst.vcpus, inst.memory_gib) == (vcpu, mem), name
        assert inst.accelerator_count == 0 and inst.accelerator_memory_gib == 0


SIZE_UNITS = {"medium": 0.5, "large": 1, "xlarge": 2, "metal-24xl": 48, "metal-48xl": 96, "metal-96xl": 192}


def _units(size: str) -> float:
    if size in SIZE_UNITS:
        return SIZE_UNITS[size]
    m = re.fullmatch(r"(\d+)xlarge", size)
    assert m, size
    return int(m.group(1)) * 2


def test_cpu_rows_memory_ratio_and_vcpus_follow_the_size_name(cat: Catalog) -> None:
    ratio = {"c": 2, "m": 4, "r": 8}
    for inst in cat.filter(accelerator_type="cpu"):
        size = inst.name.split(".", 1)[1]
        if size != "metal":  # c7g.metal etc. = 16xlarge
            expected = max(1, int(_units(size) * 2))
            assert inst.vcpus == expected, inst.name
        assert inst.memory_gib == inst.vcpus * ratio[inst.family[0]], inst.name


def test_cpu_generation_and_isa(cat: Catalog) -> None:
    gens = {"7g": "Graviton3", "8g": "Graviton4", "9g": "Graviton5", "7i": "Xeon-SPR", "8i": "Xeon-GNR"}
    for inst in cat.filter(accelerator_type="cpu"):
        assert inst.accelerator_name == gens[inst.family[1:]], inst.name
        spec = cat.accelerator_for(inst)
        assert inst.cpu_isa == spec.isa, inst.name
        if inst.arch == "x86_64":
            assert {"amx", "amx_bf16", "avx512", "avx512_bf16", "avx512_vnni"} <= set(inst.cpu_isa)
        else:
            assert {"sve", "bf16", "i8mm"} <= set(inst.cpu_isa)
            assert ("sve2" in inst.cpu_isa) == (inst.accelerator_name != "Graviton3")
    assert "amx_fp16" in cat.accelerator("Xeon-GNR").isa
    assert "amx_fp16" not in cat.accelerator("Xeon-SPR").isa


def test_numa_nodes_are_what_lscpu_reports(cat: Catalog) -> None:
    for inst in cat.filter(accelerator_type="cpu"):
        spec = cat.accelerator_for(inst)
        assert spec.cores_per_socket
        sockets = -(-inst.cores // spec.cores_per_socket)
        assert inst.numa_nodes % sockets == 0, inst.name  # a socket is one node, or split evenly
    assert cat.instance("m7i.48xlarge").numa_nodes == 2
    assert cat.instance("m7i.24xlarge").numa_nodes == 1
    # Xeon 6 runs sub-NUMA clustering: 32 cores a node
    assert cat.instance("m8i.16xlarge").numa_nodes == 1
    assert cat.instance("m8i.24xlarge").numa_nodes == 2
    assert cat.instance("m8i.48xlarge").numa_nodes == 3
    assert cat.instance("m8i.96xlarge").numa_nodes == 6
    assert cat.instance("r8g.48xlarge").numa_nodes == 2  # Graviton4's largest size is two sockets
    assert {i.numa_nodes for i in cat.filter(family=["c7g", "m7g", "r7g", "c9g"])} == {1}


# ----------------------------------------------------------------------------------- accelerator specs
def test_every_spec_is_sourced(cat: Catalog) -> None:
    for spec in cat.accelerators.values():
        assert spec.sources, spec.name
        for src in spec.sources:
            assert src.title and src.url and src.url.startswith("https://"), spec.name
            assert src.accessed
            dt.date.fromisoformat(src.accessed)


def test_gpu_specs(cat: Catalog) -> None:
    fp8_kv = {n for n, s in cat.accelerators.items() if s.supports_fp8_kv}
    assert fp8_kv == {"L4", "L40S", "RTX-PRO-6000", "H100-SXM", "H200", "B200", "B300"}
    for spec in cat.accelerators.values():
        if spec.kind == AcceleratorType.cpu:
            continue
        if spec.fp8_tflops is not None:
            assert spec.fp8_tflops >= spec.bf16_tflops, spec.name
    h100, h200 = cat.accelerator("H100-SXM"), cat.accelerator("H200")
    assert (h100.bf16_tflops, h100.memory_bandwidth_gbps, h100.memory_gib) == (989, 3350, 80)
    assert (h200.memory_bandwidth_gbps, h200.memory_gib) == (4800, 141)
    assert cat.accelerator("A10G").fp8_tflops is None
    assert cat.accelerator("L4").memory_bandwidth_gbps == 300


def _read_per_core(cat: Catalog, accelerator: str, cores: int) -> list[float]:
    """DRAM read GB/s per core measured on the catalog's sizes of ``cores`` physical cores (every vCPU reading)."""
    return [
        i.memory_read_gbps / cores
        for i in cat.instances
        if i.accelerator_name == accelerator and i.cores == cores and i.memory_read_gbps
    ]


def test_xeon_per_core_bandwidth_is_what_one_core_reads(cat: Catalog) -> None:
    """Granite Rapids: misses in flight x 64 B / loaded DRAM latency (Little's law), which the small sizes' measured
    reads confirm to within 15%. Sapphire Rapids: the measured read of its 1- and 2-core sizes, half what Little's
    law at the same latency would say."""
    gnr = cat.accelerator("Xeon-GNR")
    assert gnr.l2_outstanding_misses == 48 and gnr.dram_latency_ns is not None
    assert gnr.per_core_bandwidth_gbps == pytest.approx(48 * 64 / gnr.dram_latency_ns, abs=0.05)
    small = _read_per_core(cat, "Xeon-GNR", 1) + _read_per_core(cat, "Xeon-GNR", 2)
    assert len(small) >= 6 and statistics.median(small) >= 0.85 * gnr.per_core_bandwidth_gbps
    spr = cat.accelerator("Xeon-SPR")
    measured = _read_per_core(cat, "Xeon-SPR", 1) + _read_per_core(cat, "Xeon-SPR", 2)
    assert len(measured) >= 6
    # the catalog keeps whole GB/s per size; the spec's figure is the median of the unrounded reads
    assert spr.per_core_bandwidth_gbps == pytest.approx(statistics.median(measured), abs=0.3)
    assert spr.per_core_bandwidth_gbps < 0.6 * 48 * 64 / 125


def test_cpu_specs_are_consistent(cat: Catalog) -> None:
    for spec in cat.accelerators.values():
        if spec.kind != AcceleratorType.cpu:
            continue
        cores = spec.cores_per_socket
        assert cores and spec.per_core_bf16_gflops and spec.per_core_bandwidth_gbps and spec.memory_channels
        # The socket BF16 peak is all its cores at the per-core peak.
        assert spec.bf16_tflops == pytest.approx(cores * spec.per_core_bf16_gflops / 1000, rel=0.02), (
            spec.name
        )
        # One core cannot saturate the socket; all of them can.
        assert spec.per_core_bandwidth_gbps < spec.memory_bandwidth_gbps / 4
        assert cores * spec.per_core_bandwidth_gbps > spec.memory_bandwidth_gbps
    # AMX gives Intel an order of magnitude more BF16 per core than Arm BFMMLA.
    assert (
        cat.accelerator("Xeon-SPR").per_core_bf16_gflops
        > 10 * cat.accelerator("Graviton4").per_core_bf16_gflops
    )
    assert cat.accelerator("Graviton4").memory_bandwidth_gbps == pytest.approx(12 * 5600 * 8 / 1000)
    assert cat.accelerator("Graviton3").memory_bandwidth_gbps == pytest.approx(8 * 4800 * 8 / 1000)


def test_xeon_6_socket_peak_is_above_what_was_measured_on_it(cat: Catalog) -> None:
    gnr = cat.accelerator("Xeon-GNR")
    # Chips and Cheese measured 691.62 GB/s of DRAM bandwidth on an AWS r8i socket: a peak below that is
    # wrong. AWS's "up to 2.5x the memory bandwidth" of the 7i generation: 2.5 x Xeon-SPR's 8 x DDR5-4800.
    assert gnr.memory_bandwidth_gbps > 691.62
    assert gnr.memory_bandwidth_gbps == pytest.approx(2.5 * cat.accelerator("Xeon-SPR").memory_bandwidth_gbps)
    assert gnr.memory_bandwidth_gbps == pytest.approx(12 * 8000 * 8 / 1000)


def test_tier_counts(cat: Catalog) -> None:
    counts = {k: len(cat.filter(accelerator_type=k)) for k in AcceleratorType}
    assert counts[AcceleratorType.gpu] >= 35
    assert counts[AcceleratorType.neuron] >= 8
    assert counts[AcceleratorType.cpu] >= 140
