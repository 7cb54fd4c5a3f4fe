"""A secret sent with a run (hf_token) reaches the worker that executes it and nothing else: it is never
returned by the API, never logged, never stored in clear (the whole database and the server's log are searched
for it), on SQLite and PostgreSQL."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

import pytest
from sqlalchemy import MetaData, select

from accelbench.store import Store
from tests.support.api_app import ScriptedExecutor, api_for, wait_for


def database_text(store: Store) -> str:
    """Every value of every row of every table, as text."""
    meta = MetaData()
    meta.reflect(store.engine)
    parts = []
    with store.engine.connect() as conn:
        for table in meta.sorted_tables:
            for row in conn.execute(select(table)):
                parts.append(repr(tuple(row)))
    return "\n".join(parts)


def sqlite_bytes(store: Store) -> bytes:
    path = Path(store.engine.url.database or "")
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*") if p.is_file())


def test_hf_token_reaches_only_the_worker(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    secret = "hf_" + secrets.token_hex(20)
    ex = ScriptedExecutor()
    ex.hold.set()
    caplog.set_level(logging.DEBUG)
    with api_for(store, executor=ex, start_worker=True) as api:
        spec = {"model": "smollm2-135m-instruct", "hf_token": secret, "label": "gated",
                "engine": {"settings": {"kv_cache_space_gib": 1, "env": {"HF_TOKEN": "from-env-setting"}}}}  # fmt: skip
        r = api.client.post("/api/v1/runs", json=spec, headers=api.auth)
        assert r.status_code == 202, r.text
        run_id = r.json()["id"]
        assert secret not in r.text
        wait_for(lambda: api.store.get_run(run_id).status.value == "completed")
        # the executor got them, in memory: hf_token and the engine's secret variable (stored masked)
        assert ex.kwargs[0]["secrets"] == {"hf_token": secret, "env:HF_TOKEN": "from-env-setting"}
        responses = [
            api.client.get(f"/api/v1/runs/{run_id}").text,
            api.client.get("/api/v1/runs").text,
            api.client.get(f"/api/v1/runs/{run_id}/results.csv").text,
            api.client.get(f"/runs/{run_id}").text,
            api.client.get("/runs").text,
            api.client.get("/").text,
        ]
        detail = api.client.get(f"/api/v1/runs/{run_id}").json()
    for body in responses:
        assert secret not in body
    # A token-like value in the engine environment is masked in what the API shows.
    assert detail["run"]["spec"]["engine"]["settings"]["env"]["HF_TOKEN"] == "***"
    assert "from-env-setting" not in responses[0]
    assert secret not in database_text(store) and "from-env-setting" not in database_text(store)
    if not store.is_postgres:
        assert secret.encode() not in sqlite_bytes(store)  # the file itself, WAL included
    assert secret not in caplog.text
    assert f"run {run_id} queued" in caplog.text  # the log did record the run, without the secret


def test_secret_without_a_worker_is_refused(store: Store) -> None:
    with api_for(store, start_worker=False) as api:
        r = api.client.post(
            "/api/v1/runs",
            json={
                "model": "smollm2-135m-instruct",
                "hf_token": "hf_x" * 5,
                "engine": {"settings": {"kv_cache_space_gib": 1}},
            },
            headers=api.auth,
        )
        assert r.status_code == 400
        assert "never stored" in r.json()["error"]["message"]
        assert api.store.list_runs()[1] == 0


def test_validation_errors_do_not_echo_the_secret(store: Store) -> None:
    secret = "hf_" + secrets.token_hex(20)
    with api_for(store) as api:
        r = api.client.post(
            "/api/v1/runs", json={"model": "m", "hf_token": secret, "bogus": 1}, headers=api.auth
        )
        assert r.status_code == 422
        assert secret not in r.text
        r = api.client.post("/api/v1/runs", json={"model": "m", "hf_token": 12345678901}, headers=api.auth)
        assert r.status_code == 422 and "12345678901" not in r.text
