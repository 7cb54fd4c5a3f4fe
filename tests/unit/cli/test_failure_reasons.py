"""Why a cell failed is shown where the figures are: the HTTP 400 reason of a run whose requests all
failed in ``runs show``, on its result page (instead of empty charts) and in the report; ``--max-error-rate``
judging a cell with a third of its requests failed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.store import Store
from tests.support.api_app import api_for
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner()
REASON = "This model's maximum context length is 2048 tokens"
WIDE = {"COLUMNS": "250"}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture
def refusing(tokenizer_dir: Path) -> Iterator[StreamServer]:
    with StreamServer(
        Script(status=400, error_message=REASON), tokenizer_dir=tokenizer_dir, model="smol"
    ) as s:
        yield s


@pytest.fixture
def server(tokenizer_dir: Path) -> Iterator[StreamServer]:
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tokenizer_dir, model="smol") as s:
        yield s


def test_a_run_whose_requests_all_failed_shows_its_http_400_reason(
    store: Store, refusing: StreamServer, tokenizer_dir: Path
) -> None:
    res = runner.invoke(
        app,
        ["bench", "--base-url", refusing.base_url, "--tokenizer", str(tokenizer_dir), "--input-len", "48",
         "--output-len", "4", "--num-prompts", "2", "--num-warmups", "0", "--no-scrape"],
        env=WIDE,
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    said = " ".join(res.output.split())
    assert "2 of 2 requests failed (100%)" in said and REASON in said
    (run,), _ = store.list_runs()
    assert run.status == RunStatus.failed

    shown = runner.invoke(app, ["runs", "show", run.id], env=WIDE)
    assert shown.exit_code == 0, shown.output
    assert "Failures" in shown.output
    assert f"most common reason (2x): HTTP 400: {REASON}" in shown.output  # the run's reason
    # the Failures table: the cell, its failed share and the reason whole, on one line
    line = next(ln for ln in shown.output.splitlines() if REASON in ln and "2/2" in ln)
    assert "HTTP 400" in line and "(2x)" in line and "100%" in line

    with api_for(store) as api:
        page = api.client.get(f"/runs/{run.id}")
    assert page.status_code == 200
    html = page.text
    assert 'id="failure-reasons"' in html and "HTTP 400" in html
    assert REASON.replace("'", "&#39;") in html
    assert "2 of 2" in html
    # no empty chart boxes: the page says why there is nothing to chart
    for box in ('id="chart-tpot"', 'id="chart-ttft"', 'id="chart-throughput"'):
        assert box not in html
    assert 'id="no-charts"' in html

    from accelbench.report.files import load_report
    from accelbench.report.html import render_html

    report = render_html(load_report(store, [run.id]))
    assert 'id="failures-table"' in report and REASON.replace("'", "&#39;") in report


def _third_failing(tmp_path: Path) -> Path:
    """Three prompts, the second refused with HTTP 400: cycling through them, a third of the requests fail."""
    bad = json.dumps({"status": 400, "error_message": "bad third"})
    rows = [{"prompt": "Tell me a story"}, {"prompt": f"Refuse this [[fixture:{bad}]]"}, {"prompt": "Go on"}]
    path = tmp_path / "third.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _sweep(server: StreamServer, tokenizer_dir: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "sweep", "--base-url", server.base_url, "--tokenizer", str(tokenizer_dir), "--dataset", "jsonl",
        "--dataset-path", str(_third_failing(tmp_path)), "--input-lens", "48", "--concurrency", "3",
        "--repeats", "1", "--output-len", "4", "--prompts-per-concurrency", "2", "--num-warmups", "0",
        "--no-scrape", "--out", str(tmp_path / "out"), *extra,
    ]  # fmt: skip


def test_a_sweep_with_a_third_of_requests_failing_exits_1_and_marks_the_cell_failed(
    store: Store, server: StreamServer, tokenizer_dir: Path, tmp_path: Path
) -> None:
    res = runner.invoke(app, _sweep(server, tokenizer_dir, tmp_path), env=WIDE)
    assert res.exit_code == 1, res.output
    said = " ".join(res.output.split())
    assert (
        "input 48, concurrency 3, repeat 1: 2 of 6 requests failed (33%, more than --max-error-rate 5%)"
        in said
    )
    assert "most common reason (2x): HTTP 400" in said and "bad third" in said
    (run,), _ = store.list_runs()
    assert run.status == RunStatus.failed and run.error is not None and "bad third" in run.error
    (result,) = store.get_results(run.id)
    assert result.status == CellStatus.failed and (result.completed, result.failed) == (4, 2)


def test_max_error_rate_1_lets_the_same_sweep_pass_and_still_shows_the_reason(
    store: Store, server: StreamServer, tokenizer_dir: Path, tmp_path: Path
) -> None:
    res = runner.invoke(app, _sweep(server, tokenizer_dir, tmp_path, "--max-error-rate", "1"), env=WIDE)
    assert res.exit_code == 0, res.output
    (run,), _ = store.list_runs()
    assert run.status == RunStatus.completed
    (result,) = store.get_results(run.id)
    assert result.status == CellStatus.completed
    line = next(ln for ln in res.output.splitlines() if "bad third" in ln)  # the Failures table
    assert "2/6" in line and "33%" in line
