"""The device telemetry chart's data: every cell's samples and window on the run's one axis, the series a
source did not give left out (never drawn at zero), the cell bands on the device and /metrics charts, and
the per-cell device rows with energy per token on the devices that served."""

from __future__ import annotations

from typing import Any

import pytest

from accelbench.domain.bench_summary import TelemetrySample
from accelbench.domain.device import DeviceKind, DeviceSample, DeviceTelemetry
from accelbench.domain.results import ResultInfo
from accelbench.report.document import build_report, telemetry_series
from accelbench.report.html import render_html
from accelbench.report.html_figures import device_figure, telemetry_figure
from accelbench.report.timeline import cell_label, chart_payload, device_table, run_timeline
from tests.support.report_data import make_result, make_run, run_data

GIB = 2**30
T0 = 1_767_000_000.0  # Unix time of the first cell's benchmark start


def _cell(
    input_len: int,
    concurrency: int,
    *,
    repeat: int = 0,
    zero: float,
    first_send: float,
    duration: float,
    samples: list[DeviceSample],
    output_tokens: int = 1000,
    zero_recorded: bool = True,
) -> ResultInfo:
    """A stored cell whose benchmark started at ``zero`` (Unix time), sent its first request
    ``first_send`` s later and ran ``duration`` s; ``samples`` are on its own clock (t_s from ``zero``)."""
    tel = DeviceTelemetry.build(
        samples,
        sources=["cpu:/proc/stat"],
        missing=["RAPL: /sys/class/powercap is absent (no powercap driver)"],
        interval_s=1.0,
        zero_wall=zero if zero_recorded else None,
    )
    r = make_result("run-1", input_len, concurrency, repeat=repeat)
    summary: dict[str, Any] = {
        "started_at": zero + first_send,
        "finished_at": zero + first_send + duration,
        "duration_s": duration,
        "total_output_tokens": output_tokens,
        "device_telemetry": tel.model_dump(mode="json"),
    }
    return r.model_copy(update={"summary": summary})


def _cpu(t: float, util: float | None, mem_gib: float, **kw: Any) -> DeviceSample:
    return DeviceSample(
        t_s=t, device="cpu", kind=DeviceKind.cpu, util_pct=util, memory_used_bytes=mem_gib * GIB, **kw
    )


def _two_cells() -> list[ResultInfo]:
    first = _cell(
        256,
        4,
        zero=T0,
        first_send=0.002,
        duration=3.0,
        samples=[_cpu(-0.05, None, 2.0), _cpu(1.0, 80.0, 2.5), _cpu(2.0, 90.0, 2.6), _cpu(3.05, 85.0, 2.6)],
    )
    # the second cell's benchmark started 10 s after the first's; its clock starts at 0 again
    second = _cell(
        512,
        8,
        zero=T0 + 10.0,
        first_send=0.5,  # a rate: the first request went out half a second in
        duration=2.0,
        samples=[_cpu(-0.04, None, 2.6), _cpu(1.0, 95.0, 3.0), _cpu(2.6, 97.0, 3.1)],
    )
    return [second, first]  # stored order is not the order they ran


def test_cells_and_samples_share_one_axis() -> None:
    tl = run_timeline("run-1", _two_cells(), origin_wall=T0 - 0.5)  # the first scrape, half a second early
    assert [c.label for c in tl.cells] == ["in 256 / c 4 / r1", "in 512 / c 8 / r1"]  # in the order they ran
    a, b = tl.cells
    assert (a.start_s, a.end_s) == pytest.approx((0.502, 3.502))
    assert (b.start_s, b.end_s) == pytest.approx((11.0, 13.0))
    (cpu,) = tl.devices
    # each sample at its cell's zero plus its own t_s, on the scrape's zero
    assert cpu.t_s == pytest.approx([0.45, 1.5, 2.5, 3.55, 10.46, 11.5, 13.1])
    assert cpu.util_pct == [None, 80.0, 90.0, 85.0, None, 95.0, 97.0]
    assert cpu.memory_gib == pytest.approx([2.0, 2.5, 2.6, 2.6, 2.6, 3.0, 3.1])
    inside_b = [t for t in cpu.t_s if b.start_s <= t <= b.end_s]
    assert inside_b == pytest.approx([11.5])
    # without an origin: the earliest sample or cell start is zero
    tl = run_timeline("run-1", _two_cells())
    assert tl.origin_wall == pytest.approx(T0 - 0.05)
    assert tl.devices[0].t_s[0] == pytest.approx(0.0, abs=1e-6)


def test_results_without_the_recorded_zero_fall_back_to_the_first_send() -> None:
    r = _cell(
        128, 1, zero=T0, first_send=0.0, duration=1.0, samples=[_cpu(0.5, 50.0, 1.0)], zero_recorded=False
    )
    tl = run_timeline("run-1", [r], origin_wall=T0)
    assert tl.devices[0].t_s == pytest.approx([0.5])
    # a cell cut off before its first send has no window, and results without telemetry have no trace
    bare = make_result("run-1", 128, 2)
    tl = run_timeline("run-1", [bare])
    assert tl.cells == [] and tl.devices == [] and tl.origin_wall is None


def test_a_series_no_source_gave_is_left_out_not_zero() -> None:
    tl = run_timeline("run-1", _two_cells(), origin_wall=T0)
    assert tl.has("util_pct") and tl.has("memory_gib")
    assert not tl.has("power_w") and not tl.has("memory_bw_gbps")
    payload = chart_payload(tl)
    assert [s["name"] for s in payload["series"]] == ["util_pct", "memory_gib"]
    (cpu,) = payload["devices"]
    assert "power_w" not in cpu and "memory_bw_gbps" not in cpu
    assert cpu["util_pct"]["y"] == [80.0, 90.0, 85.0, 95.0, 97.0]  # the baseline readings have none
    fig = device_figure(tl)
    assert fig is not None
    titles = [a.text for a in fig.layout.annotations if not a.text.startswith("in ")]
    assert titles == ["Utilisation (%)", "Memory used (GiB)"]
    assert all(0.0 not in tr.y for tr in fig.data if tr.name == "cpu" and tr.yaxis == "y")
    assert len(fig.data) == 2  # one line per series of the one device; no power panel, no zero line


def test_a_gpu_with_power_gets_its_panel_and_the_cpu_none() -> None:
    samples = [
        DeviceSample(t_s=t, device="gpu0", kind=DeviceKind.gpu, util_pct=u, memory_used_bytes=20 * GIB,
                     power_w=p, energy_j=e)
        for t, u, p, e in ((0.0, 10.0, 100.0, 0.0), (1.0, 90.0, 300.0, 200.0), (2.0, 95.0, 310.0, 505.0))
    ] + [_cpu(t, 20.0, 8.0) for t in (0.0, 1.0, 2.0)]  # fmt: skip
    r = _cell(1024, 16, zero=T0, first_send=0.0, duration=2.0, samples=samples, output_tokens=1010)
    tl = run_timeline("run-1", [r], origin_wall=T0)
    assert [d.device for d in tl.devices] == ["gpu0", "cpu"]  # accelerators first
    fig = device_figure(tl)
    assert fig is not None
    power = [tr for tr in fig.data if tr.yaxis == "y3"]
    assert [tr.name for tr in power] == ["gpu0"]  # the CPU had no power reading: no line
    assert list(power[0].y) == [100.0, 300.0, 310.0]
    rows = device_table(tl)
    gpu_row, cpu_row = rows
    assert gpu_row[0] == "in 1024 / c 16 / r1" and gpu_row[1] == "gpu0"
    assert gpu_row[6] == "505.0"  # the energy counter's increase
    assert gpu_row[8] == "2.00" and gpu_row[9] == "0.500"  # 1010 tokens / 505 J, on the GPU that served
    assert cpu_row[1] == "cpu" and cpu_row[5] == "-" and cpu_row[8] == "-" and cpu_row[9] == "-"


def test_cell_bands_on_the_device_chart() -> None:
    tl = run_timeline("run-1", _two_cells(), origin_wall=T0)
    fig = device_figure(tl)
    assert fig is not None
    bands = [s for s in fig.layout.shapes if s.type == "rect"]
    assert [(s.x0, s.x1) for s in bands] == [
        pytest.approx((0.002, 3.002), abs=1e-6),
        pytest.approx((10.5, 12.5), abs=1e-6),
    ]
    assert all(s.yref == "paper" and (s.y0, s.y1) == (0, 1) for s in bands)  # across every panel
    labels = [a for a in fig.layout.annotations if a.text.startswith("in ")]
    assert [(a.text, a.x) for a in labels] == [
        ("in 256 / c 4 / r1", pytest.approx(0.002, abs=1e-6)),
        ("in 512 / c 8 / r1", pytest.approx(10.5, abs=1e-6)),
    ]
    assert cell_label(256, 4, 1) == "in 256 / c 4 / r2"  # the second repeat (stored repeats count from 0)


def test_the_metrics_chart_gets_the_same_bands_and_the_report_a_device_section() -> None:
    results = _two_cells()
    scrapes = [
        TelemetrySample(t_s=0.0, wall=T0 - 0.5 + i, values={"running": float(i % 3), "waiting": 0.0})
        for i in range(15)
    ]
    series = telemetry_series("run-1", scrapes)
    assert series.origin_wall == T0 - 0.5
    data = build_report([run_data(make_run("run-1", label="cpu run"), results)], telemetry=[series])
    (tl,) = data.devices
    assert tl.origin_wall == T0 - 0.5  # the device chart's zero is the /metrics chart's
    fig = telemetry_figure(data)
    assert fig is not None
    bands = [(s.x0, s.x1) for s in fig.layout.shapes if s.type == "rect"]
    assert bands == [pytest.approx((0.502, 3.502), abs=1e-6), pytest.approx((11.0, 13.0), abs=1e-6)]
    html = render_html(data)
    assert '<section id="devices">' in html and 'id="chart-devices-1"' in html
    assert 'id="device-table-1"' in html and "in 512 / c 8 / r1" in html
    assert "RAPL: /sys/class/powercap is absent" in html


def test_zero_wall_is_recorded_by_the_monitor() -> None:
    import time

    from accelbench.telemetry.devices import DeviceMonitor
    from accelbench.telemetry.devices.collector import DeviceCollector

    class One(DeviceCollector):
        name = "one"

        def __init__(self) -> None:
            super().__init__()
            self.available = True

        def sample(self, t_s: float | None = None) -> list[DeviceSample]:
            return [_cpu(float(t_s or 0.0), 1.0, 1.0)]

    mon = DeviceMonitor([One()], interval_s=10.0)
    mon.start(time.perf_counter())
    time.sleep(0.05)
    t0 = time.perf_counter()
    wall = time.time()
    mon.restart_clock(t0)
    tel = mon.stop()
    assert tel.zero_wall == pytest.approx(wall, abs=0.01)
    assert tel.samples[0].t_s < 0  # the baseline reading came before the benchmark's start
