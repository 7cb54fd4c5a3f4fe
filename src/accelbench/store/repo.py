"""The repository: every read and write of the store goes through ``Store``; callers get domain types.

A run is created once, its cells are saved as they finish (so an interrupted sweep keeps what it measured),
and deleting a run removes its results, per-request records and telemetry with it.

``Store`` is a facade over one module per concern: ``store/run_list.py`` (the run list, in SQLAlchemy Core),
``store/run_rows.py`` (runs and their lifecycle), ``store/result_rows.py`` (results, request records,
telemetry), ``store/admin.py`` (prices, tool versions, audit, API keys, calibrations), ``store/claims.py`` (a
run's one executor and the fence on its writes), on ``store/database.py`` (the database, transactions, run-id
lookup, the one handle per database a process holds).
"""

from __future__ import annotations

from accelbench.store.admin import AdminStore
from accelbench.store.claims import ClaimStore
from accelbench.store.database import jsonable, new_run_id, reset_stores, shared_store
from accelbench.store.result_rows import ResultStore
from accelbench.store.run_list import RunListing
from accelbench.store.run_rows import RUN_FIELDS, RunStore

__all__ = ["RUN_FIELDS", "Store", "get_store", "jsonable", "new_run_id", "reset_stores"]


class Store(RunListing, RunStore, ResultStore, AdminStore, ClaimStore):
    """Access to one database (SQLite file or PostgreSQL): every part of the store. (The run list is
    ``RunListing``'s, first among the parts.)"""


def get_store(url: str | None = None) -> Store:
    """The process-wide store for ``url`` (default: from settings), migrated on first use."""
    return shared_store(Store, url)
