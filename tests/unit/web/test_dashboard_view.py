"""The dashboard's charts against a real store: one throughput line per recent completed run at the
input length it measured most, named by model and where it ran (``report/attribution.py``), twins told apart;
one row per recent capacity answer with its SLO, answer, output tok/s, $/1M output tokens and $/h; the bars
of those that met their SLO; nothing for an empty store."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from accelbench.domain.capacity import CapacityResult
from accelbench.domain.results import CellStatus
from accelbench.domain.run import RunStatus
from accelbench.store import Store
from accelbench.web.dashboard_view import THROUGHPUT_RUNS, dashboard_view
from tests.support.api_app import summary
from tests.support.capacity_runs import (
    knee_result,
    met_result,
    store_capacity_run,
    store_in_flight,
    unmet_result,
)

_ids = itertools.count(1)


def _run_id() -> str:
    # increasing ids: the store lists runs newest first, with the id breaking a tie in created_at
    return f"20261130-{next(_ids):06d}"


def store_sweep(store: Store, cells: dict[tuple[int, int], list[float]], *,
                status: RunStatus = RunStatus.completed, **fields: Any) -> str:  # fmt: skip
    """A run with one stored result per (input length, concurrency) x repeat, each with the output tok/s given."""
    fields = {"label": "sweep", "model": "qwen2.5-7b-instruct", "engine": "vllm", **fields}
    run = store.create_run(kind="run", run_id=_run_id(), **fields)
    for (input_len, conc), rates in cells.items():
        for repeat, rate in enumerate(rates):
            s = summary(input_len, conc).model_copy(update={"output_throughput": rate})
            store.save_result(run.id, input_len=input_len, concurrency=conc, repeat=repeat, summary=s)
    store.set_status(run.id, status)
    return run.id


GPU: dict[str, Any] = {"instance_type": "g6.2xlarge", "accelerator_type": "gpu", "accelerator_name": "L4",
       "accelerator_count": 1, "target": "kubernetes"}  # fmt: skip


def test_an_empty_store_draws_nothing(store: Store) -> None:
    assert dashboard_view(store) == {"throughput": [], "capacity": [], "capacity_bars": []}


def test_one_line_per_completed_run_named_by_model_and_where_it_ran(store: Store) -> None:
    gpu = store_sweep(store, {(128, 1): [60.0], (128, 2): [90.0], (512, 1): [100.0], (512, 2): [180.0],
                              (512, 4): [290.0, 310.0]}, **GPU)  # fmt: skip
    cpu = store_sweep(store, {(256, 1): [12.5], (256, 2): [20.25]}, label="cpu", model="smollm2-135m-instruct",
                      engine="vllm-cpu", accelerator_type="cpu", target="local")  # fmt: skip
    # an old endpoint run that stored its --tokenizer directory as the model: named by its served name
    endpoint = store_sweep(store, {(128, 8): [400.0]}, label="remote", model="/models/tok", served_model="qwen-big",
                           target="endpoint", base_url="http://10.1.2.3:8000",
                           spec={"endpoint": {"base_url": "http://10.1.2.3:8000", "tokenizer": "/models/tok"}})  # fmt: skip
    store_sweep(store, {(128, 1): [100.0]}, status=RunStatus.failed, **GPU)  # not completed: no line
    dead = store.create_run(kind="run", run_id=_run_id(), model="qwen2.5-7b-instruct", **GPU)
    store.save_result(dead.id, input_len=128, concurrency=1, repeat=0,
                      summary=summary(128, 1).model_copy(update={"output_throughput": None}),
                      status=CellStatus.failed)  # fmt: skip
    store.set_status(dead.id, RunStatus.completed)  # completed, but no cell has a throughput: no line

    lines = dashboard_view(store)["throughput"]
    assert [line["run"] for line in lines] == [endpoint, cpu, gpu]  # newest first
    by_run = {line["run"]: line for line in lines}
    g = by_run[gpu]
    assert g["name"] == "qwen2.5-7b-instruct on 1 x L4 (g6.2xlarge)"
    # input 512 has three concurrencies, 128 two: the line is at 512; repeats are averaged
    assert (g["input_len"], g["other_inputs"]) == (512, [128])
    assert (g["x"], g["y"]) == ([1, 2, 4], [100.0, 180.0, 300.0])
    assert g["href"] == f"/runs/{gpu}"
    c = by_run[cpu]
    assert c["name"] == "smollm2-135m-instruct on CPU (this machine)"
    assert (c["input_len"], c["other_inputs"], c["x"], c["y"]) == (256, [], [1, 2], [12.5, 20.25])
    assert by_run[endpoint]["name"] == "qwen-big on remote endpoint (10.1.2.3:8000)"


def test_a_tie_between_input_lengths_takes_the_shortest(store: Store) -> None:
    run = store_sweep(
        store, {(1024, 1): [50.0], (1024, 2): [80.0], (256, 1): [70.0], (256, 2): [120.0]}, **GPU
    )
    (line,) = dashboard_view(store)["throughput"]
    assert (line["run"], line["input_len"], line["other_inputs"], line["y"]) == (
        run,
        256,
        [1024],
        [70.0, 120.0],
    )


def test_twins_are_told_apart_by_label_else_by_run_id(store: Store) -> None:
    a = store_sweep(store, {(128, 1): [10.0]}, label="tp1", **GPU)
    b = store_sweep(store, {(128, 1): [20.0]}, label="tp2", **GPU)
    lines = dashboard_view(store)["throughput"]
    base = "qwen2.5-7b-instruct on 1 x L4 (g6.2xlarge)"
    assert [(x["run"], x["name"]) for x in lines] == [(b, f"{base} · tp2"), (a, f"{base} · tp1")]
    c = store_sweep(store, {(128, 1): [30.0]}, label="tp1", **GPU)  # now two runs share the label "tp1"
    names = [x["name"] for x in dashboard_view(store)["throughput"]]
    assert names == [f"{base} · {c}", f"{base} · {b}", f"{base} · {a}"]


def test_only_the_newest_runs_are_drawn(store: Store) -> None:
    ids = [
        store_sweep(store, {(128, 1): [float(i + 1)]}, label=f"r{i}", **GPU)
        for i in range(THROUGHPUT_RUNS + 2)
    ]
    lines = dashboard_view(store)["throughput"]
    assert [line["run"] for line in lines] == ids[::-1][:THROUGHPUT_RUNS]


def test_capacity_rows_and_the_bars_of_the_answers_that_met_their_slo(store: Store) -> None:
    sweep = store_sweep(store, {(128, 1): [100.0]}, **GPU)
    met = store_capacity_run(store, met_result(), label="met")
    knee = store_capacity_run(store, knee_result(), label="knee")
    unmet = store_capacity_run(store, unmet_result(), label="unmet")
    store_in_flight(store)  # still searching: no answer to show yet
    cheaper = met_result().model_copy(update={"output_tokens_per_s_at_max": 200.0, "hourly_usd": 0.72,
                                              "usd_per_million_output_tokens": 1.0})  # fmt: skip
    met2 = store_capacity_run(store, cheaper, label="met again")

    view = dashboard_view(store)
    # capacity searches are no throughput lines
    assert [line["run"] for line in view["throughput"]] == [sweep]
    rows = {r["run"]: r for r in view["capacity"]}
    assert [r["run"] for r in view["capacity"]] == [met2, unmet, knee, met]
    name = "smollm2-135m-instruct on CPU (m8i.2xlarge)"
    r = rows[met]
    assert r["name"] == f"{name} · met"
    assert (r["slo"], r["met"], r["answer"]) == ("p90 TPOT <= 50 ms, TTFT <= 1000 ms", True, "6 users")
    assert r["output_tps"] == 171.0 and r["output_tps_text"] == "171.0"
    assert r["usd_per_million"] == pytest.approx(0.98 / (171.0 * 3600) * 1e6)
    assert (r["usd_per_million_text"], r["hourly_text"], r["href"]) == ("$1.59", "$0.980/h", f"/runs/{met}")
    k = rows[knee]
    assert (k["slo"], k["met"], k["answer"]) == (
        "none (the knee)",
        False,
        "no SLO; the knee is at 4 requests/s",
    )
    assert (k["output_tps"], k["output_tps_text"], k["usd_per_million_text"]) == (None, "-", "-")
    u = rows[unmet]
    assert (u["slo"], u["met"], u["answer"], u["output_tps"]) == ("p90 TPOT <= 5 ms", False, "no level meets it",
                                                                  None)  # fmt: skip
    assert (rows[met2]["output_tps"], rows[met2]["usd_per_million_text"], rows[met2]["hourly_text"]) == (
        200.0, "$1.00", "$0.720/h")  # fmt: skip

    bars = view["capacity_bars"]
    # the met answers only, oldest first (a horizontal bar chart draws the first at the bottom)
    assert [(b["run"], b["name"], b["y"]) for b in bars] == [(met, f"{name} · met", 171.0),
                                                             (met2, f"{name} · met again", 200.0)]  # fmt: skip
    assert bars[0]["text"] == "6 users at p90 TPOT <= 50 ms, TTFT <= 1000 ms, $1.59 per 1M output tokens"
    assert bars[1]["href"] == f"/runs/{met2}"


def test_a_run_spec_capacity_search_is_a_capacity_answer_not_a_line(store: Store) -> None:
    spec = {"capacity": {"load": "concurrency", "slo": {"tpot": 50.0, "ttft": 1000.0}}}
    run = store_capacity_run(store, met_result(), kind="run", label="spec", spec=spec)
    unpriced: CapacityResult = met_result().model_copy(
        update={
            "hourly_usd": None,
            "usd_per_million_output_tokens": None,
            "usd_per_million_total_tokens": None,
        }
    )
    free = store_capacity_run(store, unpriced, kind="run", label="unpriced", spec=spec)
    view = dashboard_view(store)
    assert view["throughput"] == []
    assert [(r["run"], r["answer"]) for r in view["capacity"]] == [(free, "6 users"), (run, "6 users")]
    f = view["capacity"][0]
    assert (f["usd_per_million"], f["usd_per_million_text"], f["hourly_text"]) == (None, "-", "-")
    # a bar without a price says nothing of one
    assert view["capacity_bars"][-1]["text"] == "6 users at p90 TPOT <= 50 ms, TTFT <= 1000 ms"
