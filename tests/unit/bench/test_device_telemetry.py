"""The benchmark samples this machine's devices when the engine runs here, and the result keeps them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accelbench.bench import run_benchmark
from accelbench.bench.results_io import from_dict, to_vllm_dict
from accelbench.bench.runner import engine_is_local
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.settings import reset_settings_cache
from accelbench.store.repo import get_store, reset_stores
from tests.support.stream_server import StreamServer


def test_engine_is_local() -> None:
    assert engine_is_local(Endpoint(base_url="http://127.0.0.1:8000", served_model="m"))
    assert engine_is_local(Endpoint(base_url="http://localhost:8000", served_model="m"))
    assert engine_is_local(Endpoint(base_url="http://10.1.2.3:8000", served_model="m", engine_pids=[42]))
    assert not engine_is_local(Endpoint(base_url="http://10.1.2.3:8000", served_model="m"))
    # the pids are not part of what a stored run keeps of the endpoint
    assert "engine_pids" not in Endpoint(base_url="http://x", served_model="m", engine_pids=[1]).record()


def test_a_local_benchmark_carries_cpu_telemetry_that_round_trips(
    fixture_server: StreamServer, tok_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = Endpoint(
        base_url=fixture_server.base_url,
        served_model=fixture_server.model,
        tokenizer=str(tok_dir),
        engine_pids=[os.getpid()],  # the fixture server runs in this process: its cgroup is ours
    )
    config = BenchConfig(input_len=48, output_len=4, num_prompts=6, max_concurrency=2, scrape_interval_s=0.05)
    summary = run_benchmark(endpoint, config)
    tel = summary.device_telemetry
    assert tel is not None and tel.available
    assert tel.sources[0] == "cpu:/proc/stat"
    cpu = tel.device("cpu")
    assert cpu is not None and cpu.samples >= 2  # the baseline and the last sample at least
    assert cpu.memory_total_bytes is not None and cpu.memory_total_bytes > 0
    assert all(0.0 <= s.util_pct <= 100.0 for s in tel.samples if s.util_pct is not None)
    assert any(n.startswith("Device cpu:") for n in summary.notes)
    if tel.energy_j is None:
        assert any(m.startswith("RAPL") for m in tel.missing)

    # through the result file and the store, unchanged
    assert from_dict(to_vllm_dict(summary)).device_telemetry == tel
    monkeypatch.setenv("ACCELBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    reset_settings_cache()
    reset_stores()
    try:
        store = get_store()
        run = store.create_run(kind="bench", label="dev", model="m")
        rid = store.save_result(run.id, input_len=48, concurrency=2, repeat=0, summary=summary)
        assert store.get_summary(rid).device_telemetry == tel
    finally:
        reset_stores()


def test_a_remote_engine_gets_no_device_telemetry(fixture_server: StreamServer, tok_dir: Path) -> None:
    endpoint = Endpoint(
        base_url=fixture_server.base_url, served_model=fixture_server.model, tokenizer=str(tok_dir)
    )
    summary = run_benchmark(endpoint, BenchConfig(input_len=48, output_len=2, num_prompts=2), devices=False)
    assert summary.device_telemetry is None


def test_old_stored_results_load_without_it() -> None:
    data = to_vllm_dict(BenchmarkSummary(date="2026-01-01T00:00:00+00:00", config=BenchConfig()))
    data["accelbench"]["summary"].pop("device_telemetry")
    assert from_dict(data).device_telemetry is None
