"""The repository: every read and write of the store goes through ``Store``; callers get domain types.

A run is created once, its cells are saved as they finish (so an interrupted sweep keeps what it measured),
and deleting a run removes its results, per-request records and telemetry with it.

``Store`` is a facade over one module per concern: ``store/run_rows.py`` (runs and their lifecycle),
``store/result_rows.py`` (results, request records, telemetry), ``store/admin.py`` (prices, tool versions,
audit, API keys, calibrations), ``store/claims.py`` (a run's one executor and the fence on its writes), on
``store/database.py`` (the database, sessions, run-id lookup).
"""

from __future__ import annotations

import threading

from accelbench.settings import get_settings
from accelbench.store.admin import AdminStore
from accelbench.store.claims import ClaimStore
from accelbench.store.database import jsonable, new_run_id
from accelbench.store.result_rows import ResultStore
from accelbench.store.run_rows import RUN_FIELDS, RunStore

__all__ = ["RUN_FIELDS", "Store", "get_store", "jsonable", "new_run_id", "reset_stores"]


class Store(RunStore, ResultStore, AdminStore, ClaimStore):
    """Access to one database (SQLite file or PostgreSQL): every part of the store."""


_stores: dict[str, Store] = {}
_lock = threading.Lock()


def get_store(url: str | None = None) -> Store:
    """The process-wide store for ``url`` (default: from settings), migrated on first use."""

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
