"""The catalog loader: strict validation with file/line/row/field errors, user files, lookups and filters."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from accelbench.catalog import CatalogDataError, build_catalog, get_catalog, reset_catalog_cache
from accelbench.catalog.loader import DATA_DIR, load_catalog
from accelbench.domain.instance_types import AcceleratorType
from accelbench.errors import NotFoundError
from accelbench.settings import get_settings

ACCELS = textwrap.dedent(
    """\
    schema_version: 1
    accelerators:
      - name: L4
        kind: gpu
        memory_gib: 24
        memory_bandwidth_gbps: 300
        bf16_tflops: 121
        fp8_tflops: 242
        supports_fp8_kv: true
        sources: [{title: datasheet, url: "https://example.invalid/l4", accessed: "2026-01-01"}]
      - name: TestCPU
        kind: cpu
        memory_bandwidth_gbps: 300
        bf16_tflops: 10
        cores_per_socket: 64
        isa: [sve, bf16]
        memory_channels: 8
        per_core_bandwidth_gbps: 20
        per_core_bf16_gflops: 156
        sources: [{title: guide, url: "https://example.invalid/cpu", accessed: "2026-01-01"}]
    """
)

INSTANCES = textwrap.dedent(
    """\
    schema_version: 1
    price_snapshot: {region: us-east-1, date: "2026-01-01", source: test snapshot}
    families:
      - family: t1g
        arch: x86_64
        accelerator_type: gpu
        accelerator_name: L4
        accelerator_memory_gib: 24
        sizes:
          - {name: t1g.xlarge, vcpus: 4, memory_gib: 16, accelerator_count: 1, on_demand_usd: 0.8}
          - {name: t1g.12xlarge, vcpus: 48, memory_gib: 192, accelerator_count: 4, on_demand_usd: 4.6}
      - family: t1c
        arch: arm64
        accelerator_type: cpu
        accelerator_name: TestCPU
        cpu_generation: Test
        cpu_isa: [sve, bf16]
        sizes:
          - {name: t1c.large, vcpus: 2, memory_gib: 16, on_demand_usd: 0.1}
          - {name: t1c.16xlarge, vcpus: 64, memory_gib: 512}
    """
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def load(tmp_path: Path, instances: str = INSTANCES, accels: str = ACCELS) -> object:
    return build_catalog([write(tmp_path, "inst.yaml", instances)], [write(tmp_path, "acc.yaml", accels)])


def error_of(tmp_path: Path, instances: str = INSTANCES, accels: str = ACCELS) -> str:
    with pytest.raises(CatalogDataError) as exc:
        load(tmp_path, instances, accels)
    return str(exc.value)


def test_valid_files_load_with_the_snapshot_applied(tmp_path: Path) -> None:
    cat = build_catalog([write(tmp_path, "i.yaml", INSTANCES)], [write(tmp_path, "a.yaml", ACCELS)])
    inst = cat.instance("t1g.xlarge")
    assert (inst.price_region, inst.price_date, inst.price_source) == (
        "us-east-1",
        "2026-01-01",
        "test snapshot",
    )
    unpriced = cat.instance("t1c.16xlarge")
    assert unpriced.on_demand_usd is None and unpriced.price_date is None


def test_a_bad_value_names_file_line_row_and_field(tmp_path: Path) -> None:
    bad = INSTANCES.replace("{name: t1g.12xlarge, vcpus: 48", "{name: t1g.12xlarge, vcpus: 0")
    msg = error_of(tmp_path, bad)
    assert "inst.yaml line 11" in msg
    assert "family t1g, size 2 (t1g.12xlarge)" in msg
    assert "field 'vcpus'" in msg and "greater than or equal to 1" in msg


def test_a_misspelled_key_is_an_error_not_silence(tmp_path: Path) -> None:
    bad = INSTANCES.replace("vcpus: 4, memory_gib: 16", "vcpu: 4, memory_gib: 16")
    msg = error_of(tmp_path, bad)
    assert "t1g.xlarge" in msg and "field 'vcpu'" in msg and "Extra inputs" in msg


def test_a_wrong_type_is_reported(tmp_path: Path) -> None:
    bad = INSTANCES.replace("arch: arm64", "arch: sparc")
    msg = error_of(tmp_path, bad)
    assert "t1c.large" in msg and "field 'arch'" in msg


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (("accelerator_count: 4", "accelerator_count: 0"), "field 'accelerator_count'"),
        (("{name: t1c.large, vcpus: 2, memory_gib: 16", "{name: t1c.large, vcpus: 2, memory_gib: 16, "
          "accelerator_memory_gib: 8"), "field 'accelerator_memory_gib'"),
        (("cpu_isa: [sve, bf16]\n", "cpu_isa: []\n"), "field 'cpu_isa'"),
        (("{name: t1g.xlarge,", "{name: t2g.xlarge,"), "field 'family'"),
        (("on_demand_usd: 0.8", "on_demand_usd: 0"), "field 'on_demand_usd'"),
        (("on_demand_usd: 0.8", "on_demand_usd: -1"), "field 'on_demand_usd'"),
        (("accelerator_name: L4", "accelerator_name: L5"), "no accelerator spec called 'L5'"),
        (("accelerator_memory_gib: 24", "accelerator_memory_gib: 48"), "the L4 spec says 24"),
        (("accelerator_type: gpu", "accelerator_type: neuron"), "field 'accelerator_type'"),
        (("{name: t1g.xlarge,", "{name: t1gxlarge,"), "field 'name'"),
    ],
)  # fmt: skip
def test_row_rules(tmp_path: Path, change: tuple[str, str], expect: str) -> None:
    assert change[0] in INSTANCES
    msg = error_of(tmp_path, INSTANCES.replace(*change))
    assert expect in msg
    assert "inst.yaml" in msg


def test_missing_snapshot_metadata_for_a_price_is_an_error(tmp_path: Path) -> None:
    bad = INSTANCES.replace(
        'price_snapshot: {region: us-east-1, date: "2026-01-01", source: test snapshot}\n', ""
    )
    msg = error_of(tmp_path, bad)
    assert "price_region" in msg and "t1g.xlarge" in msg


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (("schema_version: 1\naccelerators", "schema_version: 7\naccelerators"), "schema_version 7"),
        (("    sources: [{title: datasheet", "    sourcez: [{title: datasheet"), "field 'sourcez'"),
        (("    per_core_bandwidth_gbps: 20\n", ""), "field 'per_core_bandwidth_gbps'"),
        (("    per_core_bandwidth_gbps: 20\n", "    l2_outstanding_misses: 48\n"), "field 'dram_latency_ns'"),
        (("    per_core_bandwidth_gbps: 20\n", "    per_core_bandwidth_gbps: 20\n    l2_outstanding_misses: 48\n"
          "    dram_latency_ns: 125\n"), "disagrees with l2_outstanding_misses"),
        (("memory_bandwidth_gbps: 300\n    bf16_tflops: 121", "memory_bandwidth_gbps: 0\n    bf16_tflops: 121"),
         "field 'memory_bandwidth_gbps'"),
        (("    fp8_tflops: 242\n", ""), "field 'supports_fp8_kv'"),
    ],
)  # fmt: skip
def test_accelerator_rules(tmp_path: Path, change: tuple[str, str], expect: str) -> None:
    assert change[0] in ACCELS
    msg = error_of(tmp_path, accels=ACCELS.replace(*change))
    assert expect in msg and "acc.yaml" in msg


def test_schema_version_and_layout_errors(tmp_path: Path) -> None:
    assert "schema_version 2 is not supported" in error_of(
        tmp_path, INSTANCES.replace("schema_version: 1", "schema_version: 2")
    )
    assert "schema_version None" in error_of(tmp_path, INSTANCES.replace("schema_version: 1\n", ""))
    assert "unknown top-level key" in error_of(tmp_path, INSTANCES + "extra: 1\n")
    assert "not valid YAML" in error_of(tmp_path, INSTANCES + "  - {oops\n")
    assert "'sizes' must be a non-empty list" in error_of(
        tmp_path,
        INSTANCES.replace(
            "    sizes:\n      - {name: t1c.large", "    sizes: []\n    x:\n      - {name: t1c.large"
        ),
    )


def test_duplicate_names_across_files(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", INSTANCES)
    b = write(tmp_path, "b.yaml", INSTANCES)
    acc = write(tmp_path, "acc.yaml", ACCELS)
    with pytest.raises(
        CatalogDataError, match=r"b.yaml: instance type 't1g.xlarge' is defined twice \(also in a.yaml\)"
    ):
        build_catalog([a, b], [acc])
    # Layered user files may override by name.
    cat = build_catalog([a, b], [acc], allow_override=True)
    assert len(cat) == 4


# ----------------------------------------------------------------------------------- lookups & filters
def test_instance_lookup_is_case_insensitive_and_suggests(tmp_path: Path) -> None:
    cat = get_catalog()
    assert cat.instance(" G6.2XLARGE ").name == "g6.2xlarge"
    assert "g6.2xlarge" in cat
    assert "g6.3xlarge" not in cat
    with pytest.raises(NotFoundError) as exc:
        cat.instance("g6.2xlarg")
    assert "Did you mean 'g6.2xlarge'" in exc.value.message
    assert exc.value.status_code == 404
    with pytest.raises(NotFoundError, match=r"Did you mean 'r8g\.4xlarge'"):
        cat.instance("r8g.4xl")


def test_accelerator_lookup(tmp_path: Path) -> None:
    cat = get_catalog()
    assert cat.accelerator("h100-sxm").name == "H100-SXM"
    assert cat.accelerator_for("p5.48xlarge").name == "H100-SXM"
    assert cat.accelerator_for(cat.instance("m8i.2xlarge")).name == "Xeon-GNR"
    with pytest.raises(NotFoundError, match="Did you mean 'Graviton4'"):
        cat.accelerator("Graviton 4")


def test_filters() -> None:
    cat = get_catalog()
    cpus = cat.filter(accelerator_type="cpu")
    assert cpus and all(i.accelerator_type == AcceleratorType.cpu for i in cpus)
    assert cat.filter(accelerator_type=AcceleratorType.neuron) == cat.filter(accelerator_type="NEURON")
    g6 = cat.filter(family="g6")
    assert {i.family for i in g6} == {"g6"} and len(g6) == 8
    both = cat.filter(family=["g6", "gr6"])
    assert {i.family for i in both} == {"g6", "gr6"}
    # Serving memory: GPU total, CPU host memory.
    big = cat.filter(min_memory_gib=1000)
    assert "p5e.48xlarge" in {i.name for i in big}  # 8 x 141 GiB
    assert "r8g.48xlarge" in {i.name for i in big}  # 1536 GiB host
    assert "g6e.48xlarge" not in {i.name for i in big}  # 8 x 48 = 384 GiB of GPU memory (1536 host)
    cheap = cat.filter(max_price=0.1)
    assert cheap and all(i.on_demand_usd is not None and i.on_demand_usd <= 0.1 for i in cheap)
    assert "p5e.48xlarge" not in {i.name for i in cat.filter(max_price=1e6)}  # no price -> dropped
    arm = cat.filter(arch="aarch64")
    assert arm and {i.arch for i in arm} == {"arm64"}
    combo = cat.filter(accelerator_type="cpu", arch="x86_64", min_memory_gib=512, max_price=5)
    assert combo and all(i.family.endswith("i") and i.memory_gib >= 512 for i in combo)
    # Store prices override the snapshot for max_price.
    override = cat.filter(family="g6", max_price=1.0, prices={"g6.48xlarge": 0.5})
    assert [i.name for i in override] == ["g6.48xlarge"]


def test_filter_rejects_unknown_names_with_suggestions() -> None:
    cat = get_catalog()
    with pytest.raises(NotFoundError, match="Did you mean 'r8g'"):
        cat.filter(family="r8gg")
    with pytest.raises(NotFoundError, match="Did you mean 'neuron'"):
        cat.filter(accelerator_type="nueron")
    with pytest.raises(NotFoundError, match="architecture"):
        cat.filter(arch="sparc")


# ----------------------------------------------------------------------------------- caching & user files
def test_get_catalog_is_cached_per_data_dir() -> None:
    reset_catalog_cache()
    a = get_catalog()
    assert get_catalog() is a
    reset_catalog_cache()
    assert get_catalog() is not a


def test_user_files_add_and_override(tmp_path: Path) -> None:
    data_dir = get_settings().data_dir
    (data_dir / "catalog" / "instances").mkdir(parents=True)
    (data_dir / "catalog" / "instances" / "mine.yaml").write_text(
        textwrap.dedent(
            """\
            schema_version: 1
            price_snapshot: {region: us-east-1, date: "2026-11-01", source: my negotiated price}
            families:
              - family: g6
                arch: x86_64
                accelerator_type: gpu
                accelerator_name: L4
                accelerator_memory_gib: 24
                sizes:
                  - {name: g6.xlarge, vcpus: 4, memory_gib: 16, accelerator_count: 1, on_demand_usd: 0.5}
              - family: x9z
                arch: arm64
                accelerator_type: cpu
                accelerator_name: MyCPU
                cpu_generation: Lab prototype
                cpu_isa: [sve2]
                sizes:
                  - {name: x9z.large, vcpus: 2, memory_gib: 8, on_demand_usd: 0.05}
            """
        )
    )
    (data_dir / "catalog" / "accelerators.yaml").write_text(
        ACCELS.replace("name: TestCPU", "name: MyCPU").split("  - name: L4")[0]
        + "  - name: MyCPU"
        + ACCELS.split("  - name: TestCPU")[1]
    )
    reset_catalog_cache()
    cat = get_catalog()
    assert cat.instance("g6.xlarge").on_demand_usd == 0.5
    assert cat.instance("g6.xlarge").price_source == "my negotiated price"
    assert cat.instance("x9z.large").accelerator_name == "MyCPU"
    assert cat.accelerator("MyCPU").cores_per_socket == 64
    assert len(cat) == len(load_catalog()) + 1
    # A broken user file is reported with its name.
    (data_dir / "catalog" / "instances" / "mine.yaml").write_text("schema_version: 1\nfamilies: 3\n")
    reset_catalog_cache()
    with pytest.raises(CatalogDataError, match=r"mine\.yaml"):
        get_catalog()
    reset_catalog_cache()


def test_shipped_files_are_where_the_package_says() -> None:
    assert (DATA_DIR / "accelerators.yaml").is_file()
    assert sorted(p.name for p in (DATA_DIR / "instances").glob("*.yaml")) == [
        "cpu.yaml",
        "gpu.yaml",
        "neuron.yaml",
    ]


def test_per_core_bandwidth_is_derived_from_its_inputs(tmp_path: Path) -> None:
    """A CPU row may give its core's L2 miss queue and DRAM latency instead of the per-core figure: Little's
    law, misses x 64-byte line / latency."""
    accels = ACCELS.replace(
        "    per_core_bandwidth_gbps: 20\n", "    l2_outstanding_misses: 40\n    dram_latency_ns: 128\n"
    )
    cat = build_catalog([write(tmp_path, "i.yaml", INSTANCES)], [write(tmp_path, "a.yaml", accels)])
    spec = cat.accelerator("TestCPU")
    assert (spec.l2_outstanding_misses, spec.dram_latency_ns) == (40, 128)
    assert spec.per_core_bandwidth_gbps == pytest.approx(40 * 64 / 128)  # 20.0 GB/s
