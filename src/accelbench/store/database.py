"""What every part of the store shares: one database (SQLite file or PostgreSQL), its transactions, run-id
lookup, the one handle per database a process holds, and the JSON and time helpers of its columns.

Nothing here needs the ORM: ``runs list`` opens the database through here and reads it with SQLAlchemy Core
(``store/run_list.py``); the ORM loads with the first ``session()`` of the parts that write and read whole runs.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import Connection, Engine, Table, select
from sqlalchemy.exc import OperationalError

from accelbench.errors import NotFoundError, StoreError, UserInputError
from accelbench.settings import get_settings
from accelbench.store.db import drop_failed_cursors, make_engine, upgrade_schema
from accelbench.store.tables import runs

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker


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


def shared_names(table: Table, model: type[BaseModel]) -> set[str]:
    """The names that are both a column of ``table`` and a field of ``model``: stored as they are."""
    return set(table.c.keys() & model.model_fields.keys())


def stored_values(row: Any, names: Iterable[str]) -> dict[str, Any]:
    """The row's values under ``names`` (a Core row or an ORM object: the same attributes) as a model reads them:
    a time made timezone-aware (SQLite returns naive ones), a NULL left out so the model's default applies (None,
    an empty list or dict, "")."""
    values = {name: getattr(row, name) for name in names}
    return {name: _aware(v) if isinstance(v, datetime) else v for name, v in values.items() if v is not None}


class StoreBase:
    """Access to one database (SQLite file or PostgreSQL)."""

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.url = url
        self.engine: Engine = make_engine(url)
        if migrate:
            upgrade_schema(self.engine)
        self._sessions: sessionmaker[Session] | None = None

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @contextmanager
    def _usable(self) -> Iterator[None]:
        """A store that cannot be used (read-only, full, unreachable, damaged) raises ``StoreError`` with the
        driver's one line, for the CLI and the API alike."""
        try:
            yield
        except OperationalError as exc:
            drop_failed_cursors(exc)
            first = str(exc.orig or exc).strip().splitlines()[0]
            where = self.engine.url.render_as_string(hide_password=True)
            raise StoreError(
                f"The results store {where} cannot be used: {first}.",
                hint="Check that it is writable, its disk has space and its server is up; nothing was changed.",
            ) from exc

    @contextmanager
    def session(self) -> Iterator[Session]:
        """One transaction of ORM objects (a store that cannot be used: ``StoreError``)."""
        with self._usable(), self._session_factory()() as s, s.begin():
            yield s

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """One transaction of SQLAlchemy Core statements (a store that cannot be used: ``StoreError``)."""
        with self._usable(), self.engine.begin() as conn:
            yield conn

    def _session_factory(self) -> sessionmaker[Session]:
        if self._sessions is None:
            # start-up time: the ORM loads with the first session; the run list reads with Core and needs none
            from sqlalchemy.orm import sessionmaker

            self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        return self._sessions

    def dispose(self) -> None:
        self.engine.dispose()

    def resolve_run_id(self, ref: str) -> str:
        """Accept a full id or an unambiguous prefix."""
        ref = ref.strip()
        if not ref:
            raise UserInputError("Empty run id.")
        with self.connection() as conn:
            if conn.scalar(select(runs.c.id).where(runs.c.id == ref)) is not None:
                return ref
            ids = list(
                conn.scalars(select(runs.c.id).where(runs.c.id.startswith(ref, autoescape=True)).limit(5))
            )
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise NotFoundError(f"No run {ref!r}.", hint="`accelbench runs list` shows the stored runs.")
        raise UserInputError(f"Run id {ref!r} is ambiguous: {', '.join(ids)}. Give more characters.")


S = TypeVar("S", bound=StoreBase)

_open: dict[str, StoreBase] = {}
_lock = threading.Lock()


def shared_store(kind: type[S], url: str | None = None) -> S:
    """The process-wide handle of ``kind`` on the database at ``url`` (default: from settings), opened and
    migrated on first use. A handle that can do less (the run list's) gives way to the first one asked for that
    can do more (``Store``: every part), which then serves both."""
    url = url or get_settings().effective_database_url
    with _lock:
        store = _open.get(url)
        if not isinstance(store, kind):
            if store is not None:
                store.dispose()  # its engine still works for whoever holds it: it reconnects when next used
            store = _open[url] = kind(url)
        return store


def reset_stores() -> None:
    """Close every handle this process opened and forget them."""
    with _lock:
        for s in _open.values():
            s.dispose()
        _open.clear()
