"""``accelbench machine probe``: the quick probe's figures, saving and loading by CPU model, the planner's local
machine built from a saved probe, the GEMM worker's guard against slow paths, and the CLI command."""

from __future__ import annotations

import copy
import json
import math
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.machine import BandwidthKernel, GemmResult, MachineProbe
from accelbench.plan.hardware import bf16_flops_per_cycle, efficiency_data, hardware_for, local_machine
from accelbench.settings import get_settings
from accelbench.telemetry import gemm_worker, probe
from accelbench.telemetry.host import cpu_info
from accelbench.telemetry.probe import (
    MIB,
    GemmPython,
    last_level_cache,
    load_probe,
    probe_machine,
    probe_path,
    save_probe,
    usable_cores,
)

CPU_MODEL = "Test CPU 9000 (probe fixture)"

ENVIRONMENT: dict[str, Any] = {
    "cpu": {
        "model": CPU_MODEL,
        "vendor": "TestVendor",
        "arch": "x86_64",
        "flags": ["avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16"],
        "sockets": 1,
        "numa_nodes": 1,
        "physical_cores": 4,
        "logical_cpus": 4,
        "usable_cpus": 4,
        "cgroup_cpu_limit": None,
        "max_mhz": 3000.0,
    },
    "memory": {"total_gib": 16.0, "available_gib": 15.0, "swap_gib": 0.0},
    "accelerators": {"gpus": [], "neuron_devices": []},
}


def make_probe(
    cpu_model: str = CPU_MODEL, *, bf16: bool = True, cores: int = 4, numa_nodes: int = 1
) -> MachineProbe:
    return MachineProbe(
        cpu_model=cpu_model,
        vendor="TestVendor",
        arch="x86_64",
        isa=["AVX2", "AVX512-BF16"],
        matrix_engine="AVX512-BF16",
        cores_used=cores,
        logical_cpus=cores,
        physical_cores=cores,
        threads_per_core=1,
        numa_nodes=numa_nodes,
        llc_mib=32.0,
        measured_at=datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC),
        wall_seconds=12.5,
        accelbench_version="0.0.0",
        libraries={"python": "3.11.7", "numpy": "2.0.0"} | ({"torch": "2.5.0"} if bf16 else {}),
        single_core_gbps=20.0,
        all_core_gbps=50.0,
        bandwidth=[
            BandwidthKernel(kernel="triad", threads=1, gbps=20.0, array_mib=128, repeats=6),
            BandwidthKernel(kernel="triad", threads=cores, gbps=50.0, array_mib=64, repeats=6),
        ],
        gemm_library="torch 2.5.0" if bf16 else "numpy 2.0.0",
        gemm_dtype="bfloat16" if bf16 else "float32",
        gemm_python="this interpreter",
        bf16_measured=bf16,
        decode_gflops_single=40.0,
        decode_gflops_all=120.0,
        prefill_gflops_single=150.0,
        prefill_gflops_all=480.0,
        gemm=[
            GemmResult(shape="prefill", m=512, k=4096, n=4096, threads=1, gflops=150.0, calls=3),
            GemmResult(shape="prefill", m=512, k=4096, n=4096, threads=cores, gflops=480.0, calls=3),
        ],
    )


def _guessed() -> tuple[float, float, float]:
    """The planner's guesses for ENVIRONMENT: per-core GB/s, socket GB/s, per-core GFLOP/s (3 GHz)."""
    data = efficiency_data()
    fpc, _ = bf16_flops_per_cycle(["avx512", "avx512_bf16"])
    return (
        float(data["local_cpu_per_core_bandwidth_gbps"]["x86_64"]),
        float(data["local_cpu_socket_bandwidth_gbps"]),
        fpc * 3.0,
    )


def _finite_positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


# ----------------------------------------------------------------------------------------------- probe
def test_quick_probe_measures_positive_finite_figures(cpu_path: Callable[[str], None]) -> None:
    result = probe_machine(quick=True)
    cpu_path(
        f"quick probe: {result.cores_used} core(s), GEMM {result.gemm_library} {result.gemm_dtype} in "
        f"{result.gemm_python}; {result.single_core_gbps:.1f} / {result.all_core_gbps:.1f} GB/s"
    )
    assert result.quick and result.cores_used == usable_cores(cpu_info())
    assert result.cpu_model == probe.normalize_cpu_model(cpu_info()["model"])
    for value in (
        result.single_core_gbps,
        result.all_core_gbps,
        result.decode_gflops_single,
        result.decode_gflops_all,
        result.prefill_gflops_single,
        result.prefill_gflops_all,
    ):
        assert _finite_positive(value)
    # the figures are the best kernels of each thread count; how the two compare is the machine's business (a
    # busy shared machine deschedules one of the threads and makes all cores look slower than one): how the
    # threads' bytes and times add up is held exactly by test_all_core_bandwidth_adds_the_threads_bytes_over_their_span
    by_threads = {t: max(k.gbps for k in result.bandwidth if k.threads == t) for t in {1, result.cores_used}}
    assert result.single_core_gbps == by_threads[1]
    assert result.all_core_gbps == by_threads[result.cores_used]
    assert {k.kernel for k in result.bandwidth} == {"copy", "triad"}
    assert all(_finite_positive(k.gbps) for k in result.bandwidth)
    counts = {1, result.cores_used}
    assert {(g.shape, g.threads) for g in result.gemm} == {
        (s, t) for s in ("decode", "prefill") for t in counts
    }
    assert result.bf16_measured == (result.gemm_dtype == "bfloat16")
    assert result.gemm_library.split()[0] in result.libraries
    if not result.bf16_measured:
        assert any("BF16 GEMM not measured" in n for n in result.notes)
    assert 0 < result.wall_seconds < 60


def _scripted_clock(stagger_s: float, kernel_s: float = 0.001) -> Callable[[], float]:
    """A perf_counter for ``stream_bandwidth``'s threads: each timed kernel call takes ``kernel_s``, thread i's
    starting ``i x stagger_s`` after thread 0's (whatever the machine's scheduling did)."""
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def perf_counter() -> float:
        name = threading.current_thread().name
        with lock:
            c = calls[name] = calls.get(name, -1) + 1
        thread = int(name.rsplit("-", 1)[1])
        return (c // 2) * 1.0 + thread * stagger_s + (c % 2) * kernel_s

    return perf_counter


def test_all_core_bandwidth_adds_the_threads_bytes_over_their_span(monkeypatch: pytest.MonkeyPatch) -> None:
    def measure(threads: int, stagger_s: float) -> dict[str, float]:
        monkeypatch.setattr(probe, "time", SimpleNamespace(perf_counter=_scripted_clock(stagger_s)))
        return {k.kernel: k.gbps for k in probe.stream_bandwidth(threads, 8.0, 2, [])}

    one = measure(1, 0.0)
    # 8 MiB arrays: a copy reads and writes 16 MiB, a triad 40 MiB, in the scripted 1 ms
    assert one == pytest.approx(
        {"copy": 2 * 8 * MIB / 0.001 / 1e9, "triad": 5 * 8 * MIB / 0.001 / 1e9}, abs=1e-3
    )
    # both threads at once: twice the bytes in the same time; one after the other: twice the bytes in twice the
    # time, so no faster than one thread (bytes per thread, or the longest thread's time, would say otherwise)
    assert measure(2, 0.0) == pytest.approx({k: 2 * v for k, v in one.items()}, abs=2e-3)
    assert measure(2, 0.001) == pytest.approx(one, abs=2e-3)


def test_a_python_without_torch_falls_back_to_numpy_and_says_so(cpu_path: Callable[[str], None]) -> None:
    # this test's own interpreter stands in for an engine: it has numpy; where it also has torch, torch runs
    result = probe_machine(quick=True, torch_python=GemmPython(Path(sys.executable), "a stand-in engine"))
    if probe._torch_here():
        cpu_path("torch importable in the test interpreter: BF16 measured there")
        assert result.bf16_measured and result.gemm_python == "this interpreter"
    else:
        cpu_path("no torch in the test interpreter: the stand-in engine fails, numpy float32 measured")
        assert not result.bf16_measured and result.gemm_dtype == "float32"
        assert result.gemm_library.startswith("numpy ")
        assert any("torch in a stand-in engine failed" in n for n in result.notes)


def test_gemm_worker_shrinks_a_call_that_would_be_too_slow() -> None:
    out = gemm_worker.measure(
        {
            "library": "numpy",
            "threads": [1],
            "shapes": [{"shape": "prefill", "m": 512, "k": 128, "n": 128}],
            "min_seconds": 0.0,
            "min_calls": 1,
            "max_call_seconds": 1e-9,
        }
    )
    (res,) = out["results"]
    assert out["dtype"] == "float32" and res["m"] == gemm_worker.PILOT_ROWS and res["gflops"] > 0
    assert any("M reduced from 512" in n for n in out["notes"])


def test_last_level_cache_from_sysfs(tmp_path: Path) -> None:
    def cache(cpu: int, index: int, level: int, kind: str, size: str, shared: str) -> None:
        d = tmp_path / f"cpu{cpu}" / "cache" / f"index{index}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{value}\n")

    for cpu in range(4):
        cache(cpu, 0, 1, "Data", "48K", str(cpu))
        cache(cpu, 1, 1, "Instruction", "32K", str(cpu))
        cache(cpu, 2, 2, "Unified", "2048K", str(cpu))
        cache(cpu, 3, 3, "Unified", "32M", "0-1" if cpu < 2 else "2-3")
    assert last_level_cache([0, 1, 2, 3], root=tmp_path) == (32 * 2**20, 64 * 2**20)
    assert last_level_cache([0, 1], root=tmp_path) == (32 * 2**20, 32 * 2**20)
    assert last_level_cache([7], root=tmp_path) is None


# --------------------------------------------------------------------------------------------- storage
def test_save_and_load_round_trip_in_the_data_dir() -> None:
    p = make_probe()
    path = save_probe(p)
    assert path == probe_path() == get_settings().data_dir / "machine-probe.json"
    assert load_probe(CPU_MODEL) == p
    assert load_probe("  Test CPU   9000 (probe fixture) ") == p  # whitespace does not make another CPU
    assert [f.name for f in path.parent.iterdir()] == ["machine-probe.json"]  # no temporary file left


def test_each_cpu_model_keeps_its_own_probe_and_another_model_gets_none() -> None:
    mine, other = make_probe(), make_probe("Another CPU 1234", bf16=False)
    save_probe(mine)
    save_probe(other)
    assert load_probe(CPU_MODEL) == mine and load_probe("Another CPU 1234") == other
    assert load_probe("Yet another CPU") is None and load_probe(None) is None
    doc = json.loads(probe_path().read_text())
    assert sorted(doc["probes"]) == ["Another CPU 1234", CPU_MODEL]


def test_an_unreadable_or_other_schema_file_loads_nothing() -> None:
    path = probe_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert load_probe(CPU_MODEL) is None
    save_probe(make_probe())  # a damaged file is replaced, not a reason to fail
    assert load_probe(CPU_MODEL) is not None
    doc = json.loads(path.read_text())
    doc["probes"][CPU_MODEL]["schema_version"] = 99
    path.write_text(json.dumps(doc))
    assert load_probe(CPU_MODEL) is None


# --------------------------------------------------------------------------------------------- planner
def test_local_machine_without_a_probe_keeps_the_guesses() -> None:
    inst, spec = local_machine(copy.deepcopy(ENVIRONMENT))
    per_core_bw, socket_bw, per_core_gflops = _guessed()
    assert spec.per_core_bandwidth_gbps == per_core_bw and spec.memory_bandwidth_gbps == socket_bw
    assert spec.per_core_bf16_gflops == pytest.approx(per_core_gflops)  # AVX512-BF16 x 3 GHz
    assert not any("machine probe" in s.title for s in spec.sources)
    assert inst.vcpus == 4


STREAM_SHARE = float(efficiency_data()["probe_stream_share_of_peak"]["value"])
GEMM_SHARE = float(efficiency_data()["probe_gemm_share_of_peak"]["value"])


def test_local_machine_uses_a_saved_probe_of_this_cpu_model() -> None:
    save_probe(make_probe())
    inst, spec = local_machine(copy.deepcopy(ENVIRONMENT))
    hw = hardware_for(inst, spec)
    # measured figures, put on the scale of the peaks the efficiency factors are shares of
    assert spec.per_core_bandwidth_gbps == pytest.approx(20.0 / STREAM_SHARE)
    assert hw.unit_bandwidth_gbps == pytest.approx(50.0 / STREAM_SHARE)  # min(socket = all-core, 4 x 20)
    assert spec.per_core_bf16_gflops == pytest.approx(480.0 / 4 / GEMM_SHARE)
    assert hw.unit_bf16_tflops == pytest.approx(0.48 / GEMM_SHARE)
    (source,) = spec.sources
    assert source.title.startswith("measured by accelbench machine probe on 2026-03-04")
    assert source.accessed == "2026-03-04" and "torch 2.5.0" in source.title


def test_a_probe_of_another_cpu_model_is_not_applied() -> None:
    save_probe(make_probe("Another CPU 1234"))
    _, spec = local_machine(copy.deepcopy(ENVIRONMENT))
    assert spec.per_core_bandwidth_gbps == _guessed()[0]
    assert not any("machine probe" in s.title for s in spec.sources)


def test_a_probe_passed_in_and_one_without_bf16() -> None:
    env = copy.deepcopy(ENVIRONMENT)
    env["cpu"]["numa_nodes"] = 2
    inst, spec = local_machine(env, probe=make_probe(bf16=False, numa_nodes=2))
    hw = hardware_for(inst, spec)
    # per socket: the all-core figure over 2 nodes (on the peaks' scale)
    assert spec.memory_bandwidth_gbps == pytest.approx(25.0 / STREAM_SHARE)
    assert hw.unit_bandwidth_gbps == pytest.approx(50.0 / STREAM_SHARE)
    assert spec.per_core_bf16_gflops == pytest.approx(_guessed()[2])  # float32 only: the ISA's figure stays
    titles = [s.title for s in spec.sources]
    assert "BF16 GEMM not measured (numpy 2.0.0 float32 only)" in titles[0]
    assert "matrix path AVX512-BF16" in titles[1]


# ------------------------------------------------------------------------------------------------- CLI
def test_cli_quick_probe_as_json(cpu_path: Callable[[str], None]) -> None:
    result = CliRunner().invoke(app, ["machine", "probe", "--quick", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    cpu_path(f"CLI quick probe: GEMM {data['gemm_library']} {data['gemm_dtype']} in {data['gemm_python']}")
    assert data["quick"] is True and data["saved_to"] is None
    assert data["single_core_gbps"] > 0 and data["prefill_gflops_all"] > 0
    assert not probe_path().exists()  # a quick probe is never saved


def test_cli_full_probe_is_saved_and_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.services import machine_probe as service

    measured = make_probe(probe.normalize_cpu_model(cpu_info()["model"]))
    monkeypatch.setattr(service, "probe_machine", lambda **_: measured)
    result = CliRunner().invoke(app, ["machine", "probe"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("20.0 GB/s", "50.0 GB/s", "480.0 GFLOP/s", "torch 2.5.0 bfloat16", "machine-probe.json"):
        assert text in result.stdout
    assert load_probe(measured.cpu_model) == measured
    _, spec = local_machine()  # this machine, planned from what was just saved
    assert spec.per_core_bandwidth_gbps == pytest.approx(20.0 / STREAM_SHARE)
    again = CliRunner().invoke(app, ["machine", "probe", "--no-save", "--format", "json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["saved_to"] is None
