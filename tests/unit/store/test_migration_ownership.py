"""A store written before key roles and run ownership (schema 0001) upgrades in place, on SQLite and
PostgreSQL: its keys become user keys, its runs have no owner key and no claim, and a worker still takes its
pending runs; the schema after the upgrade is the one the tables declare."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from accelbench.store import Store
from accelbench.store.db import alembic_config, make_engine
from accelbench.store.models import Base


def test_a_store_of_schema_0001_upgrades_with_its_keys_and_runs(db_url: str) -> None:
    engine = make_engine(db_url)
    with engine.begin() as conn:  # a new, empty database (PostgreSQL: one of this test's own)
        cfg = alembic_config(db_url)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.execute(
            text(
                "INSERT INTO api_keys (name, prefix, key_hash, created_at, revoked) "
                "VALUES ('old', 'abk_00000000', 'scrypt$x', CURRENT_TIMESTAMP, false)"
            )
        )
        conn.execute(
            text(
                "INSERT INTO runs (id, kind, status, created_at, spec, environment, progress, extra) "
                "VALUES ('20260101-aaaaaa', 'run', 'pending', CURRENT_TIMESTAMP, '{}', '{}', '{}', '{}')"
            )
        )
    engine.dispose()

    store = Store(db_url)  # upgrades to the newest schema
    assert [(k["name"], k["role"]) for k in store.list_api_keys()] == [("old", "user")]
    assert store.claim_of("20260101-aaaaaa") == (None, None)
    assert store.run_owner_key("20260101-aaaaaa") is None
    taken = store.claim_next_pending("worker-1")
    assert taken is not None and taken.id == "20260101-aaaaaa"
    assert store.claim_of(taken.id) == ("worker-1", 1)
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], diff
    store.dispose()
