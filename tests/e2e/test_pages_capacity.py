"""Capacity on the pages, in a real headless Chromium (the system one): the Run form switches between a sweep
and a capacity search and posts a spec with a capacity section and no sweep, the API's refusals shown in words;
a capacity run's page shows the answer, the planner's prediction with its error, one latency-vs-throughput
curve per judged metric (the SLO target line, the chosen capacity and the knee marked) and the probe table,
for a search that met its SLO, a knee-only one by request rate, one that nothing met, and one in flight."""

from __future__ import annotations

from typing import Any

import pytest

from accelbench.domain.run import RunStatus
from tests.e2e import pages
from tests.e2e.pages import Tab
from tests.support.capacity_runs import (
    knee_result,
    met_result,
    store_capacity_run,
    store_in_flight,
    unmet_result,
)

pytestmark = pytest.mark.browser

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab


def fill_capacity_form(tab: Tab) -> None:
    p = tab.page
    p.fill("#model", "qwen2.5-7b-instruct")
    p.fill("#label", "capacity from the page")
    p.select_option("#instance", "r8g.4xlarge")
    p.check("#mode-capacity")
    p.select_option("#cap_load", "concurrency")
    p.fill("#cap_input_len", "256")
    p.fill("#cap_output_len", "64")
    p.fill("#slo_tpot", "50")
    p.fill("#slo_ttft", "1000")
    p.fill("#cap_percentile", "95")
    p.fill("#cap_attainment", "0.9")
    p.fill("#cap_max_load", "32")
    p.fill("#cap_max_probes", "8")


def test_run_form_posts_a_capacity_spec(tab: Tab) -> None:
    tab.sign_in("/run")
    p = tab.page
    assert p.is_checked("#mode-sweep") and p.locator("#sweep-fields").is_visible()
    assert not p.locator("#capacity-fields").is_visible()
    fill_capacity_form(tab)
    assert p.locator("#capacity-fields").is_visible() and not p.locator("#sweep-fields").is_visible()
    with p.expect_request(lambda r: r.method == "POST" and r.url.endswith("/api/v1/runs")) as sent:
        p.click("#submit")
    body = sent.value.post_data_json
    assert "sweep" not in body
    assert body["capacity"] == {"load": "concurrency", "endpoint": "chat", "input_len": 256, "output_len": 64,
                                "percentile": 95, "attainment": 0.9, "max_load": 32, "max_probes": 8,
                                "slo": {"ttft": 1000, "tpot": 50}}  # fmt: skip
    p.wait_for_url(f"{tab.server.url}/runs/*")
    run = tab.server.store.get_run(p.url.rsplit("/", 1)[1])
    assert run.status == RunStatus.pending and run.label == "capacity from the page"
    cap = run.spec["capacity"]
    assert cap["slo"] == {"ttft": 1000.0, "tpot": 50.0} and (cap["input_len"], cap["output_len"]) == (256, 64)
    assert (cap["percentile"], cap["attainment"], cap["max_load"], cap["max_probes"]) == (95, 0.9, 32, 8)
    assert p.inner_text("#capacity-answer") == "Queued: the search starts when the worker picks the run up."
    assert p.inner_text("#capacity").count("No level has been measured yet.") == 1
    tab.assert_clean()


def test_capacity_refusals_are_shown_in_words_and_a_knee_search_needs_no_target(tab: Tab) -> None:
    tab.sign_in("/run")
    p = tab.page
    fill_capacity_form(tab)
    box = p.locator("#run-error")
    for field, value, says in (("#cap_percentile", "100", "capacity.percentile"),
                               ("#cap_max_load", "0.5", "capacity.max_load"),
                               ("#slo_itl", "-3", "positive number of milliseconds")):  # fmt: skip
        p.fill(field, value)
        p.click("#submit")
        p.wait_for_selector("#run-error:not([hidden])")
        assert says in box.locator(".message").inner_text()
        p.fill(field, {"#cap_percentile": "95", "#cap_max_load": "32", "#slo_itl": ""}[field])
    assert tab.server.store.list_runs()[1] == 0
    # the preview of a capacity search describes the search (no sweep cells)
    p.click("#preview-button")
    p.wait_for_selector("#preview:not([hidden])")
    assert p.is_hidden("#preview-cells")
    text = p.inner_text("#preview-total")
    assert text.startswith("Capacity search by concurrency: at most 8 levels, up to 32 users, judged at")
    assert "50 ms" in text
    # no target at all: a knee search by request rate
    p.fill("#slo_tpot", "")
    p.fill("#slo_ttft", "")
    p.select_option("#cap_load", "request_rate")
    with p.expect_request(lambda r: r.method == "POST" and r.url.endswith("/api/v1/runs")) as sent:
        p.click("#submit")
    assert "slo" not in sent.value.post_data_json["capacity"]
    p.wait_for_url(f"{tab.server.url}/runs/*")
    run = tab.server.store.get_run(p.url.rsplit("/", 1)[1])
    assert run.spec["capacity"]["load"] == "request_rate" and run.spec["capacity"]["slo"] is None


def traces(tab: Tab, metric: str) -> list[dict[str, Any]]:
    tab.page.wait_for_selector(f"#chart-capacity-{metric} .main-svg")
    return tab.page.locator(f"#chart-capacity-{metric}").evaluate(
        "el => el.data.map(t => ({name: t.name, x: Array.from(t.x), y: Array.from(t.y)}))"
    )


def probe_rows(tab: Tab) -> list[dict[str, str]]:
    return tab.page.locator("#capacity-probes tbody tr").evaluate_all(
        "rs => rs.map(r => Object.assign({}, r.dataset))"
    )


def test_result_page_of_a_search_that_met_its_slo(tab: Tab) -> None:
    run_id = store_capacity_run(tab.server.store, met_result())
    tab.goto(f"/runs/{run_id}")
    p = tab.page
    answer = p.inner_text("#capacity-answer")
    assert answer.startswith("Capacity at p90 TPOT <= 50 ms, TTFT <= 1000 ms: 6 users, 171.0 output tokens/s")
    assert "$1.59 per 1M output tokens" in answer
    assert p.inner_text("#capacity-max-load") == "6 users"
    assert p.inner_text("#capacity-predicted") == "8 users"
    assert p.inner_text("#capacity-prediction-error") == "+33% against the measured 6 users"
    assert p.inner_text("#capacity-knee") == "8 users"
    # one curve per SLO metric: the probes, the target line, the chosen point and the knee
    for metric, target, chosen, knee in (("tpot", 50, 45, 70), ("ttft", 1000, 700, 1500)):
        t = {tr["name"]: tr for tr in traces(tab, metric)}
        assert set(t) == {"probes", f"SLO target {target} ms", "capacity: 6 users", "knee: 8 users"}
        assert t["probes"]["x"] == [40, 75, 130, 170, 172, 180, 181, 190]  # output tokens/s, by level
        assert set(t[f"SLO target {target} ms"]["y"]) == {target}
        assert (t["capacity: 6 users"]["x"], t["capacity: 6 users"]["y"]) == ([170], [chosen])
        assert (t["knee: 8 users"]["x"], t["knee: 8 users"]["y"]) == ([190], [knee])
        assert p.locator(f"#chart-capacity-{metric} .scatterlayer .trace").count() == 4
    assert p.locator("#chart-capacity-itl").count() == 0  # not in the SLO
    rows = probe_rows(tab)
    assert [(r["level"], r["repeat"], r["met"]) for r in rows] == [
        ("1", "1", "yes"), ("2", "1", "yes"), ("4", "1", "yes"), ("6", "1", "yes"), ("6", "2", "yes"),
        ("7", "1", "no"), ("7", "2", "no"), ("8", "1", "no")]  # fmt: skip
    assert [r["level"] for r in rows if r.get("chosen")] == ["6"]
    assert [r["level"] for r in rows if r.get("knee")] == ["8"]
    assert "p90 tpot 70.0 ms > 50 ms" in p.inner_text("#capacity-probes tr[data-level='8']")
    assert p.locator("#chart-tpot").count() == 0  # the sweep's curves are not drawn for a search
    assert p.locator("#results tbody tr").count() == 6  # one cell per level (a re-measure is a repeat)
    tab.assert_clean()


def test_result_page_of_a_knee_only_search_by_request_rate(tab: Tab) -> None:
    run_id = store_capacity_run(tab.server.store, knee_result())
    tab.goto(f"/runs/{run_id}")
    p = tab.page
    assert p.inner_text("#capacity-answer") == (
        "No SLO given: the knee (throughput stops growing) is at 4 requests/s."
    )
    assert p.inner_text("#capacity-max-load") == "-" and p.locator("#capacity-prediction").count() == 0
    for metric in ("tpot", "ttft"):
        t = {tr["name"]: tr for tr in traces(tab, metric)}
        assert set(t) == {"probes", "knee: 4 requests/s"}  # no target line, no chosen point
        assert t["knee: 4 requests/s"]["x"] == [120]
    headers = p.locator("#capacity-probes thead th").all_inner_texts()
    assert headers[0] == "rate (req/s)" and "achieved rate" in headers and "TPOT p90 (ms)" in headers
    rows = probe_rows(tab)
    assert [r["level"] for r in rows] == ["1", "2", "4", "8"] and {r["met"] for r in rows} == {"-"}
    assert "yes" in p.inner_text("#capacity-probes tr[data-level='8']")  # over-saturated
    tab.assert_clean()


def test_result_page_when_nothing_met_and_while_searching(tab: Tab) -> None:
    unmet = store_capacity_run(tab.server.store, unmet_result())
    tab.goto(f"/runs/{unmet}")
    p = tab.page
    assert p.inner_text("#capacity-answer") == (
        "No level meets p90 TPOT <= 5 ms: even the lowest level measured (1) misses the SLO: "
        "p90 tpot 20.0 ms > 5 ms"
    )
    assert p.get_attribute("#capacity", "data-state") == "none"
    t = {tr["name"]: tr for tr in traces(tab, "tpot")}
    assert set(t) == {"probes", "SLO target 5 ms"}
    assert [r["met"] for r in probe_rows(tab)] == ["no"]
    assert p.locator("#capacity-no-prediction").count() == 1
    tab.assert_clean()
    searching = store_in_flight(tab.server.store)
    tab.goto(f"/runs/{searching}")
    assert p.inner_text("#capacity-answer") == "Searching: 2 level(s) measured so far."
    t = {tr["name"]: tr for tr in traces(tab, "tpot")}
    assert set(t) == {"probes", "SLO target 50 ms"} and t["probes"]["x"] == [40, 75]
    assert p.locator("#capacity-probes thead th").all_inner_texts()[5] == "TPOT p95 (ms)"
    tab.server.store.set_status(searching, RunStatus.cancelled, error="cancelled by request")
    tab.goto(f"/runs/{searching}")
    assert p.inner_text("#capacity-answer") == (
        "The search stopped (cancelled) before it answered; 2 probe(s) were measured."
    )
    assert p.locator("#capacity-probes tbody tr").count() == 2
    # a sweep's page has no capacity section, and keeps its own curves
    sweep = pages.seed(tab.server.store)["cpu"]
    tab.goto(f"/runs/{sweep}")
    p.wait_for_selector("#chart-tpot .main-svg")
    assert p.locator("#capacity").count() == 0
    tab.assert_clean()
