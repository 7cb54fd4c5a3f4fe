"""Dashboard, Catalog, Runs, Result detail and Compare pages in a real headless Chromium (the system one):
what each shows, the catalog chips, the charts drawn, the CPU accelerator shown as "CPU", downloads, no
console error and no request leaving the server."""

from __future__ import annotations

import pytest

from tests.e2e import pages
from tests.e2e.pages import Tab, seed

# The page fixtures, made visible to this module's tests.
sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab

pytestmark = pytest.mark.browser


def test_dashboard(tab: Tab) -> None:
    ids = seed(tab.server.store)
    tab.goto("/")
    p = tab.page
    assert p.inner_text("#stat-total") == "4"
    assert p.inner_text("#stat-completed") == "2"
    assert p.inner_text("#stat-inflight") == "1"
    assert p.inner_text("#stat-failed") == "1"
    rows = p.locator("#recent-runs tbody tr")
    assert rows.count() == 4
    cpu_row = p.locator(f"#recent-runs tr[data-run='{ids['cpu']}']")
    assert "CPU" in cpu_row.inner_text() and "this machine" in cpu_row.inner_text()
    assert "1 x L4" in p.locator(f"#recent-runs tr[data-run='{ids['gpu']}']").inner_text()
    cpu_row.locator("a").first.click()
    p.wait_for_url(f"{tab.server.url}/runs/{ids['cpu']}")
    tab.assert_clean()


def test_catalog_chips(tab: Tab) -> None:
    tab.goto("/catalog")
    p = tab.page
    rows = p.locator("#catalog tbody tr")
    total = rows.count()
    assert total > 50
    counts = {}
    for tier, label in (("cpu", "CPU"), ("gpu", "GPU"), ("neuron", "Neuron")):
        p.click(f".chip[data-tier='{tier}']")
        visible = p.locator("#catalog tbody tr:not([hidden])")
        counts[tier] = visible.count()
        assert counts[tier] > 0
        assert set(visible.locator("td:nth-child(2)").all_inner_texts()) == {label}
        assert p.get_attribute(f".chip[data-tier='{tier}']", "aria-pressed") == "true"
        assert p.url.endswith(f"/catalog?accelerator_type={tier}")
        assert p.inner_text("#catalog-count") == f"{counts[tier]} of {total} instance types"
    assert sum(counts.values()) == total
    # CPU rows name their generation and ISA; memory is host memory.
    r8g = p.locator("#catalog tbody tr", has_text="r8g.4xlarge").first
    assert "Graviton4" in r8g.inner_text()
    p.click(".chip[data-tier='all']")
    assert p.locator("#catalog tbody tr:not([hidden])").count() == total
    # the chip links work without script too
    tab.goto("/catalog?accelerator_type=neuron")
    assert p.locator("#catalog tbody tr:not([hidden])").count() == counts["neuron"]
    tab.assert_clean()


def test_runs_list_filters_cancel_and_delete(tab: Tab) -> None:
    ids = seed(tab.server.store)
    tab.sign_in("/runs")
    p = tab.page
    assert p.locator("#runs tbody tr").count() == 4
    p.select_option("select[name=status]", "completed")
    p.click("form.filters button[type=submit]")
    p.wait_for_url("**/runs?status=completed*")
    assert {r for r in p.locator("#runs tbody tr").evaluate_all("rs => rs.map(r => r.dataset.run)")} == {
        ids["cpu"], ids["gpu"]}  # fmt: skip
    tab.goto("/runs?accelerator_type=cpu")
    assert p.locator("#runs tbody tr").count() == 3
    tab.goto("/runs")
    asked: list[str] = []
    p.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))  # cancelling asks first; "no" keeps it
    p.click(f"button[data-action=cancel][data-run='{ids['pending']}']")
    assert asked and "has not started" in asked[0]
    assert tab.server.store.get_run(ids["pending"]).status.value == "pending"
    p.on("dialog", lambda d: d.accept())
    p.click(f"button[data-action=cancel][data-run='{ids['pending']}']")
    p.wait_for_selector(f"tr[data-run='{ids['pending']}'][data-status='cancelled']")
    p.click(f"button[data-action=delete][data-run='{ids['failed']}']")
    p.locator(f"tr[data-run='{ids['failed']}']").wait_for(state="detached")
    assert tab.server.store.list_runs()[1] == 3
    tab.assert_clean()


def test_runs_actions_without_sign_in_say_how(tab: Tab) -> None:
    ids = seed(tab.server.store)
    tab.goto("/runs")
    tab.page.on("dialog", lambda d: d.accept())
    tab.page.click(f"button[data-action=cancel][data-run='{ids['pending']}']")
    box = tab.page.locator("#action-error")
    box.wait_for(state="visible")
    assert "bearer token" in box.inner_text() and "Sign in" in box.inner_text()
    assert tab.server.store.get_run(ids["pending"]).status.value == "pending"


def test_result_detail_cpu_run(tab: Tab) -> None:
    ids = seed(tab.server.store)
    tab.goto(f"/runs/{ids['cpu']}")
    p = tab.page
    assert p.inner_text("#accelerator") == "CPU"
    assert p.inner_text("#run-status") == "completed"
    assert p.locator("#results tbody tr").count() == 6
    first = p.locator("#results tbody tr").first.locator("td").all_inner_texts()
    headers = p.locator("#results thead th").all_inner_texts()
    for metric in ("TTFT", "TPOT", "ITL", "E2E"):  # the tails beside every median, p50/p90/p99 by default
        assert [h for h in headers if h.startswith(metric + " ")] == [
            f"{metric} p{q} (ms)" for q in (50, 90, 99)
        ]
    assert headers[-1] == "Top failure reason" and first[-1] == "-"
    assert (
        first[:2] == ["128", "1"] and first[headers.index("TPOT p50 (ms)")] == "29.00"
    )  # 25 + 3x1 + 128/128
    assert "Latencies at p50, p90, p99" in p.inner_text("#results-note")
    assert "No device telemetry" in p.inner_text("#no-devices")
    for chart in ("#chart-tpot", "#chart-ttft", "#chart-throughput", "#chart-telemetry"):
        p.wait_for_selector(f"{chart} .main-svg")
    assert p.locator("#chart-tpot .scatterlayer .trace").count() == 2  # one line per input length
    findings = p.locator("#findings li").all_inner_texts()
    assert findings and any("TPOT" in f for f in findings)
    assert "Test CPU 9000" in p.inner_text("#environment")
    csv = p.request.get(tab.server.url + p.get_attribute("a[href$='results.csv']", "href"))
    assert csv.ok and csv.text().startswith("run_id,input_len,concurrency")
    report = p.request.get(tab.server.url + f"/api/v1/runs/{ids['cpu']}/report")
    assert report.ok and "<html" in report.text().lower()
    tab.page.screenshot(path=str(_artifact("result-cpu.png")))
    tab.assert_clean()


def test_result_detail_gpu_and_failed_runs(tab: Tab) -> None:
    ids = seed(tab.server.store)
    tab.goto(f"/runs/{ids['gpu']}")
    assert tab.page.inner_text("#accelerator") == "1 x L4"
    tab.goto(f"/runs/{ids['failed']}")
    assert "out of memory" in tab.page.inner_text("#run-error")
    assert tab.page.locator("#results").count() == 0
    resp = tab.goto("/runs/20000101-ffffff")
    assert resp.status == 404 and "No run" in tab.page.inner_text(".alert.error")


def test_result_detail_opens_with_the_headline(tab: Tab) -> None:
    from accelbench.report.compare_runs import compare_runs
    from accelbench.report.headline import headline_for
    from accelbench.report.tables import aggregate_results

    ids = seed(tab.server.store)
    store = tab.server.store
    run = store.get_run(ids["cpu"])
    results = store.get_results(run.id)
    cmp = compare_runs(store, [run.id], min_runs=1)
    expected = headline_for(store, cmp, aggregate_results(results), results, [run])[0]
    tab.goto(f"/runs/{ids['cpu']}")
    p = tab.page
    assert p.locator("#headline").is_visible()
    assert p.inner_text("#headline-title") == expected.title
    assert expected.title.startswith("Best: input ") and "(no SLO known)" in expected.title
    assert p.locator("#headline-lines li").all_inner_texts() == expected.lines
    # the first thing under the page's title, seen without scrolling, above the summary, the table, the charts
    p.wait_for_selector("#chart-tpot .main-svg")
    at = p.evaluate(
        """() => ({
            next: document.querySelector('h1').nextElementSibling.id,
            tops: ['headline', 'run-summary', 'results', 'chart-tpot']
                .map(id => document.getElementById(id).getBoundingClientRect().top),
            height: window.innerHeight,
        })"""
    )
    assert at["next"] == "headline", at
    assert at["tops"] == sorted(at["tops"]) and 0 < at["tops"][0] < at["height"] / 4, at
    p.screenshot(path=str(_artifact("result-headline.png")))  # the viewport: the top of the page
    tab.assert_clean()


def test_compare(tab: Tab) -> None:
    ids = seed(tab.server.store)
    tab.goto("/compare")
    p = tab.page
    p.check(f"input[name=runs][value='{ids['cpu']}']")
    p.check(f"input[name=runs][value='{ids['gpu']}']")
    p.click("#compare-form button[type=submit]")
    p.wait_for_selector("#comparison")
    assert p.locator("#comparison tbody tr").count() == 12  # 6 cells x 2 runs
    findings = p.locator("#findings li").all_inner_texts()
    assert any("faster" in f or "x" in f for f in findings)
    csv = p.request.get(tab.server.url + p.get_attribute("#compare-csv", "href"))
    assert csv.ok and csv.text().startswith("#")
    tab.goto(f"/compare?runs={ids['cpu']}")
    assert "at least two" in p.inner_text(".alert.error")
    tab.assert_clean()


def _artifact(name: str):
    from tests.e2e.conftest import ARTIFACTS_DIR

    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS_DIR / name


def test_api_docs_render_offline(tab: Tab) -> None:
    tab.goto("/docs")
    p = tab.page
    p.wait_for_selector(".opblock-summary-path")
    paths = set(p.locator(".opblock-summary-path").all_inner_texts())
    assert {"/api/v1/runs", "/api/v1/estimate", "/api/v1/config/tool-versions", "/api/v1/health"} <= {
        x.replace("\u200b", "") for x in paths
    }
    assert tab.offsite == []  # Swagger UI comes from the server itself, not a CDN
