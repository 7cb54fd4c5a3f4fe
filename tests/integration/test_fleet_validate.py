"""`fleet --validate` against the in-repo streaming server (exact timing, CI speed): one server's share of the
busiest interval is replayed through the trace dataset at the plan's per-server load, the measured SLO attainment
is set beside the promised one, and the replay is stored as a bench run like any other. (The real vLLM CPU engine
is driven the same way: `--base-url` of a local engine.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.capacity import CapacityResult, CapacitySLO, Probe
from accelbench.domain.run import RunStatus
from accelbench.report.files import load_report
from accelbench.report.html import render_html
from accelbench.report.markdown import render_markdown
from accelbench.store import get_store
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner(env={"COLUMNS": "200"})
MODEL = "smollm2-135m-instruct"
SLO = CapacitySLO(targets={"ttft": 1000.0, "tpot": 100.0}, percentile=90.0, attainment=0.95)
# 10 and 30 requests/s for a minute each; one server carries 20 requests/s (stored as measured on this machine):
# 1 server, then ceil(peak/20) = 2 servers (the 0.99 quantile of Poisson(30 x 60) per 60 s window is ~1,900): the
# busiest load per server is 15 requests/s in the second interval
PROFILE = "interval_s: 60\ninput_tokens: 64\noutput_tokens: 8\nintervals:\n  - requests_per_s: 10\n  - requests_per_s: 30\n"


def _measured_here() -> None:
    store = get_store()
    result = CapacityResult(load="request_rate", slo=SLO, max_load=20.0, requests_per_s_at_max=20.0,
                            probes=[Probe(level=20.0, requests=100, met=True, why="meets the SLO")])  # fmt: skip
    run = store.create_run(kind="capacity", model=MODEL, instance_type="local",
                           spec={"capacity": {"load": "request_rate", "input_len": 64, "output_len": 8}},
                           extra={"capacity": result.model_dump(mode="json")})  # fmt: skip
    store.set_status(run.id, RunStatus.completed)


def _run(tmp_path: Path, script: Script, fmt: str = "json") -> str:
    traffic = tmp_path / "day.yaml"
    traffic.write_text(PROFILE)
    tok = make_tokenizer_dir(tmp_path / "tok")
    _measured_here()
    with StreamServer(script, tokenizer_dir=tok, record=False) as s:
        res = runner.invoke(app, ["fleet", "--traffic", str(traffic), "--model", MODEL, "--slo", "ttft:1000,tpot:100",
                                  "--instances", "local", "--validate", "--base-url", s.base_url, "--served-model",
                                  "fixture-model", "--tokenizer", str(tok), "--validate-requests", "40",
                                  "--format", fmt])  # fmt: skip
    assert res.exit_code == 0, res.output
    return res.stdout


def test_a_server_within_the_slo_meets_the_promise(tmp_path: Path) -> None:
    data = json.loads(_run(tmp_path, Script(ttft_ms=20, itl_ms=5)))
    local = data["candidates"][0]
    assert local["instance"] == "local" and local["capacity_source"] == "measured"
    assert [i["servers"] for i in local["intervals"]] == [1, 2]
    v = data["validation"]
    assert v["requests_per_s"] == pytest.approx(15.0) and v["servers"] == 2 and v["requests"] == 40
    assert v["promised_attainment"] == 0.95 and v["measured_attainment"] == 1.0 and v["met"] is True, v
    run = get_store().get_run(v["run_id"])
    assert run.kind == "bench" and run.status == RunStatus.completed and run.instance_type == "local"
    assert run.extra["fleet_validation"]["measured_attainment"] == 1.0
    (result,) = get_store().get_results(run.id)
    assert result.summary["completed"] == 40
    # the run's report carries the plan it checked: the ranked table and the servers-over-the-day chart
    report = load_report(get_store(), [run.id])
    assert [p.candidates[0].instance for p in report.fleet_plans] == ["local"]
    page = render_html(report)
    assert '<a href="#fleet">Fleet plan</a>' in page and '<section id="fleet">' in page
    assert 'id="chart-fleet-0"' in page
    assert "## Fleet plan" in render_markdown(report, {})


def test_a_slow_server_breaks_the_promise(tmp_path: Path) -> None:
    v = json.loads(_run(tmp_path, Script(ttft_ms=1500, itl_ms=5)))["validation"]
    assert v["measured_attainment"] == 0.0 and v["met"] is False
    assert "ttft" in v["why"]


def test_the_terminal_says_measured_beside_promised_and_replays_compare(tmp_path: Path) -> None:
    out = " ".join(_run(tmp_path, Script(ttft_ms=20, itl_ms=5), fmt="table").split())
    assert "Replay on this machine (40 requests at 15 req/s per server, 2 server(s)" in out
    assert "measured 100.0%, promised at least 95%" in out
    # a second replay, on a slower server: the two stored runs compare like any two benchmarks
    (tmp_path / "again").mkdir()
    _run(tmp_path / "again", Script(ttft_ms=200, itl_ms=20), fmt="table")
    runs, _ = get_store().list_runs(kind="bench", limit=10)
    assert len(runs) == 2
    res = runner.invoke(app, ["compare", runs[1].id, runs[0].id, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert {r["id"] for r in json.loads(res.stdout)["runs"]} == {runs[0].id, runs[1].id}
