"""What every part of the store shares: one database (SQLite file or PostgreSQL), its sessions, run-id lookup,
and the JSON and time helpers of its columns."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from accelbench.errors import NotFoundError, StoreError, UserInputError
from accelbench.store.db import drop_failed_cursors, make_engine, upgrade_schema
from accelbench.store.models import (
    RunRow,
)


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


class StoreBase:
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
        """One transaction. A store that cannot be used (read-only, full, unreachable, damaged) raises
        ``StoreError`` with the driver's one line, for the CLI and the API alike."""
        try:
            with self._sessions() as s, s.begin():
                yield s
        except OperationalError as exc:
            drop_failed_cursors(exc)
            first = str(exc.orig or exc).strip().splitlines()[0]
            where = self.engine.url.render_as_string(hide_password=True)
            raise StoreError(
                f"The results store {where} cannot be used: {first}.",
                hint="Check that it is writable, its disk has space and its server is up; nothing was changed.",
            ) from exc

    def dispose(self) -> None:
        self.engine.dispose()

    def resolve_run_id(self, ref: str) -> str:
        """Accept a full id or an unambiguous prefix."""
        ref = ref.strip()
        if not ref:
            raise UserInputError("Empty run id.")
        with self.session() as s:
            if s.get(RunRow, ref) is not None:
                return ref
            ids = list(
                s.scalars(select(RunRow.id).where(RunRow.id.startswith(ref, autoescape=True)).limit(5))
            )
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise NotFoundError(f"No run {ref!r}.", hint="`accelbench runs list` shows the stored runs.")
        raise UserInputError(f"Run id {ref!r} is ambiguous: {', '.join(ids)}. Give more characters.")
