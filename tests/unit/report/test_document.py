"""What a report gathers: per-request latencies and telemetry from the store, the planner's estimates."""

from __future__ import annotations

import pytest

from accelbench.domain.plan_query import PlanQuery
from accelbench.domain.run import EngineSettings
from accelbench.modelspec import load_model_spec
from accelbench.plan import estimate, estimate_local
from accelbench.report.compare_runs import build_comparison
from accelbench.report.document import predicted_vs_measured
from accelbench.report.files import load_report
from accelbench.store.repo import Store
from tests.support.report_data import make_result, make_run, make_summary, run_data

ENV = {
    "cpu": {
        "model": "AMD EPYC 9R14",
        "arch": "x86_64",
        "flags": ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni"],
        "usable_cpus": 2,
        "logical_cpus": 2,
        "max_mhz": 3700.0,
    },
    "memory": {"total_gib": 24.0},
}


def test_predictions_match_the_planner_for_each_cell() -> None:
    gpu = make_run("ra", label="gpu", model="qwen2.5-7b-instruct", instance_type="g6.xlarge", engine="vllm")
    cpu = make_run(
        "rb", label="cpu", model="smollm2-135m-instruct", engine="vllm-cpu", environment=ENV,
        spec={"engine": {"name": "vllm-cpu", "settings": {"kv_cache_space_gib": 1}}},
    )  # fmt: skip
    runs = [
        run_data(gpu, [make_result("ra", 128, c, tpot=20.0 + c, ttft=40.0, output_len=64) for c in (1, 8)]),
        run_data(cpu, [make_result("rb", 128, 1, tpot=27.0, ttft=200.0, output_len=32)]),
    ]
    cmp = build_comparison(runs)
    preds, notes = predicted_vs_measured(runs, cmp, None)
    assert [(p.run_id, p.concurrency, p.metric) for p in preds] == [
        ("ra", 1, "TTFT p50 (ms)"), ("ra", 1, "TPOT p50 (ms)"), ("ra", 1, "output tok/s"),
        ("ra", 8, "TTFT p50 (ms)"), ("ra", 8, "TPOT p50 (ms)"), ("ra", 8, "output tok/s"),
        ("rb", 1, "TTFT p50 (ms)"), ("rb", 1, "TPOT p50 (ms)"), ("rb", 1, "output tok/s"),
    ]  # fmt: skip
    direct = estimate(
        "qwen2.5-7b-instruct",
        "g6.xlarge",
        PlanQuery(input_len=128, output_len=64, concurrency=8, engine="vllm"),
    )
    p8 = next(p for p in preds if p.run_id == "ra" and p.concurrency == 8 and p.metric == "TPOT p50 (ms)")
    assert p8.predicted == pytest.approx(direct.tpot_ms) and p8.measured == 28.0
    assert p8.error_pct == pytest.approx((28.0 / direct.tpot_ms - 1) * 100)
    local = estimate_local(
        load_model_spec("smollm2-135m-instruct"),
        PlanQuery(
            input_len=128,
            output_len=32,
            concurrency=1,
            engine="vllm-cpu",
            engine_settings=EngineSettings(kv_cache_space_gib=1),
        ),
        environment=ENV,
    )
    pb = next(p for p in preds if p.run_id == "rb" and p.metric == "TTFT p50 (ms)")
    assert pb.predicted == pytest.approx(local.ttft_ms) and pb.measured == 200.0
    from accelbench.plan.measured_error import error_sentence

    # each uncalibrated run's note quotes the planner's measured error for its tier (or says there is none)
    assert notes == [
        "gpu: estimated for g6.xlarge with the planner's default efficiency factors. "
        + str(error_sentence("gpu")),
        "cpu: estimated for the machine recorded with the run with the planner's default efficiency factors. "
        + str(error_sentence("cpu")),
    ]
    assert "Measured error of this model on published GPU measurements" in notes[0]


def test_no_estimate_without_model_or_machine() -> None:
    runs = [
        run_data(make_run("r1", label="nomodel", instance_type="g6.xlarge"), [make_result("r1", 128, 1)]),
        run_data(make_run("r2", label="nomachine", model="qwen2.5-7b-instruct"), [make_result("r2", 128, 1)]),
        run_data(make_run("r3", label="unknown", model="org/not-a-model", instance_type="g6.xlarge"),
                 [make_result("r3", 128, 1)]),
    ]  # fmt: skip
    preds, notes = predicted_vs_measured(runs, build_comparison(runs), None)
    assert preds == []
    assert notes[0] == "No estimate for nomodel: the run does not record its model."
    assert notes[1] == "No estimate for nomachine: neither an instance type nor a captured machine."
    assert notes[2].startswith(
        "No estimate for unknown: the planner cannot read model 'org/not-a-model' offline:"
    )


def test_load_report_reads_records_and_telemetry(store: Store) -> None:
    run = store.create_run(kind="sweep", label="solo", model="m")
    for rep in range(2):
        store.save_result(
            run.id, input_len=128, concurrency=2, repeat=rep,
            summary=make_summary(128, 2, tpot_ms=20.0, ttft_ms=100.0, requests=6, failed=1,
                                 telemetry_start=1000.0 + 100 * rep),
        )  # fmt: skip
    data = load_report(store, [run.id])
    (cell,) = data.latencies
    # 6 successful requests per repeat, the failed ones left out
    assert len(cell.ttft_ms) == len(cell.e2e_ms) == len(cell.tpot_ms) == 12
    records = [r for res in store.get_results(run.id) for r in store.get_request_records(res.id) if r.success]
    assert sorted(cell.ttft_ms) == pytest.approx(sorted(r.ttft_s * 1000 for r in records))
    (tel,) = data.telemetry
    assert tel.t_s[0] == 0.0 and tel.t_s == sorted(tel.t_s)
    assert tel.t_s[-1] == pytest.approx(100.0 + max(t for t in tel.t_s if t < 100))
    assert tel.has("running") and tel.has("waiting") and tel.has("kv_cache_pct")
    assert data.prediction_notes == ["No estimate for solo: neither an instance type nor a captured machine."]
