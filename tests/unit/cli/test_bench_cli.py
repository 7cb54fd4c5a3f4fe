"""`accelbench bench` end to end against the in-repo streaming server: JSON and table output, the stored run,
--save-result, vLLM's --goodput syntax, --header, the default served model, and user errors."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.bench.results_io import read_result
from accelbench.cli.main import app
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.store.repo import Store
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner(env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture
def server(tok_dir: Path) -> Iterator[StreamServer]:
    with StreamServer(Script(ttft_ms=3, itl_ms=1), tokenizer_dir=tok_dir, model="smol") as s:
        yield s


def args(server: StreamServer, tok_dir: Path, *extra: str) -> list[str]:
    return ["bench", "--base-url", server.base_url, "--model", "smol", "--tokenizer", str(tok_dir),
            "--input-len", "48", "--output-len", "4", "--num-prompts", "6", "--max-concurrency", "2", *extra]  # fmt: skip


def test_json_output_store_and_result_file(
    server: StreamServer, tok_dir: Path, tmp_path: Path, store: Store
) -> None:
    out = tmp_path / "res.json"
    result = runner.invoke(
        app,
        args(
            server,
            tok_dir,
            "--format",
            "json",
            "--goodput",
            "ttft:1000",
            "tpot:50",
            "--header",
            "X-Team:perf",
            "--save-result",
            str(out),
            "--label",
            "cli",
        ),
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    s = data["summary"]
    assert s["completed"] == 6 and s["failed"] == 0 and s["label"] == "cli"
    assert s["config"]["goodput"] == {"ttft_ms": 1000.0, "tpot_ms": 50.0, "e2el_ms": None}
    assert s["request_goodput"] > 0 and "requests" not in s
    assert s["config"]["request_rate"] == "Infinity"
    assert data["result_file"] == str(out) and read_result(out).completed == 6
    run = store.get_run(data["run_id"])
    assert run.kind == "bench" and run.status == RunStatus.completed and run.label == "cli"
    assert run.served_model == "smol" and run.completed_requests == 6
    assert run.spec["bench"]["input_len"] == 48 and run.environment["command"]
    results = store.get_results(run.id)
    assert len(results) == 1 and results[0].status == CellStatus.completed and results[0].concurrency == 2
    assert len(store.get_summary(results[0].id).requests) == 6
    heads = [r.head for r in server.records if r.path.endswith("completions")]
    assert len(heads) == 6 and all("\r\nX-Team: perf\r\n" in h for h in heads)
    bodies = [r.body for r in server.records if r.path.endswith("completions")]
    assert all(b["max_tokens"] == 4 and b["stream_options"] == {"include_usage": True} for b in bodies)


def test_table_output(server: StreamServer, tok_dir: Path, store: Store) -> None:
    result = runner.invoke(app, args(server, tok_dir))
    assert result.exit_code == 0, result.output
    for text in ("TTFT", "TPOT", "ITL", "E2EL", "Send lag", "6 ok, 0 failed", "Stored as run", "exact"):
        assert text in result.stdout


def test_default_model_no_store_and_include_requests(
    server: StreamServer, tok_dir: Path, store: Store
) -> None:
    argv = [a for a in args(server, tok_dir, "--no-store", "--format", "json", "--include-requests")
            if a not in ("--model", "smol")]  # fmt: skip
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["run_id"] is None and data["summary"]["model_id"] == "smol"
    assert len(data["summary"]["requests"]) == 6
    assert store.list_runs()[1] == 0


def test_all_requests_failing_exits_1_and_stores_a_failed_run(tok_dir: Path, store: Store) -> None:
    with StreamServer(
        Script(status=503, error_message="warming up"), tokenizer_dir=tok_dir, model="smol"
    ) as s:
        result = runner.invoke(app, args(s, tok_dir, "--format", "json"))
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["summary"]["errors"] == {"HTTP 503: warming up": 6}
    run = store.get_run(data["run_id"])
    assert run.status == RunStatus.failed
    assert run.error == "6 of 6 requests failed (100%); most common reason (6x): HTTP 503: warming up"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--goodput", "ttft:fast"], "Bad --goodput item 'ttft:fast'"),
        (["--goodput", "latency:5"], "Bad --goodput item"),
        (["tpot:5"], "Did you mean --goodput?"),
        (["surprise"], "Unexpected argument(s): surprise"),
        (["--header", "novalue"], "Bad --header 'novalue'"),
        (["--request-rate", "-1"], "must be positive"),
        (["--dataset", "jsonl"], "--dataset jsonl needs --dataset-path FILE"),
        (["--input-len", "5"], "is too small"),
    ],
)
def test_user_errors(
    server: StreamServer, tok_dir: Path, extra: list[str], message: str, store: Store
) -> None:
    result = runner.invoke(app, args(server, tok_dir, "--no-store", *extra))
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_unreachable_server_for_model_lookup() -> None:
    result = runner.invoke(app, ["bench", "--base-url", "http://127.0.0.1:9", "--no-store"])
    # a server that is not there is said so, not answered with "give --model"
    assert result.exit_code == 1 and "Cannot reach the server at http://127.0.0.1:9" in result.output
    assert "--model" not in result.output


def test_unlimited_concurrency_is_stored_as_what_was_in_flight_and_reports_work(
    server: StreamServer, tok_dir: Path, tmp_path: Path, store: Store
) -> None:
    """Without --max-concurrency the run was stored with concurrency 0, and report/compare then divided by
    zero. Every request may be in flight at once: the cell's concurrency is the number of prompts."""
    argv = ["bench", "--base-url", server.base_url, "--model", "smol", "--tokenizer", str(tok_dir),
            "--input-len", "48", "--output-len", "4", "--num-prompts", "5", "--format", "json"]  # fmt: skip
    first = runner.invoke(app, argv)
    second = runner.invoke(app, argv)
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    a, b = json.loads(first.stdout)["run_id"], json.loads(second.stdout)["run_id"]
    [cell] = store.get_results(a)
    assert cell.concurrency == 5
    assert store.get_summary(cell.id).config.max_concurrency is None  # what was asked stays on record
    report = runner.invoke(app, ["report", a, b, "--out", str(tmp_path / "r")])
    assert report.exit_code == 0, report.output
    compare = runner.invoke(app, ["compare", a, b, "--format", "json"])
    assert compare.exit_code == 0, compare.output


def test_a_server_that_dies_mid_bench_fails_the_run_as_the_sweep_does(tok_dir: Path, store: Store) -> None:
    """A bench whose server died after 61 of 200 requests was stored completed and exited 0; the sweep path
    called the same case failed. One rule now: failures and a server that no longer answers mean failed,
    with the requests that finished kept as a partial cell."""
    import threading

    from tests.support.stream_server import spawn_server

    with spawn_server("--tokenizer-dir", str(tok_dir), "--model", "smol", "--record",
                      "--script", '{"ttft_ms": 20, "itl_ms": 40}') as proc:  # fmt: skip

        def kill_after_a_few() -> None:
            # once a few benchmark requests were served (not after a fixed time: a busy machine starts slowly)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with contextlib.suppress(Exception):
                    if sum(1 for r in proc.records() if r.path.endswith("completions")) >= 4:
                        break
                time.sleep(0.05)
            proc.proc.kill()

        killer = threading.Thread(target=kill_after_a_few, daemon=True)
        killer.start()
        res = runner.invoke(app, ["bench", "--base-url", proc.base_url, "--model", "smol", "--tokenizer", str(tok_dir),
                                  "--input-len", "48", "--output-len", "8", "--num-prompts", "40",
                                  "--max-concurrency", "2", "--timeout", "10", "--format", "json"])  # fmt: skip
        killer.join()
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    run = store.get_run(data["run_id"])
    assert run.status == RunStatus.failed and "stopped answering" in (run.error or "")
    [cell] = store.get_results(run.id)
    assert cell.status == CellStatus.partial and cell.completed >= 1 and cell.failed >= 1


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # SQLite's query_only pragma plays it
def test_a_store_that_cannot_be_written_refuses_before_any_load(
    server: StreamServer, tok_dir: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a read-only store, bench sent its whole load and then died with a raw traceback, printing nothing."""
    from sqlalchemy import event

    from accelbench.store import db as store_db
    from accelbench.store.repo import reset_stores

    real = store_db.make_engine

    def read_only(url: str):  # type: ignore[no-untyped-def]
        engine = real(url)
        event.listen(engine, "connect", lambda conn, _rec: conn.execute("PRAGMA query_only=1"))
        return engine

    reset_stores()
    monkeypatch.setattr("accelbench.store.database.make_engine", read_only)
    res = runner.invoke(app, args(server, tok_dir))
    assert res.exit_code == 1, res.output
    assert "cannot be used" in res.output and "readonly" in res.output and "Traceback" not in res.output
    assert not [r for r in server.records if r.path.endswith("completions")]  # no load was sent


def test_credentials_in_the_server_url_are_never_stored(
    server: StreamServer, tok_dir: Path, store: Store
) -> None:
    """Credentials in an endpoint URL were stored with the run and returned to anonymous readers."""
    url = server.base_url.replace("http://", "http://bench:sekrit@")
    res = runner.invoke(app, ["bench", "--base-url", url, "--model", "smol", "--tokenizer", str(tok_dir),
                              "--input-len", "48", "--output-len", "4", "--num-prompts", "2", "--format", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    run = store.get_run(json.loads(res.stdout)["run_id"])
    [cell] = store.get_results(run.id)
    stored = run.model_dump_json() + store.get_summary(cell.id).model_dump_json()
    assert "sekrit" not in stored and "bench:***@" in (run.base_url or "")


def test_an_aliased_served_model_is_stored_as_the_directory_the_server_loaded(
    tok_dir: Path, store: Store
) -> None:
    """vLLM serves --served-model-name aliases and lists the model's directory as ``root``: the run stores that
    (a name the planner and calibration can read), and the alias as the served model."""
    with StreamServer(
        Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir, model="alias", model_root=str(tok_dir)
    ) as s:
        argv = ["bench", "--base-url", s.base_url, "--input-len", "48", "--output-len", "4", "--num-prompts", "2",
                "--format", "json"]  # fmt: skip
        result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    run = store.get_run(json.loads(result.stdout)["run_id"])
    assert run.model == str(tok_dir) and run.served_model == "alias"


def test_ramp_up_staggers_the_streams_and_the_result_says_what_it_left_out(
    tok_dir: Path, store: Store
) -> None:
    # each request ~40 ms: over a 0.1 s ramp the second stream starts at 0.05 s; the requests sent before 0.1 s
    # are left out of the figures and the result counts them
    with StreamServer(Script(ttft_ms=20, itl_ms=5), tokenizer_dir=tok_dir, model="smol") as s:
        result = runner.invoke(app, args(s, tok_dir, "--ramp-up", "0.1", "--format", "json", "--no-store"))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    assert summary["config"]["ramp_up_s"] == 0.1
    assert summary["ramp_requests"] >= 2
    assert summary["completed"] == 6 - summary["ramp_requests"]
    assert any(n.startswith("Staggered start: the 2 streams") for n in summary["notes"])
    refused = runner.invoke(app, args(s, tok_dir, "--no-store", "--ramp-up", "1", "--request-rate", "5"))
    assert refused.exit_code == 2 and "ramp_up_s staggers the streams of a closed loop" in refused.output
