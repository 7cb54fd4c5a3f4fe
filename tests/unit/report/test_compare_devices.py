"""The compare's accelerator and energy columns from stored device telemetry; blanks carry their reason."""

from __future__ import annotations

from accelbench.domain.device import DeviceKind, DeviceSample, DeviceTelemetry
from accelbench.report.compare_csv import read_compare_csv, write_compare_csv
from accelbench.report.compare_runs import build_comparison
from tests.support.report_data import make_result, make_run, run_data

GiB = 2**30


def _cpu_tel(util: tuple[float, float], mem_gib: tuple[float, float]) -> dict:
    samples = [
        DeviceSample(t_s=t, device="cpu", kind=DeviceKind.cpu, util_pct=u, memory_used_bytes=m * GiB)
        for t, u, m in zip((0.0, 1.0), util, mem_gib, strict=True)
    ]
    missing = ["RAPL: /sys/class/powercap is absent (no powercap driver)"]
    return DeviceTelemetry.build(samples, sources=["cpu:/proc/stat"], missing=missing).model_dump(mode="json")


def _gpu_tel() -> dict:
    samples = [
        DeviceSample(t_s=0.0, device=f"gpu{i}", kind=DeviceKind.gpu, util_pct=u, memory_used_bytes=20 * GiB,
                     energy_j=0.0, power_w=300.0)
        for i, u in ((0, 80.0), (1, 60.0))
    ] + [
        DeviceSample(t_s=10.0, device=f"gpu{i}", kind=DeviceKind.gpu, util_pct=u, memory_used_bytes=22 * GiB,
                     energy_j=e, power_w=300.0)
        for i, u, e in ((0, 100.0, 3000.0), (1, 80.0, 2000.0))
    ] + [DeviceSample(t_s=0.0, device="cpu", kind=DeviceKind.cpu, util_pct=5.0)]  # fmt: skip
    return DeviceTelemetry.build(samples, sources=["nvml", "cpu:/proc/stat"]).model_dump(mode="json")


def _with(result, tel: dict | None, out_tokens: int):
    summary = dict(result.summary)
    summary["total_output_tokens"] = out_tokens
    if tel is not None:
        summary["device_telemetry"] = tel
    return result.model_copy(update={"summary": summary})


def _comparison():
    cpu = make_run("cpu-1", label="cpu", model="m")
    gpu = make_run("gpu-1", label="gpu", model="m")
    old = make_run("old-1", label="old", model="m")
    cr = [
        _with(make_result("cpu-1", 128, 1, repeat=0), _cpu_tel((50.0, 70.0), (2.0, 3.0)), 1000),
        _with(make_result("cpu-1", 128, 1, repeat=1), _cpu_tel((90.0, 100.0), (4.0, 5.0)), 1000),
    ]
    gr = [_with(make_result("gpu-1", 128, 1), _gpu_tel(), 10000)]
    orr = [_with(make_result("old-1", 128, 1), None, 500)]
    return build_comparison([run_data(cpu, cr), run_data(gpu, gr), run_data(old, orr)], with_findings=False)


def test_cpu_run_fills_utilisation_and_host_memory_and_says_why_energy_is_blank() -> None:
    cmp = _comparison()
    (c,) = cmp.cells_of("cpu-1")
    assert c.accelerator_telemetry == "cpu"
    assert c.accelerator_util_avg_pct == 77.5  # the repeats' means 60 and 95
    assert c.accelerator_util_peak_pct == 100.0
    assert c.accelerator_memory_avg_gib == 3.5  # 2.5 and 4.5 GiB
    assert c.accelerator_memory_peak_gib == 5.0
    assert c.energy_j is None and c.tokens_per_joule is None
    assert (
        "cpu: energy and tokens per joule are blank: RAPL: /sys/class/powercap is absent (no powercap driver)."
        in cmp.notes
    )


def test_gpu_run_energy_per_token_from_the_accelerators_only() -> None:
    (g,) = _comparison().cells_of("gpu-1")
    assert g.accelerator_telemetry == "gpu"
    assert g.accelerator_util_avg_pct == 80.0  # gpu0 90, gpu1 70; the CPU is not an accelerator here
    assert g.accelerator_util_peak_pct == 100.0
    assert g.accelerator_memory_peak_gib == 44.0  # summed over the two GPUs
    assert g.energy_j == 5000.0
    assert g.tokens_per_joule == 2.0 and g.joules_per_output_token == 0.5


def test_csv_fills_where_collected_and_blanks_with_a_note() -> None:
    cmp = _comparison()
    comments, rows = read_compare_csv(write_compare_csv(cmp))
    by = {r["run_id"]: r for r in rows}
    assert by["cpu-1"]["accelerator_util_avg_pct"] == "77.5" and by["cpu-1"]["accelerator_telemetry"] == "cpu"
    assert by["cpu-1"]["energy_j"] == "" and by["cpu-1"]["tokens_per_joule"] == ""
    assert by["gpu-1"]["energy_j"] == "5000" and by["gpu-1"]["tokens_per_joule"] == "2"
    assert by["old-1"]["accelerator_util_avg_pct"] == "" and by["old-1"]["accelerator_telemetry"] == ""
    assert any(c.startswith("# note: old: no device telemetry") for c in comments)
    assert not any(c.startswith("# note: gpu:") for c in comments)
