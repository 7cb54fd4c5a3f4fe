"""Secrets never leave the process: a real bench against the in-repo streaming server, made with a password in
its base URL, an --api-key and a secret header, leaves none of them in the store, the API's answers and pages,
the --save-result file, the report files, the run's files, stdout or the logs. The server has no /metrics, so
the run's telemetry error names the URL too (that is where a password once leaked)."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.settings import get_settings
from accelbench.store import Store
from tests.integration.test_api_secrets import database_text, sqlite_bytes
from tests.support.api_app import api_for
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner(env={"COLUMNS": "200"})


def test_a_bench_with_a_url_password_api_key_and_secret_header_leaves_none_of_them(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    password, api_key, header = (secrets.token_hex(12) for _ in range(3))
    caplog.set_level(logging.DEBUG)
    tok = make_tokenizer_dir(tmp_path / "tok")
    with StreamServer(Script(ttft_ms=2, itl_ms=1), tokenizer_dir=tok, model="smol", metrics=False) as server:
        url = server.base_url.replace("http://", f"http://bench:{password}@")
        saved = tmp_path / "result.json"
        res = runner.invoke(app, ["bench", "--base-url", url, "--api-key", api_key, "--header",
                                  f"X-Secret-Token:{header}", "--input-len", "64", "--output-len", "4",
                                  "--num-prompts", "4", "--max-concurrency", "2", "--save-result", str(saved),
                                  "--label", "secrets", "--format", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    (run,), _ = store.list_runs()
    report = tmp_path / "report"
    rep = runner.invoke(app, ["report", run.id, "--out", str(report)])
    assert rep.exit_code == 0, rep.output
    texts = {"stdout": res.output + rep.output, "logs": caplog.text, "database": database_text(store)}
    texts["result file"] = saved.read_text()
    for f in [*report.rglob("*"), *get_settings().data_dir.rglob("*")]:
        if f.is_file() and f.suffix in (".html", ".md", ".json", ".jsonl", ".csv", ".txt", ".log", ".yaml"):
            texts[str(f)] = f.read_text(errors="replace")
    if store.engine.url.get_backend_name() == "sqlite":
        texts["sqlite file"] = sqlite_bytes(store).decode("latin-1")
    with api_for(store) as api:
        for path in ("/api/v1/runs", f"/api/v1/runs/{run.id}", f"/runs/{run.id}", "/runs"):
            r = api.client.get(path, headers=api.auth)
            assert r.status_code == 200, (path, r.status_code)
            texts[path] = r.text
    # the run really carries what the secrets were attached to: the URL, the telemetry error, the tokenizer id
    assert (
        "/metrics" in texts["database"]
        and "/tokenize" in texts["database"]
        and "bench:***@" in texts["database"]
    )
    for where, text in texts.items():
        for secret in (password, api_key, header):
            assert secret not in text, f"a secret is in {where}"
