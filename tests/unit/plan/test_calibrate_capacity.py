"""``plan calibrate`` fed by capacity searches: every probe is a measured point (a concurrency probe like a sweep
cell, a request-rate probe at its rate), and each capacity run's measured capacity is reported against the
planner's before and after the fit. The planner gets plain data; ``services.plan`` reads the store."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.capacity import CapacityResult, CapacitySLO, Probe
from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.load import BenchConfig
from accelbench.domain.run import RunStatus
from accelbench.plan.calibrate import calibrate as fit_measured
from accelbench.plan.capacity_prediction import RateModel, predict_capacity
from accelbench.plan.hardware import default_factors
from accelbench.plan.measured_points import MeasuredRun, RunModel, run_model
from accelbench.services.planning import calibrate, calibration_json, measured_runs
from accelbench.store.repo import Store
from tests.support.plan_data import add_sweep, summary
from tests.support.report_data import make_result, make_run

MODEL, INSTANCE, IN, OUT = "smollm2-135m-instruct", "m8i.2xlarge", 128, 32
SLO = CapacitySLO(targets={"tpot": 45.0, "ttft": 1500.0}, percentile=90.0, attainment=0.9)
#: what the "measured" engine really does: slower than the shipped CPU factors say
TRUTH = default_factors("cpu", "vllm-cpu").model_copy(
    update={
        "bandwidth_efficiency": 0.35,
        "step_overhead_ms": 14.0,
        "per_sequence_overhead_ms": 0.9,
        "request_overhead_ms": 40.0,
    }
)
CONCURRENCY_LEVELS = [(1.0, 1), (2.0, 1), (4.0, 1), (8.0, 1), (16.0, 1), (12.0, 1), (12.0, 2), (14.0, 1)]
RATE_FRACTIONS = [0.1, 0.3, 0.6, 0.8, 0.9, 0.95]


def _cell(store: Store, run_id: str, load: str, level: float, index: int, repeat: int, numbers: Any) -> None:
    ttft, tpot, e2e, out_tps = numbers
    s = summary(IN, max(int(level), 1), ttft, tpot, e2e, out_tps, OUT)
    if load == "concurrency":
        store.save_result(run_id, input_len=IN, concurrency=int(level), repeat=repeat, summary=s)
        return
    config = BenchConfig(input_len=IN, output_len=OUT, num_prompts=s.num_prompts, request_rate=level)
    s = s.model_copy(update={"config": config})
    store.save_result(run_id, input_len=IN, concurrency=0, repeat=index + 1, summary=s)


def add_capacity_run(
    store: Store, load: str, truth: EfficiencyFactors = TRUTH, *, finished: bool = True
) -> tuple[str, float]:
    """A capacity search as the search stores it (each probe a cell; a rate probe under concurrency 0 with its
    rate in the config; the answer in extra["capacity"]), its numbers what the model gives with ``truth``.
    Returns (run id, the capacity ``truth`` gives)."""
    run = store.create_run(
        kind="capacity",
        status=RunStatus.benchmarking,
        label=f"capacity {load}",
        model=MODEL,
        served_model=MODEL,
        instance_type=INSTANCE,
        spec={
            "capacity": {
                "load": load,
                "input_len": IN,
                "output_len": OUT,
                "slo": SLO.targets,
                "max_load": 256,
            }
        },
    )
    placeholder = (100.0, 30.0, 1000.0, 30.0)
    levels: list[tuple[float, int]]
    if load == "concurrency":
        levels = CONCURRENCY_LEVELS
    else:
        levels = [(float(i + 1), 1) for i in range(len(RATE_FRACTIONS))]
    for i, (lv, rep) in enumerate(levels):
        _cell(store, run.id, load, lv, i, rep, placeholder)
    rm = run_model(store.get_run(run.id), store.get_results(run.id))
    assert isinstance(rm, RunModel), rm
    if load == "request_rate":  # rates from the engine's own saturation
        sat = RateModel(rm.perf, truth, IN, OUT).saturation
        levels = [(round(sat * x, 4), 1) for x in RATE_FRACTIONS]
    probes = []
    for i, (lv, rep) in enumerate(levels):
        if load == "concurrency":
            p = rm.perf.predict(truth, IN, OUT, int(lv), "bursts")
        else:
            model = RateModel(rm.perf, truth, IN, OUT)
            p = model.predict(lv)
            if not math.isfinite(p.ttft):  # near saturation: the stationary queue's median
                p.ttft = model.population(lv).quantile("ttft", 0.5)
                p.e2e = p.ttft + (OUT - 1) * p.tpot
        _cell(store, run.id, load, lv, i, rep, (p.ttft * 1000, p.tpot * 1000, p.e2e * 1000, p.out_tps))
        probes.append(Probe(level=lv, repeat=rep, requests=30, percentiles={"tpot": p.tpot * 1000}))
    cap = predict_capacity(rm.perf, truth, input_len=IN, output_len=OUT, slo=SLO, load=load).max_load
    assert cap is not None
    if finished:
        result = CapacityResult(load=load, slo=SLO, max_load=cap, probes=probes, predicted_max_load=cap * 2)  # type: ignore[arg-type]
        store.merge_run_extra(run.id, capacity=result.model_dump(mode="json"))
        store.set_status(run.id, RunStatus.completed)
    else:  # a search still under way: its probes so far, no answer
        store.merge_run_extra(run.id, capacity={"probes": [p.model_dump(mode="json") for p in probes]})
    return run.id, cap


@pytest.mark.parametrize("load", ["concurrency", "request_rate"])
def test_calibrate_from_a_stored_capacity_run(store: Store, load: str) -> None:
    run_id, truth_cap = add_capacity_run(store, load)
    rep = calibrate(store, dry_run=True)
    assert not rep.saved and len(rep.groups) == 1
    g = rep.groups[0]
    assert (g.accelerator, g.engine) == ("Xeon-GNR", "vllm-cpu")
    assert g.runs == [run_id]
    n = len(CONCURRENCY_LEVELS) if load == "concurrency" else len(RATE_FRACTIONS)
    assert g.n_points == n == len(g.cells)
    if load == "request_rate":  # every rate probe a point at its rate
        assert all(c.concurrency == 0 and c.request_rate for c in g.cells)
        assert len({c.request_rate for c in g.cells}) == n
    else:
        assert all(c.request_rate is None and c.concurrency >= 1 for c in g.cells)
    # the fit explains the probes far better than the shipped factors
    assert g.error_after["tpot_mape_pct"] < g.error_before["tpot_mape_pct"]
    assert g.error_after["tpot_mape_pct"] < 5
    # the capacity error, per run: measured vs predicted at the run, before and after the fit
    [k] = g.capacity
    assert k.run_id == run_id and k.load == load and k.measured_max_load == truth_cap
    assert k.predicted_at_run == truth_cap * 2 and k.error_at_run_pct == pytest.approx(100.0)
    assert "p90" in k.slo and k.input_len == IN and k.output_len == OUT
    assert k.predicted_before is not None and k.predicted_after is not None
    assert k.error_before_pct is not None and k.error_after_pct is not None
    assert abs(k.error_after_pct) < abs(k.error_before_pct)
    tolerance = 1.0 / truth_cap * 100 + 1e-9 if load == "concurrency" else 5.0  # a user, or 5%
    assert abs(k.error_after_pct) <= tolerance, (k.predicted_after, truth_cap)
    assert g.error_after["capacity_mape_pct"] == pytest.approx(abs(k.error_after_pct), abs=0.01)
    assert g.error_before["capacity_runs"] == 1
    data = calibration_json(rep)
    [kj] = data["groups"][0]["capacity"]
    assert kj["error_after_pct"] == pytest.approx(k.error_after_pct, abs=0.01)
    # stored: the error goes with the calibration
    saved = calibrate(store)
    assert saved.saved and saved.groups[0].saved_id
    [active] = store.active_calibrations()
    assert active["error_after"]["capacity_mape_pct"] == pytest.approx(abs(k.error_after_pct), abs=0.01)


def test_capacity_and_sweep_runs_calibrate_together(store: Store) -> None:
    """A sweep and two capacity searches on the same machine are one group; a search still under way gives its
    probes but no capacity to compare."""
    conc, _ = add_capacity_run(store, "concurrency")
    rate, _ = add_capacity_run(store, "request_rate")
    running, _ = add_capacity_run(store, "concurrency", finished=False)
    sweep = add_sweep(store, instance_type=INSTANCE, environment={})
    rep = calibrate(store, dry_run=True)
    [g] = rep.groups
    assert set(g.runs) == {conc, rate, running, sweep}
    assert {k.run_id for k in g.capacity} == {conc, rate}
    assert any(c.request_rate for c in g.cells) and any(c.run_id == sweep for c in g.cells)


def test_the_planner_calibrates_from_plain_data() -> None:
    """No store: runs and cells handed to the planner as values (what services.plan.measured_runs builds)."""
    run = make_run("r1", model=MODEL, instance_type=INSTANCE, engine="vllm-cpu")
    cells = [
        make_result(
            "r1",
            IN,
            c,
            tpot=30.0 + 2 * c,
            ttft=150.0 + 20 * c,
            total_tps=None,
            output_tps=30.0 * c,
            output_len=OUT,
        )
        for c in (1, 2, 4)
    ]
    rep = fit_measured([MeasuredRun(run=run, results=cells)])
    assert not rep.saved and rep.groups[0].saved_id is None
    assert rep.groups[0].n_points == 3 and rep.groups[0].capacity == []
    skipped = fit_measured([MeasuredRun(run=run, results=cells)], skipped=["r0: gone"])
    assert skipped.skipped == ["r0: gone"]


def test_measured_runs_reads_cells_and_request_starts(store: Store) -> None:
    run_id, _ = add_capacity_run(store, "concurrency")
    [m], unread = measured_runs(store, [run_id])
    assert not unread and m.run.id == run_id and len(m.results) == len(CONCURRENCY_LEVELS)
    assert set(m.starts) <= {r.id for r in m.results if r.concurrency > 1}


def test_plan_calibrate_cli_shows_the_capacity_error(store: Store) -> None:
    add_capacity_run(store, "request_rate")
    runner = CliRunner(env={"COLUMNS": "220"})
    res = runner.invoke(app, ["plan", "calibrate", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "Capacity at the SLO: measured vs predicted" in res.stdout and "/s" in res.stdout
    assert "capacity" in res.stdout.split("Mean absolute error")[1]
    out = runner.invoke(app, ["plan", "calibrate", "--dry-run", "--format", "json"])
    data = json.loads(out.stdout)
    [k] = data["groups"][0]["capacity"]
    assert k["load"] == "request_rate" and k["error_after_pct"] is not None
    assert any(c["request_rate"] for c in data["groups"][0]["cells"])
