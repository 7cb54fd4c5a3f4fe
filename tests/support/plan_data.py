"""Stored runs for planner tests: a local vLLM CPU sweep shaped like the reference one in ENGINE-NOTES.

The numbers are the reference methodology's table (SmolLM2-135M BF16, 2 vCPU, 32 output tokens), with the
concurrency-2 cells placed between the C=1 and C=4 ones; tests use them as "measured" results.
"""

from __future__ import annotations

from typing import Any

from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats
from accelbench.domain.load import BenchConfig
from accelbench.domain.run import RunStatus
from accelbench.store.repo import Store

#: (input_len, concurrency) -> (TTFT p50 ms, TPOT p50 ms, E2E p50 ms, output tok/s)
REFERENCE_SWEEP: dict[tuple[int, int], tuple[float, float, float, float]] = {
    (128, 1): (214.0, 27.3, 1066.0, 29.7),
    (128, 2): (214.0, 27.2, 1120.0, 56.0),
    (128, 4): (214.0, 27.2, 1358.0, 96.8),
    (512, 1): (611.0, 27.9, 1471.0, 21.7),
    (512, 2): (540.0, 31.0, 1800.0, 35.5),
    (512, 4): (456.0, 36.3, 2405.0, 52.5),
}

#: A sweep measured with `accelbench sweep` on this project's kind of machine (vLLM CPU 0.32.0, SmolLM2-135M
#: BF16, VLLM_CPU_KVCACHE_SPACE=1, 2 vCPU shared with other work, 32 output tokens, 10 x C prompts per cell).
#: Its requests travel in waves: the client re-sends all C at once (see PerfModel.predict, "bursts").
MEASURED_LOCAL_SWEEP: dict[tuple[int, int], tuple[float, float, float, float]] = {
    (128, 1): (196.2, 38.45, 1403.8, 22.4),
    (128, 2): (364.6, 46.87, 1752.9, 36.0),
    (128, 4): (704.0, 37.91, 1877.1, 67.6),
    (512, 1): (789.4, 37.64, 1961.5, 15.4),
    (512, 2): (1285.2, 71.55, 3356.9, 18.5),
    (512, 4): (2854.1, 46.75, 4346.7, 28.5),
}

#: what telemetry.host.capture_environment records on a 2-vCPU AMD EPYC slice with AVX512-BF16, no AMX
LOCAL_ENVIRONMENT: dict[str, Any] = {
    "cpu": {
        "model": "AMD EPYC",
        "vendor": "AuthenticAMD",
        "arch": "x86_64",
        "flags": ["avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16"],
        "sockets": 1,
        "numa_nodes": 1,
        "physical_cores": 2,
        "logical_cpus": 2,
        "usable_cpus": 2,
        "cgroup_cpu_limit": None,
        "max_mhz": 2596.1,
    },
    "memory": {"total_gib": 23.54, "available_gib": 23.05, "swap_gib": 0.0},
    "accelerators": {"gpus": [], "neuron_devices": []},
}


def summary(
    input_len: int,
    concurrency: int,
    ttft: float,
    tpot: float,
    e2e: float,
    out_tps: float,
    output_len: int = 32,
) -> BenchmarkSummary:
    n = 10 * concurrency
    duration = n * output_len / out_tps
    return BenchmarkSummary(
        date="2026-11-30T00:00:00+00:00",
        config=BenchConfig(
            input_len=input_len, output_len=output_len, num_prompts=n, max_concurrency=concurrency
        ),
        duration_s=duration,
        num_prompts=n,
        completed=n,
        total_input_tokens=n * input_len,
        total_output_tokens=n * output_len,
        request_throughput=n / duration,
        output_throughput=out_tps,
        total_token_throughput=out_tps * (input_len + output_len) / output_len,
        ttft_ms=MetricStats(count=n, mean=ttft, median=ttft, p50=ttft, p90=ttft, p95=ttft, p99=ttft),
        tpot_ms=MetricStats(count=n, mean=tpot, median=tpot, p50=tpot, p90=tpot, p95=tpot, p99=tpot),
        e2el_ms=MetricStats(count=n, mean=e2e, median=e2e, p50=e2e, p90=e2e, p95=e2e, p99=e2e),
    )


def add_sweep(
    store: Store,
    cells: dict[tuple[int, int], tuple[float, float, float, float]] | None = None,
    *,
    model: str = "smollm2-135m-instruct",
    environment: dict[str, Any] | None = None,
    instance_type: str | None = None,
    engine: str = "vllm-cpu",
    kv_cache_space_gib: int | None = 1,
    max_model_len: int | None = 2048,
    output_len: int = 32,
) -> str:
    """Store a completed sweep run with one result per cell; returns the run id."""
    cells = cells or REFERENCE_SWEEP
    settings: dict[str, Any] = {}
    if kv_cache_space_gib is not None:
        settings["kv_cache_space_gib"] = kv_cache_space_gib
    if max_model_len is not None:
        settings["max_model_len"] = max_model_len
    spec = {
        "model": model,
        "engine": {"name": engine, "settings": settings},
        "sweep": {"output_len": output_len},
    }
    run = store.create_run(
        kind="sweep",
        status=RunStatus.completed,
        model=model,
        engine=engine,
        instance_type=instance_type,
        accelerator_type="cpu" if instance_type is None else None,
        spec=spec,
        environment=environment
        if environment is not None
        else (LOCAL_ENVIRONMENT if instance_type is None else {}),
        label="reference sweep",
    )
    for (input_len, concurrency), (ttft, tpot, e2e, tps) in cells.items():
        store.save_result(
            run.id,
            input_len=input_len,
            concurrency=concurrency,
            repeat=0,
            summary=summary(input_len, concurrency, ttft, tpot, e2e, tps, output_len),
        )
    return run.id
