"""The run list, read with SQLAlchemy Core: stored runs newest first, filtered, with the counts of cells and
requests each run's record carries.

``runs list``, the API's and the pages' run lists read it. It needs the tables, the database and ``RunInfo`` only
(no ORM, no result models), so a ``RunListing`` handle (``get_run_listing``) opens without the rest of the store
and ``runs list`` starts fast; ``Store`` lists runs with this same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, func, or_, select

from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunStatus
from accelbench.store.database import StoreBase, shared_names, shared_store, stored_values
from accelbench.store.tables import results, runs, utcnow

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["RunListing", "get_run_listing", "request_counts", "run_info"]


def request_counts(conn: Connection | Session, run_ids: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """(completed requests, failed requests, cells) of each run that has results."""
    if not run_ids:
        return {}
    q = (
        select(
            results.c.run_id,
            func.coalesce(func.sum(results.c.completed), 0),
            func.coalesce(func.sum(results.c.failed), 0),
            func.count(results.c.id),
        )
        .where(results.c.run_id.in_(run_ids))
        .group_by(results.c.run_id)
    )
    return {rid: (int(c), int(f), int(n)) for rid, c, f, n in conn.execute(q)}


#: the run record's fields its row keeps under the same name (the request counts come from the results)
_RUN_INFO_FIELDS = shared_names(runs, RunInfo)


def run_info(row: Any, counts: tuple[int, int, int]) -> RunInfo:
    """A run's record from its row (a Core row or an ORM ``RunRow``: the same attributes) and its
    ``request_counts``."""
    return RunInfo.model_validate(
        {
            "created_at": utcnow(),  # when the row has none
            **stored_values(row, _RUN_INFO_FIELDS),
            "completed_requests": counts[0],
            "failed_requests": counts[1],
            "cells": counts[2],
        }
    )


class RunListing(StoreBase):
    """The part of the store that lists runs."""

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
        q = select(runs)
        if status:
            statuses = [status] if isinstance(status, str) else list(status)
            q = q.where(runs.c.status.in_([RunStatus(x).value for x in statuses]))
        if model:
            q = q.where(
                or_(
                    runs.c.model.contains(model, autoescape=True),
                    runs.c.served_model.contains(model, autoescape=True),
                )
            )
        for column, value in (
            (runs.c.instance_type, instance_type),
            (runs.c.accelerator_type, accelerator_type),
            (runs.c.engine, engine),
            (runs.c.kind, kind),
        ):
            if value:
                q = q.where(column == value)
        if label:
            q = q.where(runs.c.label.contains(label, autoescape=True))
        with self.connection() as conn:
            total = conn.scalar(select(func.count()).select_from(q.subquery())) or 0
            rows = conn.execute(
                q.order_by(runs.c.created_at.desc(), runs.c.id.desc()).limit(limit).offset(offset)
            ).all()
            counts = request_counts(conn, [r.id for r in rows])
        return [run_info(r, counts.get(r.id, (0, 0, 0))) for r in rows], total


def get_run_listing(url: str | None = None) -> RunListing:
    """The process-wide handle for listing the runs of the store at ``url`` (default: from settings): the
    process's ``Store`` when one is open, else one that opens without the ORM."""
    return shared_store(RunListing, url)
