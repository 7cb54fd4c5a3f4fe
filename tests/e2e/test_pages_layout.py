"""The run page holds its layout at the widths people use (1024 and 1440 px): the device chart is as tall as its
figure, so the per-cell device table below it is never drawn over; screenshots of the whole page are kept."""

from __future__ import annotations

from typing import Any

import pytest

from accelbench.domain.device import DeviceKind, DeviceSample, DeviceTelemetry
from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.e2e.pages import open_tab
from tests.support.api_app import summary
from tests.support.live_server import live_server

GIB = 2**30
T0 = 1_767_000_000.0


def _device_run(store: Store) -> str:
    """A completed CPU run of four cells, each with device samples on its own clock."""
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
            s = summary(il, c).model_copy(
                update={"device_telemetry": tel, "started_at": zero + 0.2, "finished_at": zero + 3.8}
            )
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
