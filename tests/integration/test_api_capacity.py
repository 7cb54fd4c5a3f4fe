"""Capacity through the API, against SQLite and a real PostgreSQL: a run spec with a ``capacity:`` section is
queued (and previewed) like a sweep; a bad one (unknown SLO metric, percentile outside (0, 100), max_load below
1, both sweep and capacity) is refused with what to change and nothing stored; GET /runs/{id}/capacity answers
the stored search (the answer, the knee, every probe, the price, the planner's error), its probes so far while
it runs, and a clear 404 for a run that is not a capacity search."""

from __future__ import annotations

import pytest

from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.support.api_app import api_for
from tests.support.capacity_runs import (
    knee_result,
    met_result,
    store_capacity_run,
    store_in_flight,
    unmet_result,
)

SMALL = "smollm2-135m-instruct"
LOCAL = {"settings": {"kv_cache_space_gib": 1}}
CAPACITY = {"load": "concurrency", "input_len": 128, "output_len": 32, "slo": {"tpot": 50, "ttft": 1000},
            "percentile": 90, "attainment": 0.95, "max_load": 64, "max_probes": 10}  # fmt: skip


@pytest.fixture
def api(store: Store):
    with api_for(store) as a:
        yield a


def post(api, spec: dict, **kw):
    return api.client.post("/api/v1/runs", json=spec, headers=api.auth, **kw)


def test_a_capacity_spec_is_queued_with_its_section_and_no_sweep(api) -> None:
    r = post(api, {"model": SMALL, "label": "cap", "engine": LOCAL, "capacity": CAPACITY})
    assert r.status_code == 202, r.text
    run = api.store.get_run(r.json()["id"])
    assert run.status == RunStatus.pending
    cap = run.spec["capacity"]
    assert cap["slo"] == {"tpot": 50.0, "ttft": 1000.0} and cap["load"] == "concurrency"
    assert (cap["percentile"], cap["attainment"], cap["max_load"], cap["max_probes"]) == (90, 0.95, 64, 10)
    # a knee search (no SLO) by request rate is a capacity spec too
    knee = post(api, {"model": SMALL, "engine": LOCAL, "capacity": {"load": "request_rate", "max_load": 8}})
    assert knee.status_code == 202, knee.text
    assert api.store.get_run(knee.json()["id"]).spec["capacity"]["slo"] is None
    # queued: no level measured yet, the SLO from the spec, no answer claimed
    r = api.client.get(f"/api/v1/runs/{run.id}/capacity")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["status"], body["complete"], body["probes"], body["max_load"]) == (
        "pending",
        False,
        [],
        None,
    )
    assert body["slo"] == {"targets": {"tpot": 50.0, "ttft": 1000.0}, "percentile": 90.0, "attainment": 0.95}


def test_a_capacity_spec_previews_through_the_dry_run(api) -> None:
    r = post(api, {"model": SMALL, "engine": LOCAL, "capacity": CAPACITY}, params={"dry_run": "true"})
    assert r.status_code == 200, r.text
    assert r.json()["dry_run"] is True and r.json()["runtime"] == "vllm-cpu"
    assert api.store.list_runs()[1] == 0


@pytest.mark.parametrize(
    ("capacity", "extra", "says"),
    [
        ({"slo": {"tbt": 50}}, {}, "Unknown SLO metric"),
        ({"slo": {"tpot": -5}}, {}, "positive number of milliseconds"),
        ({"slo": {"tpot": 50}, "percentile": 100}, {}, "capacity.percentile"),
        ({"slo": {"tpot": 50}, "percentile": 0}, {}, "capacity.percentile"),
        ({"slo": {"tpot": 50}, "attainment": 1.5}, {}, "capacity.attainment"),
        ({"slo": {"tpot": 50}, "max_load": 0.5}, {}, "capacity.max_load"),
        ({"slo": {"tpot": 50}, "max_probes": 1}, {}, "capacity.max_probes"),
        ({"slo": {"tpot": 50}, "request_rate": 4}, {}, "cannot be set in a capacity search"),
        ({"slo": {"tpot": 50}, "concurency": 4}, {}, "concurency"),
        ({"slo": {"tpot": 50}}, {"sweep": {"input_lens": [128]}}, "either a sweep or a capacity search"),
    ],
)
def test_bad_capacity_specs_say_what_to_change(api, capacity: dict, extra: dict, says: str) -> None:
    spec = {"model": SMALL, "engine": LOCAL, "capacity": capacity, **extra}
    for params in ({}, {"dry_run": "true"}):
        r = post(api, spec, params=params)
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert says in err["message"], err
        assert err["type"] == "ValidationError"
    assert api.store.list_runs()[1] == 0


def test_the_capacity_answer_of_a_search_that_met_its_slo(api) -> None:
    run_id = store_capacity_run(api.store, met_result())
    r = api.client.get(f"/api/v1/runs/{run_id}/capacity")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["run_id"], body["status"], body["complete"]) == (run_id, "completed", True)
    assert body["load"] == "concurrency" and body["max_load"] == 6 and body["knee"] == 8
    assert body["slo"] == {"targets": {"tpot": 50.0, "ttft": 1000.0}, "percentile": 90.0, "attainment": 0.95}
    assert body["output_tokens_per_s_at_max"] == 171.0
    assert body["usd_per_million_output_tokens"] == pytest.approx(0.98 / (171 * 3600) * 1e6)
    assert body["predicted_max_load"] == 8 and body["prediction_error_pct"] == pytest.approx(33.3)
    assert len(body["probes"]) == 8
    assert [(p["level"], p["repeat"], p["met"]) for p in body["probes"][-2:]] == [(6, 2, True), (7, 2, False)]
    assert body["probes"][3]["why"] == "p90 tpot 70.0 ms > 50 ms; p90 ttft 1500.0 ms > 1000 ms"
    # a unique prefix of the id works as everywhere else; the run's own detail still lists the cells
    assert api.client.get(f"/api/v1/runs/{run_id[:12]}/capacity").json()["run_id"] == run_id
    assert len(api.client.get(f"/api/v1/runs/{run_id}").json()["results"]) == 8


def test_a_knee_only_search_and_one_that_nothing_met(api) -> None:
    knee = api.client.get(f"/api/v1/runs/{store_capacity_run(api.store, knee_result())}/capacity").json()
    assert knee["load"] == "request_rate" and knee["slo"] is None and knee["max_load"] is None
    assert knee["knee"] == 4 and knee["prediction_error_pct"] is None
    assert [p["met"] for p in knee["probes"]] == [None] * 4 and knee["probes"][-1]["oversaturated"] is True
    unmet = api.client.get(f"/api/v1/runs/{store_capacity_run(api.store, unmet_result())}/capacity").json()
    assert unmet["max_load"] is None and unmet["complete"] is True
    assert unmet["reason"].startswith(
        "even the lowest level measured (1) misses the SLO: p90 tpot 20.0 ms > 5 ms"
    )


def test_a_search_in_flight_answers_its_probes_so_far(api) -> None:
    """A run spec's search (kind "run", not "capacity") half-way: the probes stored so far, the SLO from the
    spec, no max_load, complete False; once it stops without an answer the reason says so."""
    run_id = store_in_flight(api.store)
    body = api.client.get(f"/api/v1/runs/{run_id}/capacity").json()
    assert (body["status"], body["complete"], body["max_load"]) == ("benchmarking", False, None)
    assert body["slo"] == {"targets": {"tpot": 50.0}, "percentile": 95.0, "attainment": 0.9}
    assert [p["level"] for p in body["probes"]] == [1, 2]
    api.store.set_status(run_id, RunStatus.cancelled, error="cancelled by request")
    stopped = api.client.get(f"/api/v1/runs/{run_id}/capacity").json()
    assert stopped["complete"] is False and "stopped (cancelled) before it answered" in stopped["reason"]


def test_a_run_without_a_capacity_answer_is_a_clear_404(api) -> None:
    sweep = api.store.create_run(kind="sweep", label="plain", model=SMALL, status=RunStatus.completed)
    queued = post(api, {"model": SMALL, "engine": LOCAL, "sweep": {"input_lens": [128]}}).json()["id"]
    assert api.client.get(f"/api/v1/runs/{queued}/capacity").status_code == 404  # a queued sweep
    r = api.client.get(f"/api/v1/runs/{sweep.id}/capacity")
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["type"] == "NotFoundError" and f"Run {sweep.id} has no capacity answer" in err["message"]
    assert f"/api/v1/runs/{sweep.id}" in err["hint"]
    unknown = api.client.get("/api/v1/runs/20000101-ffffff/capacity")
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "NotFoundError"
    damaged = store_capacity_run(api.store, met_result(), extra={"capacity": {"load": "moon", "probes": []}})
    r = api.client.get(f"/api/v1/runs/{damaged}/capacity")
    assert r.status_code == 404 and "cannot be read" in r.json()["error"]["message"]


def test_the_schema_types_the_capacity_answer(api) -> None:
    schema = api.client.get("/openapi.json").json()
    op = schema["paths"]["/api/v1/runs/{run_id}/capacity"]["get"]
    ref = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    model = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    for field in ("max_load", "knee", "probes", "slo", "complete", "prediction_error_pct",
                  "usd_per_million_output_tokens"):  # fmt: skip
        assert field in model["properties"], field
    assert "404" in op["responses"]
    body = schema["components"]["schemas"]["RunSpec"]["properties"]
    assert "capacity" in body
