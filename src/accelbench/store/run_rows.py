"""Runs in the store: create, read, update, status, list, delete, and the worker's claim and cancel."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunStatus
from accelbench.errors import ConflictError, NotFoundError
from accelbench.store.claims import Claim, check_fence, hold
from accelbench.store.database import StoreBase, jsonable, new_run_id
from accelbench.store.models import (
    RequestRow,
    ResultRow,
    RunRow,
    TelemetryRow,
    utcnow,
)
from accelbench.store.owner import IN_FLIGHT, owner_is_dead, process_owner
from accelbench.store.run_list import request_counts, run_info

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
#: What a run's info reads from its row as it is stored (the request counts come from its results).


class RunStore(StoreBase):
    """The runs table and what a run's row carries."""

    def create_run(
        self,
        *,
        kind: str,
        status: RunStatus = RunStatus.pending,
        run_id: str | None = None,
        claimed_by: str | None = None,
        owner_key_id: int | None = None,
        **fields: Any,
    ) -> RunInfo:
        """Store a new run. ``claimed_by`` (an owner id, ``store.owner``): the process that will execute it
        holds its claim from the start, so no worker takes it; without it a pending run waits for a worker.
        ``owner_key_id``: the API key that submitted it."""
        unknown = set(fields) - RUN_FIELDS
        if unknown:
            raise ValueError(f"unknown run fields: {sorted(unknown)}")
        for key in ("spec", "environment", "progress", "extra"):
            if key in fields:
                fields[key] = jsonable(fields[key])
        if claimed_by is not None:
            fields["worker_id"] = claimed_by
        with self.session() as s:
            row = RunRow(
                id=run_id or new_run_id(),
                kind=kind,
                status=RunStatus(status).value,
                owner_key_id=owner_key_id,
                claim_epoch=1 if claimed_by is not None else None,
                **fields,
            )
            row.spec = row.spec or {}
            row.environment = row.environment or {}
            row.progress = row.progress or {}
            row.extra = row.extra or {}
            s.add(row)
            s.flush()
            info = self._run_info(s, row)
        if claimed_by is not None:
            hold(Claim(info.id, claimed_by, 1))
        return info

    def run_owner_key(self, run_id: str) -> int | None:
        """The id of the API key that submitted the run (None: not submitted with a key)."""
        with self.session() as s:
            return s.scalar(select(RunRow.owner_key_id).where(RunRow.id == run_id))

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
            check_fence(s, run_id, cells=False)  # this process's executor writes only under its claim
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
                    fields["worker_id"] = process_owner()  # a CLI process runs it: found if it dies
        if status.finished:
            fields["finished_at"] = now
        if error is not None:
            fields["error"] = error
        return self.update_run(run_id, **fields)

    def claim_run(self, run_id: str, owner: str | None = None) -> RunInfo:
        """Take a stopped run over to resume it: compare-and-set of its owner, so two resumes of one run cannot
        both measure it, and refused while the process that owns it is measuring it. The run goes in flight
        (benchmarking) with its stale error cleared."""

        owner = owner or process_owner()
        with self.session() as s:
            row = s.get(RunRow, run_id)
            if row is None:
                raise NotFoundError(f"No run {run_id!r}.")
            previous = row.worker_id
            if row.status in IN_FLIGHT and previous not in (None, owner) and not owner_is_dead(previous):
                raise ConflictError(
                    f"Run {run_id} is being measured right now (by {previous}).",
                    hint="Let it finish or stop it first; resume it once it is interrupted.",
                )
            same_owner = RunRow.worker_id.is_(None) if previous is None else RunRow.worker_id == previous
            epoch = row.claim_epoch
            same_epoch = RunRow.claim_epoch.is_(None) if epoch is None else RunRow.claim_epoch == epoch
            result: CursorResult[Any] = s.execute(  # type: ignore[assignment]
                update(RunRow)
                .where(RunRow.id == run_id, same_owner, same_epoch)
                .values(
                    worker_id=owner,
                    claim_epoch=(epoch or 0) + 1,
                    status=RunStatus.benchmarking.value,
                    error=None,
                    finished_at=None,
                )
            )
            claimed = result.rowcount
        if claimed != 1:
            raise ConflictError(
                f"Run {run_id} was just taken over by another process.",
                hint="Two resumes of one run cannot both measure it; this one stops.",
            )
        hold(Claim(run_id, owner, (epoch or 0) + 1))  # the previous executor, if alive, is fenced out
        return self.get_run(run_id)

    def measured_models(self) -> dict[str, list[tuple[str, ...]]]:
        """Instance type -> the names of each model measured on it (one query, for the estimate table): per
        run that measured something (completed, or with a cell of completed requests), its model and the
        name it was served under. Which of them is the model being estimated is the planner's rule
        (``plan/measured.py``)."""
        measured = or_(
            RunRow.status == RunStatus.completed.value,
            RunRow.id.in_(select(ResultRow.run_id).where(ResultRow.completed > 0)),
        )
        q = (
            select(RunRow.instance_type, RunRow.model, RunRow.served_model)
            .where(RunRow.instance_type.is_not(None), measured)
            .distinct()
        )
        out: dict[str, list[tuple[str, ...]]] = {}
        with self.session() as s:
            for instance, model, served in s.execute(q):
                names = tuple(n for n in (model, served) if n)
                if names:
                    out.setdefault(str(instance), []).append(names)
        return out

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
            q = (  # a run a CLI process claimed when it made it is that process's, never a worker's
                select(RunRow)
                .where(RunRow.status == RunStatus.pending.value, RunRow.claim_epoch.is_(None))
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
                .where(
                    RunRow.id == row.id,
                    RunRow.status == RunStatus.pending.value,
                    RunRow.claim_epoch.is_(None),
                )
                .values(
                    status=RunStatus.deploying.value,
                    worker_id=worker_id,
                    claim_epoch=1,
                    heartbeat_at=utcnow(),
                    started_at=utcnow(),
                )
            )
            if res.rowcount != 1:  # type: ignore[attr-defined]
                return None
            s.flush()
            s.refresh(row)
            info = self._run_info(s, row)
        hold(Claim(info.id, worker_id, 1))
        return info

    def cancel_run(self, ref: str) -> RunInfo:
        run = self.get_run(ref)
        if run.status.finished:
            raise ConflictError(
                f"Run {run.id} is already {run.status.value}; only pending or running runs can be cancelled."
            )
        return self.set_status(run.id, RunStatus.cancelled, error="cancelled by request")

    def _run_info(self, s: Session, row: RunRow, counts: tuple[int, int, int] | None = None) -> RunInfo:
        if counts is None:
            counts = request_counts(s, [row.id]).get(row.id, (0, 0, 0))
        return run_info(row, counts)
