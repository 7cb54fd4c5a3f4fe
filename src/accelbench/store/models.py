"""The ORM classes of the store, mapped onto the tables of ``store/tables.py`` (where the columns are defined, and
changed with a new alembic migration). The annotations below say each attribute's Python type; the columns
come from the tables."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import DeclarativeBase, Mapped, relationship

from accelbench.store import tables
from accelbench.store.tables import utcnow

__all__ = [
    "ApiKeyRow",
    "AuditRow",
    "Base",
    "CalibrationRow",
    "PriceRow",
    "RequestRow",
    "ResultRow",
    "RunRow",
    "TelemetryRow",
    "ToolVersionRow",
    "utcnow",
]


class Base(DeclarativeBase):
    metadata = tables.metadata


class RunRow(Base):
    __table__ = tables.runs

    id: Mapped[str]
    label: Mapped[str | None]
    kind: Mapped[str]
    status: Mapped[str]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    model: Mapped[str | None]
    model_revision: Mapped[str | None]
    served_model: Mapped[str | None]
    base_url: Mapped[str | None]
    engine: Mapped[str | None]
    engine_version: Mapped[str | None]
    target: Mapped[str | None]
    instance_type: Mapped[str | None]
    accelerator_type: Mapped[str | None]
    accelerator_name: Mapped[str | None]
    accelerator_count: Mapped[int | None]
    tp_degree: Mapped[int | None]
    quantization: Mapped[str | None]
    hourly_usd: Mapped[float | None]
    spec: Mapped[dict[str, Any]]
    environment: Mapped[dict[str, Any]]
    command: Mapped[str | None]
    error: Mapped[str | None]
    progress: Mapped[dict[str, Any]]
    extra: Mapped[dict[str, Any]]
    worker_id: Mapped[str | None]
    heartbeat_at: Mapped[datetime | None]
    claim_epoch: Mapped[int | None]
    owner_key_id: Mapped[int | None]

    results: Mapped[list[ResultRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", passive_deletes=True
    )


class ResultRow(Base):
    __table__ = tables.results

    id: Mapped[int]
    run_id: Mapped[str]
    input_len: Mapped[int]
    concurrency: Mapped[int]
    repeat: Mapped[int]
    output_len: Mapped[int | None]
    status: Mapped[str]
    num_prompts: Mapped[int]
    completed: Mapped[int]
    failed: Mapped[int]
    duration_s: Mapped[float]
    ttft_p50_ms: Mapped[float | None]
    ttft_p95_ms: Mapped[float | None]
    ttft_p99_ms: Mapped[float | None]
    tpot_p50_ms: Mapped[float | None]
    tpot_p95_ms: Mapped[float | None]
    tpot_p99_ms: Mapped[float | None]
    itl_p50_ms: Mapped[float | None]
    itl_p95_ms: Mapped[float | None]
    itl_p99_ms: Mapped[float | None]
    e2el_p50_ms: Mapped[float | None]
    e2el_p95_ms: Mapped[float | None]
    e2el_p99_ms: Mapped[float | None]
    request_throughput: Mapped[float | None]
    output_throughput: Mapped[float | None]
    total_token_throughput: Mapped[float | None]
    request_goodput: Mapped[float | None]
    summary: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]

    run: Mapped[RunRow] = relationship(back_populates="results")
    requests: Mapped[list[RequestRow]] = relationship(
        back_populates="result", cascade="all, delete-orphan", passive_deletes=True
    )


class RequestRow(Base):
    __table__ = tables.request_records

    id: Mapped[int]
    result_id: Mapped[int]
    idx: Mapped[int]
    success: Mapped[bool]
    error: Mapped[str | None]
    prompt_len: Mapped[int]
    server_prompt_tokens: Mapped[int | None]
    max_tokens: Mapped[int | None]
    output_tokens: Mapped[int]
    output_tokens_source: Mapped[str]
    planned_send_s: Mapped[float]
    start_s: Mapped[float]
    ttft_s: Mapped[float]
    latency_s: Mapped[float]
    tpot_s: Mapped[float | None]
    itl_s: Mapped[list[Any]]
    generated_text: Mapped[str | None]

    result: Mapped[ResultRow] = relationship(back_populates="requests")


class TelemetryRow(Base):
    __table__ = tables.telemetry_samples

    id: Mapped[int]
    run_id: Mapped[str]
    result_id: Mapped[int | None]
    t_s: Mapped[float]
    wall: Mapped[float]
    values: Mapped[dict[str, Any]]


class PriceRow(Base):
    __table__ = tables.pricing

    id: Mapped[int]
    instance_type: Mapped[str]
    region: Mapped[str]
    tier: Mapped[str]
    usd_per_hour: Mapped[float]
    effective_date: Mapped[str]
    source: Mapped[str]
    fetched_at: Mapped[datetime]


class ToolVersionRow(Base):
    __table__ = tables.tool_versions

    key: Mapped[str]
    value: Mapped[str]
    updated_at: Mapped[datetime]


class AuditRow(Base):
    __table__ = tables.config_audit_log

    id: Mapped[int]
    at: Mapped[datetime]
    key: Mapped[str]
    old_value: Mapped[str | None]
    new_value: Mapped[str | None]
    actor: Mapped[str | None]
    source: Mapped[str | None]


class ApiKeyRow(Base):
    __table__ = tables.api_keys

    id: Mapped[int]
    name: Mapped[str]
    prefix: Mapped[str]
    key_hash: Mapped[str]
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    revoked: Mapped[bool]
    role: Mapped[str]


class CalibrationRow(Base):
    __table__ = tables.calibrations

    id: Mapped[int]
    created_at: Mapped[datetime]
    accelerator: Mapped[str]
    engine: Mapped[str]
    factors: Mapped[dict[str, Any]]
    n_points: Mapped[int]
    error_before: Mapped[dict[str, Any]]
    error_after: Mapped[dict[str, Any]]
    active: Mapped[bool]
