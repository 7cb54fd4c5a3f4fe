"""The Compare page in a real headless Chromium: runs compared in the order ticked, the baseline
picked among them, the report's charts drawn with data, only comparable runs offered, no console error and no
request leaving the server."""

from __future__ import annotations

import re

import pytest

from tests.e2e import pages
from tests.e2e.pages import Tab, seed

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab

pytestmark = pytest.mark.browser


def test_compare_in_tick_order_with_a_picked_baseline_and_charts(tab: Tab, artifacts_dir) -> None:
    ids = seed(tab.server.store)
    tab.goto("/compare")
    p = tab.page
    # the failed and the pending run are not offered, and the page says why
    offered = p.locator("#compare-pick input[name=runs]").evaluate_all("bs => bs.map(b => b.value)")
    assert set(offered) == {ids["cpu"], ids["gpu"]}
    withheld = p.locator("#compare-withheld li")
    assert withheld.count() == 2
    assert "failed: Engine exited: out of memory" in p.text_content(
        f"#compare-withheld li[data-run='{ids['failed']}']"
    )
    assert "still pending" in p.text_content(f"#compare-withheld li[data-run='{ids['pending']}']")

    # tick the CPU run first (the page lists newest first: the GPU run is above it)
    p.check(f"input[name=runs][value='{ids['cpu']}']")
    p.check(f"input[name=runs][value='{ids['gpu']}']")
    options = p.locator("#compare-baseline option").evaluate_all("os => os.map(o => o.value)")
    assert options == [ids["cpu"], ids["gpu"]]  # tick order
    assert p.input_value("#compare-baseline") == ids["cpu"]  # the first ticked by default
    p.click("#compare-form button[type=submit]")
    p.wait_for_selector("#comparison")
    assert re.search(rf"runs={ids['cpu']}&runs={ids['gpu']}", p.url)
    assert "cpu-sweep" in p.inner_text("#compare-baseline-note")
    findings = " ".join(p.locator("#findings li").all_inner_texts())
    assert "gpu-l4 decodes" in findings and "faster than the baseline cpu-sweep" in findings
    assert not re.search(r"(?<![\d.])0\.\d+x", p.inner_text("main"))

    # pick the GPU run as the baseline instead
    p.select_option("#compare-baseline", ids["gpu"])
    p.click("#compare-form button[type=submit]")
    p.wait_for_url(re.compile(rf"baseline={ids['gpu']}"))
    p.wait_for_selector("#comparison")
    assert "gpu-l4" in p.inner_text("#compare-baseline-note")
    findings = " ".join(p.locator("#findings li").all_inner_texts())
    assert "cpu-sweep decodes" in findings and "slower than the baseline gpu-l4" in findings
    headers = p.locator("#comparison thead th").all_inner_texts()
    for h in (
        "TTFT p50 ms",
        "TTFT p90 ms",
        "TPOT p99 ms",
        "decode speed vs baseline",
        "throughput vs baseline",
    ):
        assert h in headers, h
    gpu_rows = p.locator("#comparison tbody tr", has_text="gpu-l4")
    assert all(r.endswith("baseline\tbaseline") for r in gpu_rows.all_inner_texts())
    assert p.locator("#comparison tbody tr").count() == 12  # 6 cells x 2 runs

    # the report's charts, drawn with data
    for chart in ("chart-tpot", "chart-throughput", "chart-ttft"):
        p.wait_for_selector(f"#{chart}.js-plotly-plot .main-svg")
        traces = p.evaluate(f"document.getElementById('{chart}').data.length")
        assert traces == 4, chart  # 2 runs x 2 input lengths
        points = p.evaluate(f"document.getElementById('{chart}').data.map(t => t.y.length)")
        assert points == [3, 3, 3, 3]
    assert p.locator("#compare-charts .js-plotly-plot").count() >= 3
    p.screenshot(path=str(artifacts_dir / "compare-charts.png"), full_page=True)

    # percentiles from the address; fewer than two runs is said plainly
    tab.goto(f"/compare?runs={ids['cpu']}&runs={ids['gpu']}&percentiles=50,95")
    headers = p.locator("#comparison thead th").all_inner_texts()
    assert "TPOT p95 ms" in headers and "TPOT p90 ms" not in headers
    tab.goto(f"/compare?runs={ids['cpu']}")
    assert "at least two" in p.inner_text(".alert.error")
    tab.goto(f"/compare?runs={ids['cpu']}&runs={ids['failed']}")
    assert f"Run {ids['failed']} cannot be compared: failed" in p.inner_text(".alert.error")
    tab.assert_clean()
