"""An instance is "measured" for an estimate only where the same model was measured on it: the
name rule (plan/measured.py), the store's query, and the estimate rows the CLI and the API share."""

from __future__ import annotations

from accelbench.domain.plan_query import EstimateQuery, PlanQuery
from accelbench.domain.run import RunStatus
from accelbench.modelspec import load_model_spec
from accelbench.plan import estimate
from accelbench.plan.context import PlanContext
from accelbench.plan.measured import attribution, same_model
from accelbench.services.planning import estimate_json, estimate_result, plan_context
from accelbench.store import Store
from tests.support.api_app import summary

QWEN = "qwen2.5-7b-instruct"
LLAMA = "llama-3.1-8b-instruct"


def test_names_match_by_preset_hub_id_and_path_without_case() -> None:
    qwen = load_model_spec(QWEN)
    assert same_model(qwen, ["qwen2.5-7b-instruct"])
    assert same_model(qwen, ["Qwen/Qwen2.5-7B-Instruct"])
    assert same_model(qwen, ["/models/qwen2.5-7b-instruct/"])
    assert same_model(qwen, ["whatever-alias", "Qwen2.5-7B-Instruct"])  # the served name counts too
    assert not same_model(qwen, ["qwen2.5-1.5b-instruct"])
    assert not same_model(qwen, ["meta-llama/Llama-3.1-8B-Instruct"])
    assert not same_model(qwen, [])


def test_attribution_names_the_other_models_once() -> None:
    qwen = load_model_spec(QWEN)
    runs = {"g6.2xlarge": [("meta-llama/Llama-3.1-8B-Instruct",), ("/models/llama-3.1-8b-instruct",)],
            "g6.4xlarge": [(QWEN,), ("smollm2-135m-instruct",)]}  # fmt: skip
    other = attribution(qwen, "g6.2xlarge", runs)
    assert not other.measured and other.other_models == ["meta-llama/Llama-3.1-8B-Instruct"]
    both = attribution(qwen, "g6.4xlarge", runs)
    assert both.measured and both.other_models == ["smollm2-135m-instruct"]
    assert attribution(qwen, "g5.xlarge", runs) == attribution(qwen, "g5.xlarge", None)


def test_an_estimate_is_measured_only_for_the_model_measured() -> None:
    runs = {"g6.2xlarge": [(LLAMA,)]}
    qwen = estimate(
        QWEN,
        "g6.2xlarge",
        PlanQuery(input_len=512, output_len=128, concurrency=4),
        PlanContext(measured_runs=runs),
    )
    assert qwen.has_benchmark_data is False and qwen.measured_other_models == [LLAMA]
    assert f"the store's runs there are of {LLAMA}" in " ".join(qwen.notes)
    llama = estimate(
        LLAMA,
        "g6.2xlarge",
        PlanQuery(input_len=512, output_len=128, concurrency=4),
        PlanContext(measured_runs=runs),
    )
    assert llama.has_benchmark_data is True and llama.measured_other_models == []
    assert f"Measured: the store has runs of {LLAMA} on g6.2xlarge." in llama.notes


def test_the_store_counts_runs_that_measured_something(store: Store) -> None:
    done = store.create_run(kind="run", model=LLAMA, served_model="llama", instance_type="g6.2xlarge",
                            accelerator_type="gpu")  # fmt: skip
    store.set_status(done.id, RunStatus.completed)
    cut = store.create_run(kind="run", model="smollm2-135m-instruct", instance_type="g6.2xlarge",
                           accelerator_type="gpu")  # fmt: skip
    store.save_result(cut.id, input_len=128, concurrency=1, repeat=0, summary=summary(128, 1, tpot=9.0))
    store.set_status(cut.id, RunStatus.interrupted)
    failed = store.create_run(kind="run", model=QWEN, instance_type="g6.2xlarge", accelerator_type="gpu")
    store.set_status(failed.id, RunStatus.failed, error="out of memory")
    store.create_run(kind="run", model=QWEN, instance_type="g6.4xlarge", accelerator_type="gpu")  # pending
    measured = store.measured_models()
    assert sorted(measured) == ["g6.2xlarge"]
    assert sorted(measured["g6.2xlarge"]) == [(LLAMA, "llama"), ("smollm2-135m-instruct",)]


def test_the_cli_and_the_api_read_the_same_rows(store: Store) -> None:
    run = store.create_run(kind="run", model=LLAMA, instance_type="g6.2xlarge", accelerator_type="gpu")
    store.set_status(run.id, RunStatus.completed)
    assert plan_context(store).measured_runs == {"g6.2xlarge": [(LLAMA,)]}
    query = EstimateQuery(model=QWEN, accelerator_type="gpu", limit=500)
    table = estimate_json(
        estimate_result(store, query), query
    )  # what the API, the page and --format json give
    row = next(r for r in table["rows"] if r["instance"] == "g6.2xlarge")
    assert row["has_benchmark_data"] is False and row["measured_other_models"] == [LLAMA]
    assert not any(r["has_benchmark_data"] for r in table["rows"])
    own = estimate_json(estimate_result(store, query.model_copy(update={"model": LLAMA})), query)
    assert [r["instance"] for r in own["rows"] if r["has_benchmark_data"]] == ["g6.2xlarge"]
