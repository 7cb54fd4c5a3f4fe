"""The pages hold their layout at the widths people use (1024 and 1440 px): the run page (cells, device telemetry,
warnings), the compare page of two runs and the estimate page with a result neither scroll sideways nor draw one
block over another (``pages.layout_problems``); the device chart is as tall as its figure, so the per-cell device
table below it is never drawn over. Screenshots of each whole page are kept in the test artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelbench.domain.device import DeviceKind, DeviceSample, DeviceTelemetry
from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.e2e.conftest import ARTIFACTS_DIR
from tests.e2e.pages import assert_layout_holds, open_tab, seed
from tests.support.api_app import summary
from tests.support.live_server import live_server

GIB = 2**30
T0 = 1_767_000_000.0


def _device_run(store: Store, notes: bool = False) -> str:
    """A completed CPU run of four cells, each with device samples on its own clock (and with ``notes``, the
    caveats a real run's cells carry, shown as its warnings)."""
    run = store.create_run(kind="run", label="cpu-devices", model="smollm2-135m-instruct", engine="vllm-cpu",
                           target="local", accelerator_type="cpu")  # fmt: skip
    zero = T0
    for il in (128, 512):
        for c in (1, 4):
            samples = [
                DeviceSample(t_s=0.5 * k, device="cpu", kind=DeviceKind.cpu, util_pct=40.0 + 10 * (k % 3),
                             memory_used_bytes=(3 + 0.1 * k) * GIB)
                for k in range(8)
            ]  # fmt: skip
            tel = DeviceTelemetry.build(samples, sources=["cpu:/proc/stat"], interval_s=0.5, zero_wall=zero)
            update: dict[str, Any] = {
                "device_telemetry": tel,
                "started_at": zero + 0.2,
                "finished_at": zero + 3.8,
            }
            if notes:
                update["notes"] = [
                    "Device telemetry lacks power and memory bandwidth: no RAPL energy counter is readable here.",
                    f"The client fell behind the schedule at concurrency {c}: send times slipped by up to 40 ms.",
                ]
            s = summary(il, c).model_copy(update=update)
            store.save_result(run.id, input_len=il, concurrency=c, repeat=0, summary=s)
            zero += 5.0
    store.set_status(run.id, RunStatus.completed)
    return run.id


def _box(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not on the page"
    return dict(box)


@pytest.mark.parametrize("width", [1024, 1440])
def test_the_device_chart_never_covers_the_device_table(browser: Any, tmp_path: Any, width: int) -> None:
    from tests.e2e.test_pages_real_run import pages_artifact

    store = Store(f"sqlite:///{tmp_path / 'layout.db'}")
    run_id = _device_run(store)
    with live_server(store) as server:
        tab = open_tab(browser, server)
        page = tab.page
        page.set_viewport_size({"width": width, "height": 900})
        tab.sign_in(f"/runs/{run_id}")
        page.wait_for_selector("#chart-devices .main-svg")
        chart = _box(page, "#chart-devices")
        svg = _box(page, "#chart-devices .main-svg >> nth=0")
        table = _box(page, "#device-table")
        assert svg["y"] + svg["height"] <= chart["y"] + chart["height"] + 1, (
            svg,
            chart,
        )  # the figure fits its box
        assert chart["y"] + chart["height"] <= table["y"], (chart, table)  # and the table starts below it
        assert page.locator("#device-table tbody tr").count() == 4
        page.screenshot(path=str(pages_artifact(f"result-devices-{width}.png")), full_page=True)
        tab.assert_clean()
        page.context.close()


def _screenshot(name: str) -> Path:
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS_DIR / name


@pytest.mark.parametrize("width", [1024, 1440])
def test_the_run_page_holds_at_any_width(browser: Any, tmp_path: Any, width: int) -> None:
    store = Store(f"sqlite:///{tmp_path / 'layout.db'}")
    run_id = _device_run(store, notes=True)
    with live_server(store) as server:
        tab = open_tab(browser, server)
        page = tab.page
        page.set_viewport_size({"width": width, "height": 900})
        tab.sign_in(f"/runs/{run_id}")
        for chart in ("chart-tpot", "chart-ttft", "chart-throughput", "chart-telemetry", "chart-devices"):
            page.wait_for_selector(f"#{chart} .main-svg")
        assert page.locator("#result-warnings li").count() >= 1  # the warnings are on the page checked
        assert page.locator("#results tbody tr").count() == 4
        assert_layout_holds(page, width, _screenshot(f"layout-run-{width}.png"))
        # its 18 columns (three percentiles of four latencies) shown whole, not behind a scroll bar
        scroll, shown = page.eval_on_selector("#results", "t => [t.scrollWidth, t.parentElement.clientWidth]")
        assert scroll <= shown, (scroll, shown)
        tab.assert_clean()
        page.context.close()


@pytest.mark.parametrize("width", [1024, 1440])
def test_the_compare_page_holds_at_any_width_and_opens_with_the_verdict(
    browser: Any, tmp_path: Any, width: int
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'layout.db'}")
    ids = seed(store)
    with live_server(store) as server:
        tab = open_tab(browser, server)
        page = tab.page
        page.set_viewport_size({"width": width, "height": 900})
        tab.goto(f"/compare?runs={ids['cpu']}&runs={ids['gpu']}")
        page.wait_for_selector("#chart-cdf .main-svg")
        # the answer before the question: the findings come before the form that asked for them
        findings, form = (
            page.locator("#findings").bounding_box(),
            page.locator("#compare-form").bounding_box(),
        )
        assert findings is not None and form is not None
        assert findings["y"] < form["y"], (findings, form)
        # the CDF, 12 lines in three panels, has the width of the page, not half of it
        cdf = page.locator("#chart-cdf").bounding_box()
        main = page.locator("main").bounding_box()
        assert cdf is not None and main is not None
        assert cdf["width"] > 0.85 * main["width"], (cdf, main)
        assert_layout_holds(page, width, _screenshot(f"layout-compare-{width}.png"))
        tab.assert_clean()
        page.context.close()


@pytest.mark.parametrize("width", [1024, 1440])
def test_the_estimate_page_holds_at_any_width(browser: Any, tmp_path: Any, width: int) -> None:
    store = Store(f"sqlite:///{tmp_path / 'layout.db'}")
    with live_server(store) as server:
        tab = open_tab(browser, server)
        page = tab.page
        page.set_viewport_size({"width": width, "height": 900})
        tab.goto("/estimate?model=qwen2.5-7b-instruct&slo=tpot:40&concurrency=4&limit=20")
        page.wait_for_selector("#estimate-chart .main-svg")
        assert page.locator("#estimate > tbody > tr").count() == 20
        assert_layout_holds(page, width, _screenshot(f"layout-estimate-{width}.png"))
        tab.assert_clean()
        page.context.close()


def test_the_layout_check_sees_sideways_scrolling_spills_and_overlaps(browser: Any) -> None:
    """The check itself: each fault it is for is reported, and a page without one passes."""
    from tests.e2e.pages import layout_problems

    context = browser.new_context(viewport={"width": 1024, "height": 700})
    page = context.new_page()
    page.set_content(
        "<main style='width:600px'><h2>Heading</h2><div class='card' id='a' style='height:80px'></div>"
        "<div class='scroll' style='overflow-x:auto'><table id='wide' style='width:1500px'><tr><td>x</td></tr>"
        "</table></div><p id='p'>text</p></main>"
    )
    assert layout_problems(page) == []  # a wide table inside its scroll box is fine
    page.evaluate("document.getElementById('a').style.marginBottom = '-60px'")  # the card runs into the next
    page.evaluate("document.querySelector('.scroll').style.overflowX = 'visible'")  # the table pokes out
    problems = "\n".join(layout_problems(page))
    assert "the page scrolls sideways: 1508 px of content in a 1024 px window" in problems, problems
    assert "table#wide spills out of main" in problems, problems
    assert "div#a.card and" in problems and "overlap by" in problems, problems
    page.set_content("<main><div class='stat' style='width:60px'>p6-b200.48xlarge</div></main>")
    assert "holds" in "".join(layout_problems(page))  # text wider than its box
    context.close()


@pytest.mark.parametrize("width", [1024, 1440])
def test_every_other_page_holds_at_any_width(browser: Any, tmp_path: Any, width: int) -> None:
    """The rest of the pages over a seeded store (a CPU sweep, a GPU run, a failed and a pending run)."""
    store = Store(f"sqlite:///{tmp_path / 'layout.db'}")
    ids = seed(store)
    with live_server(store) as server:
        tab = open_tab(browser, server)
        page = tab.page
        page.set_viewport_size({"width": width, "height": 900})
        tab.sign_in("/runs")
        pages = {"dashboard": "/", "catalog": "/catalog", "instance": "/catalog/g6.xlarge", "runs": "/runs",
                 "run-form": "/run", "fleet": "/fleet", "config": "/config", "compare-empty": "/compare",
                 "run-gpu": f"/runs/{ids['gpu']}", "run-failed": f"/runs/{ids['failed']}"}  # fmt: skip
        failures = []
        for name, path in pages.items():
            tab.goto(path)
            page.wait_for_load_state("networkidle")
            try:
                assert_layout_holds(page, width, _screenshot(f"layout-{name}-{width}.png"))
            except AssertionError as e:
                failures.append(f"{path}: {e}")
        assert failures == [], "\n".join(failures)
        tab.assert_clean()
        page.context.close()
