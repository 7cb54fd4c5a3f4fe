"""`bench --quality` and `sweep --quality` against the in-repo streaming server (its filler text answers nothing)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from accelbench.cli.main import app
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner(env={"COLUMNS": "220"})


def test_bench_quality_is_measured_before_the_load_and_stored(tmp_path: Path) -> None:
    from accelbench.store import get_store

    tok = make_tokenizer_dir(tmp_path / "tok")
    with StreamServer(Script(ttft_ms=2, itl_ms=1), tokenizer_dir=tok, model="smol") as server:
        args = ["bench", "--base-url", server.base_url, "--tokenizer", str(tok), "--input-len", "48",
                "--output-len", "4", "--num-prompts", "3", "--quality", "probe:5", "--format", "json"]  # fmt: skip
        result = runner.invoke(app, args)
        first_streamed = next(i for i, r in enumerate(server.records) if r.body.get("stream"))
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["quality"]["tasks"] == 5 and body["quality"]["correct"] == 0
    assert body["quality"]["accuracy_ci95"][0] == 0.0
    assert first_streamed == 5  # the five probe questions came before the load
    extra = get_store().get_run(body["run_id"]).extra
    assert extra["quality"]["tasks"] == 5
    assert extra["served"]["sampling"]["value"]["max_tokens"] == 4


def test_quality_settings_are_checked_before_anything_runs(tmp_path: Path) -> None:
    with StreamServer(model="smol") as server:
        bad = runner.invoke(app, ["bench", "--base-url", server.base_url, "--quality", "trivia"])
        assert bad.exit_code != 0 and "Unknown quality setting" in bad.output
        assert not server.records


def test_sweep_quality_prints_the_score(tmp_path: Path) -> None:
    tok = make_tokenizer_dir(tmp_path / "tok")
    with StreamServer(Script(ttft_ms=2, itl_ms=1), tokenizer_dir=tok, model="smol") as server:
        args = ["sweep", "--base-url", server.base_url, "--tokenizer", str(tok), "--input-lens", "48",
                "--concurrency", "1", "--output-len", "4", "--prompts-per-concurrency", "2", "--num-warmups", "0",
                "--quality", "probe:4", "--out", str(tmp_path / "out")]  # fmt: skip
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "quality (probe): 0 of 4 right" in result.output


def test_runs_show_says_what_the_run_served_and_its_quality() -> None:
    from accelbench.bench.quality import make_tasks, tally
    from accelbench.store import get_store

    store = get_store()
    run = store.create_run(kind="bench", model="smol", served_model="smol")
    tasks = make_tasks(0, 3)
    quality = tally(tasks, [t.expected for t in tasks], [None] * 3) | {"source": "probe"}
    store.merge_run_extra(
        run.id, served={"max_model_len": {"value": 2048, "source": "/v1/models"}}, quality=quality
    )
    result = runner.invoke(app, ["runs", "show", run.id])
    assert result.exit_code == 0, result.output
    assert "What it served" in result.output and "/v1/models" in result.output
    assert "quality (probe): 3 of 3 right" in result.output
