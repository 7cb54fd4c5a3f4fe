"""Engine creation and schema migration: one ``get_engine`` for SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import fcntl
import re
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.exc import DatabaseError

from accelbench.errors import StoreError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


_REVISION = re.compile(r"^(down_)?revision(?::[^=]*)?=\s*(None|['\"]([^'\"]+)['\"])", re.M)


def head_revision() -> str | None:
    """The newest migration's revision, read from the migration files without importing alembic (None when the
    files do not say it plainly: then alembic decides)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        for down, _, value in _REVISION.findall(path.read_text(encoding="utf-8")):
            if value:
                (parents if down else revisions).add(value)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def at_head(engine: Engine) -> bool:
    """Whether the store's schema is already at the newest migration (one query; False when unsure)."""
    head = head_revision()
    if head is None:
        return False
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if (
        database
        and database != ":memory:"
        and (not Path(database).is_file() or Path(database).stat().st_size == 0)
    ):
        return False  # a new or empty file: connecting would write to it before check_sqlite_file has looked
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).fetchall()
    except Exception:  # no table yet, a damaged file, ...: the migration path says what is wrong
        return False
    return [r[0] for r in rows] == [head]


def alembic_config(url: str) -> Config:
    # alembic here, not at the top: a store already at head is opened without it (start-up time of every command)
    from alembic.config import Config  # heavy: only when migrating

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def make_engine(url: str) -> Engine:
    """Create an engine; SQLite gets foreign keys, WAL and a busy timeout so a worker and the CLI can share it."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _rec):  # type: ignore[no-untyped-def]
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "handle_error")
        def _reopen_after_read_only(ctx):  # type: ignore[no-untyped-def]
            # a connection opened while the file or its filesystem was read-only stays read-only for good:
            # dropping the pool on this error lets the next session reopen it writable once it is again
            if "readonly database" in str(ctx.original_exception):
                ctx.is_disconnect = True

        return engine
    return create_engine(url, pool_pre_ping=True)


def drop_failed_cursors(exc: BaseException) -> None:
    """Clear the finished frames of a failed statement's traceback (and of the exceptions chained to it).

    Those frames hold the DB-API cursor, and the cursor its connection. On SQLite a connection closed while a
    cursor lives stays open (a zombie) until the cursor is collected, and exception tracebacks sit in reference
    cycles that only the garbage collector frees, at a time nobody knows. A zombie that was opened while the
    store's filesystem was read-only keeps SQLite's shared-memory index of the file read-only for the whole
    process, so every new connection fails "attempt to write a readonly database" long after the filesystem is
    writable again. Clearing the frames frees the cursors at once; the traceback's lines stay readable."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if e.__traceback__ is not None:
            traceback.clear_frames(e.__traceback__)
        orig = getattr(e, "orig", None)
        todo.extend([e.__cause__, e.__context__, orig if isinstance(orig, BaseException) else None])


#: the PostgreSQL advisory lock every accelbench process takes while it migrates (an arbitrary constant)
MIGRATION_LOCK_ID = 0x61636362  # "accb"


def check_sqlite_file(url: str) -> None:
    """Refuse a SQLite store file that exists but cannot be one: SQLite would turn a 0-byte file (a truncated
    copy, a failed restore) into a new empty store without a word. Called under the migration lock: a file
    another process is creating is never seen empty here (it is created and migrated under the same lock)."""

    if not url.startswith("sqlite") or "///" not in url:
        return
    path = Path(url.split("///", 1)[1])
    if str(path) != ":memory:" and path.is_file() and path.stat().st_size == 0:
        raise StoreError(
            f"The store file {path} is empty (0 bytes): it is not a store accelbench wrote.",
            hint="Restore it from a backup, or delete it to start a new, empty store.",
        )


def upgrade_schema(engine: Engine) -> None:
    """Bring the schema to the newest migration (idempotent). Serialised, so that processes starting together
    on a fresh store do not all create the same tables: on PostgreSQL an advisory lock held for the
    migration's transaction, on SQLite an exclusive lock on a file beside the database; whoever waited then
    finds the schema at head and does nothing."""
    if at_head(engine):
        return
    from alembic.util.exc import CommandError  # only when migrating: see alembic_config

    where = engine.url.render_as_string(hide_password=True)
    cfg = alembic_config(str(engine.url.render_as_string(hide_password=False)))
    try:
        with _migration_lock(engine):
            check_sqlite_file(str(engine.url))
            _migrate(engine, cfg)
    except CommandError as exc:
        if "Can't locate revision" in str(exc):
            raise StoreError(
                f"The store {where} was written by a newer accelbench: its schema ({str(exc).split()[-1]}) "
                "is not one this version knows.",
                hint="Use the accelbench version that wrote it (or newer), or point ACCELBENCH_DATABASE_URL "
                "at another store.",
            ) from None
        raise
    except DatabaseError as exc:
        first = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        raise StoreError(
            f"The store {where} cannot be opened: {first}.",
            hint="A damaged or foreign file: restore it from a backup, or point ACCELBENCH_DATABASE_URL at "
            "another store. Nothing was changed.",
        ) from None


def _migrate(engine: Engine, cfg: Config) -> None:
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})
        cfg.attributes["connection"] = conn
        from alembic import command  # only when migrating: see alembic_config

        command.upgrade(cfg, "head")


@contextlib.contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:":
        yield  # PostgreSQL locks inside the transaction; an in-memory SQLite database has one process
        return
    try:
        fh = open(f"{database}.migrate.lock", "a")  # noqa: SIM115 - closed below
    except OSError:
        # a read-only directory or filesystem: nobody can migrate this store, so there is nothing to
        # serialise; a store that needs a migration is then refused by the migration itself, in one line
        yield
        return
    with fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def schema_tables(engine: Engine) -> list[str]:
    return sorted(inspect(engine).get_table_names())
