"""A run in flight on its page, in a real headless Chromium: the phase in words (never an engine log
line), the time so far and the time left, the engine's log kept in its own collapsed block, the page following the
run without a reload, and a Cancel button that asks first and says what cancelling does."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.domain.run import RunStatus
from tests.e2e import pages
from tests.e2e.pages import Tab
from tests.support.api_app import summary

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab

pytestmark = pytest.mark.browser

LOG_LINE = "WARNING 12-02 12:00:01 [worker.py:88] prefix cache load failure: rebuilding it"


def _running_run(tab: Tab) -> str:
    store = tab.server.store
    prediction = {
        "duration_s": 480.0,
        "cells": [
            {"input_len": 128, "concurrency": c, "repeats": 1, "predicted_s": 120.0} for c in (1, 2, 4, 8)
        ],
        "notes": ["load only: the engine's start-up and the model's download are not included"],
    }
    run = store.create_run(kind="run", label="in-flight", model="smollm2-135m-instruct", engine="vllm-cpu",
                           target="local", accelerator_type="cpu", spec={"sweep": {"repeats": 1}},
                           extra={"sweep_prediction": prediction})  # fmt: skip
    store.set_status(run.id, RunStatus.benchmarking)
    store.save_result(run.id, input_len=128, concurrency=1, repeat=0, summary=summary(128, 1))
    store.update_run(run.id, progress={"phase": "measuring", "cells_total": 4, "cells_done": 1,
                                       "current": {"input_len": 128, "concurrency": 2, "repeat": 0},
                                       "detail": LOG_LINE})  # fmt: skip
    return run.id


def test_a_running_run_says_its_phase_and_time_and_follows_the_run(tab: Tab, artifacts_dir: Path) -> None:
    run_id = _running_run(tab)
    tab.sign_in(f"/runs/{run_id}")
    p = tab.page
    assert p.inner_text("#run-phase") == "Benchmarking cell 2 of 4 (input 128, concurrency 2)"
    assert p.inner_text("#run-elapsed").startswith("running for ")
    # three cells of 120 s predicted are left; the one measured took 2 s, so the prediction is scaled down
    assert p.inner_text("#run-remaining") == "less than a minute left"
    expected = p.inner_text("#run-expected")
    assert "predicted to take about 8 minutes in all" in expected and "scaled by the 1 cell(s)" in expected
    assert LOG_LINE not in p.inner_text("#run-live")  # a log line is never the status ...
    assert p.locator("#engine-log").is_visible() and not p.locator("#engine-log-lines").is_visible()
    p.click("#engine-log summary")  # ... it is the collapsed engine log
    assert LOG_LINE in p.inner_text("#engine-log-lines")

    asked: list[str] = []
    p.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    p.click("button[data-action=cancel]")
    assert asked and "torn down" in asked[0] and "cells already measured stay stored" in asked[0]
    assert tab.server.store.get_run(run_id).status == RunStatus.benchmarking  # "no" cancels nothing

    # the page follows the run: the next cell's phase and log line arrive without a reload
    tab.server.store.update_run(run_id, progress={"phase": "measuring", "cells_total": 4, "cells_done": 2,
                                                  "current": {"input_len": 128, "concurrency": 4, "repeat": 0},
                                                  "detail": "INFO engine step 1200"})  # fmt: skip
    p.wait_for_function(
        "() => document.getElementById('run-phase').textContent.includes('cell 3 of 4')", timeout=15_000
    )
    assert "INFO engine step 1200" in p.inner_text("#engine-log-lines")
    assert LOG_LINE in p.inner_text("#engine-log-lines")  # the earlier line is kept
    p.screenshot(path=str(artifacts_dir / "run-progress.png"))

    runs = tab.goto("/runs")
    assert runs is not None and runs.ok
    row = p.locator(f"tr[data-run='{run_id}'] .run-phase").inner_text()
    assert row.startswith("Benchmarking cell 3 of 4 (input 128, concurrency 4) · ") and LOG_LINE not in row
    tab.assert_clean()


def test_the_result_page_shows_the_tails_asked_for_and_the_devices_with_each_cells_window(
    tab: Tab, artifacts_dir: Path
) -> None:
    """The tails (?percentiles=) and the device telemetry on the result page: the devices' chart
    with a band per cell, the per-cell device table with output tokens per joule, the sources this machine lacked;
    the server /metrics chart banded the same way."""
    from accelbench.domain.device import DeviceKind, DeviceSample, DeviceTelemetry

    store = tab.server.store
    run = store.create_run(kind="run", label="devices", model="smollm2-135m-instruct", engine="vllm-cpu",
                           target="local", accelerator_type="cpu")  # fmt: skip
    t0 = 1_767_000_000.0
    for i, c in enumerate((1, 4)):
        zero = t0 + 10.0 * i
        samples = [
            DeviceSample(t_s=t, device="cpu", kind=DeviceKind.cpu, util_pct=50.0 + 10 * c, power_w=100.0 + c,
                         energy_j=(100.0 + c) * t, memory_used_bytes=2 * 2**30)
            for t in (0.5, 1.0, 1.5, 2.0)
        ]  # fmt: skip
        tel = DeviceTelemetry.build(
            samples, sources=["cpu:/proc/stat", "cpu:RAPL"], missing=["memory bandwidth: no uncore PMU"],
            interval_s=0.5, zero_wall=zero,
        )  # fmt: skip
        base = summary(128, c)
        scrapes = [x.model_copy(update={"wall": zero + x.t_s}) for x in base.telemetry_samples]  # one clock
        s = base.model_copy(update={"started_at": zero + 0.1, "finished_at": zero + 2.1, "device_telemetry": tel,
                                    "telemetry_samples": scrapes})  # fmt: skip
        store.save_result(run.id, input_len=128, concurrency=c, repeat=0, summary=s)
    store.set_status(run.id, RunStatus.completed)
    tab.goto(f"/runs/{run.id}?percentiles=50,95")
    p = tab.page
    headers = p.locator("#results thead th").all_inner_texts()
    assert [h for h in headers if h.startswith("TPOT ")] == ["TPOT p50 (ms)", "TPOT p95 (ms)"]
    rows = p.locator("#device-table tbody tr")
    assert rows.count() == 2
    cells = rows.first.locator("td").all_inner_texts()
    assert cells[:2] == ["in 128 / c 1 / r1", "cpu"] and cells[2] == "60%"
    tpj = cells[p.locator("#device-table thead th").all_inner_texts().index("out tok/J")]
    assert tpj not in ("", "-") and float(tpj) > 0  # energy known: tokens per joule stated
    assert "no uncore PMU" in p.inner_text("#device-missing")
    p.wait_for_selector("#chart-devices .main-svg")
    shapes = p.evaluate("() => document.getElementById('chart-devices').layout.shapes.length")
    assert shapes == 2  # one band per cell
    bands = p.evaluate(
        "() => document.getElementById('chart-telemetry').layout.shapes.map(s => [s.x0, s.x1])"
    )
    assert len(bands) == 2 and 0 <= bands[0][0] < bands[0][1] < bands[1][0] < 20  # seconds into the run
    device_x = p.evaluate("() => document.getElementById('chart-devices').data[0].x")
    assert min(device_x) >= 0 and max(device_x) < 20
    p.locator("#devices").screenshot(path=str(artifacts_dir / "result-devices.png"))
    bad = p.request.get(f"{tab.server.url}/runs/{run.id}?percentiles=42")  # not navigated: no console error
    assert bad.status == 400 and "Percentile &#39;42&#39; is not one accelbench stores" in bad.text()
    tab.assert_clean()
