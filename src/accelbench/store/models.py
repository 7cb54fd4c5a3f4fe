"""Table definitions. Changing a table means a new alembic migration under ``migrations/versions``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeEngine


class JsonType(TypeDecorator[Any]):
    """JSON, stored as JSONB on PostgreSQL. The PostgreSQL type is chosen when a PostgreSQL engine asks for it,
    so a SQLite store (every CLI command) does not import the PostgreSQL dialect and its drivers."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            # start-up time: only a PostgreSQL store needs its dialect
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JsonType, list[Any]: JsonType}


class RunRow(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    label: Mapped[str | None] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    updated_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    model: Mapped[str | None] = mapped_column(String(500), index=True)
    model_revision: Mapped[str | None] = mapped_column(String(200))
    served_model: Mapped[str | None] = mapped_column(String(500))
    base_url: Mapped[str | None] = mapped_column(String(500))
    engine: Mapped[str | None] = mapped_column(String(64))
    engine_version: Mapped[str | None] = mapped_column(String(64))
    target: Mapped[str | None] = mapped_column(String(32))
    instance_type: Mapped[str | None] = mapped_column(String(64), index=True)
    accelerator_type: Mapped[str | None] = mapped_column(String(16), index=True)
    accelerator_name: Mapped[str | None] = mapped_column(String(64))
    accelerator_count: Mapped[int | None] = mapped_column(Integer)
    tp_degree: Mapped[int | None] = mapped_column(Integer)
    quantization: Mapped[str | None] = mapped_column(String(32))
    hourly_usd: Mapped[float | None] = mapped_column(Float)
    spec: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    environment: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    command: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    progress: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    extra: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    worker_id: Mapped[str | None] = mapped_column(String(64))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # the fence of the run's one executor: raised by every claim, checked with each write the executor makes
    claim_epoch: Mapped[int | None] = mapped_column(Integer)
    # the API key that submitted the run (None: the service token, a CLI process, or made before ownership)
    owner_key_id: Mapped[int | None] = mapped_column(Integer, index=True)

    results: Mapped[list[ResultRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", passive_deletes=True
    )


class ResultRow(Base):
    __tablename__ = "results"
    __table_args__ = (
        UniqueConstraint("run_id", "input_len", "concurrency", "repeat", name="uq_result_cell"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    input_len: Mapped[int] = mapped_column(Integer)
    concurrency: Mapped[int] = mapped_column(Integer)
    repeat: Mapped[int] = mapped_column(Integer)
    output_len: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    num_prompts: Mapped[int] = mapped_column(Integer, default=0)
    completed: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    ttft_p50_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p95_ms: Mapped[float | None] = mapped_column(Float)
    ttft_p99_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p50_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p95_ms: Mapped[float | None] = mapped_column(Float)
    tpot_p99_ms: Mapped[float | None] = mapped_column(Float)
    itl_p50_ms: Mapped[float | None] = mapped_column(Float)
    itl_p95_ms: Mapped[float | None] = mapped_column(Float)
    itl_p99_ms: Mapped[float | None] = mapped_column(Float)
    e2el_p50_ms: Mapped[float | None] = mapped_column(Float)
    e2el_p95_ms: Mapped[float | None] = mapped_column(Float)
    e2el_p99_ms: Mapped[float | None] = mapped_column(Float)
    request_throughput: Mapped[float | None] = mapped_column(Float)
    output_throughput: Mapped[float | None] = mapped_column(Float)
    total_token_throughput: Mapped[float | None] = mapped_column(Float)
    request_goodput: Mapped[float | None] = mapped_column(Float)
    summary: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    run: Mapped[RunRow] = relationship(back_populates="results")
    requests: Mapped[list[RequestRow]] = relationship(
        back_populates="result", cascade="all, delete-orphan", passive_deletes=True
    )


class RequestRow(Base):
    __tablename__ = "request_records"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("results.id", ondelete="CASCADE"), index=True)
    idx: Mapped[int] = mapped_column(Integer)
    success: Mapped[bool] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(Text)
    prompt_len: Mapped[int] = mapped_column(Integer)
    server_prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    max_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens_source: Mapped[str] = mapped_column(String(16))
    planned_send_s: Mapped[float] = mapped_column(Float)
    start_s: Mapped[float] = mapped_column(Float)
    ttft_s: Mapped[float] = mapped_column(Float)
    latency_s: Mapped[float] = mapped_column(Float)
    tpot_s: Mapped[float | None] = mapped_column(Float)
    itl_s: Mapped[list[Any]] = mapped_column(JsonType, default=list)
    generated_text: Mapped[str | None] = mapped_column(Text)

    result: Mapped[ResultRow] = relationship(back_populates="requests")


class TelemetryRow(Base):
    __tablename__ = "telemetry_samples"
    __table_args__ = (Index("ix_telemetry_run_t", "run_id", "wall"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    result_id: Mapped[int | None] = mapped_column(ForeignKey("results.id", ondelete="CASCADE"), index=True)
    t_s: Mapped[float] = mapped_column(Float)
    wall: Mapped[float] = mapped_column(Float)
    values: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)


class PriceRow(Base):
    __tablename__ = "pricing"
    __table_args__ = (UniqueConstraint("instance_type", "region", "tier", "effective_date", name="uq_price"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    instance_type: Mapped[str] = mapped_column(String(64), index=True)
    region: Mapped[str] = mapped_column(String(32))
    tier: Mapped[str] = mapped_column(String(16))
    usd_per_hour: Mapped[float] = mapped_column(Float)
    effective_date: Mapped[str] = mapped_column(String(10))
    source: Mapped[str] = mapped_column(String(64))
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ToolVersionRow(Base):
    __tablename__ = "tool_versions"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class AuditRow(Base):
    __tablename__ = "config_audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    key: Mapped[str] = mapped_column(String(64))
    old_value: Mapped[str | None] = mapped_column(String(200))
    new_value: Mapped[str | None] = mapped_column(String(200))
    actor: Mapped[str | None] = mapped_column(String(200))
    source: Mapped[str | None] = mapped_column(String(32))


class ApiKeyRow(Base):
    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    prefix: Mapped[str] = mapped_column(String(16), index=True)
    key_hash: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    role: Mapped[str] = mapped_column(String(16), default="user", server_default="user")


class CalibrationRow(Base):
    __tablename__ = "calibrations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    accelerator: Mapped[str] = mapped_column(String(64), index=True)
    engine: Mapped[str] = mapped_column(String(64))
    factors: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    n_points: Mapped[int] = mapped_column(Integer, default=0)
    error_before: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    error_after: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
