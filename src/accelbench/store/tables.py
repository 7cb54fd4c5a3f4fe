"""The store's tables, in SQLAlchemy Core. Changing a table means a new alembic migration under
``migrations/versions``.

They are defined here once: ``store/models.py`` maps its ORM classes onto them for the parts of the store that
write and read whole runs, and the run list (``store/run_list.py``) queries them directly, so ``runs list``
starts without the ORM.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
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


def _when(name: str, *, required: bool = False, **kw: Any) -> Column[Any]:
    """A timestamp column (UTC, with its time zone)."""
    return Column(name, DateTime(timezone=True), nullable=not required, **kw)


def _json(name: str, empty: type = dict) -> Column[Any]:
    """A JSON column, never NULL: an empty dict (or list) when nothing is given."""
    return Column(name, JsonType, nullable=False, default=empty)


def _id() -> Column[int]:
    return Column("id", Integer, primary_key=True, autoincrement=True)


metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("label", String(200)),
    Column("kind", String(16), nullable=False),
    Column("status", String(16), nullable=False, index=True),
    _when("created_at", required=True, default=utcnow, index=True),
    _when("updated_at", default=utcnow, onupdate=utcnow),
    _when("started_at"),
    _when("finished_at"),
    Column("model", String(500), index=True),
    Column("model_revision", String(200)),
    Column("served_model", String(500)),
    Column("base_url", String(500)),
    Column("engine", String(64)),
    Column("engine_version", String(64)),
    Column("target", String(32)),
    Column("instance_type", String(64), index=True),
    Column("accelerator_type", String(16), index=True),
    Column("accelerator_name", String(64)),
    Column("accelerator_count", Integer),
    Column("tp_degree", Integer),
    Column("quantization", String(32)),
    Column("hourly_usd", Float),
    _json("spec"),
    _json("environment"),
    Column("command", Text),
    Column("error", Text),
    _json("progress"),
    _json("extra"),
    Column("worker_id", String(64)),
    _when("heartbeat_at"),
    # the fence of the run's one executor: raised by every claim, checked with each write the executor makes
    Column("claim_epoch", Integer),
    # the API key that submitted the run (None: the service token, a CLI process, or made before ownership)
    Column("owner_key_id", Integer, index=True),
)

_PERCENTILES = [
    Column(f"{metric}_p{p}_ms", Float) for metric in ("ttft", "tpot", "itl", "e2el") for p in (50, 95, 99)
]

results = Table(
    "results",
    metadata,
    _id(),
    Column("run_id", ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("input_len", Integer, nullable=False),
    Column("concurrency", Integer, nullable=False),
    Column("repeat", Integer, nullable=False),
    Column("output_len", Integer),
    Column("status", String(16), nullable=False),
    Column("num_prompts", Integer, nullable=False, default=0),
    Column("completed", Integer, nullable=False, default=0),
    Column("failed", Integer, nullable=False, default=0),
    Column("duration_s", Float, nullable=False, default=0.0),
    *_PERCENTILES,
    Column("request_throughput", Float),
    Column("output_throughput", Float),
    Column("total_token_throughput", Float),
    Column("request_goodput", Float),
    _json("summary"),
    _when("created_at", required=True, default=utcnow),
    UniqueConstraint("run_id", "input_len", "concurrency", "repeat", name="uq_result_cell"),
)

request_records = Table(
    "request_records",
    metadata,
    _id(),
    Column("result_id", ForeignKey("results.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("idx", Integer, nullable=False),
    Column("success", Boolean, nullable=False),
    Column("error", Text),
    Column("prompt_len", Integer, nullable=False),
    Column("server_prompt_tokens", Integer),
    Column("max_tokens", Integer),
    Column("output_tokens", Integer, nullable=False),
    Column("output_tokens_source", String(16), nullable=False),
    Column("planned_send_s", Float, nullable=False),
    Column("start_s", Float, nullable=False),
    Column("ttft_s", Float, nullable=False),
    Column("latency_s", Float, nullable=False),
    Column("tpot_s", Float),
    _json("itl_s", list),
    Column("generated_text", Text),
)

telemetry_samples = Table(
    "telemetry_samples",
    metadata,
    _id(),
    Column("run_id", ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("result_id", ForeignKey("results.id", ondelete="CASCADE"), index=True),
    Column("t_s", Float, nullable=False),
    Column("wall", Float, nullable=False),
    _json("values"),
    Index("ix_telemetry_run_t", "run_id", "wall"),
)

pricing = Table(
    "pricing",
    metadata,
    _id(),
    Column("instance_type", String(64), nullable=False, index=True),
    Column("region", String(32), nullable=False),
    Column("tier", String(16), nullable=False),
    Column("usd_per_hour", Float, nullable=False),
    Column("effective_date", String(10), nullable=False),
    Column("source", String(64), nullable=False),
    _when("fetched_at", required=True, default=utcnow),
    UniqueConstraint("instance_type", "region", "tier", "effective_date", name="uq_price"),
)

tool_versions = Table(
    "tool_versions",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(200), nullable=False),
    _when("updated_at", required=True, default=utcnow, onupdate=utcnow),
)

config_audit_log = Table(
    "config_audit_log",
    metadata,
    _id(),
    _when("at", required=True, default=utcnow, index=True),
    Column("key", String(64), nullable=False),
    Column("old_value", String(200)),
    Column("new_value", String(200)),
    Column("actor", String(200)),
    Column("source", String(32)),
)

api_keys = Table(
    "api_keys",
    metadata,
    _id(),
    Column("name", String(100), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False, index=True),
    Column("key_hash", String(200), nullable=False),
    _when("created_at", required=True, default=utcnow),
    _when("last_used_at"),
    Column("revoked", Boolean, nullable=False, default=False),
    Column("role", String(16), nullable=False, default="user", server_default="user"),
)

calibrations = Table(
    "calibrations",
    metadata,
    _id(),
    _when("created_at", required=True, default=utcnow),
    Column("accelerator", String(64), nullable=False, index=True),
    Column("engine", String(64), nullable=False),
    _json("factors"),
    Column("n_points", Integer, nullable=False, default=0),
    _json("error_before"),
    _json("error_after"),
    Column("active", Boolean, nullable=False, default=True),
)
