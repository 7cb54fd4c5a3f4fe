"""The CPU collector's memory bandwidth: the memory-controller PMUs found in recorded sysfs trees
(tests/data/telemetry/imc, amd_df, host; see its README), perf stat's interval output parsed, and a perf
stand-in that prints recorded output, so the whole path (discovery, the process, the reader, GB/s per
sample) runs without uncore counters on this VM."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

from accelbench.telemetry.devices.cpu import CpuCollector, imc_events, parse_perf_interval

DATA = Path(__file__).resolve().parents[2] / "data" / "telemetry"
MIB = 2**20


def _tree(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(DATA / name / "first", root)
    return root


def _fake_perf(tmp_path: Path, output: str, *, exit_code: int | None = None) -> Path:
    """An executable that records its argv, prints ``output`` on stderr as perf stat -I does, then runs until
    SIGINT (as perf does), or exits with ``exit_code`` at once."""
    out = tmp_path / "perf-output.txt"
    out.write_text(output)
    script = tmp_path / "perf"
    tail = (
        f"sys.exit({exit_code})"
        if exit_code is not None
        else "signal.signal(signal.SIGINT, lambda *a: sys.exit(0))\ntime.sleep(60)"
    )
    script.write_text(
        f"#!{sys.executable}\n"
        "import pathlib, signal, sys, time\n"
        f"pathlib.Path({str(tmp_path / 'argv.txt')!r}).write_text('\\n'.join(sys.argv[1:]))\n"
        f"sys.stderr.write(pathlib.Path({str(out)!r}).read_text())\n"
        "sys.stderr.flush()\n"
        f"{tail}\n"
    )
    script.chmod(0o755)
    return script


def _bandwidth_missing(c: CpuCollector) -> list[str]:
    return [m for m in c.missing if m.startswith("memory bandwidth")]


def test_parse_perf_interval_lines() -> None:
    line = "0.250166873,1525.88,MiB,uncore_imc_0/cas_count_read/,250114633,100.00,,"
    assert parse_perf_interval(line) == (0.250166873, "uncore_imc_0/cas_count_read/", 1525.88 * MIB)
    assert parse_perf_interval("1.0,<not counted>,MiB,uncore_imc_1/cas_count_write/,0,0.00,,") == (
        1.0,
        "uncore_imc_1/cas_count_write/",
        None,
    )
    assert parse_perf_interval("#           time,counts,unit,events,run,enabled,,") is None
    assert parse_perf_interval("") is None
    assert parse_perf_interval("Error: uncore_imc_0/cas_count_read/: permission denied") is None


def test_imc_events_named_by_sysfs() -> None:
    devices = DATA / "imc" / "first" / "sys/bus/event_source/devices"
    assert imc_events(devices / "uncore_imc_0") == [
        ("uncore_imc_0/cas_count_read/", "read"),
        ("uncore_imc_0/cas_count_write/", "write"),
    ]
    assert imc_events(DATA / "amd_df" / "first" / "sys/bus/event_source/devices/amd_df") == []


def test_bandwidth_from_the_imc_counters_through_perf(tmp_path: Path) -> None:
    root = _tree(tmp_path, "imc")
    perf = _fake_perf(tmp_path, (DATA / "imc" / "perf_stat.txt").read_text())
    c = CpuCollector(root, perf=str(perf))
    try:
        assert "cpu:perf-uncore" in c.sources
        assert _bandwidth_missing(c) == []
        assert c._perf is not None
        deadline = time.monotonic() + 10
        while c._perf.intervals < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert c._perf.intervals == 2
        s = c.sample(0.0)[0]
        later = c.sample(1.0)[0]
    finally:
        c.close()
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv[:6] == ["stat", "-a", "-x", ",", "-I", "250"]
    assert argv[6:] == [
        "-e",
        "uncore_imc_0/cas_count_read/,uncore_imc_0/cas_count_write/,"
        "uncore_imc_1/cas_count_read/,uncore_imc_1/cas_count_write/",
    ]
    # reads: both channels in both intervals, over the 0.500332118 s perf covered
    assert s.memory_read_gbps == pytest.approx((2 * 1525.88 + 2 * 3051.76) * MIB / 0.500332118 / 1e9)
    # writes: the second interval had an uncounted channel, so only the first counts (no partial sum)
    assert s.memory_write_gbps == pytest.approx(2 * 381.47 * MIB / 0.250166873 / 1e9)
    # nothing printed since: unknown, not zero
    assert later.memory_read_gbps is None and later.memory_write_gbps is None


def test_a_perf_that_fails_is_said_during_the_run(tmp_path: Path) -> None:
    root = _tree(tmp_path, "imc")
    perf = _fake_perf(
        tmp_path, "Error:\nNo permission to enable uncore_imc_0/cas_count_read/ event.\n", exit_code=1
    )
    c = CpuCollector(root, perf=str(perf))
    try:
        deadline = time.monotonic() + 10
        assert c._perf is not None
        while c._perf.failure() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        s = c.sample(0.0)[0]
    finally:
        c.close()
    assert s.memory_read_gbps is None and s.memory_write_gbps is None
    (err,) = [e for e in c.errors if e.startswith("memory bandwidth")]
    assert "perf stat exited with status 1" in err and "No permission" in err


def test_no_pmu_on_this_vm_says_why_once(tmp_path: Path) -> None:
    """The recorded tree of this development VM: no memory-controller PMU, perf_event_paranoid 2; perf
    given or not, one sentence names each reason."""
    root = _tree(tmp_path, "host")
    c = CpuCollector(root, perf=None)
    (m,) = _bandwidth_missing(c)
    assert m.startswith("memory bandwidth: not measured: no uncore memory-controller PMU is exposed")
    assert "perf_event_paranoid=2" in m and "no perf binary" in m
    perf = _fake_perf(tmp_path, "")
    c = CpuCollector(root, perf=str(perf))
    (m,) = _bandwidth_missing(c)
    assert "no perf binary" not in m and c._perf is None
    assert c.sample(0.0)[0].memory_read_gbps is None


def test_paranoid_or_capabilities(tmp_path: Path) -> None:
    root = _tree(tmp_path, "imc")
    (root / "proc/sys/kernel/perf_event_paranoid").write_text("2\n")
    perf = _fake_perf(tmp_path, "")
    c = CpuCollector(root, perf=str(perf))
    (m,) = _bandwidth_missing(c)
    assert "perf_event_paranoid=2 (system-wide uncore counters need 0 or less, or CAP_PERFMON)" in m
    assert "PMU" not in m  # the PMUs are there
    # CAP_PERFMON (bit 38) in the effective set lifts the paranoid setting
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/status").write_text(f"Name:\tpython\nCapEff:\t{1 << 38:016x}\n")
    c = CpuCollector(root, perf=str(perf))
    try:
        assert _bandwidth_missing(c) == [] and "cpu:perf-uncore" in c.sources
    finally:
        c.close()


def test_an_amd_data_fabric_without_named_events(tmp_path: Path) -> None:
    root = _tree(tmp_path, "amd_df")
    c = CpuCollector(root, perf=str(_fake_perf(tmp_path, "")))
    (m,) = _bandwidth_missing(c)
    assert "amd_df name no DRAM read/write events in sysfs" in m
    assert "paranoid" not in m  # -1 in this tree
