"""CPU topology in the catalog, and `accelbench catalog refresh-instances` against moto's EC2 server.

The server is a real endpoint URL reached through the product's own boto3 client. Its instance types come
from moto's shipped table; tests add or change rows in that table to play a non-AWS EC2-compatible cloud
(``m8i.2xlarge`` sold as 8 cores x 1 thread, ``xc1.4xlarge`` as 4 cores x 4 threads).
"""

from __future__ import annotations

import contextlib
import copy
import http.server
import json
import socket
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.ec2.models import instance_types as moto_types
from moto.server import ThreadedMotoServer
from pydantic import ValidationError
from typer.testing import CliRunner

from accelbench.catalog import CatalogDataError, get_catalog, load_catalog, reset_catalog_cache
from accelbench.catalog.instance_mapping import Provenance, Skipped, map_instance_type, network_gbps
from accelbench.catalog.instances_refresh import (
    default_provider,
    read_overlay,
    refresh_instances,
    split_names,
    write_overlay,
)
from accelbench.catalog.loader import DATA_DIR, parse_instances, refreshed_instances_file
from accelbench.cli.main import app
from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.errors import UserInputError
from accelbench.plan.hardware import hardware_for
from accelbench.settings import get_settings

runner = CliRunner(env={"COLUMNS": "240"})
PROV = Provenance("aws", "https://ec2.us-east-1.amazonaws.com", "us-east-1", "2026-02-01")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def moto_port() -> Iterator[int]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield port
    finally:
        server.stop()


@pytest.fixture
def endpoint(moto_port: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The moto endpoint URL, with test credentials in the environment (and no profile files)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    reset_catalog_cache()
    return f"http://127.0.0.1:{moto_port}"


def cloud_types(**rows: dict[str, Any]) -> dict[str, Any]:
    """Put rows into moto's instance type table for one test (moto serves what the table holds)."""
    table = dict(moto_types.INSTANCE_TYPES)
    table.update(rows)
    return table


@pytest.fixture
def other_cloud(monkeypatch: pytest.MonkeyPatch) -> None:
    """A non-AWS EC2-compatible cloud: m8i.2xlarge with SMT off (8 vCPUs = 8 cores x 1 thread) and a made-up
    xc1.4xlarge (16 vCPUs = 4 cores x 4 threads, an SMT-4 CPU)."""
    m8i = copy.deepcopy(moto_types.INSTANCE_TYPES["m8i.2xlarge"])
    m8i["VCpuInfo"] = {"DefaultVCpus": 8, "DefaultCores": 8, "DefaultThreadsPerCore": 1}
    xc1 = copy.deepcopy(moto_types.INSTANCE_TYPES["m8i.4xlarge"])
    xc1["InstanceType"] = "xc1.4xlarge"
    xc1["VCpuInfo"] = {"DefaultVCpus": 16, "DefaultCores": 4, "DefaultThreadsPerCore": 4}
    xc1["MemoryInfo"] = {"SizeInMiB": 65536}
    xc1["NetworkInfo"] = {"NetworkPerformance": "25 Gigabit"}
    table = cloud_types(**{"m8i.2xlarge": m8i, "xc1.4xlarge": xc1})
    monkeypatch.setattr(moto_types, "INSTANCE_TYPES", table)
    rows = [moto_types.InstanceType(name) for name in table]  # reads the patched table
    monkeypatch.setattr(moto_types.InstanceTypeBackend, "instance_types", rows)


@contextlib.contextmanager
def html_server() -> Iterator[str]:
    """An HTTP server that answers every request with a web page (an endpoint URL that is not an EC2 API)."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = b"<html><body>not an API</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def invoke(*args: str) -> Any:
    return runner.invoke(app, ["catalog", "refresh-instances", *args])


def refresh_json(*args: str) -> dict[str, Any]:
    res = invoke(*args, "--format", "json")
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def write_xc1_family() -> None:
    """A hand-written family for the other cloud's xc1 CPUs, so refreshed xc1 sizes have a CPU spec."""
    d = get_settings().data_dir / "catalog" / "instances"
    d.mkdir(parents=True, exist_ok=True)
    (d / "xcloud.yaml").write_text(
        textwrap.dedent(
            """\
            schema_version: 1
            families:
              - family: xc1
                arch: x86_64
                threads_per_core: 4
                accelerator_type: cpu
                accelerator_name: Xeon-GNR
                cpu_generation: Xeon 6 (xcloud, SMT-4 test part)
                cpu_isa: [avx2, avx512, avx512_bf16, amx, amx_bf16]
                sizes:
                  - {name: xc1.large, vcpus: 4, memory_gib: 16, provider: xcloud}
            """
        )
    )
    reset_catalog_cache()


# ------------------------------------------------------------------------------------------- topology
def test_shipped_xeon_and_graviton_rows_carry_their_threads_per_core() -> None:
    cat = load_catalog()
    xeon, graviton = cat.instance("m8i.2xlarge"), cat.instance("r8g.4xlarge")
    assert (xeon.vcpus, xeon.threads_per_core, xeon.physical_cores, xeon.cores) == (8, 2, 4, 4)
    assert (graviton.vcpus, graviton.threads_per_core, graviton.physical_cores, graviton.cores) == (
        16,
        1,
        16,
        16,
    )
    assert hardware_for(xeon, cat.accelerator_for(xeon)).physical_cores == 4
    assert hardware_for(graviton, cat.accelerator_for(graviton)).physical_cores == 16
    assert cat.instance("c7g.medium").cores == 1 and cat.instance("c7i.large").cores == 1
    for inst in cat.instances:
        assert inst.threads_per_core and inst.physical_cores, inst.name
        assert inst.physical_cores * inst.threads_per_core == inst.vcpus, inst.name
        if inst.accelerator_type == AcceleratorType.cpu:
            assert inst.threads_per_core == (1 if inst.arch == "arm64" else 2), inst.name
            # NUMA nodes split the sockets evenly (one node a socket, or Xeon 6's sub-NUMA clusters)
            per_socket = cat.accelerator_for(inst).cores_per_socket or 1
            assert inst.numa_nodes % -(-inst.cores // per_socket) == 0, inst.name
        else:
            assert inst.threads_per_core == 2, inst.name  # every GPU / Neuron host is x86 with SMT on


def test_cores_property_prefers_the_topology_and_falls_back_to_the_old_guess() -> None:
    base: dict[str, Any] = dict(
        name="zz1.2xlarge", family="zz1", memory_gib=32, accelerator_type="cpu", accelerator_name="Xeon-GNR"
    )
    assert InstanceType(**base, vcpus=8, arch="x86_64").cores == 4
    assert InstanceType(**base, vcpus=1, arch="x86_64").cores == 1
    assert InstanceType(**base, vcpus=8, arch="arm64").cores == 8
    assert InstanceType(**base, vcpus=16, arch="x86_64", threads_per_core=4).cores == 4
    assert InstanceType(**base, vcpus=8, arch="x86_64", physical_cores=8, threads_per_core=1).cores == 8
    with pytest.raises(ValidationError, match="not vcpus"):
        InstanceType(**base, vcpus=8, arch="x86_64", physical_cores=8, threads_per_core=2)
    with pytest.raises(ValidationError, match="exceeds vcpus"):
        InstanceType(**base, vcpus=8, arch="x86_64", physical_cores=9)
    with pytest.raises(ValidationError):
        InstanceType(**base, vcpus=8, arch="x86_64", threads_per_core=0)
    assert InstanceType(**base, vcpus=8, arch="x86_64", provider="my-cloud").provider == "my-cloud"
    with pytest.raises(ValidationError):
        InstanceType(**base, vcpus=8, arch="x86_64", provider="Not A Name")


def test_loader_derives_physical_cores_from_family_threads(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            schema_version: 1
            families:
              - family: zz1
                arch: x86_64
                threads_per_core: 2
                accelerator_type: cpu
                accelerator_name: Xeon-GNR
                cpu_generation: test
                cpu_isa: [amx]
                sizes:
                  - {name: zz1.2xlarge, vcpus: 8, memory_gib: 32}
                  - {name: zz1.metal, vcpus: 8, memory_gib: 32, physical_cores: 8, threads_per_core: 1}
            """
        )
    )
    rows = {i.name: i for i in parse_instances(path)}
    assert (rows["zz1.2xlarge"].physical_cores, rows["zz1.2xlarge"].threads_per_core) == (4, 2)
    assert (rows["zz1.metal"].physical_cores, rows["zz1.metal"].threads_per_core) == (8, 1)
    path.write_text(path.read_text().replace("vcpus: 8, memory_gib: 32}", "vcpus: 7, memory_gib: 32}"))
    with pytest.raises(CatalogDataError, match=r"t\.yaml line \d+, family zz1, size 1 .*7 vCPUs"):
        parse_instances(path)


# ------------------------------------------------------------------------------------------- mapping
def doc(name: str, **changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(moto_types.INSTANCE_TYPES[name])
    d.update(changes)
    return d


def test_every_shipped_row_is_reproduced_from_the_ec2_description() -> None:
    """Mapping moto's description of each shipped type gives the shipped row back (network aside: moto's
    table is newer; Trainium2: moto lists 512 GiB per chip, the spec says 96, so it is skipped, not guessed)."""
    cat = load_catalog()
    for inst in cat.instances:
        got = map_instance_type(doc(inst.name), cat, PROV)
        if inst.family == "trn2":
            assert isinstance(got, Skipped) and "512 GiB per Trainium2" in got.reason
            continue
        assert isinstance(got, InstanceType), (inst.name, got)
        skip = {"network_gbps", "refreshed_from", "refreshed_region", "refreshed_date"}
        want, have = inst.model_dump(exclude=skip), got.model_dump(exclude=skip)
        assert have == want, inst.name
        assert got.refreshed_from == PROV.endpoint and got.refreshed_region == "us-east-1"


def test_gpu_names_map_to_specs_by_name_and_memory() -> None:
    cat = load_catalog()
    # A family the catalog lacks: the GPU name (and its memory) picks the spec.
    h100 = map_instance_type(doc("p5.48xlarge", InstanceType="zz9.48xlarge"), cat, PROV)
    assert isinstance(h100, InstanceType)
    assert (h100.accelerator_name, h100.accelerator_count, h100.accelerator_memory_gib) == ("H100-SXM", 8, 80)
    assert h100.family == "zz9" and h100.on_demand_usd is None and h100.cpu_generation is None
    a100 = map_instance_type(doc("p4de.24xlarge", InstanceType="zz8.24xlarge"), cat, PROV)
    assert isinstance(a100, InstanceType) and a100.accelerator_name == "A100-80GB"
    a100 = map_instance_type(doc("p4d.24xlarge", InstanceType="zz8.24xlarge"), cat, PROV)
    assert isinstance(a100, InstanceType) and a100.accelerator_name == "A100-40GB"
    # L4 reports 22.35 GiB usable; the row carries the spec's 24 GiB (the catalog's convention).
    l4 = map_instance_type(doc("g6.2xlarge", InstanceType="zz7.2xlarge"), cat, PROV)
    assert isinstance(l4, InstanceType) and (l4.accelerator_name, l4.accelerator_memory_gib) == ("L4", 24)
    assert l4.physical_cores == 4 and l4.threads_per_core == 2
    # No spec, a device far from its spec's memory, a family of another tier: skipped with the reason.
    t4 = map_instance_type(doc("g4dn.xlarge"), cat, PROV)
    assert isinstance(t4, Skipped) and "'T4' has no accelerator spec" in t4.reason
    odd = doc("g6.2xlarge")
    odd["GpuInfo"]["Gpus"][0]["MemoryInfo"]["SizeInMiB"] = 8192
    bad = map_instance_type(odd, cat, PROV)
    assert isinstance(bad, Skipped) and "8 GiB per L4" in bad.reason
    gpu_in_cpu_family = map_instance_type(doc("g6.2xlarge", InstanceType="m8i.2xlarge"), cat, PROV)
    assert isinstance(gpu_in_cpu_family, Skipped) and "family 'm8i' is cpu" in gpu_in_cpu_family.reason
    mac = map_instance_type(doc("mac1.metal"), cat, PROV)
    assert isinstance(mac, Skipped) and "x86_64_mac" in mac.reason


def test_prices_stay_only_for_the_same_provider_and_inputs_are_checked() -> None:
    cat = load_catalog()
    same = map_instance_type(doc("m8i.2xlarge"), cat, PROV)
    assert isinstance(same, InstanceType) and same.on_demand_usd == cat.instance("m8i.2xlarge").on_demand_usd
    other = Provenance("xcloud", "https://ec2.xcloud.example", "x-1", "2026-02-01")
    moved = map_instance_type(doc("m8i.2xlarge"), cat, other)
    assert isinstance(moved, InstanceType) and moved.on_demand_usd is None and moved.provider == "xcloud"
    assert network_gbps({"NetworkInfo": {"NetworkPerformance": "4x 100 Gigabit"}}) == 400
    assert network_gbps({"NetworkInfo": {"NetworkPerformance": "Up to 12.5 Gigabit"}}) == 12.5
    assert network_gbps({"NetworkInfo": {"NetworkPerformance": "High"}}) is None
    cards = [{"PeakBandwidthInGbps": 100.0}, {"PeakBandwidthInGbps": 100.0}]
    assert network_gbps({"NetworkInfo": {"NetworkPerformance": "High", "NetworkCards": cards}}) == 200
    assert default_provider("https://ec2.eu-west-1.amazonaws.com") == "aws"
    assert default_provider("https://compute.example.org/ec2") == "ec2-compatible"
    assert split_names(["m8i.2xlarge, R8G.4xlarge", "m8i.*", "m8i.2xlarge"]) == [
        "m8i.2xlarge",
        "r8g.4xlarge",
        "m8i.*",
    ]
    with pytest.raises(UserInputError, match="Not an instance type name"):
        split_names(["m8i"])


# ------------------------------------------------------------------------------------------- the command
def test_refresh_from_another_cloud_feeds_the_catalog_and_the_planner(
    endpoint: str, other_cloud: None
) -> None:
    before = get_catalog()  # cached before the refresh: the refresh must invalidate it
    assert before.instance("m8i.2xlarge").cores == 4
    out = refresh_json(
        "--endpoint-url", endpoint, "--region", "eu-west-1", "--instance-types", "m8i.2xlarge,xc1.4xlarge",
        "--provider-name", "xcloud",
    )  # fmt: skip
    assert out["provider"] == "xcloud" and out["region"] == "eu-west-1"
    assert out["counts"] == {"added": 0, "updated": 1, "unchanged": 0, "skipped": 1}
    (row,) = out["rows"]
    assert row["status"] == "updated" and row["cores"] == 8
    assert "physical_cores: 4 -> 8" in row["changes"] and "threads_per_core: 2 -> 1" in row["changes"]
    (skipped,) = out["skipped"]
    assert skipped["name"] == "xc1.4xlarge" and "no catalog family 'xc1'" in skipped["reason"]

    cat = get_catalog()
    inst = cat.instance("m8i.2xlarge")
    assert (inst.vcpus, inst.physical_cores, inst.threads_per_core) == (8, 8, 1)
    assert (inst.provider, inst.refreshed_from, inst.refreshed_region) == ("xcloud", endpoint, "eu-west-1")
    assert inst.on_demand_usd is None  # AWS's snapshot price is not this cloud's
    hw = hardware_for(inst, cat.accelerator_for(inst))
    assert hw.physical_cores == 8  # the cloud's cores, not vcpus / 2
    assert hw.physical_cores != inst.vcpus // 2

    # Once the catalog knows the xc1 family (a hand-written file), the SMT-4 type maps with its 4 cores.
    write_xc1_family()
    out = refresh_json("--endpoint-url", endpoint, "-i", "xc1.4xlarge", "--provider-name", "xcloud")
    assert out["counts"]["added"] == 1 and out["rows"][0]["cores"] == 4
    cat = get_catalog()
    xc1 = cat.instance("xc1.4xlarge")
    assert (xc1.vcpus, xc1.physical_cores, xc1.threads_per_core) == (16, 4, 4)
    assert xc1.accelerator_name == "Xeon-GNR" and xc1.cpu_generation == "Xeon 6 (xcloud, SMT-4 test part)"
    assert hardware_for(xc1, cat.accelerator_for(xc1)).physical_cores == 4  # not 16 // 2
    assert cat.instance("m8i.2xlarge").physical_cores == 8  # the earlier refresh is kept
    # `catalog show` and `catalog list` print the refreshed topology.
    res = runner.invoke(app, ["catalog", "show", "xc1.4xlarge"])
    assert res.exit_code == 0 and "4 x 4 threads" in res.stdout and "xcloud" in res.stdout
    listed = json.loads(runner.invoke(app, ["catalog", "list", "--family", "xc1", "--format", "json"]).stdout)
    assert {r["name"]: r["cores"] for r in listed} == {"xc1.large": 1, "xc1.4xlarge": 4}


def test_overlay_merges_endpoints_and_survives_a_second_refresh(endpoint: str, other_cloud: None) -> None:
    port = endpoint.rsplit(":", 1)[1]
    second = f"http://localhost:{port}"  # the same server under another URL plays a second endpoint
    refresh_json("--endpoint-url", endpoint, "-i", "m8i.2xlarge", "--provider-name", "xcloud")
    out = refresh_json("--endpoint-url", second, "-i", "r8g.4xlarge,g6.2xlarge", "--region", "us-west-2")
    assert out["provider"] == "ec2-compatible" and out["counts"]["updated"] == 2
    path = refreshed_instances_file(get_settings().data_dir)
    rows = {i.name: i for i in read_overlay(path)}
    assert set(rows) == {"m8i.2xlarge", "r8g.4xlarge", "g6.2xlarge"}
    assert rows["m8i.2xlarge"].refreshed_from == endpoint and rows["m8i.2xlarge"].provider == "xcloud"
    assert (
        rows["r8g.4xlarge"].refreshed_from == second and rows["r8g.4xlarge"].refreshed_region == "us-west-2"
    )
    assert rows["g6.2xlarge"].accelerator_name == "L4" and rows["g6.2xlarge"].physical_cores == 4
    # Refreshing the same type again: unchanged figures, one row per name, the other endpoint's rows kept.
    again = refresh_json("--endpoint-url", endpoint, "-i", "m8i.2xlarge", "--provider-name", "xcloud")
    assert again["counts"] == {"added": 0, "updated": 0, "unchanged": 1, "skipped": 0}
    text = path.read_text()
    assert text.count("name: m8i.2xlarge") == 1 and "name: r8g.4xlarge" in text
    assert text.startswith("# Written by `accelbench catalog refresh-instances`")
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    cat = get_catalog()
    assert cat.instance("r8g.4xlarge").provider == "ec2-compatible" and cat.instance("m8i.2xlarge").cores == 8
    assert len(cat) == len(load_catalog())  # nothing shipped is lost, nothing duplicated


def test_table_output_and_names_the_endpoint_lacks(endpoint: str, other_cloud: None) -> None:
    res = invoke("--endpoint-url", endpoint, "-i", "m8i.2xlarge,g4dn.xlarge,zz0.large,m9g.metal-48xl")
    assert res.exit_code == 0, res.output
    assert "updated" in res.stdout and "m8i.2xlarge" in res.stdout and "8 x 1 thread" in res.stdout
    assert "added" in res.stdout and "m9g.metal-48xl" in res.stdout
    assert "skipped" in res.stdout and "'T4' has no accelerator spec" in res.stdout
    assert "zz0.large" in res.stdout and "does not list it" in res.stdout
    assert "1 added, 1 updated, 0 unchanged, 2 skipped" in res.stderr
    # Wildcards go to the endpoint's instance-type filter.
    out = refresh_json("--endpoint-url", endpoint, "-i", "m8i.*")
    names = {r["instance"]["name"] for r in out["rows"]}
    assert "m8i.2xlarge" in names and names <= {i.name for i in get_catalog().instances}
    assert all(n.startswith("m8i.") for n in names)


def test_a_refresh_that_maps_nothing_writes_nothing(endpoint: str, other_cloud: None) -> None:
    out = refresh_json("--endpoint-url", endpoint, "-i", "xc1.4xlarge,g4dn.xlarge")
    assert out["counts"]["skipped"] == 2 and out["rows"] == []
    assert not refreshed_instances_file(get_settings().data_dir).exists()


def test_missing_credentials_unreachable_endpoint_and_bad_input(
    endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay = refreshed_instances_file(get_settings().data_dir)
    res = invoke("--endpoint-url", endpoint, "-i", "m8i.2xlarge")
    assert res.exit_code == 0, res.output
    before = overlay.read_text()

    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    res = invoke("--endpoint-url", endpoint, "-i", "m8i.2xlarge", "--format", "json")
    assert res.exit_code == 1 and res.stdout == "" and "Traceback" not in res.output
    assert "No credentials found for the EC2 endpoint" in res.stderr and "AWS_ACCESS_KEY_ID" in res.stderr
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")

    nowhere = f"http://127.0.0.1:{free_port()}"
    res = invoke("--endpoint-url", nowhere, "-i", "m8i.2xlarge")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert f"Cannot reach the EC2 endpoint {nowhere}" in res.stderr and "catalog is unchanged" in res.stderr
    with pytest.raises(UserInputError, match="Cannot reach"):
        refresh_instances(nowhere, "us-east-1", ["m8i.2xlarge"])

    with html_server() as not_ec2:
        res = invoke("--endpoint-url", not_ec2, "-i", "m8i.2xlarge")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "did not answer like an EC2 API" in res.stderr

    res = invoke("--endpoint-url", "ftp://example.org", "-i", "m8i.2xlarge")
    assert res.exit_code == 2 and "Not an endpoint URL" in res.stderr
    res = invoke("--endpoint-url", endpoint, "--region", "bad region")
    assert res.exit_code == 2 and "Not a region name" in res.stderr
    res = invoke("--endpoint-url", endpoint, "--provider-name", "Bad Name")
    assert res.exit_code == 2 and "Not a provider name" in res.stderr
    res = invoke("--endpoint-url", "http://user:s3cret@127.0.0.1:1", "-i", "m8i.2xlarge")
    assert res.exit_code == 1 and "s3cret" not in res.output
    assert overlay.read_text() == before  # every failure left the overlay alone


def test_overlay_write_is_checked_and_atomic_and_cache_follows_it(tmp_path: Path) -> None:
    data_dir = get_settings().data_dir
    path = refreshed_instances_file(data_dir)
    cat = get_catalog()
    good = cat.instance("m8i.2xlarge").model_copy(update={"physical_cores": 8, "threads_per_core": 1})
    write_overlay(path, [good], data_dir)
    # Another process's refresh (no reset here): get_catalog() notices the overlay changed.
    assert get_catalog() is not cat and get_catalog().instance("m8i.2xlarge").cores == 8
    bad = good.model_copy(update={"accelerator_name": "NoSuchCPU"})
    with pytest.raises(CatalogDataError, match="NoSuchCPU"):
        write_overlay(path, [good, bad.model_copy(update={"name": "m8i.4xlarge"})], data_dir)
    assert [i.name for i in read_overlay(path)] == ["m8i.2xlarge"]  # the old file stays
    assert sorted(p.name for p in path.parent.iterdir()) == ["refreshed-instances.yaml"]
    # A hand-written instances/*.yaml row has the last word over the overlay.
    mine = data_dir / "catalog" / "instances"
    mine.mkdir()
    (mine / "mine.yaml").write_text((DATA_DIR / "instances" / "cpu.yaml").read_text())
    reset_catalog_cache()
    assert get_catalog().instance("m8i.2xlarge").cores == 4
