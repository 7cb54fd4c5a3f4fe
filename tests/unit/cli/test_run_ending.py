"""How ``run`` and the demo end: the headline, the tails (the percentile table ``runs show`` prints), the
warnings grouped, then the next three commands (open the report, ``runs show ID``, ``serve``), with the report
directory said once."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.cli import render
from accelbench.cli.run_ending import next_steps, open_command, print_ending
from accelbench.domain.run import RunStatus
from accelbench.report.tables import aggregate_results
from accelbench.store.repo import Store
from tests.support.summaries import make_summary

NOTE = "Scraping /metrics took 3% of the client time: its figures carry that cost."


def finished_run(store: Store, out: Path) -> tuple[str, dict[str, object]]:
    """A completed demo-shaped run (2 input lengths x 3 concurrency levels, 2 repeats) and its report files."""
    run = store.create_run(kind="run", status=RunStatus.completed, label="demo", served_model="smol")
    for input_len in (128, 512):
        for conc in (1, 2, 4):
            for rep in (0, 1):
                summary = make_summary(input_len=input_len, concurrency=conc, tpot=20.0 + conc + rep)
                summary = summary.model_copy(update={"notes": [NOTE]})
                store.save_result(run.id, input_len=input_len, concurrency=conc, repeat=rep, summary=summary)
    out.mkdir()
    files = [out / name for name in ("report.html", "report.md", "results.csv")]
    for f in files:
        f.write_text("x")
    cells = aggregate_results(store.get_results(run.id))
    data = {
        "cells": [c.model_dump(mode="json") for c in cells],
        "files": [str(f) for f in files],
        "out_dir": str(out),
    }
    return run.id, data


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")


def test_the_ending_has_the_headline_the_tails_and_the_next_three_commands(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    rid, data = finished_run(store, tmp_path / "report")
    print_ending(store, store.get_run(rid), data)
    out, err = capsys.readouterr()
    assert "Headline" in out and "Best: input" in out
    for header in ("TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"):  # the tails, not p50 alone
        assert header in out
    # the rest stays with runs show, so the tails are not what a terminal's width drops
    for header in ("ITL p50", "E2E p50", "TTFT p90", "Total tok/s", "Top failure reason"):
        assert header not in out
    assert " ".join(out.split()).count(NOTE) == 1 and "in 6 of 6 cells" in out
    said = [" ".join(ln.split()) for ln in err.splitlines()]
    start = said.index("Next")
    assert said[start + 1].startswith(f"xdg-open {tmp_path / 'report' / 'report.html'} the report")
    assert said[start + 2].startswith(f"accelbench runs show {rid} ")
    assert said[start + 3].startswith("accelbench serve ") and f"/runs/{rid}" in said[start + 3]
    assert err.count(str(tmp_path / "report")) == 1  # in the command that opens the report, nowhere else
    assert "Report files: report.html, report.md, results.csv" in err
    assert out.strip().splitlines()[-1] == str(tmp_path / "report")  # stdout is not a terminal: for a script


def test_on_a_terminal_the_directory_is_said_once(
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    wide: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rid, data = finished_run(store, tmp_path / "report")
    monkeypatch.setattr(type(render.console), "is_terminal", property(lambda self: True))
    print_ending(store, store.get_run(rid), data)
    out, err = capsys.readouterr()
    assert (out + err).count(str(tmp_path / "report")) == 1


def test_next_steps_open_the_report_the_platforms_way() -> None:
    report = Path("/data/runs/ab12/report.html")
    assert open_command(report, "darwin") == "open /data/runs/ab12/report.html"
    assert open_command(report, "linux") == "xdg-open /data/runs/ab12/report.html"
    assert open_command(Path("/a b/report.html"), "linux") == "xdg-open '/a b/report.html'"
    steps = [cmd for cmd, _ in next_steps("ab12", report, platform="linux")]
    assert steps == ["xdg-open /data/runs/ab12/report.html", "accelbench runs show ab12", "accelbench serve"]
    assert [cmd for cmd, _ in next_steps("ab12", None)] == ["accelbench runs show ab12", "accelbench serve"]


def test_a_run_that_wrote_no_report_is_not_offered_one(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], wide: None
) -> None:
    """An engine that never answered leaves a run directory with its log and no report: the next steps are
    runs show and serve, and stdout stays empty."""
    run = store.create_run(kind="run", status=RunStatus.failed, label="demo", error="did not answer")
    print_ending(store, run, {"cells": [], "files": [], "out_dir": str(tmp_path)})
    out, err = capsys.readouterr()
    assert out == "" and "xdg-open" not in err and str(tmp_path) not in err
    assert f"accelbench runs show {run.id}" in err and "did not answer" in err
