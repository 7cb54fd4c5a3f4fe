"""The whole service end to end, in a real headless Chromium: a run created on the Run page ("local (this
machine)", vLLM CPU, the real SmolLM2 model, a tiny sweep) is queued through the API, executed by the service's
worker with the real orchestrator (engine start, answer check, sweep, teardown), and its result page shows
the measured table, the charts, the server telemetry and "CPU" as the accelerator."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from accelbench.deploy.proctree import processes_in_group
from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.e2e import pages
from tests.integration import conftest as engines
from tests.support.live_server import LiveServer, live_server

pytestmark = [pytest.mark.browser, pytest.mark.engine]

# The real engine and model (installed and prepared once per machine, shared with the integration tests).
vllm_engine, smollm2_model = engines.vllm_engine, engines.smollm2_model
sqlite_store = pages.sqlite_store


@pytest.fixture
def worker_server(sqlite_store: Store) -> Iterator[LiveServer]:
    with live_server(sqlite_store, start_worker=True) as s:
        yield s


def test_a_run_from_the_run_page_completes_on_the_real_engine(
    browser, worker_server: LiveServer, vllm_engine, smollm2_model
) -> None:
    tab = pages.open_tab(browser, worker_server)
    tab.sign_in("/run")
    p = tab.page
    p.select_option("#instance", "")  # local (this machine)
    p.fill("#model", smollm2_model.name)
    assert p.input_value("#engine") == "vllm-cpu"
    p.fill("#label", "page e2e")
    p.fill("#max_model_len", "2048")
    p.fill("#kv_cache_space_gib", "1")
    p.fill("#input_lens", "64")
    p.fill("#concurrency", "1,2")
    p.fill("#output_len", "8")
    p.fill("#prompts_per_concurrency", "2")
    p.click("#submit")
    p.wait_for_url(f"{worker_server.url}/runs/*")
    run_id = p.url.rsplit("/", 1)[1]
    store = worker_server.store
    deadline = time.monotonic() + 900
    # finished, and the worker idle again (the sweep stores its status before teardown and report files)
    while not store.get_run(run_id).status.finished or worker_server.app.state.worker.current_run_id:
        assert time.monotonic() < deadline, f"run still {store.get_run(run_id).status} after 15 minutes"
        time.sleep(2)
    run = store.get_run(run_id)
    assert run.status == RunStatus.completed, run.error
    # the page reloads itself when the run finishes; open it fresh to be sure of what it shows now
    tab.goto(f"/runs/{run_id}")
    assert p.inner_text("#run-status") == "completed"
    assert p.inner_text("#accelerator") == "CPU"
    rows = p.locator("#results tbody tr")
    assert rows.count() == 2
    headers = p.locator("#results thead th").all_inner_texts()
    for r in rows.all():
        cells = r.locator("td").all_inner_texts()
        assert cells[0] == "64" and cells[headers.index("Failed")] == "0"  # no failed request
        assert cells[headers.index("Top failure reason")] == "-"
        texts = [cells[headers.index(f"TPOT p{q} (ms)")] for q in (50, 90, 99)]
        tpot = [float(t.split()[0].replace(",", "")) for t in texts]
        assert 0 < tpot[0] <= tpot[1] <= tpot[2]  # a real TPOT and its tails
        assert "+-" in texts[0]  # with its 95% interval
    # the engine ran here: the CPU was sampled during each cell, and the page shows it per cell
    devices = p.locator("#device-table tbody tr")
    assert devices.count() >= 2, p.inner_text("#devices")
    assert all(r.locator("td").nth(1).inner_text() == "cpu" for r in devices.all())
    p.wait_for_selector("#chart-tpot .main-svg")
    p.wait_for_selector("#chart-telemetry .main-svg")  # vLLM's /metrics was scraped
    assert p.locator("#findings li").count() >= 1
    assert "vllm" in p.inner_text("#environment").lower() or run.engine_version
    p.screenshot(path=str(pages_artifact("result-real-run.png")))
    results = store.get_results(run_id)
    assert sum(r.completed for r in results) == 2 + 4 and sum(r.failed for r in results) == 0
    # nothing of the engine is left running
    pid = (run.extra.get("deployment") or {}).get("pid")
    assert pid, run.extra
    assert processes_in_group(int(pid)) == []  # the engine led its own process group
    tab.assert_clean()
    tab.page.context.close()


def pages_artifact(name: str):
    from tests.e2e.conftest import ARTIFACTS_DIR

    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS_DIR / name
