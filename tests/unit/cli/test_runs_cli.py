"""`accelbench runs list|show|delete` on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.store.repo import Store
from tests.support.summaries import make_summary

runner = CliRunner(env={"COLUMNS": "220"})


def seed(store: Store) -> tuple[str, str]:
    """Two runs: a completed sweep with 2 cells x 2 repeats, an interrupted one with a partial cell."""
    done = store.create_run(
        kind="sweep",
        status=RunStatus.completed,
        label="cpu-baseline",
        served_model="smol",
        base_url="http://127.0.0.1:1",
        spec={"sweep": {"input_lens": [128], "concurrency": [1, 4], "repeats": 2}},
        environment={
            "cpu": {"model": "AMD EPYC", "arch": "x86_64", "isa": {"present": ["AVX512-BF16"], "has": {}}}
        },
        progress={"cells_done": 4, "cells_total": 4},
    )
    for c, ttft in ((1, 200.0), (4, 400.0)):
        for rep in (0, 1):
            store.save_result(
                done.id,
                input_len=128,
                concurrency=c,
                repeat=rep,
                summary=make_summary(concurrency=c, ttft=ttft + 20 * rep),
            )
    broken = store.create_run(
        kind="sweep", status=RunStatus.interrupted, label="gpu", served_model="other", error="server gone"
    )
    store.save_result(
        broken.id,
        input_len=512,
        concurrency=8,
        repeat=0,
        summary=make_summary(input_len=512, concurrency=8, completed=30, failed=2),
        status=CellStatus.partial,
    )
    return done.id, broken.id


def test_list_json(store: Store) -> None:
    done, broken = seed(store)
    res = runner.invoke(app, ["runs", "list", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["total"] == 2
    by_id = {r["id"]: r for r in data["runs"]}
    assert by_id[done]["status"] == "completed"
    # 2 repeats x (10 requests at c=1 + 40 at c=4)
    assert by_id[done]["completed_requests"] == 2 * (10 + 40)
    assert by_id[done]["failed_requests"] == 0
    assert by_id[done]["cells"] == 4
    assert by_id[broken]["status"] == "interrupted"
    assert (by_id[broken]["completed_requests"], by_id[broken]["failed_requests"]) == (30, 2)
    assert by_id[broken]["error"] == "server gone"


def test_list_filters_and_table(store: Store) -> None:
    done, broken = seed(store)
    res = runner.invoke(app, ["runs", "list", "--status", "interrupted", "--format", "json"])
    assert [r["id"] for r in json.loads(res.stdout)["runs"]] == [broken]
    res = runner.invoke(app, ["runs", "list", "--model", "smol", "--format", "json"])
    assert [r["id"] for r in json.loads(res.stdout)["runs"]] == [done]
    res = runner.invoke(app, ["runs", "list", "--limit", "1", "--format", "json"])
    data = json.loads(res.stdout)
    assert data["total"] == 2 and len(data["runs"]) == 1
    res = runner.invoke(app, ["runs", "list"])
    assert res.exit_code == 0
    assert done in res.stdout and broken in res.stdout and "interrupted" in res.stdout
    assert "4/4" in res.stdout  # cells progress
    res = runner.invoke(app, ["runs", "list", "--status", "finished"])
    assert res.exit_code != 0 and "finished" in res.output


def test_show_json_and_table(store: Store) -> None:
    done, _ = seed(store)
    res = runner.invoke(app, ["runs", "show", done[:-1], "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["run"]["id"] == done
    cells = data["cells"]
    assert [(c["input_len"], c["concurrency"]) for c in cells] == [(128, 1), (128, 4)]
    assert cells[0]["ttft_p50_ms"]["mean"] == pytest.approx(210.0)
    assert (cells[0]["ttft_p50_ms"]["min"], cells[0]["ttft_p50_ms"]["max"]) == (200.0, 220.0)
    assert len(data["results"]) == 4 and "summary" not in data["results"][0]
    res = runner.invoke(app, ["runs", "show", done, "--repeats"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "cpu-baseline" in out and "AMD EPYC" in out and "AVX512-BF16" in out
    assert "input_lens" not in out  # the spec only with --spec
    # the tails by default (p50/p90/p99 of each latency): make_summary's p90 is 1.1 x p50, p99 1.25 x
    assert "TTFT p90 (ms)" in out and "TTFT p99 (ms)" in out and "TTFT p95" not in out
    assert "231.0" in out and "262.5" in out
    # with one percentile the min-max over repeats fits
    res = runner.invoke(app, ["runs", "show", done, "--percentiles", "50"])
    assert res.exit_code == 0, res.output
    assert "210.0 (200.0-220.0)" in res.stdout and "p90" not in res.stdout


def test_show_leaves_the_spec_behind_a_flag_and_its_nulls_out(store: Store) -> None:
    """``runs show`` leads with the headline and the table; ``--spec`` adds the spec, without its unset fields
    (a stored spec is the whole model, most of it null)."""
    run = store.create_run(
        kind="run",
        status=RunStatus.completed,
        served_model="smol",
        spec={
            "model": "smol",
            "engine": {
                "name": "vllm-cpu",
                "version": None,
                "settings": {"max_model_len": 2048, "dtype": None},
            },
            "target": {"kind": "local", "port": None},
            "sweep": {"input_lens": [128], "concurrency": [1], "goodput": None},
            "quality": {"tasks": None},
        },
    )
    store.save_result(run.id, input_len=128, concurrency=1, repeat=0, summary=make_summary())
    plain = runner.invoke(app, ["runs", "show", run.id])
    assert plain.exit_code == 0, plain.output
    assert "Spec" not in plain.stdout and "max_model_len" not in plain.stdout
    assert plain.stdout.index("Headline") < plain.stdout.index("Cells") < plain.stdout.index("Run ")
    shown = runner.invoke(app, ["runs", "show", run.id, "--spec"])
    assert shown.exit_code == 0, shown.output
    out = shown.stdout
    assert "Spec" in out and "max_model_len: 2048" in out and "name: vllm-cpu" in out and "kind: local" in out
    assert "null" not in out and "dtype" not in out and "goodput" not in out
    assert "quality" not in out  # left empty by its unset field


def test_show_unknown_run(store: Store) -> None:
    res = runner.invoke(app, ["runs", "show", "nope"])
    assert res.exit_code == 2
    assert "No run 'nope'" in res.stderr and "Traceback" not in res.output


def test_delete_asks_and_refuses_without_answer(store: Store) -> None:
    done, broken = seed(store)
    res = runner.invoke(app, ["runs", "delete", done], input="n\n")
    assert res.exit_code == 1 and "Nothing deleted" in res.stderr
    res = runner.invoke(app, ["runs", "delete", done])  # no input at all
    assert res.exit_code == 1 and "--yes" in res.stderr
    assert store.get_run(done).cells == 4
    res = runner.invoke(app, ["runs", "delete", done], input="y\n")
    assert res.exit_code == 0, res.output
    assert "Delete" in res.stderr and done in res.stderr
    res = runner.invoke(app, ["runs", "delete", broken, "--yes", "--format", "json"])
    assert json.loads(res.stdout) == {"deleted": [broken]}
    assert store.list_runs()[1] == 0


def test_delete_refuses_running_run_without_force(store: Store) -> None:
    run = store.create_run(kind="sweep", status=RunStatus.benchmarking)
    res = runner.invoke(app, ["runs", "delete", run.id, "--yes"])
    assert res.exit_code == 1 and "still marked as running" in res.stderr
    res = runner.invoke(app, ["runs", "delete", run.id, "--yes", "--force"])
    assert res.exit_code == 0
