"""Builders of runs and results with known numbers, for report tests (no engine, no store needed)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.report.compare import RunData

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
