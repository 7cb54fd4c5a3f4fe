"""`accelbench capacity` end to end against the fixture's continuous-batching engine: the search, the JSON, the
stored run and its probes, resuming, and the input errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.store import get_store
from tests.support.batching_engine import BatchingEngine
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner(env={"COLUMNS": "200"})


@pytest.fixture
def server(tmp_path: Path):
    tok = make_tokenizer_dir(tmp_path / "tok")
    with StreamServer(Script(), engine=BatchingEngine(slots=8, step_ms=10, per_seq_ms=4), tokenizer_dir=tok,
                      record=False) as s:  # fmt: skip
        yield s, tok


def test_capacity_json_is_stored_and_resumes(server) -> None:
    s, tok = server
    args = ["capacity", "--base-url", s.base_url, "--model", "fixture-model", "--tokenizer", str(tok),
            "--input-len", "64", "--output-len", "10", "--ignore-eos", "--slo", "tpot:32", "--percentile", "50", "--attainment", "0.5", "--start", "2",
            "--max-load", "32", "--instance", "g6.xlarge", "--format", "json"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    # TPOT = 10 + 4 x C ms: a 32 ms median holds to C = 5 (30 ms) and breaks at 6 (34 ms), 2 ms either side
    assert data["load"] == "concurrency" and abs(data["max_load"] - 5) <= 1
    assert data["usd_per_million_output_tokens"] > 0 and data["hourly_usd"] > 0
    run = get_store().get_run(data["run_id"])
    assert run.kind == "capacity" and run.status.value == "completed"
    cells = get_store().get_results(run.id)
    assert len(cells) == len(data["probes"])
    # resuming a finished search replays its stored probes: the same answer, nothing measured again
    again = runner.invoke(app, [*args[:-2], "--resume", run.id, "--format", "json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["max_load"] == data["max_load"]
    assert len(get_store().get_results(run.id)) == len(cells)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--slo", "latency:5"], "Unknown SLO metric"),
        (["--slo", "tpot:5", "--percentile", "120"], "outside (0, 100)"),
        (["--slo", "tpot:5", "--max-load", "0.5"], "below 1"),
        (["--load", "waves"], "Unknown --load"),
    ],
)
def test_bad_input_says_what_to_change(server, extra: list[str], says: str) -> None:
    s, tok = server
    res = runner.invoke(app, ["capacity", "--base-url", s.base_url, "--model", "fixture-model", "--tokenizer",
                              str(tok), "--no-store", *extra])  # fmt: skip
    assert res.exit_code != 0 and says in res.output


def test_an_slo_nothing_meets_is_an_answer_with_the_reason(server) -> None:
    s, tok = server
    res = runner.invoke(app, ["capacity", "--base-url", s.base_url, "--model", "fixture-model", "--tokenizer",
                              str(tok), "--input-len", "64", "--output-len", "8", "--ignore-eos", "--slo", "tpot:1",
                              "--no-store", "--format", "json"])  # fmt: skip
    assert res.exit_code == 3, res.output
    data = json.loads(res.stdout)
    assert data["max_load"] is None and "misses the SLO" in data["reason"]


def test_a_search_that_fails_leaves_its_run_failed_with_the_reason(server, monkeypatch) -> None:
    from accelbench.bench import capacity_search as cap

    s, tok = server

    def broken(*args, **kwargs):
        raise RuntimeError("the server went away")

    monkeypatch.setattr(cap, "run_capacity", broken)
    res = runner.invoke(app, ["capacity", "--base-url", s.base_url, "--model", "fixture-model", "--tokenizer",
                              str(tok), "--slo", "tpot:5", "--label", "breaks"])  # fmt: skip
    assert res.exit_code != 0
    (run,) = [r for r in get_store().list_runs(limit=50)[0] if r.label == "breaks"]
    assert run.status.value == "failed" and "the server went away" in (run.error or "")


def test_the_planner_reads_the_model_the_server_loaded_when_the_served_name_is_an_alias(
    tmp_path: Path,
) -> None:
    """vLLM lists where an aliased model was loaded from (``root``): the planner reads that directory; a root that
    is not a directory here (another machine's path) is not used."""
    from accelbench.services.endpoints import served_model_root

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    with StreamServer(Script(), model="alias", model_root=str(model_dir), record=False) as server:
        assert served_model_root(server.base_url, {}, None, "alias") == str(model_dir)
        assert served_model_root(server.base_url, {}, None, "other") is None
    with StreamServer(Script(), model="alias", model_root=str(tmp_path / "absent"), record=False) as server:
        assert served_model_root(server.base_url, {}, None, "alias") is None


def test_no_prediction_says_why_when_the_model_cannot_be_read() -> None:
    from accelbench.domain.capacity import CapacitySpec
    from accelbench.services.capacity_at_slo import plan_capacity

    plan = plan_capacity(
        CapacitySpec(slo={"tpot": 50}), instance="g6.xlarge", model_ref="an-alias-nobody-knows", strict=False
    )
    assert plan.predicted_max_load is None and plan.hourly_usd
    assert any("cannot read the model 'an-alias-nobody-knows'" in n for n in plan.notes)


def test_a_search_on_this_machine_stores_its_environment_for_calibration(server) -> None:
    """--instance local: the server runs here, so the run describes this machine (calibration needs the CPU)."""
    s, tok = server
    args = ["capacity", "--base-url", s.base_url, "--model", "fixture-model", "--tokenizer", str(tok),
            "--input-len", "64", "--output-len", "6", "--slo", "tpot:5", "--percentile", "50", "--attainment", "0.5",
            "--start", "1", "--instance", "local", "--format", "json"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 3, res.output  # 5 ms is below the engine's 14 ms step: nothing meets it
    run = get_store().get_run(json.loads(res.stdout)["run_id"])
    assert run.instance_type == "local" and (run.environment or {}).get("cpu", {}).get("logical_cpus")


def test_the_answer_says_what_the_cpu_did_at_the_capacity(server, tmp_path: Path) -> None:
    """Device utilisation and memory at the capacity point. The fixture server runs on this machine
    (loopback), so the CPU is sampled during every probe; the answer's probe carries it."""
    s, tok = server
    args = ["capacity", "--base-url", s.base_url, "--model", "fixture-model", "--tokenizer", str(tok),
            "--input-len", "64", "--output-len", "10", "--ignore-eos", "--slo", "tpot:32", "--percentile", "50",
            "--attainment", "0.5", "--start", "2", "--max-load", "32"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    said = [line for line in res.stdout.splitlines() if "the CPU ran at" in line]
    assert len(said) == 1, res.stdout
    assert re.match(
        r"At \d+ users, the CPU ran at \d+% mean utilisation \(\d+% peak\), [\d.]+ GiB of [\d.]+ GiB", said[0]
    )
    [run], _ = get_store().list_runs(kind="capacity")
    shown = runner.invoke(app, ["runs", "show", run.id])
    assert shown.exit_code == 0 and said[0] in shown.stdout, shown.output
    report = runner.invoke(app, ["report", run.id, "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert f'<p class="capacity-devices">{said[0]}</p>' in html and said[0] in md
