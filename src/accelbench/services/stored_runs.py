"""Stored runs as records: list them with filters, look them up, cancel and delete them. ``runs list``, ``runs
delete``, the API's run list, cancel and delete and the pages call these. Kept light (the run list's part of the
store and the domain only): ``runs list`` imports this module and should start fast; listing takes a
``RunListing`` (``services.session.get_run_listing``, or a whole ``Store``), the rest a ``Store``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import RunStatus
from accelbench.services.session import whole_store
from accelbench.store.owner import in_flight_runs, owner_is_dead, recover_dead_owners
from accelbench.store.run_list import RunListing

if TYPE_CHECKING:
    from accelbench.store.repo import Store


class RunListRequest(BaseModel):
    """Which runs to list: every filter optional, newest first."""

    status: list[RunStatus] | None = None
    model: str | None = Field(None, description="Model or served name contains this.")
    instance_type: str | None = None
    accelerator_type: str | None = None
    engine: str | None = None
    label: str | None = Field(None, description="Label contains this.")
    kind: str | None = None
    limit: int = 50
    offset: int = 0
    recover: bool = Field(False, description="First mark runs whose process died as interrupted (the CLI).")


class RunPage(BaseModel):
    """One page of runs, newest first, and how many match."""

    items: list[RunInfo]
    total: int


class OwnedRun(BaseModel):
    """A run and the id of the API key that queued it (None: queued from the CLI or before keys owned runs)."""

    run: RunInfo
    owner_key_id: int | None


def list_runs(store: RunListing, request: RunListRequest) -> RunPage:
    if request.recover and any(owner_is_dead(owner) for *_, owner in in_flight_runs(store)):
        # a run whose process was killed outright is not "benchmarking" any more; marking it takes the whole
        # store, which a run list's handle opens only then
        recover_dead_owners(whole_store(store))
    items, total = store.list_runs(
        status=[s.value for s in request.status] if request.status else None,
        model=request.model,
        instance_type=request.instance_type,
        accelerator_type=request.accelerator_type,
        engine=request.engine,
        label=request.label,
        kind=request.kind,
        limit=request.limit,
        offset=request.offset,
    )
    return RunPage(items=items, total=total)


def get_run(store: Store, ref: str) -> RunInfo:
    """One run by id or unambiguous prefix (NotFoundError otherwise)."""
    return store.get_run(ref)


def get_results(store: Store, ref: str) -> list[ResultInfo]:
    """One run's results, one per (cell, repeat)."""
    return store.get_results(ref)


def status_counts(store: RunListing) -> dict[str, int]:
    """How many runs are stored in each state."""
    return {s.value: store.list_runs(status=s.value, limit=1)[1] for s in RunStatus}


def get_runs(store: Store, refs: Sequence[str]) -> list[RunInfo]:
    """Each named run once, in the order named."""
    return [store.get_run(ref) for ref in dict.fromkeys(refs)]


def owned_run(store: Store, ref: str) -> OwnedRun:
    run = store.get_run(ref)
    return OwnedRun(run=run, owner_key_id=store.run_owner_key(run.id))


def cancel_run(store: Store, run_id: str) -> RunInfo:
    """Mark a pending or running run cancelled (its executor stops at its next check)."""
    return store.cancel_run(run_id)


def delete_runs(store: Store, run_ids: Sequence[str]) -> list[str]:
    """Delete runs with their results, per-request records and telemetry; their ids."""
    return [store.delete_run(rid) for rid in run_ids]
