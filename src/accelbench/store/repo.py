"""The repository: every read and write of the store goes through ``Store``; callers get domain types.

A run is created once, its cells are saved as they finish (so an interrupted sweep keeps what it measured),
and deleting a run removes its results, per-request records and telemetry with it.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, delete, func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from accelbench.domain.bench import BenchmarkSummary, RequestRecord, TelemetrySample
from accelbench.domain.catalog import Price, PriceTier
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.errors import ConflictError, NotFoundError, UserInputError
from accelbench.store.db import make_engine, upgrade_schema
from accelbench.store.models import (
    ApiKeyRow,
    AuditRow,
    CalibrationRow,
    PriceRow,
    RequestRow,
    ResultRow,
    RunRow,
    TelemetryRow,
    ToolVersionRow,
    utcnow,
)

RUN_FIELDS = {
    "label",
    "kind",
    "status",
    "started_at",
    "finished_at",
    "model",
    "model_revision",
    "served_model",
    "base_url",
    "engine",
    "engine_version",
    "target",
    "instance_type",
    "accelerator_type",
    "accelerator_name",
    "accelerator_count",
    "tp_degree",
    "quantization",
    "hourly_usd",
    "spec",
    "environment",
    "command",
    "error",
    "progress",
    "extra",
    "worker_id",
    "heartbeat_at",
}


def jsonable(obj: Any) -> Any:
    """JSON-safe copy for JSON columns: pydantic models dumped, inf/nan written as strings (PostgreSQL's
    JSONB rejects them; pydantic reads "Infinity" back as a float)."""
    if hasattr(obj, "model_dump_json"):
        return json.loads(obj.model_dump_json())
    if isinstance(obj, float):
        if obj != obj:
            return "NaN"
        if obj in (float("inf"), float("-inf")):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, str | int | bool) or obj is None:
        return obj
    if isinstance(obj, datetime):
        return obj.isoformat()
    return str(obj)


def new_run_id() -> str:
    """Short, sortable-by-day, unambiguous: 20261130-a1b2c3."""
    return datetime.now(UTC).strftime("%Y%m%d") + "-" + secrets.token_hex(3)


def _aware(dt: datetime | None) -> datetime | None:
    # SQLite returns naive datetimes; everything is stored in UTC.
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt


class Store:
    """Access to one database (SQLite file or PostgreSQL)."""

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.url = url
        self.engine: Engine = make_engine(url)
        if migrate:
            upgrade_schema(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self._sessions() as s, s.begin():
            yield s

    def dispose(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ runs
    def create_run(
        self, *, kind: str, status: RunStatus = RunStatus.pending, run_id: str | None = None, **fields: Any
    ) -> RunInfo:
        unknown = set(fields) - RUN_FIELDS
        if unknown:
            raise ValueError(f"unknown run fields: {sorted(unknown)}")
        for key in ("spec", "environment", "progress", "extra"):
            if key in fields:
                fields[key] = jsonable(fields[key])
        with self.session() as s:
            row = RunRow(id=run_id or new_run_id(), kind=kind, status=RunStatus(status).value, **fields)
            row.spec = row.spec or {}
            row.environment = row.environment or {}
            row.progress = row.progress or {}
            row.extra = row.extra or {}
            s.add(row)
            s.flush()
            return self._run_info(s, row)

    def resolve_run_id(self, ref: str) -> str:
        """Accept a full id or an unambiguous prefix."""
        ref = ref.strip()
        if not ref:
            raise UserInputError("Empty run id.")
        with self.session() as s:
            if s.get(RunRow, ref) is not None:
                return ref
            ids = list(s.scalars(select(RunRow.id).where(RunRow.id.startswith(ref)).limit(5)))
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise NotFoundError(f"No run {ref!r}.", hint="`accelbench runs list` shows the stored runs.")
        raise UserInputError(f"Run id {ref!r} is ambiguous: {', '.join(ids)}. Give more characters.")

    def get_run(self, ref: str) -> RunInfo:
        run_id = self.resolve_run_id(ref)
        with self.session() as s:
            row = s.get(RunRow, run_id)
            assert row is not None
            return self._run_info(s, row)

    def update_run(self, run_id: str, **fields: Any) -> RunInfo:
        unknown = set(fields) - RUN_FIELDS
        if unknown:
            raise ValueError(f"unknown run fields: {sorted(unknown)}")
        with self.session() as s:
            row = s.get(RunRow, run_id)
            if row is None:
                raise NotFoundError(f"No run {run_id!r}.")
            for key, value in fields.items():
                if key in ("spec", "environment", "progress", "extra"):
                    value = jsonable(value)
                if key == "status":
                    value = RunStatus(value).value
                setattr(row, key, value)
            s.flush()
            return self._run_info(s, row)

    def merge_run_extra(self, run_id: str, **items: Any) -> RunInfo:
        """Add keys to ``extra`` without dropping the others."""
        run = self.get_run(run_id)
        extra = dict(run.extra)
        extra.update(jsonable(items))
        return self.update_run(run_id, extra=extra)

    def set_status(self, run_id: str, status: RunStatus, *, error: str | None = None) -> RunInfo:
        fields: dict[str, Any] = {"status": status}
        now = utcnow()
        if status in (RunStatus.deploying, RunStatus.benchmarking):
            with self.session() as s:
                row = s.get(RunRow, run_id)
                if row is not None and row.started_at is None:
                    fields["started_at"] = now
                if row is not None and row.worker_id is None:
                    from accelbench.store.owner import process_owner

                    fields["worker_id"] = process_owner()  # a CLI process runs it: found if it dies
        if status.finished:
            fields["finished_at"] = now
        if error is not None:
            fields["error"] = error
        return self.update_run(run_id, **fields)

    def list_runs(
        self,
        *,
        status: str | Sequence[str] | None = None,
        model: str | None = None,
        instance_type: str | None = None,
        accelerator_type: str | None = None,
        engine: str | None = None,
        label: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[RunInfo], int]:
        """Newest first; returns (page, total matching)."""
        q = select(RunRow)
        if status:
            statuses = [status] if isinstance(status, str) else list(status)
            q = q.where(RunRow.status.in_([RunStatus(x).value for x in statuses]))
        if model:
            q = q.where(or_(RunRow.model.contains(model), RunRow.served_model.contains(model)))
        if instance_type:
            q = q.where(RunRow.instance_type == instance_type)
        if accelerator_type:
            q = q.where(RunRow.accelerator_type == accelerator_type)
        if engine:
            q = q.where(RunRow.engine == engine)
        if label:
            q = q.where(RunRow.label.contains(label))
        if kind:
            q = q.where(RunRow.kind == kind)
        with self.session() as s:
            total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
            rows = s.scalars(
                q.order_by(RunRow.created_at.desc(), RunRow.id.desc()).limit(limit).offset(offset)
            ).all()
            counts = self._request_counts(s, [r.id for r in rows])
            return [self._run_info(s, r, counts.get(r.id)) for r in rows], total

    def benchmarked_instance_types(self) -> set[str]:
        """Instance types that have at least one stored run (one DISTINCT query, for the estimate table)."""
        with self.session() as s:
            return set(
                s.scalars(select(RunRow.instance_type).where(RunRow.instance_type.is_not(None)).distinct())
            )

    def delete_run(self, ref: str) -> str:
        run_id = self.resolve_run_id(ref)
        with self.session() as s:
            # Explicit deletes keep SQLite and PostgreSQL identical even without ON DELETE support.
            result_ids = list(s.scalars(select(ResultRow.id).where(ResultRow.run_id == run_id)))
            if result_ids:
                s.execute(delete(RequestRow).where(RequestRow.result_id.in_(result_ids)))
            s.execute(delete(TelemetryRow).where(TelemetryRow.run_id == run_id))
            s.execute(delete(ResultRow).where(ResultRow.run_id == run_id))
            s.execute(delete(RunRow).where(RunRow.id == run_id))
        return run_id

    def claim_next_pending(self, worker_id: str) -> RunInfo | None:
        """Atomically take the oldest pending run. PostgreSQL: row lock with SKIP LOCKED, so several workers
        never take the same run; SQLite: a conditional UPDATE (one writer at a time)."""
        with self.session() as s:
            q = (
                select(RunRow)
                .where(RunRow.status == RunStatus.pending.value)
                .order_by(RunRow.created_at)
                .limit(1)
            )
            if self.is_postgres:
                q = q.with_for_update(skip_locked=True)
            row = s.scalars(q).first()
            if row is None:
                return None
            res = s.execute(
                update(RunRow)
                .where(RunRow.id == row.id, RunRow.status == RunStatus.pending.value)
                .values(
                    status=RunStatus.deploying.value,
                    worker_id=worker_id,
                    heartbeat_at=utcnow(),
                    started_at=utcnow(),
                )
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return None
            s.flush()
            s.refresh(row)
            return self._run_info(s, row)

    def cancel_run(self, ref: str) -> RunInfo:
        run = self.get_run(ref)
        if run.status.finished:
            raise ConflictError(
                f"Run {run.id} is already {run.status.value}; only pending or running runs can be cancelled."
            )
        return self.set_status(run.id, RunStatus.cancelled, error="cancelled by request")

    def _request_counts(self, s: Session, run_ids: list[str]) -> dict[str, tuple[int, int, int]]:
        if not run_ids:
            return {}
        q = (
            select(
                ResultRow.run_id,
                func.coalesce(func.sum(ResultRow.completed), 0),
                func.coalesce(func.sum(ResultRow.failed), 0),
                func.count(ResultRow.id),
            )
            .where(ResultRow.run_id.in_(run_ids))
            .group_by(ResultRow.run_id)
        )
        return {rid: (int(c), int(f), int(n)) for rid, c, f, n in s.execute(q)}

    def _run_info(self, s: Session, row: RunRow, counts: tuple[int, int, int] | None = None) -> RunInfo:
        if counts is None:
            counts = self._request_counts(s, [row.id]).get(row.id, (0, 0, 0))
        return RunInfo(
            id=row.id,
            label=row.label,
            kind=row.kind,
            status=RunStatus(row.status),
            created_at=_aware(row.created_at) or utcnow(),
            updated_at=_aware(row.updated_at),
            started_at=_aware(row.started_at),
            finished_at=_aware(row.finished_at),
            model=row.model,
            model_revision=row.model_revision,
            served_model=row.served_model,
            base_url=row.base_url,
            engine=row.engine,
            engine_version=row.engine_version,
            target=row.target,
            instance_type=row.instance_type,
            accelerator_type=row.accelerator_type,
            accelerator_name=row.accelerator_name,
            accelerator_count=row.accelerator_count,
            tp_degree=row.tp_degree,
            quantization=row.quantization,
            hourly_usd=row.hourly_usd,
            spec=row.spec or {},
            environment=row.environment or {},
            command=row.command,
            error=row.error,
            progress=row.progress or {},
            extra=row.extra or {},
            completed_requests=counts[0],
            failed_requests=counts[1],
            cells=counts[2],
        )

    # --------------------------------------------------------------- results
    def save_result(
        self,
        run_id: str,
        *,
        input_len: int,
        concurrency: int,
        repeat: int,
        summary: BenchmarkSummary,
        status: CellStatus = CellStatus.completed,
    ) -> int:
        """Store one cell/repeat with its per-request records and telemetry; replaces an earlier one."""
        body = json.loads(summary.model_dump_json(exclude={"requests", "telemetry_samples"}))
        stats = {}
        for metric in ("ttft", "tpot", "itl", "e2el"):
            ms = getattr(summary, f"{metric}_ms")
            has = ms.count > 0
            for p in ("p50", "p95", "p99"):
                stats[f"{metric}_{p}_ms"] = getattr(ms, p) if has else None
        with self.session() as s:
            old = s.scalars(
                select(ResultRow).where(
                    ResultRow.run_id == run_id,
                    ResultRow.input_len == input_len,
                    ResultRow.concurrency == concurrency,
                    ResultRow.repeat == repeat,
                )
            ).first()
            if old is not None:
                s.execute(delete(RequestRow).where(RequestRow.result_id == old.id))
                s.execute(delete(TelemetryRow).where(TelemetryRow.result_id == old.id))
                s.delete(old)
                s.flush()
            row = ResultRow(
                run_id=run_id,
                input_len=input_len,
                concurrency=concurrency,
                repeat=repeat,
                output_len=summary.config.output_len,
                status=CellStatus(status).value,
                num_prompts=summary.num_prompts,
                completed=summary.completed,
                failed=summary.failed,
                duration_s=summary.duration_s,
                request_throughput=summary.request_throughput,
                output_throughput=summary.output_throughput,
                total_token_throughput=summary.total_token_throughput,
                request_goodput=summary.request_goodput,
                summary=body,
                **stats,
            )
            s.add(row)
            s.flush()
            s.add_all(
                RequestRow(
                    result_id=row.id,
                    idx=r.index,
                    success=r.success,
                    error=r.error or None,
                    prompt_len=r.prompt_len,
                    server_prompt_tokens=r.server_prompt_tokens,
                    max_tokens=r.max_tokens,
                    output_tokens=r.output_tokens,
                    output_tokens_source=r.output_tokens_source,
                    planned_send_s=r.planned_send_s,
                    start_s=r.start_s,
                    ttft_s=r.ttft_s,
                    latency_s=r.latency_s,
                    tpot_s=r.tpot_s,
                    itl_s=list(r.itl_s),
                    generated_text=r.generated_text or None,
                )
                for r in summary.requests
            )
            s.add_all(
                TelemetryRow(
                    run_id=run_id, result_id=row.id, t_s=t.t_s, wall=t.wall, values=jsonable(t.values)
                )
                for t in summary.telemetry_samples
            )
            return row.id

    def get_results(self, ref: str) -> list[ResultInfo]:
        run_id = self.resolve_run_id(ref)
        with self.session() as s:
            rows = s.scalars(
                select(ResultRow)
                .where(ResultRow.run_id == run_id)
                .order_by(ResultRow.input_len, ResultRow.concurrency, ResultRow.repeat)
            ).all()
            return [self._result_info(r) for r in rows]

    def get_summary(
        self, result_id: int, *, with_requests: bool = True, with_telemetry: bool = True
    ) -> BenchmarkSummary:
        """The full BenchmarkSummary of one stored cell, per-request records and samples included."""
        with self.session() as s:
            row = s.get(ResultRow, result_id)
            if row is None:
                raise NotFoundError(f"No result {result_id}.")
            data = dict(row.summary)
            if with_requests:
                data["requests"] = [
                    self._record(r)
                    for r in s.scalars(
                        select(RequestRow).where(RequestRow.result_id == result_id).order_by(RequestRow.idx)
                    )
                ]
            if with_telemetry:
                data["telemetry_samples"] = [
                    {"t_s": t.t_s, "wall": t.wall, "values": t.values}
                    for t in s.scalars(
                        select(TelemetryRow)
                        .where(TelemetryRow.result_id == result_id)
                        .order_by(TelemetryRow.wall)
                    )
                ]
            return BenchmarkSummary.model_validate(data)

    def get_request_records(self, result_id: int) -> list[RequestRecord]:
        with self.session() as s:
            return [
                RequestRecord.model_validate(self._record(r))
                for r in s.scalars(
                    select(RequestRow).where(RequestRow.result_id == result_id).order_by(RequestRow.idx)
                )
            ]

    def add_telemetry(
        self, run_id: str, samples: Sequence[TelemetrySample], result_id: int | None = None
    ) -> None:
        with self.session() as s:
            s.add_all(
                TelemetryRow(
                    run_id=run_id, result_id=result_id, t_s=t.t_s, wall=t.wall, values=jsonable(t.values)
                )
                for t in samples
            )

    def get_telemetry(self, ref: str) -> list[TelemetrySample]:
        run_id = self.resolve_run_id(ref)
        with self.session() as s:
            return [
                TelemetrySample(t_s=t.t_s, wall=t.wall, values=t.values)
                for t in s.scalars(
                    select(TelemetryRow).where(TelemetryRow.run_id == run_id).order_by(TelemetryRow.wall)
                )
            ]

    @staticmethod
    def _record(r: RequestRow) -> dict[str, Any]:
        return {
            "index": r.idx,
            "prompt_len": r.prompt_len,
            "server_prompt_tokens": r.server_prompt_tokens,
            "max_tokens": r.max_tokens,
            "output_tokens": r.output_tokens,
            "output_tokens_source": r.output_tokens_source,
            "planned_send_s": r.planned_send_s,
            "start_s": r.start_s,
            "ttft_s": r.ttft_s,
            "itl_s": r.itl_s or [],
            "latency_s": r.latency_s,
            "success": r.success,
            "error": r.error or "",
            "generated_text": r.generated_text or "",
        }

    @staticmethod
    def _result_info(r: ResultRow) -> ResultInfo:
        return ResultInfo(
            id=r.id,
            run_id=r.run_id,
            input_len=r.input_len,
            concurrency=r.concurrency,
            repeat=r.repeat,
            output_len=r.output_len,
            status=CellStatus(r.status),
            num_prompts=r.num_prompts,
            completed=r.completed,
            failed=r.failed,
            duration_s=r.duration_s,
            ttft_p50_ms=r.ttft_p50_ms,
            ttft_p95_ms=r.ttft_p95_ms,
            ttft_p99_ms=r.ttft_p99_ms,
            tpot_p50_ms=r.tpot_p50_ms,
            tpot_p95_ms=r.tpot_p95_ms,
            tpot_p99_ms=r.tpot_p99_ms,
            itl_p50_ms=r.itl_p50_ms,
            itl_p95_ms=r.itl_p95_ms,
            itl_p99_ms=r.itl_p99_ms,
            e2el_p50_ms=r.e2el_p50_ms,
            e2el_p95_ms=r.e2el_p95_ms,
            e2el_p99_ms=r.e2el_p99_ms,
            request_throughput=r.request_throughput,
            output_throughput=r.output_throughput,
            total_token_throughput=r.total_token_throughput,
            request_goodput=r.request_goodput,
            summary=r.summary or {},
            created_at=_aware(r.created_at),
        )

    # --------------------------------------------------------------- pricing
    def upsert_prices(self, prices: Sequence[Price]) -> int:
        """Insert or replace prices keyed by (instance type, region, tier, date). Returns rows written."""
        n = 0
        with self.session() as s:
            for p in prices:
                row = s.scalars(
                    select(PriceRow).where(
                        PriceRow.instance_type == p.instance_type,
                        PriceRow.region == p.region,
                        PriceRow.tier == p.tier.value,
                        PriceRow.effective_date == p.effective_date,
                    )
                ).first()
                if row is None:
                    s.add(
                        PriceRow(
                            instance_type=p.instance_type,
                            region=p.region,
                            tier=p.tier.value,
                            usd_per_hour=p.usd_per_hour,
                            effective_date=p.effective_date,
                            source=p.source,
                        )
                    )
                else:
                    row.usd_per_hour, row.source, row.fetched_at = p.usd_per_hour, p.source, utcnow()
                n += 1
        return n

    def latest_prices(
        self, *, region: str | None = None, instance_type: str | None = None, tier: PriceTier | None = None
    ) -> list[Price]:
        """The newest stored price per (instance type, region, tier)."""
        q = select(PriceRow)
        if region:
            q = q.where(PriceRow.region == region)
        if instance_type:
            q = q.where(PriceRow.instance_type == instance_type)
        if tier:
            q = q.where(PriceRow.tier == tier.value)
        latest: dict[tuple[str, str, str], PriceRow] = {}
        with self.session() as s:
            for row in s.scalars(q.order_by(PriceRow.effective_date, PriceRow.fetched_at)):
                latest[(row.instance_type, row.region, row.tier)] = row
            return [
                Price(
                    instance_type=r.instance_type,
                    region=r.region,
                    tier=PriceTier(r.tier),
                    usd_per_hour=r.usd_per_hour,
                    effective_date=r.effective_date,
                    source=r.source,
                )
                for r in latest.values()
            ]

    # ---------------------------------------------------------- tool versions
    def get_tool_versions(self) -> dict[str, str]:
        with self.session() as s:
            return {r.key: r.value for r in s.scalars(select(ToolVersionRow))}

    def set_tool_version(
        self, key: str, value: str, *, actor: str | None = None, source: str = "cli"
    ) -> bool:
        """Set one tool version; writes an audit line. Returns False when the value did not change."""
        with self.session() as s:
            row = s.get(ToolVersionRow, key)
            old = row.value if row else None
            if old == value:
                return False
            if row is None:
                s.add(ToolVersionRow(key=key, value=value))
            else:
                row.value = value
            s.add(AuditRow(key=key, old_value=old, new_value=value, actor=actor, source=source))
            return True

    def audit_log(self, limit: int = 100) -> list[dict[str, Any]]:
        with self.session() as s:
            return [
                {
                    "at": _aware(r.at),
                    "key": r.key,
                    "old_value": r.old_value,
                    "new_value": r.new_value,
                    "actor": r.actor,
                    "source": r.source,
                }
                for r in s.scalars(select(AuditRow).order_by(AuditRow.id.desc()).limit(limit))
            ]

    # --------------------------------------------------------------- API keys
    def add_api_key(self, name: str, prefix: str, key_hash: str) -> None:
        with self.session() as s:
            if s.scalars(select(ApiKeyRow).where(ApiKeyRow.name == name)).first() is not None:
                raise ConflictError(
                    f"An API key named {name!r} exists; choose another name or revoke it first."
                )
            s.add(ApiKeyRow(name=name, prefix=prefix, key_hash=key_hash))

    def api_keys_with_prefix(self, prefix: str) -> list[tuple[int, str]]:
        with self.session() as s:
            return [
                (r.id, r.key_hash)
                for r in s.scalars(
                    select(ApiKeyRow).where(ApiKeyRow.prefix == prefix, ApiKeyRow.revoked.is_(False))
                )
            ]

    def touch_api_key(self, key_id: int) -> None:
        with self.session() as s:
            s.execute(update(ApiKeyRow).where(ApiKeyRow.id == key_id).values(last_used_at=utcnow()))

    def list_api_keys(self) -> list[dict[str, Any]]:
        with self.session() as s:
            return [
                {
                    "name": r.name,
                    "prefix": r.prefix,
                    "created_at": _aware(r.created_at),
                    "last_used_at": _aware(r.last_used_at),
                    "revoked": r.revoked,
                }
                for r in s.scalars(select(ApiKeyRow).order_by(ApiKeyRow.id))
            ]

    def revoke_api_key(self, name: str) -> None:
        with self.session() as s:
            row = s.scalars(select(ApiKeyRow).where(ApiKeyRow.name == name)).first()
            if row is None:
                raise NotFoundError(f"No API key named {name!r}.")
            row.revoked = True

    # ------------------------------------------------------------ calibration
    def save_calibration(
        self,
        *,
        accelerator: str,
        engine: str,
        factors: dict[str, Any],
        n_points: int,
        error_before: dict[str, Any],
        error_after: dict[str, Any],
    ) -> int:
        """Store a new calibration and make it the active one for (accelerator, engine)."""
        with self.session() as s:
            s.execute(
                update(CalibrationRow)
                .where(CalibrationRow.accelerator == accelerator, CalibrationRow.engine == engine)
                .values(active=False)
            )
            row = CalibrationRow(
                accelerator=accelerator,
                engine=engine,
                factors=jsonable(factors),
                n_points=n_points,
                error_before=jsonable(error_before),
                error_after=jsonable(error_after),
                active=True,
            )
            s.add(row)
            s.flush()
            return row.id

    def active_calibrations(self) -> list[dict[str, Any]]:
        with self.session() as s:
            return [
                {
                    "id": r.id,
                    "accelerator": r.accelerator,
                    "engine": r.engine,
                    "factors": r.factors,
                    "n_points": r.n_points,
                    "error_before": r.error_before,
                    "error_after": r.error_after,
                    "created_at": _aware(r.created_at),
                }
                for r in s.scalars(
                    select(CalibrationRow).where(CalibrationRow.active.is_(True)).order_by(CalibrationRow.id)
                )
            ]


_stores: dict[str, Store] = {}
_lock = threading.Lock()


def get_store(url: str | None = None) -> Store:
    """The process-wide store for ``url`` (default: from settings), migrated on first use."""
    from accelbench.settings import get_settings

    url = url or get_settings().effective_database_url
    with _lock:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = Store(url)
        return store


def reset_stores() -> None:
    with _lock:
        for s in _stores.values():
            s.dispose()
        _stores.clear()
