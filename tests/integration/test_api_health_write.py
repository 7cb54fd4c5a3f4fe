"""/health tries a write: a store that answers reads but takes no writes (a read-only SQLite file opened read-only,
a PostgreSQL database in read-only mode) is reported degraded with ``writable: false`` and the driver's reason,
while a writable store is ok; the probe changes nothing and is answered from a short cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from accelbench.services import store_health as health_router
from accelbench.store import Store
from tests.support.api_app import api_for


def get_health(store: Store) -> dict:
    with api_for(store) as api:
        r = api.client.get("/api/v1/health")
        assert r.status_code == 200, r.text
        return dict(r.json())


def alembic_version(store: Store) -> list[str]:
    with store.engine.connect() as conn:
        return [row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))]


def test_a_writable_store_is_ok_and_the_probe_changes_nothing(store: Store) -> None:
    before = alembic_version(store)
    h = get_health(store)
    assert h["status"] == "ok", h
    assert h["database"]["ok"] is True and h["database"]["writable"] is True
    assert h["database"]["error"] is None
    assert alembic_version(store) == before
    store.create_run(kind="bench", model="m")  # the store still takes writes: no lock was left behind
    assert store.list_runs()[1] == 1


def read_only(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    """The same store, opened so that it takes no writes: SQLite through a read-only URI (the state of a
    file or mount the process cannot write; chmod does not stop root), PostgreSQL with the database set to
    read-only transactions."""
    if store.is_postgres:
        db = store.engine.url.database
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'ALTER DATABASE "{db}" SET default_transaction_read_only = on'))
        store.engine.dispose()  # new connections get the setting
        return store
    path = Path(store.engine.url.database or "")
    monkeypatch.chdir(tmp_path)  # make_engine creates the parent of what it is given: keep it in tmp_path
    return Store(f"sqlite:///file:{path}?mode=ro&uri=true", migrate=False)


def test_a_read_only_store_is_degraded_with_writable_false(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ro = read_only(store, tmp_path, monkeypatch)
    try:
        assert ro.list_runs()[1] == 0  # reads work
        h = get_health(ro)
    finally:
        ro.dispose()
    assert h["status"] == "degraded", h
    db = h["database"]
    assert db["ok"] is True and db["writable"] is False
    assert "read-only" in db["error"] or "readonly" in db["error"], db


def test_an_unreachable_store_is_degraded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError("connection refused")

    with api_for(store) as api:
        monkeypatch.setattr(store.engine, "connect", broken)
        h = api.client.get("/api/v1/health").json()
    assert h["status"] == "degraded"
    assert h["database"] == {
        "dialect": store.engine.dialect.name,
        "ok": False,
        "writable": False,
        "error": "ConnectionRefusedError: connection refused",
    }


def test_probes_are_answered_from_a_short_cache(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = health_router.probe_store

    def counted(engine):  # type: ignore[no-untyped-def]
        calls.append(engine)
        return real(engine)

    monkeypatch.setattr(health_router, "probe_store", counted)
    monkeypatch.setattr(health_router, "PROBE_TTL_S", 3600.0)
    with api_for(store) as api:
        for _ in range(5):
            assert api.client.get("/api/v1/health").json()["status"] == "ok"
        assert len(calls) == 1  # a load balancer asking often costs one probe
        monkeypatch.setattr(health_router, "PROBE_TTL_S", 0.0)
        api.client.get("/api/v1/health")
        assert len(calls) == 2  # once the answer is older than the TTL, the store is probed again
