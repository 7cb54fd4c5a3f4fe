"""Stored runs and results as the rest of the code reads them (the store returns these, never ORM rows)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from accelbench.domain.run import CellStatus, RunStatus
from accelbench.domain.strict import StrictModel


class RunInfo(StrictModel):
    id: str
    label: str | None = None
    kind: str = Field(description="bench, sweep, run or import")
    status: RunStatus
    created_at: datetime
    updated_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    model: str | None = None
    model_revision: str | None = None
    served_model: str | None = None
    base_url: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    target: str | None = None
    instance_type: str | None = None
    accelerator_type: str | None = None
    accelerator_name: str | None = None
    accelerator_count: int | None = None
    tp_degree: int | None = None
    quantization: str | None = None
    hourly_usd: float | None = None
    spec: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    command: str | None = None
    error: str | None = None
    progress: dict[str, Any] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)
    completed_requests: int = 0
    failed_requests: int = 0
    cells: int = 0


class ResultInfo(StrictModel):
    """One (cell, repeat) of a run with its key metrics; the full summary is in ``summary``."""

    id: int
    run_id: str
    input_len: int
    concurrency: int
    repeat: int
    output_len: int | None = None
    status: CellStatus
    num_prompts: int = 0
    completed: int = 0
    failed: int = 0
    duration_s: float = 0.0
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    e2el_p50_ms: float | None = None
    e2el_p95_ms: float | None = None
    e2el_p99_ms: float | None = None
    request_throughput: float | None = None
    output_throughput: float | None = None
    total_token_throughput: float | None = None
    request_goodput: float | None = None
    summary: dict[str, Any] = Field(
        default_factory=dict, description="BenchmarkSummary without per-request records and samples."
    )
    created_at: datetime | None = None
