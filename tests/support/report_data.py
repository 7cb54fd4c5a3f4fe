"""Builders of runs and results with known numbers, for report tests (no engine, no store needed)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats, TelemetrySample
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.report.compare_runs import RunData

_ids = iter(range(1, 1_000_000))


def make_run(run_id: str, **fields: Any) -> RunInfo:
    base: dict[str, Any] = {
        "id": run_id,
        "kind": "sweep",
        "status": RunStatus.completed,
        "created_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    }
    base.update(fields)
    return RunInfo(**base)


def make_result(
    run_id: str,
    input_len: int,
    concurrency: int,
    *,
    repeat: int = 0,
    tpot: float | None = 10.0,
    ttft: float | None = 100.0,
    total_tps: float | None = 1000.0,
    output_tps: float | None = None,
    rps: float | None = None,
    completed: int = 10,
    failed: int = 0,
    output_len: int = 128,
    status: CellStatus = CellStatus.completed,
    itl: float | None = None,
    e2e: float | None = None,
    telemetry: dict[str, Any] | None = None,
) -> ResultInfo:
    """A stored result whose p95 is p50 x 1.5 and p99 is p50 x 2 (so each percentile is checkable)."""

    def pct(v: float | None, f: float) -> float | None:
        return None if v is None else v * f

    itl = tpot if itl is None else itl
    e2e = (ttft or 0) + (tpot or 0) * (output_len - 1) if e2e is None else e2e
    return ResultInfo(
        id=next(_ids),
        run_id=run_id,
        input_len=input_len,
        concurrency=concurrency,
        repeat=repeat,
        output_len=output_len,
        status=status,
        num_prompts=completed + failed,
        completed=completed,
        failed=failed,
        duration_s=10.0,
        ttft_p50_ms=ttft,
        ttft_p95_ms=pct(ttft, 1.5),
        ttft_p99_ms=pct(ttft, 2.0),
        tpot_p50_ms=tpot,
        tpot_p95_ms=pct(tpot, 1.5),
        tpot_p99_ms=pct(tpot, 2.0),
        itl_p50_ms=itl,
        itl_p95_ms=pct(itl, 1.5),
        itl_p99_ms=pct(itl, 2.0),
        e2el_p50_ms=e2e,
        e2el_p95_ms=pct(e2e, 1.5),
        e2el_p99_ms=pct(e2e, 2.0),
        request_throughput=rps if rps is not None else (total_tps / 1000.0 if total_tps else None),
        output_throughput=output_tps if output_tps is not None else (total_tps / 2 if total_tps else None),
        total_token_throughput=total_tps,
        summary={"telemetry": telemetry} if telemetry else {},
    )


def run_data(run: RunInfo, results: list[ResultInfo], **kw: Any) -> RunData:
    return RunData(run=run, results=results, **kw)


def make_summary(
    input_len: int,
    concurrency: int,
    *,
    tpot_ms: float,
    ttft_ms: float,
    output_len: int = 32,
    requests: int = 12,
    failed: int = 0,
    telemetry_start: float | None = 1_700_000_000.0,
    vllm_metrics: bool = True,
) -> BenchmarkSummary:
    """A self-consistent BenchmarkSummary: per-request records spread around the given TTFT/TPOT, the
    statistics computed from them (numpy linear percentiles, like the benchmark), telemetry samples once a
    second when ``telemetry_start`` is given (the scraper's gauges when ``vllm_metrics``)."""
    import numpy as np

    records: list[RequestRecord] = []
    t = 0.0
    for i in range(requests + failed):
        ok = i < requests
        jitter = 1.0 + 0.2 * ((i * 7919) % 11 - 5) / 5  # deterministic spread of +-20%
        ttft = ttft_ms * jitter / 1000.0
        tpot = tpot_ms * (2.0 - jitter) / 1000.0
        latency = ttft + tpot * (output_len - 1)
        records.append(
            RequestRecord(
                index=i,
                prompt_len=input_len,
                max_tokens=output_len,
                output_tokens=output_len if ok else 0,
                output_tokens_source="usage" if ok else "none",
                start_s=t,
                planned_send_s=t,
                ttft_s=ttft if ok else 0.0,
                itl_s=[tpot] * (output_len - 1) if ok else [],
                latency_s=latency if ok else 0.0,
                success=ok,
                error="" if ok else "HTTP 500",
            )
        )
        if (i + 1) % concurrency == 0:
            t += latency
    good = [r for r in records if r.success]
    duration = max(r.start_s + r.latency_s for r in good)

    def stats(values: list[float]) -> MetricStats:
        ms = np.array(values) * 1000.0
        return MetricStats(
            count=len(ms), mean=float(ms.mean()), median=float(np.median(ms)), std=float(ms.std()),
            min=float(ms.min()), max=float(ms.max()), p50=float(np.percentile(ms, 50)),
            p90=float(np.percentile(ms, 90)), p95=float(np.percentile(ms, 95)), p99=float(np.percentile(ms, 99)),
        )  # fmt: skip

    samples: list[TelemetrySample] = []
    if telemetry_start is not None:
        for s in range(int(duration) + 2):
            running = float(min(concurrency, requests - s % max(requests, 1)))
            values = (
                {  # the canonical names the scraper stores (telemetry.prometheus)
                    "running": running,
                    "waiting": float(max(0, requests - concurrency - s)),
                    "kv_cache_usage": min(1.0, 0.02 * running * input_len / 128),
                }
                if vllm_metrics
                else {"process_cpu_seconds_total": float(s)}
            )
            samples.append(TelemetrySample(t_s=float(s), wall=telemetry_start + s, values=values))
    out_tokens = sum(r.output_tokens for r in good)
    return BenchmarkSummary(
        date="2026-01-02T03:04:05",
        config=BenchConfig(
            input_len=input_len,
            output_len=output_len,
            num_prompts=requests + failed,
            max_concurrency=concurrency,
        ),
        duration_s=duration,
        num_prompts=requests + failed,
        completed=requests,
        failed=failed,
        errors={"HTTP 500": failed} if failed else {},
        total_input_tokens=input_len * requests,
        total_output_tokens=out_tokens,
        request_throughput=requests / duration,
        output_throughput=out_tokens / duration,
        total_token_throughput=(out_tokens + input_len * requests) / duration,
        ttft_ms=stats([r.ttft_s for r in good]),
        tpot_ms=stats([r.tpot_s for r in good if r.tpot_s is not None]),
        itl_ms=stats([x for r in good for x in r.itl_s]),
        e2el_ms=stats([r.latency_s for r in good]),
        output_tokens_source="usage",
        telemetry_samples=samples,
        requests=records,
    )
