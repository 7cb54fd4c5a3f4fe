"""Results in the store: one row per (cell, repeat) with its per-request records, and telemetry samples."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select

from accelbench.domain.bench_summary import BenchmarkSummary, TelemetrySample
from accelbench.domain.load import in_ramp
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.results import ResultInfo
from accelbench.domain.run import CellStatus
from accelbench.errors import NotFoundError
from accelbench.store import tables
from accelbench.store.claims import check_fence
from accelbench.store.database import StoreBase, jsonable, shared_names, stored_values
from accelbench.store.models import (
    RequestRow,
    ResultRow,
    TelemetryRow,
)

#: The request record's fields its row keeps under the same name (the rest: ``index`` is ``idx``, ``ramp`` is
#: judged again when read, ``tpot_s`` is stored for queries but derived in the record).
_REQUEST_FIELDS = shared_names(tables.request_records, RequestRecord)
_RESULT_FIELDS = shared_names(tables.results, ResultInfo)


class ResultStore(StoreBase):
    """Results, request records and telemetry of runs."""

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
            check_fence(s, run_id, cells=True)  # one executor per run: a stale or second one stores nothing
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
                    **{
                        **r.model_dump(include=_REQUEST_FIELDS),
                        "result_id": row.id,
                        "idx": r.index,
                        "tpot_s": r.tpot_s,
                        "error": r.error or None,
                        "generated_text": r.generated_text or None,
                    }
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

    def kept_cells(self, ref: str) -> int:
        """Stored (cell, repeat) results that kept a measurement: at least one request completed. A cell an
        interruption cut off before any request completed is stored (as failed) but keeps nothing."""
        return sum(1 for r in self.get_results(ref) if r.completed > 0)

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
                ramp_s = self._ramp_s(data)
                data["requests"] = [
                    self._record(r, ramp_s)
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
            row = s.get(ResultRow, result_id)
            ramp_s = self._ramp_s(row.summary) if row is not None else 0.0
            return [
                RequestRecord.model_validate(self._record(r, ramp_s))
                for r in s.scalars(
                    select(RequestRow).where(RequestRow.result_id == result_id).order_by(RequestRow.idx)
                )
            ]

    def add_telemetry(
        self, run_id: str, samples: Sequence[TelemetrySample], result_id: int | None = None
    ) -> None:
        with self.session() as s:
            check_fence(s, run_id, cells=True)
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
    def _ramp_s(summary: dict[str, Any]) -> float:
        """The staggered start of a stored result (``config.ramp_up_s``; 0 before there was one)."""
        return float((summary.get("config") or {}).get("ramp_up_s") or 0.0)

    @staticmethod
    def _record(r: RequestRow, ramp_s: float = 0.0) -> dict[str, Any]:
        """A stored request as a record; whether it started within a staggered start is not a column, so it
        is judged again from its start and the result's ``ramp_up_s`` (the runner's rule)."""
        return {"ramp": in_ramp(r.start_s, ramp_s), "index": r.idx, **stored_values(r, _REQUEST_FIELDS)}

    @staticmethod
    def _result_info(r: ResultRow) -> ResultInfo:
        return ResultInfo.model_validate(stored_values(r, _RESULT_FIELDS))
