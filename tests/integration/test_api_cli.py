"""The service's commands: ``accelbench apikey create|list|revoke`` (the key printed once, only its hash
stored, on SQLite and PostgreSQL) and ``accelbench serve`` refusing a second worker on one SQLite store with a
clear message."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import text
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.store import Store, get_store
from tests.support.api_app import api_for

RUN = {"model": "smollm2-135m-instruct", "engine": {"settings": {"kv_cache_space_gib": 1}}}


def test_apikey_commands(store: Store) -> None:
    runner = CliRunner()
    created = runner.invoke(app, ["apikey", "create", "ci", "--format", "json"])
    assert created.exit_code == 0, created.output
    key = json.loads(created.stdout)["key"]
    assert key.startswith("abk_")
    with get_store().session() as s:
        stored = s.execute(text("SELECT key_hash FROM api_keys WHERE name = 'ci'")).scalar_one()
    assert key not in stored and stored.startswith("scrypt$")
    plain = runner.invoke(app, ["apikey", "create", "alice"])
    assert plain.exit_code == 0 and plain.stdout.strip().startswith("abk_")  # only the key on stdout
    assert "cannot be shown" in " ".join(plain.stderr.split())
    listed = runner.invoke(app, ["apikey", "list", "--format", "json"])
    rows = json.loads(listed.stdout)
    assert [r["name"] for r in rows] == ["ci", "alice"] and key not in listed.stdout
    with api_for(get_store()) as api:
        ok = api.client.post("/api/v1/runs", json=RUN, headers={"Authorization": f"Bearer {key}"})
        assert ok.status_code == 202
        revoked = runner.invoke(app, ["apikey", "revoke", "ci"])
        assert revoked.exit_code == 0
        assert (
            api.client.post("/api/v1/runs", json=RUN, headers={"Authorization": f"Bearer {key}"}).status_code
            == 401
        )
    again = runner.invoke(app, ["apikey", "create", "alice"])
    assert again.exit_code != 0 and "exists" in again.stderr
    missing = runner.invoke(app, ["apikey", "revoke", "bob"])
    assert missing.exit_code != 0 and "No API key named 'bob'" in missing.stderr


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_refuses_a_second_worker_on_one_sqlite_store(tmp_path: Path) -> None:
    env = {**os.environ, "ACCELBENCH_DATA_DIR": str(tmp_path / "data"), "ACCELBENCH_API_TOKEN": "t"}
    env.pop("ACCELBENCH_DATABASE_URL", None)
    port = _port()
    cmd = [sys.executable, "-m", "accelbench.cli.main", "serve", "--log-level", "warning"]
    first = subprocess.Popen([*cmd, "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert first.poll() is None and time.monotonic() < deadline
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).json()
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert health["worker"]["running"] and health["database"]["dialect"] == "sqlite"
        second = subprocess.run(
            [*cmd, "--port", str(_port())], env=env, capture_output=True, text=True, timeout=60
        )
        assert second.returncode != 0
        assert "Another run worker already uses this SQLite store" in second.stderr
        assert "--no-worker" in second.stderr and "Traceback" not in second.stderr
        # without a worker, a second server is fine (reads, and runs queued for the first one's worker)
        port3 = _port()
        third = subprocess.Popen([*cmd, "--no-worker", "--port", str(port3)], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                assert third.poll() is None and time.monotonic() < deadline
                try:
                    assert (
                        httpx.get(f"http://127.0.0.1:{port3}/api/v1/health", timeout=1).json()["worker"]
                        is None
                    )
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
        finally:
            third.terminate()
            third.wait(30)
    finally:
        first.terminate()
        first.wait(30)
