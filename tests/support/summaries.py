"""Hand-built BenchmarkSummary objects with known figures, for tests of storage, tables and CLIs that must not
depend on timing. (Measured summaries come from the engine's tests against the streaming test server.)"""

from __future__ import annotations

from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats, TelemetrySample
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord


def stats(p50: float, *, count: int = 10) -> MetricStats:
    """Statistics whose median/p50 is ``p50`` and the other percentiles follow from it."""
    return MetricStats(
        count=count,
        mean=p50 * 1.02,
        median=p50,
        std=p50 * 0.05,
        min=p50 * 0.9,
        max=p50 * 1.3,
        p50=p50,
        p90=p50 * 1.1,
        p95=p50 * 1.2,
        p99=p50 * 1.25,
    )


def make_summary(
    *,
    input_len: int = 128,
    concurrency: int = 1,
    output_len: int = 32,
    completed: int | None = None,
    failed: int = 0,
    ttft: float = 200.0,
    tpot: float = 27.0,
    itl: float = 27.0,
    e2el: float = 1000.0,
    duration_s: float = 10.0,
    label: str | None = None,
) -> BenchmarkSummary:
    """A summary of one cell with per-request records and two telemetry samples."""
    num_prompts = concurrency * 10
    if completed is None:
        completed = num_prompts - failed
    config = BenchConfig(
        input_len=input_len,
        output_len=output_len,
        num_prompts=num_prompts,
        max_concurrency=concurrency,
        label=label,
    )
    requests = [
        RequestRecord(
            index=i,
            prompt_len=input_len,
            server_prompt_tokens=input_len,
            max_tokens=output_len,
            output_tokens=output_len if i < completed else 0,
            output_tokens_source="usage" if i < completed else "none",
            start_s=i * 0.01,
            planned_send_s=i * 0.01,
            ttft_s=ttft / 1000,
            itl_s=[itl / 1000] * (output_len - 1) if i < completed else [],
            latency_s=e2el / 1000,
            success=i < completed,
            error="" if i < completed else "HTTP 500: boom",
        )
        for i in range(completed + failed)
    ]
    out_tokens = completed * output_len
    return BenchmarkSummary(
        label=label,
        date="2026-01-01T00:00:00+00:00",
        base_url="http://127.0.0.1:1",
        model_id="smol",
        tokenizer_id="smol",
        config=config,
        started_at=1.0e9,
        finished_at=1.0e9 + duration_s,
        duration_s=duration_s,
        num_prompts=num_prompts,
        completed=completed,
        failed=failed,
        errors={"HTTP 500: boom": failed} if failed else {},
        total_input_tokens=completed * input_len,
        total_output_tokens=out_tokens,
        request_throughput=completed / duration_s,
        output_throughput=out_tokens / duration_s,
        total_token_throughput=(out_tokens + completed * input_len) / duration_s,
        max_concurrent_requests=concurrency,
        ttft_ms=stats(ttft, count=completed) if completed else MetricStats(),
        tpot_ms=stats(tpot, count=completed) if completed else MetricStats(),
        itl_ms=stats(itl, count=completed * (output_len - 1)) if completed else MetricStats(),
        e2el_ms=stats(e2el, count=completed) if completed else MetricStats(),
        output_tokens_source="usage",
        telemetry_samples=[
            TelemetrySample(t_s=0.0, wall=1.0e9, values={"vllm:num_requests_running": 0.0}),
            TelemetrySample(
                t_s=1.0, wall=1.0e9 + 1, values={"vllm:num_requests_running": float(concurrency)}
            ),
        ],
        requests=requests,
    )
