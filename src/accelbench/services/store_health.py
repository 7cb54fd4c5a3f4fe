"""The store's health as the service reports it: a read (``SELECT 1``) and a write that is rolled back (the one
row of ``alembic_version`` updated to itself inside a write transaction; SQLite: ``BEGIN IMMEDIATE``, the write
lock taken; PostgreSQL: short lock and statement timeouts), so a read-only file, mount, URI or database, or a
store whose write lock cannot be had, shows as ``writable: false`` while reads still work. Nothing is changed.
The answer is kept for ``PROBE_TTL_S``: load balancers asking many times a second cost one probe.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from sqlalchemy import Connection, Engine, text

from accelbench.redact import redact_url
from accelbench.store import Store
from accelbench.store.db import drop_failed_cursors

#: how long one probe of the store answers for, seconds
PROBE_TTL_S = 2.0
#: how long the write probe waits for the store's write lock, milliseconds
PROBE_LOCK_WAIT_MS = 3000


def _reason(exc: BaseException) -> str:
    """The driver's first line, e.g. ``OperationalError: attempt to write a readonly database``."""
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    first = redact_url(lines[0])[:200] if lines else ""
    return f"{type(orig).__name__}: {first}" if first else type(orig).__name__


def _write_probe(engine: Engine) -> None:
    """A write in a transaction that is rolled back; raises when the store does not take it."""
    with engine.connect() as conn:
        try:
            _write_in(engine, conn)
        except Exception as exc:
            # the raw driver's error bypasses the engine's own handling: a connection that could not write is
            # not put back for others (on SQLite it may hold the file's read-only index; store/db.py)
            conn.invalidate()
            drop_failed_cursors(exc)
            raise


def _write_in(engine: Engine, conn: Connection) -> None:
    """The probe's write on one connection: SQLite takes the write lock, PostgreSQL waits briefly for it."""
    if engine.dialect.name == "sqlite":
        raw = conn.connection.driver_connection
        assert raw is not None
        raw.execute(f"PRAGMA busy_timeout={PROBE_LOCK_WAIT_MS}")
        try:
            if raw.in_transaction:
                raw.rollback()
            raw.execute("BEGIN IMMEDIATE")  # the write lock; the UPDATE then writes a page of the file
            try:
                raw.execute("UPDATE alembic_version SET version_num = version_num")
            finally:
                raw.rollback()
        finally:
            raw.execute("PRAGMA busy_timeout=30000")  # the store's own (store/db.py)
        return
    with conn.begin() as tx:
        conn.execute(text(f"SET LOCAL lock_timeout = '{PROBE_LOCK_WAIT_MS}ms'"))
        conn.execute(text(f"SET LOCAL statement_timeout = '{PROBE_LOCK_WAIT_MS + 2000}ms'"))
        conn.execute(text("UPDATE alembic_version SET version_num = version_num"))
        tx.rollback()


def probe_store(engine: Engine) -> dict[str, Any]:
    """``{ok, writable, error}`` for one engine, probed now."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        return {"ok": False, "writable": False, "error": _reason(exc)}
    try:
        _write_probe(engine)
    except Exception as exc:
        return {"ok": True, "writable": False, "error": _reason(exc)}
    return {"ok": True, "writable": True, "error": None}


class ProbeCache:
    """The last probe of each engine, answered again for ``PROBE_TTL_S``; one probe at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[int, tuple[float, dict[str, Any]]] = {}

    def get(self, engine: Engine) -> dict[str, Any]:
        with self._lock:
            hit = self._last.get(id(engine))
            if hit is not None and time.monotonic() - hit[0] < PROBE_TTL_S:
                return dict(hit[1])
            result = probe_store(engine)
            self._last[id(engine)] = (time.monotonic(), result)
            return dict(result)


def store_health(store: Store, cache: ProbeCache) -> dict[str, Any]:
    """``{dialect, ok, writable, error}`` of the store, from ``cache`` when it probed within ``PROBE_TTL_S``."""
    return {"dialect": store.engine.dialect.name, **cache.get(store.engine)}
