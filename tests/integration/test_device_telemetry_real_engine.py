"""The CPU collector against the real vLLM CPU engine serving the real small model (the session's shared
server, ``vllm_endpoint``: no engine of its own).

One cell (input 128, concurrency 2, 6 requests of 48 tokens) through the product's sweep, stored; then the
stored device telemetry must be real: CPU samples inside the cell's window, utilisation above zero while
requests were in flight, host memory in use, the engine's cgroup figures where this machine exposes its
cgroup, the sources read and the absent ones named; and the report's timeline puts samples and cell on one
axis.
"""

from __future__ import annotations

import time

import pytest

from accelbench.bench.sweep import create_sweep_run, run_sweep
from accelbench.domain.device import DeviceKind, DeviceTelemetry
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.run import CellStatus, SweepSpec
from accelbench.report.timeline import run_timeline
from accelbench.store import get_store

pytestmark = pytest.mark.engine

INPUT_LEN, CONCURRENCY, PROMPTS_PER_CONCURRENCY, OUTPUT_LEN = 128, 2, 3, 48
INTERVAL_S = 0.25


def test_cpu_telemetry_of_a_real_vllm_cpu_benchmark(vllm_endpoint: Endpoint) -> None:
    assert vllm_endpoint.engine_pids, "the local target gives the engine's pids"
    spec = SweepSpec(
        input_lens=[INPUT_LEN],
        concurrency=[CONCURRENCY],
        repeats=1,
        prompts_per_concurrency=PROMPTS_PER_CONCURRENCY,
        output_len=OUTPUT_LEN,
        scrape_interval_s=INTERVAL_S,
        self_test=False,
    )
    store = get_store()
    run = create_sweep_run(store, vllm_endpoint, spec, label="device-telemetry")
    before = time.time()
    outcome = run_sweep(store, run.id, vllm_endpoint, spec)
    after = time.time()
    assert outcome.ran and not outcome.failed and not outcome.partial, outcome

    (result,) = store.get_results(run.id)
    assert result.status == CellStatus.completed and result.failed == 0
    summary = store.get_summary(result.id)  # read back from the store, as every view reads it
    tel = summary.device_telemetry
    assert isinstance(tel, DeviceTelemetry) and tel.available
    assert "cpu:/proc/stat" in tel.sources
    assert tel.interval_s == INTERVAL_S
    assert tel.zero_wall is not None and before <= tel.zero_wall <= summary.started_at + 1e-3

    cpu = [s for s in tel.samples if s.device == "cpu"]
    assert all(s.kind == DeviceKind.cpu for s in cpu)
    # samples inside the window (first send to last completion), on the benchmark's clock
    start = summary.started_at - tel.zero_wall
    end = summary.finished_at - tel.zero_wall
    inside = [s for s in cpu if start <= s.t_s <= end]
    assert summary.duration_s > 4 * INTERVAL_S, summary.duration_s
    assert len(inside) >= int(summary.duration_s / INTERVAL_S) // 2, (len(inside), summary.duration_s)
    # the engine decoded on these cores while requests were in flight
    busy = [s.util_pct for s in inside if s.util_pct is not None]
    assert busy and max(busy) > 10.0, busy
    assert all(0.0 <= u <= 100.0 for u in busy)
    assert all(s.memory_used_bytes and s.memory_total_bytes for s in cpu)
    assert all(0 < (s.memory_used_bytes or 0) < (s.memory_total_bytes or 0) for s in cpu)

    # the engine's own cgroup where the machine exposes it; else a sentence says why
    if "cpu:cgroup" in tel.sources:
        mem = [s.extra["cgroup_memory_bytes"] for s in cpu if "cgroup_memory_bytes" in s.extra]
        cores = [s.extra["cgroup_cpu_cores"] for s in inside if "cgroup_cpu_cores" in s.extra]
        assert mem or cores, cpu[-1].extra
        if mem:
            assert min(mem) > 100 * 2**20  # the engine holds the model, its KV cache and torch
        if cores:
            assert max(cores) > 0.1
    else:
        assert any(m.startswith("cgroup") for m in tel.missing), tel.missing
    # what this machine could not measure is named, once each, with its reason
    assert len(tel.missing) == len(set(tel.missing))
    bandwidth = [m for m in tel.missing if m.startswith("memory bandwidth")]
    if any(s.memory_read_gbps is not None for s in cpu):
        assert "cpu:perf-uncore" in tel.sources and not bandwidth
    else:
        assert len(bandwidth) == 1 and "not measured: " in bandwidth[0], tel.missing
    if "cpu:rapl" not in tel.sources:
        assert any(m.startswith("RAPL") for m in tel.missing)
        assert all(s.power_w is None for s in cpu)
    (d,) = [d for d in tel.devices if d.device == "cpu"]
    assert d.samples == len(cpu) and d.util_peak_pct is not None and d.util_peak_pct > 10.0

    # the report's one axis: the cell's window holds the samples taken inside it
    timeline = run_timeline(run.id, store.get_results(run.id))
    (window,) = timeline.cells
    assert window.label == f"in {INPUT_LEN} / c {CONCURRENCY} / r{result.repeat + 1}"
    assert window.end_s - window.start_s == pytest.approx(summary.duration_s, abs=1e-3)
    (trace,) = [t for t in timeline.devices if t.device == "cpu"]
    on_axis = [t for t in trace.t_s if window.start_s <= t <= window.end_s]
    assert len(on_axis) == len(inside)
    assert not trace.has("power_w") or "cpu:rapl" in tel.sources
    assert after >= summary.finished_at
