"""The dashboard's charts in a real headless Chromium (the system one): the recent throughput chart (one line per
completed run, named by model and where it ran, a click on a point opening the run), the capacity section (a
bar per search that met its SLO, a table row per answer); a store with no completed run says how to get data
and draws nothing, without loading plotly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.e2e import pages
from tests.e2e.pages import Tab
from tests.support.api_app import summary
from tests.support.capacity_runs import met_result, store_capacity_run, unmet_result

pytestmark = pytest.mark.browser

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab

CAPACITY_NAME = "smollm2-135m-instruct on CPU (m8i.2xlarge)"


def store_sweep(store: Store, rates: dict[int, float], **fields: Any) -> str:
    """A completed run at input 128 with the output tok/s given per concurrency."""
    run = store.create_run(kind="run", **fields)
    for conc, rate in rates.items():
        s = summary(128, conc).model_copy(update={"output_throughput": rate})
        store.save_result(run.id, input_len=128, concurrency=conc, repeat=0, summary=s)
    store.set_status(run.id, RunStatus.completed)
    return run.id


def seed_charts(store: Store) -> dict[str, str]:
    cpu = store_sweep(store, {1: 20.0, 2: 35.0, 4: 50.0}, label="cpu", model="smollm2-135m-instruct",
                      engine="vllm-cpu", accelerator_type="cpu", target="local")  # fmt: skip
    gpu = store_sweep(store, {1: 110.0, 2: 200.0, 4: 350.0, 8: 520.0}, label="l4", model="qwen2.5-7b-instruct",
                      engine="vllm", instance_type="g6.2xlarge", accelerator_type="gpu", accelerator_name="L4",
                      accelerator_count=1, target="kubernetes")  # fmt: skip
    met = store_capacity_run(store, met_result(), label="met")
    unmet = store_capacity_run(store, unmet_result(), label="unmet")
    return {"cpu": cpu, "gpu": gpu, "met": met, "unmet": unmet}


def traces(tab: Tab, chart: str) -> list[dict[str, Any]]:
    tab.page.wait_for_selector(f"#{chart} .main-svg")
    result: list[dict[str, Any]] = tab.page.locator(f"#{chart}").evaluate(
        "el => el.data.map(t => ({type: t.type, name: t.name, x: Array.from(t.x), y: Array.from(t.y),"
        " customdata: Array.from(t.customdata), hovertemplate: t.hovertemplate}))"
    )
    return result


def test_the_dashboard_draws_recent_throughput_and_capacity(tab: Tab, artifacts_dir: Path) -> None:
    ids = seed_charts(tab.server.store)
    tab.goto("/")
    p = tab.page
    lines = traces(tab, "throughput-chart")
    assert [(t["type"], t["name"], t["x"], t["y"]) for t in lines] == [
        ("scatter", "qwen2.5-7b-instruct on 1 x L4 (g6.2xlarge)", [1, 2, 4, 8], [110.0, 200.0, 350.0, 520.0]),
        ("scatter", "smollm2-135m-instruct on CPU (this machine)", [1, 2, 4], [20.0, 35.0, 50.0]),
    ]  # fmt: skip
    assert set(lines[0]["customdata"]) == {f"/runs/{ids['gpu']}"}
    assert "output tok/s" in lines[0]["hovertemplate"] and "input 128 tokens" in lines[0]["hovertemplate"]
    # the legend names every line, and each run is linked under the chart
    legend = p.locator("#throughput-chart .legend .legendtext").evaluate_all(
        "ts => ts.map(t => t.textContent)"
    )
    assert legend == [lines[0]["name"], lines[1]["name"]]
    assert p.locator("#throughput-runs a").evaluate_all("as => as.map(a => a.getAttribute('href'))") == [
        f"/runs/{ids['gpu']}", f"/runs/{ids['cpu']}"]  # fmt: skip

    bars = traces(tab, "capacity-chart")
    assert [(t["type"], t["y"], t["x"]) for t in bars] == [("bar", [f"{CAPACITY_NAME} · met"], [171.0])]
    table = p.locator("#capacity-answers tbody tr")
    assert table.count() == 2
    unmet, met = (
        p.locator(f"#capacity-answers tr[data-run='{ids[k]}'] td").all_inner_texts() for k in ("unmet", "met")
    )
    assert met == [f"{CAPACITY_NAME} · met", "p90 TPOT <= 50 ms, TTFT <= 1000 ms", "6 users", "171.0", "$1.59",
                   "$0.980/h", ids["met"]]  # fmt: skip
    assert unmet[1:6] == ["p90 TPOT <= 5 ms", "no level meets it", "-", "-", "-"]  # unpriced, as stored
    assert p.locator("#charts-empty").count() == 0
    p.screenshot(path=str(artifacts_dir / "dashboard-charts.png"), full_page=True)

    # a click on a point of the GPU line opens that run's page
    point = p.locator("#throughput-chart .scatterlayer .trace").first.locator("path.point").nth(2)
    box = point.bounding_box()
    assert box is not None
    p.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    p.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    p.wait_for_url(f"{tab.server.url}/runs/{ids['gpu']}")
    tab.assert_clean()


def test_an_empty_store_says_how_to_get_data_and_draws_nothing(tab: Tab) -> None:
    tab.goto("/")
    p = tab.page
    text = p.inner_text("#charts-empty")
    assert "No completed runs to chart yet" in text and "accelbench demo" in text
    assert p.locator("#charts-empty a[href='/run']").count() == 1
    for absent in (
        "#throughput-chart",
        "#capacity-chart",
        "#capacity-answers",
        "#dashboard-data",
        ".main-svg",
    ):
        assert p.locator(absent).count() == 0, absent
    assert p.evaluate("typeof window.Plotly") == "undefined"  # nothing to draw: plotly is not loaded
    tab.assert_clean()


def test_capacity_answers_that_met_no_slo_give_a_table_and_no_chart(tab: Tab) -> None:
    unmet = store_capacity_run(tab.server.store, unmet_result(), label="unmet")
    tab.goto("/")
    p = tab.page
    assert "No completed sweep to draw yet" in p.inner_text("#throughput-empty")
    assert "No recent search met its SLO" in p.inner_text("#capacity-none-met")
    assert p.locator("#capacity-answers tbody tr").evaluate_all("rs => rs.map(r => r.dataset.run)") == [unmet]
    assert p.locator("#throughput-chart, #capacity-chart").count() == 0
    assert p.evaluate("typeof window.Plotly") == "undefined"
    tab.assert_clean()


def test_a_lone_line_is_named_and_markup_in_a_name_is_shown_as_typed(tab: Tab) -> None:
    run = store_sweep(tab.server.store, {1: 5.0, 2: 8.0}, label="odd", model="m <b>bold</b> & co", target="local",
                      accelerator_type="cpu")  # fmt: skip
    tab.goto("/")
    p = tab.page
    p.wait_for_selector("#throughput-chart .main-svg")
    legend = p.locator("#throughput-chart .legend .legendtext")
    assert legend.evaluate_all("ts => ts.map(t => t.textContent)") == [
        "m <b>bold</b> & co on CPU (this machine)"
    ]
    assert p.locator("#throughput-chart .legend b").count() == 0  # plotly did not read it as its own markup
    assert (
        p.inner_text(f"#throughput-runs li[data-run='{run}'] a") == "m <b>bold</b> & co on CPU (this machine)"
    )
    assert p.inner_text("#capacity-empty").startswith("No capacity search has completed yet")
    tab.assert_clean()
