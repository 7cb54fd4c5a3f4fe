"""Runs executed by the service's worker with the real orchestrator (no stand-in), against an existing
OpenAI-compatible server (the in-repo streaming fixture, slowed so a sweep takes seconds), on SQLite and
PostgreSQL: a completed run with progress and results, cancel of a running run (finished cells kept, nothing
left running), and a secret sent with the run that appears nowhere: not in the database, the server's log, or
the run's files."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.domain.run import RunStatus
from accelbench.settings import get_settings
from accelbench.store import Store
from tests.integration.test_api_secrets import database_text, sqlite_bytes
from tests.support.api_app import api_for, wait_for
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[tuple[StreamServer, Path]]:
    tok = make_tokenizer_dir(tmp_path / "tok")
    with StreamServer(Script(ttft_ms=20, itl_ms=40), tokenizer_dir=tok, model="smol") as s:
        yield s, tok


def spec_for(server: StreamServer, tok: Path, **sweep: object) -> dict:
    return {
        "model": "smol",
        "target": {
            "kind": "endpoint",
            "base_url": server.base_url,
            "served_model": "smol",
            "tokenizer": str(tok),
        },
        "sweep": {
            "input_lens": [64],
            "concurrency": [1, 2],
            "prompts_per_concurrency": 2,
            "output_len": 16,
            **sweep,
        },
    }


def wait_until_done(api, run_id: str) -> None:
    """Finished and the worker idle again: the sweep stores its final status before the orchestrator has torn
    down and written the report files."""
    wait_for(
        lambda: (
            api.store.get_run(run_id).status.finished
            and api.client.get("/api/v1/health").json()["worker"]["current_run"] is None
        ),
        timeout=120,
        interval=0.2,
    )


def test_run_completes_with_progress(store: Store, slow_server) -> None:
    server, tok = slow_server
    with api_for(store, start_worker=True) as api:
        r = api.client.post("/api/v1/runs", json=spec_for(server, tok), headers=api.auth)
        assert r.status_code == 202, r.text
        run_id = r.json()["id"]
        wait_until_done(api, run_id)
        d = api.client.get(f"/api/v1/runs/{run_id}").json()
    assert d["run"]["status"] == "completed", d["run"]["error"]
    assert d["run"]["progress"]["phase"] == "completed" and d["run"]["progress"]["cells_total"] == 2
    assert [(x["input_len"], x["concurrency"], x["failed"]) for x in d["results"]] == [(64, 1, 0), (64, 2, 0)]
    assert d["telemetry"]["total"] > 0  # the fixture serves /metrics like vLLM


def test_cancel_a_running_run(store: Store, slow_server) -> None:
    server, tok = slow_server
    with api_for(store, start_worker=True) as api:
        spec = spec_for(server, tok, concurrency=[1, 2, 3, 4], prompts_per_concurrency=3)
        run_id = api.client.post("/api/v1/runs", json=spec, headers=api.auth).json()["id"]
        wait_for(lambda: len(api.store.get_results(run_id)) >= 1, timeout=120, interval=0.2)
        r = api.client.post(f"/api/v1/runs/{run_id}/cancel", headers=api.auth)
        assert r.status_code == 202 and r.json()["signalled"] is True
        wait_for(lambda: api.client.get("/api/v1/health").json()["worker"]["current_run"] is None, timeout=60)
        run = api.store.get_run(run_id)
        results = api.store.get_results(run_id)
    assert run.status == RunStatus.cancelled
    assert 1 <= len(results) < 4  # what finished is kept; the rest never ran


def test_secret_reaches_the_real_orchestrator_and_nothing_else(
    store: Store, slow_server, caplog: pytest.LogCaptureFixture
) -> None:
    server, tok = slow_server
    secret = "hf_" + secrets.token_hex(20)
    caplog.set_level(logging.DEBUG)
    with api_for(store, start_worker=True) as api:
        spec = spec_for(server, tok, concurrency=[1], prompts_per_concurrency=1) | {"hf_token": secret}
        run_id = api.client.post("/api/v1/runs", json=spec, headers=api.auth).json()["id"]
        wait_until_done(api, run_id)
        bodies = [api.client.get(f"/api/v1/runs/{run_id}").text, api.client.get(f"/runs/{run_id}").text]
    assert store.get_run(run_id).status == RunStatus.completed
    assert all(secret not in b for b in bodies)
    assert secret not in database_text(store)
    if not store.is_postgres:
        assert secret.encode() not in sqlite_bytes(store)
    assert secret not in caplog.text
    run_dir = get_settings().runs_dir / run_id
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert files  # the orchestrator wrote its report files there
    for f in files:
        assert secret.encode() not in f.read_bytes(), f
