"""Attribution at the source: a bench or sweep run with ``--tokenizer DIR`` stores the server's
served name as its model and the directory only as its tokenizer; a remote endpoint's run stores the remote
environment (this machine only as the load generator), never this machine's CPU as the engine's; runs show
says where a run ran."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.endpoint import Endpoint
from accelbench.services.endpoints import endpoint_environment
from accelbench.store.repo import Store
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner(env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture
def server(tok_dir: Path) -> Iterator[StreamServer]:
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir, model="smol-chat") as s:
        yield s


def test_bench_with_a_tokenizer_directory_stores_the_served_name_as_the_model(
    server: StreamServer, tok_dir: Path, store: Store
) -> None:
    res = runner.invoke(app, ["bench", "--base-url", server.base_url, "--model", "smol-chat", "--tokenizer",
                              str(tok_dir), "--input-len", "48", "--output-len", "4", "--num-prompts", "2",
                              "--format", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    run = store.get_run(json.loads(res.stdout)["run_id"])
    assert run.model == "smol-chat" and run.served_model == "smol-chat"
    assert run.spec["endpoint"]["tokenizer"] == str(tok_dir)
    shown = runner.invoke(app, ["runs", "show", run.id])
    assert shown.exit_code == 0, shown.output
    assert "smol-chat" in shown.output and "Tokenizer" in shown.output and "this machine" in shown.output


def test_sweep_with_a_tokenizer_directory_stores_the_served_name_as_the_model(
    server: StreamServer, tok_dir: Path, store: Store, tmp_path: Path
) -> None:
    res = runner.invoke(app, ["sweep", "--base-url", server.base_url, "--tokenizer", str(tok_dir),
                              "--input-lens", "48", "--concurrency", "1", "--output-len", "4",
                              "--prompts-per-concurrency", "2", "--num-warmups", "0", "--out",
                              str(tmp_path / "out"), "--format", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    [run], _ = store.list_runs(kind="sweep")
    assert run.model == "smol-chat" and run.spec["endpoint"]["tokenizer"] == str(tok_dir)


def test_a_remote_endpoint_stores_the_remote_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("accelbench.telemetry.host.engine_info", lambda url, headers=None: {"name": "vllm"})
    remote = endpoint_environment(
        Endpoint(base_url="http://10.20.30.40:8000", served_model="m"), ["accelbench"]
    )
    assert remote["engine_host"] == "remote" and "cpu" not in remote
    assert remote["load_generator"]["cpu"] and remote["engine"] == {"name": "vllm"}
    here = endpoint_environment(Endpoint(base_url="http://127.0.0.1:8000", served_model="m"), ["accelbench"])
    assert here["cpu"] and "engine_host" not in here


def test_runs_list_and_show_name_a_remote_and_an_imported_run(store: Store) -> None:
    remote = store.create_run(
        kind="bench", model="qwen", served_model="qwen", base_url="http://10.9.8.7:8000"
    )
    imported = store.create_run(kind="import", target="import", model="qwen", label="vllm files",
                                extra={"source": "vllm bench serve --save-result"})  # fmt: skip
    shown = runner.invoke(app, ["runs", "show", remote.id])
    assert shown.exit_code == 0, shown.output
    assert "remote endpoint (10.9.8.7:8000)" in shown.output and "this machine" not in shown.output
    listed = runner.invoke(app, ["runs", "list"])
    assert listed.exit_code == 0, listed.output
    assert "remote endpoint (10.9.8.7:8000)" in listed.output
    assert "imported (vllm bench serve --save-result)" in listed.output
    assert imported.id in listed.output
