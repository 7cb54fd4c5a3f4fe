"""Device collectors against recorded outputs (tests/data/telemetry, see its README) and the live /proc."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from accelbench.domain.device import DeviceKind, DeviceSample, DeviceTelemetry
from accelbench.telemetry.devices import DeviceMonitor, collectors_for
from accelbench.telemetry.devices.cpu import CpuCollector, parse_meminfo, parse_proc_stat
from accelbench.telemetry.devices.neuron import (
    NeuronMonitorCollector,
    parse_neuron_exporter,
    parse_neuron_report,
)
from accelbench.telemetry.devices.nvidia import NvmlCollector, decode_throttle, parse_dcgm, parse_nvml

DATA = Path(__file__).resolve().parents[2] / "data" / "telemetry"
CGROUP_V1_MEM = "sys/fs/cgroup/memory/process_api/5737dec68ec6232e8a77860304cf62da/memory.usage_in_bytes"


def _tree(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(DATA / name / "first", root)
    return root


def _second(root: Path, name: str) -> None:
    shutil.copytree(DATA / name / "second", root, dirs_exist_ok=True)


# ---- CPU: a recorded tree of this machine (AMD EPYC VM, hybrid cgroups, no cpufreq, no RAPL) -----------------
def test_cpu_collector_on_the_recorded_host_tree(tmp_path: Path) -> None:
    root = _tree(tmp_path, "host")
    c = CpuCollector(root, pids=[4242])
    assert c.available
    assert c.sources == ["cpu:/proc/stat", "cpu:cgroup"]
    first = c.sample(0.0)[0]
    assert first.util_pct is None  # no interval yet
    _second(root, "host")
    s = c.sample(1.0)[0]
    assert s.device == "cpu" and s.kind == DeviceKind.cpu
    # 205 busy jiffies of 205 overall between the two readings (the CI job held both cores)
    assert s.util_pct == 100.0
    assert s.extra["cpu0_util_pct"] == 100.0 and s.extra["cpu1_util_pct"] == 100.0
    assert s.memory_total_bytes == 24684084 * 1024
    assert s.memory_used_bytes == (24684084 - 22716408) * 1024
    assert s.clock_mhz == pytest.approx(2596.132)
    assert s.power_w is None and s.energy_j is None
    # cgroup v2 cpu.stat of "0::/" (the unified hierarchy) and v1 memory.usage_in_bytes
    assert s.extra["cgroup_cpu_s"] == pytest.approx(2.035445)
    assert s.extra["cgroup_cpu_cores"] == pytest.approx(2.035445)
    assert s.extra["cgroup_memory_bytes"] == 10682368.0
    text = " | ".join(c.missing)
    assert "RAPL: /sys/class/powercap is absent" in text
    assert "/sys/devices/system/cpu/cpu*/cpufreq is absent" in text
    assert "the engine runs in the root cgroup" in text
    assert "no uncore memory-controller PMU is exposed" in text and "perf_event_paranoid=2" in text


def test_cpu_collector_rapl_wraps_and_cgroup_v2(tmp_path: Path) -> None:
    root = _tree(tmp_path, "rapl")
    c = CpuCollector(root, pids=[4242, 4243])  # both in one cgroup: counted once
    assert c.sources == ["cpu:/proc/stat", "cpu:rapl", "cpu:cgroup"]
    first = c.sample(10.0)[0]
    assert first.energy_j == 0.0 and first.power_w is None
    assert first.clock_mhz == 2700.0
    assert first.extra["cgroup_memory_bytes"] == 1073741824.0
    _second(root, "rapl")
    s = c.sample(12.0)[0]
    # package-0 wrapped: (262143328850 - 262142328850) + 4000000 uJ = 5 J; package-1 7.5 J; sub-zones not added
    assert s.extra["rapl_package_0_j"] == 5.0
    assert s.extra["rapl_package_1_j"] == 7.5
    assert s.energy_j == 12.5
    assert s.power_w == 6.25
    assert s.clock_mhz == 2900.0
    assert s.extra["cgroup_cpu_s"] == 3.0
    assert s.extra["cgroup_cpu_cores"] == 1.5
    assert s.extra["cgroup_memory_bytes"] == 2147483648.0
    assert not any(m.startswith("RAPL") or m.startswith("CPU frequency") for m in c.missing)
    assert any("uncore_imc_0 name no DRAM read/write events" in m for m in c.missing)
    tel = DeviceTelemetry.build([first, s])
    d = tel.device("cpu")
    assert d is not None and d.energy_j == 12.5 and d.window_s == 2.0 and d.power_mean_w == 6.25
    assert tel.tokens_per_joule(250) == 20.0
    assert tel.joules_per_output_token(250) == 0.05


def test_rapl_unreadable_and_no_zone(tmp_path: Path) -> None:
    root = _tree(tmp_path, "rapl")
    for z in (root / "sys/class/powercap").glob("intel-rapl:*"):
        shutil.rmtree(z)
    c = CpuCollector(root)
    assert any("has no intel-rapl zone" in m for m in c.missing)


def test_no_proc_is_absent_not_an_error(tmp_path: Path) -> None:
    c = CpuCollector(tmp_path)
    assert not c.available and c.sample() == []
    assert c.missing == [f"CPU: {tmp_path / 'proc' / 'stat'} is not readable (not a Linux host)"]


def test_parse_proc_stat_and_meminfo() -> None:
    stat = parse_proc_stat("cpu  10 0 10 60 20 0 0 0 5 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2\n")
    assert stat == {"cpu": (20, 100), "cpu0": (27, 36)}
    assert parse_meminfo("MemTotal:  100 kB\nHugePages_Total:  4\n") == {
        "MemTotal": 102400,
        "HugePages_Total": 4,
    }


def test_cpu_collector_on_this_machine() -> None:
    """The live /proc: sane figures, whatever the machine."""
    c = CpuCollector(Path("/"), pids=[os.getpid()], self_pid=os.getpid())
    assert c.available
    c.sample(0.0)
    deadline = time.perf_counter() + 0.3
    while time.perf_counter() < deadline:
        pass  # some work of our own between the readings
    s = c.sample(0.3)[0]
    assert s.util_pct is not None and 0.0 <= s.util_pct <= 100.0
    ncpu = os.cpu_count() or 1
    per_core = [v for k, v in s.extra.items() if k.endswith("_util_pct")]
    assert len(per_core) == ncpu and all(0.0 <= v <= 100.0 for v in per_core)
    assert s.memory_total_bytes is not None and s.memory_total_bytes > 2**28
    assert s.memory_used_bytes is not None and 0 < s.memory_used_bytes < s.memory_total_bytes
    if s.clock_mhz is not None:
        assert 100 < s.clock_mhz < 10000
    if "cgroup_cpu_cores" in s.extra:
        assert 0 <= s.extra["cgroup_cpu_cores"] <= ncpu * 1.5
    assert any("cgroup" in m for m in c.missing) or "cpu:cgroup" in c.sources


# ---- NVIDIA ---------------------------------------------------------------------------------------------
def test_parse_recorded_nvml_query() -> None:
    readings = json.loads((DATA / "nvml_query.json").read_text())
    energy0: dict[str, float] = {}
    samples = [s for r in readings for s in parse_nvml(r["result"], r["t_s"], energy0)]
    g0 = [s for s in samples if s.device == "gpu0"]
    assert [s.util_pct for s in g0] == [35.0, 85.0]
    assert g0[1].memory_used_bytes == 21000000000.0 and g0[1].memory_total_bytes == 24152899584.0
    assert g0[1].power_w == 71.5 and g0[1].temperature_c == 60.0 and g0[1].clock_mhz == 1980.0
    assert [s.energy_j for s in g0] == [0.0, 120.0]
    assert g0[0].throttle_reasons == ["gpu_idle"]
    assert g0[1].throttle_reasons == ["sw_power_cap", "sw_thermal_slowdown"]
    assert g0[1].extra == {"memory_util_pct": 40.0}
    g1 = [s for s in samples if s.device == "gpu1"]
    assert g1[1].energy_j is None and g1[1].throttle_reasons == ["bit_0x1000"]
    tel = DeviceTelemetry.build(samples, sources=["nvml"])
    s0, s1 = tel.device("gpu0"), tel.device("gpu1")
    assert s0 is not None and s1 is not None
    assert s0.util_mean_pct == 60.0 and s0.util_peak_pct == 85.0 and s0.power_mean_w == 58.25
    assert s0.energy_j == 120.0 and s0.memory_used_peak_bytes == 21000000000.0
    assert s1.energy_j == 80.0  # no energy counter: the power integrated, (30 + 50) / 2 W x 2 s
    assert tel.energy_j == 200.0
    assert tel.tokens_per_joule(1000) == 5.0 and tel.joules_per_output_token(1000) == 0.2


class _FakeNvml:
    """pynvml's calls, answering from a recorded query result (no driver here)."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1

    def __init__(self, result: dict) -> None:
        self.d = result["devices"]
        self.shut = False

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.d)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> dict:
        return self.d[i]

    def nvmlDeviceGetUtilizationRates(self, h: dict) -> object:
        return type("U", (), {"gpu": h["util_gpu_pct"], "memory": h["util_memory_pct"]})()

    def nvmlDeviceGetMemoryInfo(self, h: dict) -> object:
        return type("M", (), {"used": h["memory_used_bytes"], "total": h["memory_total_bytes"]})()

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: dict) -> int:
        return int(h["throttle_reasons"])

    def nvmlDeviceGetName(self, h: dict) -> bytes:
        return str(h["name"]).encode()

    def nvmlDeviceGetUUID(self, h: dict) -> str:
        return str(h["uuid"])

    def nvmlDeviceGetPowerUsage(self, h: dict) -> int:
        return int(h["power_mw"])

    def nvmlDeviceGetTotalEnergyConsumption(self, h: dict) -> int:
        if h["energy_mj"] is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return int(h["energy_mj"])

    def nvmlDeviceGetTemperature(self, h: dict, sensor: int) -> int:
        return int(h["temperature_c"])

    def nvmlDeviceGetClockInfo(self, h: dict, kind: int) -> int:
        return int(h["sm_clock_mhz"])


def test_nvml_collector_queries_into_the_recorded_shape() -> None:
    recorded = json.loads((DATA / "nvml_query.json").read_text())[0]["result"]
    fake = _FakeNvml(recorded)
    c = NvmlCollector(fake)
    assert c.available and c.sources == ["nvml"]
    samples = c.sample(0.0)
    assert samples == parse_nvml(recorded, 0.0, {})
    c.close()
    assert fake.shut


def test_decode_throttle() -> None:
    assert decode_throttle(0) == [] and decode_throttle(None) == []
    assert decode_throttle(0x8 | 0x40) == ["hw_slowdown", "hw_thermal_slowdown"]


def test_parse_recorded_dcgm_scrapes() -> None:
    energy0: dict[str, float] = {}
    a = parse_dcgm((DATA / "dcgm_scrape_1.txt").read_text(), 0.0, energy0)
    b = parse_dcgm((DATA / "dcgm_scrape_2.txt").read_text(), 4.0, energy0)
    assert [s.device for s in a] == ["gpu0", "gpu1"]
    g0 = b[0]
    assert g0.util_pct == 99.0
    assert g0.memory_used_bytes == 80064 * 2**20 and g0.memory_total_bytes == (80064 + 1024) * 2**20
    assert g0.power_w == 487.5 and g0.temperature_c == 58.0 and g0.clock_mhz == 1830.0
    assert g0.energy_j == 1800.0  # (9878343210 - 9876543210) mJ
    assert g0.extra == {"sm_active_pct": 90.0, "tensor_active_pct": 37.5}
    assert a[0].throttle_reasons == ["sw_power_cap"] and g0.throttle_reasons == []
    assert b[1].energy_j == 192.0 and b[1].throttle_reasons == ["gpu_idle"]
    tel = DeviceTelemetry.build([*a, *b])
    d0 = tel.device("gpu0")
    assert d0 is not None and d0.util_mean_pct == 98.0 and d0.power_mean_w == 450.0 and d0.energy_j == 1800.0
    assert tel.energy_j == 1992.0


# ---- Neuron ---------------------------------------------------------------------------------------------
def test_parse_recorded_neuron_monitor_report() -> None:
    idle, busy = (json.loads(line) for line in (DATA / "neuron_monitor.jsonl").read_text().splitlines())
    assert parse_neuron_report(idle, 0.0) == []  # no runtime running yet
    (s,) = parse_neuron_report(busy, 1.0)
    assert s.device == "neuron" and s.kind == DeviceKind.neuron
    assert s.util_pct == 70.0
    assert s.extra["neuroncore0_util_pct"] == 71.25 and s.extra["neuroncore1_util_pct"] == 68.75
    assert s.memory_used_bytes == 17179869184.0
    assert s.extra["runtime_host_memory_bytes"] == 612368384.0
    assert s.extra["host_memory_used_bytes"] == 9961472000.0
    assert s.extra["ecc_events"] == 3.0
    assert s.power_w is None and s.energy_j is None


def test_neuron_monitor_collector_reads_a_stream() -> None:
    with (DATA / "neuron_monitor.jsonl").open() as stream:
        c = NeuronMonitorCollector(stream)
        c._reader.join(timeout=10)
        (s,) = c.sample(2.0)
    assert s.util_pct == 70.0 and c.sources == ["neuron-monitor"]


def test_neuron_monitor_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    c = NeuronMonitorCollector()
    assert not c.available
    assert c.missing == [
        "Neuron: neuron-monitor is not on PATH (the aws-neuronx-tools package is not installed)"
    ]


def test_parse_recorded_neuron_exporter_scrape() -> None:
    (s,) = parse_neuron_exporter((DATA / "neuron_exporter_scrape.txt").read_text(), 3.0)
    assert s.util_pct == pytest.approx(70.0)
    assert s.extra["neuroncore0_util_pct"] == pytest.approx(71.25)
    assert s.memory_used_bytes == 17179869184.0
    assert s.extra["runtime_host_memory_bytes"] == 612368384.0
    assert s.extra["host_memory_total_bytes"] == 33029095424.0


# ---- selection and the monitor --------------------------------------------------------------------------
def test_collectors_for_says_each_missing_source_once(tmp_path: Path) -> None:
    root = _tree(tmp_path, "host")
    chosen, missing = collectors_for("gpu", root=root, dcgm_url="http://127.0.0.1:9/metrics")
    assert [c.name for c in chosen] == ["cpu"]
    assert (
        sum(m.startswith("DCGM: the exporter at http://127.0.0.1:9/metrics did not answer") for m in missing)
        == 1
    )
    assert sum(m.startswith("RAPL") for m in missing) == 1
    chosen, missing = collectors_for("cpu", root=root)
    assert [c.name for c in chosen] == ["cpu"] and not any(
        m.startswith(("NVML", "DCGM", "Neuron")) for m in missing
    )


class _Counting(CpuCollector):
    def __init__(self) -> None:
        super().__init__(DATA / "host" / "first")
        self.calls = 0

    def sample(self, t_s: float | None = None) -> list[DeviceSample]:
        self.calls += 1
        return [
            DeviceSample(t_s=float(t_s or 0.0), device="cpu", kind=DeviceKind.cpu, util_pct=10.0 * self.calls)
        ]


def test_monitor_samples_on_its_thread_and_summarises() -> None:
    c = _Counting()
    mon = DeviceMonitor([c], interval_s=0.01, missing=["RAPL: absent"])
    t0 = time.perf_counter()
    mon.start(t0)
    assert c.calls == 1  # the baseline, taken before start returns
    while c.calls < 4:
        time.sleep(0.005)
    tel = mon.stop()
    n = c.calls
    assert len(tel.samples) == n and tel.available
    assert tel.missing == ["RAPL: absent"] and tel.sources == ["cpu:/proc/stat"]
    d = tel.device("cpu")
    assert d is not None and d.samples == n and d.util_peak_pct == 10.0 * n
    assert d.util_mean_pct == pytest.approx(10.0 * (n + 1) / 2)
    assert all(b.t_s >= a.t_s for a, b in zip(tel.samples, tel.samples[1:], strict=False))


def test_telemetry_round_trips_through_json() -> None:
    readings = json.loads((DATA / "nvml_query.json").read_text())
    e0: dict[str, float] = {}
    tel = DeviceTelemetry.build(
        [s for r in readings for s in parse_nvml(r["result"], r["t_s"], e0)], sources=["nvml"], missing=["x"]
    )
    back = DeviceTelemetry.model_validate_json(tel.model_dump_json())
    assert back == tel and back.energy_j == 200.0


def test_monitor_thins_a_long_run_to_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    import accelbench.telemetry.devices as devices_mod

    monkeypatch.setattr(devices_mod, "MAX_READINGS", 4)
    c = _Counting()
    mon = DeviceMonitor([c], interval_s=60.0)
    for _ in range(5):
        mon._sample_all()  # the fifth reading makes five: every other one is dropped
    assert [s.util_pct for s in mon.samples] == [10.0, 30.0, 50.0]
