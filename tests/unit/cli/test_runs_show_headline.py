"""`runs show` opens with the answer: the headline, then per cell the chosen percentiles, SLO
attainment and goodput (from the stored per-request records), and the top failure reason."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.run import RunStatus
from accelbench.store.repo import Store
from tests.support.summaries import make_summary

runner = CliRunner(env={"COLUMNS": "250"})


def seed(store: Store, **run: object) -> str:
    """A sweep at input 128: concurrency 1 (TPOT 20 ms), 4 (TPOT 40 ms, one request of 40 failed) and 16
    (TPOT 90 ms); output tok/s grow with concurrency."""
    r = store.create_run(kind="sweep", status=RunStatus.completed, label="cpu", served_model="smol", **run)
    for conc, tpot, failed in ((1, 20.0, 0), (4, 40.0, 1), (16, 90.0, 0)):
        store.save_result(
            r.id,
            input_len=128,
            concurrency=conc,
            repeat=0,
            summary=make_summary(
                concurrency=conc, tpot=tpot, itl=tpot, e2el=200.0 + 31 * tpot, failed=failed, duration_s=10.0
            ),
        )
    return r.id


def test_headline_first_with_slo_attainment_goodput_and_failures(store: Store) -> None:
    rid = seed(store)
    res = runner.invoke(app, ["runs", "show", rid, "--slo", "tpot:50", "--slo-percentile", "50"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert out.index("Headline") < out.index("Cells") < out.index("Run ")  # the answer and its table first
    assert "Best: input 128, concurrency 4:" in out and "meeting the SLO" in out
    assert "At input 128 the SLO holds up to concurrency 4 and breaks at 16" in out
    assert "1 of 210 requests failed (0.5%)" in out
    for word in ("p90", "p99", "attainment", "Goodput", "Top failure reason"):  # headers fold at spaces
        assert word in out
    assert "(1x) HTTP 500: boom" in out
    assert "from each request's record" in out
    data = json.loads(
        runner.invoke(app, ["runs", "show", rid, "--slo", "tpot:50", "--format", "json"]).stdout
    )
    by_conc = {c["concurrency"]: c for c in data["cells_slo"]}
    # concurrency 4: 39 of 40 requests succeeded, each with TPOT 40 ms <= 50 ms
    assert by_conc[4]["attainment"] == pytest.approx(39 / 40) and by_conc[4]["source"] == "records"
    assert by_conc[4]["goodput_rps"] == pytest.approx(39 / 10.0)
    assert by_conc[4]["goodput_tps"] == pytest.approx(39 * 32 / 10.0)
    assert by_conc[16]["attainment"] == 0 and by_conc[16]["met"] is False
    assert data["slo"]["source"] == "given" and data["slo"]["targets"] == {"tpot": 50.0}
    assert data["headline"]["title"].startswith("Best: input 128, concurrency 4")


def test_without_slo_the_best_is_the_highest_throughput_and_no_slo_columns(store: Store) -> None:
    rid = seed(store)
    res = runner.invoke(app, ["runs", "show", rid, "--percentiles", "50,95"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Best: input 128, concurrency 16:" in out and "no SLO known" in out
    assert "p95" in out and "p99" not in out and "attainment" not in out


def test_the_run_specs_own_slo_is_used(store: Store) -> None:
    rid = seed(store, spec={"sweep": {"goodput": {"tpot_ms": 30}}})
    out = runner.invoke(app, ["runs", "show", rid]).stdout
    assert "the run spec's goodput targets" in out and "attainment" in out
    assert "Best: input 128, concurrency 1:" in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--slo", "ttft_p99<=2000"], "Use ttft, tpot, itl or e2el"),
        (["--slo", "tpot:50", "--slo-percentile", "100"], "outside (0, 100)"),
        (["--percentiles", "50,75"], "Choose among 50, 90, 95, 99"),
    ],
)
def test_bad_flags_say_what_to_change(store: Store, args: list[str], said: str) -> None:
    rid = seed(store)
    res = runner.invoke(app, ["runs", "show", rid, *args])
    assert res.exit_code == 2 and said in res.output and "Traceback" not in res.output
