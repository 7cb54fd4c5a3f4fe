"""Run, Estimate, Configuration and Login pages in a real headless Chromium (the system one): the run form's
tier logic (framework from DEFAULT_RUNTIME, GPU-only fields hidden AND cleared, CPU entries with vCPUs and
memory, a local target), queuing a run, guard errors shown in words, the ranked estimate, tool versions."""

from __future__ import annotations

import pytest

from accelbench.domain.instance_types import AcceleratorType
from accelbench.runtimes.runtime import DEFAULT_RUNTIME
from tests.e2e import pages
from tests.e2e.pages import Tab

pytestmark = pytest.mark.browser

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab


def gpu_fields_visible(tab: Tab) -> bool:
    return tab.page.locator("#gpu-only").is_visible()


def test_run_form_follows_the_instance_tier(tab: Tab) -> None:
    tab.sign_in("/run")
    p = tab.page
    groups = p.locator("#instance optgroup").evaluate_all("gs => gs.map(g => g.label)")
    assert groups == ["Local", "GPU", "Neuron", "CPU"]
    cpu_labels = p.locator("#instance optgroup[label=CPU] option").all_inner_texts()
    assert cpu_labels and all("vCPU" in t and "GiB" in t for t in cpu_labels)
    assert any(t.startswith("m8i.2xlarge — 8 vCPU, 32 GiB") for t in cpu_labels)
    # local (this machine) is selected first: CPU runtime, target fixed to local
    assert p.input_value("#instance") == ""
    assert p.input_value("#engine") == DEFAULT_RUNTIME[AcceleratorType.cpu]
    assert p.is_disabled("#target") and p.input_value("#target") == "local"
    assert not gpu_fields_visible(tab)
    # a GPU instance: its default runtime, GPU fields shown; fill them
    p.select_option("#instance", "g6.2xlarge")
    assert p.input_value("#engine") == DEFAULT_RUNTIME[AcceleratorType.gpu] == "vllm"
    assert gpu_fields_visible(tab) and not p.is_disabled("#target")
    p.fill("#gpu_memory_utilization", "0.8")
    p.select_option("#kv_cache_dtype", "fp8")
    p.select_option("#deployment_mode", "distributed")
    # Neuron
    p.select_option("#instance", "inf2.8xlarge")
    assert p.input_value("#engine") == DEFAULT_RUNTIME[AcceleratorType.neuron] == "vllm-neuron"
    assert not gpu_fields_visible(tab)
    # a CPU instance: GPU fields hidden AND cleared, and they stay cleared when going back to GPU
    p.select_option("#instance", "r8g.4xlarge")
    assert p.input_value("#engine") == "vllm-cpu"
    engines = p.locator("#engine option").all_inner_texts()
    assert "vllm" not in engines and "vllm-cpu" in engines  # only runtimes that serve CPU
    assert not gpu_fields_visible(tab)
    assert p.input_value("#gpu_memory_utilization") == ""
    assert p.input_value("#kv_cache_dtype") == "" and p.input_value("#deployment_mode") == "single"
    p.select_option("#instance", "g6.2xlarge")
    assert p.input_value("#gpu_memory_utilization") == "" and p.input_value("#kv_cache_dtype") == ""
    tab.assert_clean()


def test_queue_a_run_from_the_page(tab: Tab) -> None:
    tab.sign_in("/run")
    p = tab.page
    p.fill("#model", "qwen2.5-7b-instruct")
    p.fill("#label", "from the page")
    p.select_option("#instance", "g6.2xlarge")
    p.fill("#gpu_memory_utilization", "0.85")
    p.select_option("#kv_cache_dtype", "fp8")
    p.select_option("#instance", "r8g.4xlarge")  # a CPU instance after all: GPU values must not be sent
    p.fill("#input_lens", "128, 256")
    p.fill("#concurrency", "1,2")
    p.fill("#output_len", "16")
    p.click("#submit")
    p.wait_for_url(f"{tab.server.url}/runs/*")
    run_id = p.url.rsplit("/", 1)[1]
    assert p.inner_text("#run-status") == "pending" and p.inner_text("#accelerator") == "CPU"
    run = tab.server.store.get_run(run_id)
    assert (run.label, run.instance_type, run.engine, run.target) == (
        "from the page",
        "r8g.4xlarge",
        "vllm-cpu",
        "kubernetes",
    )
    settings = run.spec["engine"]["settings"]
    assert settings["gpu_memory_utilization"] is None and settings["kv_cache_dtype"] is None
    assert run.spec["sweep"]["input_lens"] == [128, 256] and run.spec["sweep"]["concurrency"] == [1, 2]
    tab.assert_clean()


def test_a_secret_needs_a_worker_to_reach(tab: Tab) -> None:
    """This server runs without a worker: a token typed into the form is refused, never stored."""
    tab.sign_in("/run")
    p = tab.page
    p.fill("#hf_token", "hf_page_secret_value_123")
    p.click("#submit")
    box = p.locator("#run-error")
    box.wait_for(state="visible")
    assert "never stored" in box.inner_text()
    assert tab.server.store.list_runs()[1] == 0


def test_guard_errors_are_shown_in_words(tab: Tab) -> None:
    tab.sign_in("/run")
    p = tab.page
    p.fill("#model", "qwen2.5-7b-instruct")
    p.select_option("#instance", "r8g.4xlarge")
    p.fill("#tensor_parallel_size", "2")
    p.click("#submit")
    box = p.locator("#run-error")
    box.wait_for(state="visible")
    assert "NUMA" in box.inner_text() and "tensor_parallel_size" in box.inner_text()
    assert tab.server.store.list_runs()[1] == 0
    p.fill("#tensor_parallel_size", "")
    p.fill("#concurrency", "1, x")
    p.click("#submit")
    assert "Concurrency: write whole numbers" in box.inner_text()


def test_queuing_needs_a_sign_in(tab: Tab) -> None:
    tab.goto("/run")
    p = tab.page
    p.fill("#model", "smollm2-135m-instruct")
    p.click("#submit")
    box = p.locator("#run-error")
    box.wait_for(state="visible")
    assert "bearer token" in box.inner_text()
    assert p.locator("#run-error a[href^='/login']").count() == 1


def test_estimate_page_ranks_cpu_only(tab: Tab) -> None:
    tab.goto("/estimate")
    p = tab.page
    p.fill("#model", "qwen2.5-7b-instruct")
    p.select_option("#accelerator_type", "cpu")
    p.fill("input[name=concurrency]", "4")
    p.click("#estimate-form button[type=submit]")
    p.wait_for_selector("#estimate tbody tr")
    rows = p.locator("#estimate tbody tr")
    assert rows.count() > 10
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.tier)")) == {"cpu"}
    feasible = p.locator("#estimate tbody tr[data-feasible=yes]")
    costs = [
        float(t.replace("$", "").replace(",", ""))
        for t in feasible.locator("td:nth-child(13)").all_inner_texts()
        if t != "-"
    ]
    assert costs and costs == sorted(costs)  # ranked cheapest first
    assert "fit natively" in p.inner_text("#estimate-summary")
    tab.goto("/estimate?model=qwen-nope")
    assert "Did you mean" in p.inner_text(".alert.error")
    tab.assert_clean()


def test_configuration_page_sets_versions_and_shows_the_audit(
    tab: Tab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELBENCH_TOOL_SGLANG", "0.9.9")
    tab.sign_in("/config")
    p = tab.page
    assert p.inner_text("#versions tr[data-key=sglang] .value") == "0.9.9"
    assert "env" in p.inner_text("#versions tr[data-key=sglang]")
    p.fill("#versions tr[data-key=vllm-cpu] input", "0.33.1")
    p.click("#save-versions")
    p.locator("#config-ok").wait_for(state="visible")
    p.wait_for_selector("#audit tbody tr")
    assert p.inner_text("#versions tr[data-key=vllm-cpu] .value") == "0.33.1"
    assert "store" in p.inner_text("#versions tr[data-key=vllm-cpu]")
    first = p.locator("#audit tbody tr").first.locator("td").all_inner_texts()
    assert first[1:] == ["vllm-cpu", "", "0.33.1", "api-token", "api"]
    tab.assert_clean()  # before the refused update below, whose 400 the console reports
    p.fill("#versions tr[data-key=vllm] input", "not a version!")
    p.click("#save-versions")
    # the refusal is said beside the row's field, not in a banner above the table
    p.locator("#version-vllm-error").wait_for(state="visible")
    assert "not a version" in p.inner_text("#version-vllm-error")
    assert p.get_attribute("#versions tr[data-key=vllm] input", "aria-invalid") == "true"
    assert p.locator("#config-error").is_hidden()


def test_read_auth_sends_pages_to_the_sign_in(browser, sqlite_store) -> None:
    from tests.support.live_server import live_server

    with live_server(sqlite_store, read_auth=True) as srv:
        t = pages.open_tab(browser, srv)
        t.goto("/runs")
        assert t.page.url == f"{srv.url}/login?next=/runs"
        t.page.fill("#token", "wrong")
        t.page.click("#login-form button[type=submit]")
        assert "not accepted" in t.page.inner_text(".alert.error")
        t.page.fill("#token", srv.token)
        t.page.click("#login-form button[type=submit]")
        t.page.wait_for_url(f"{srv.url}/runs")
        assert "signed in as api-token" in t.page.inner_text("header")
        t.page.click("header button:has-text('Sign out')")
        t.page.wait_for_url(f"{srv.url}/login?next=/")
        t.page.context.close()


def test_preview_shows_the_dry_run_and_stores_nothing(tab: Tab) -> None:
    """The Preview button answers what the API's dry run answers: runtime, exact command, cells."""
    tab.sign_in("/run")
    p = tab.page
    p.fill("#model", "qwen2.5-7b-instruct")
    p.select_option("#instance", "g6.2xlarge")
    p.fill("#input_lens", "128, 256")
    p.fill("#concurrency", "1,2")
    before = tab.server.store.list_runs()[1]
    p.click("#preview-button")
    p.wait_for_selector("#preview:not([hidden])")
    assert "vllm" in p.inner_text("#preview-summary") and "g6.2xlarge" in p.inner_text("#preview-summary")
    assert "--max-model-len" in p.inner_text("#preview-command")
    assert p.locator("#preview-cells tbody tr").count() == 4
    assert "min of load" in p.inner_text("#preview-total") and "/h" in p.inner_text("#preview-total")
    assert tab.server.store.list_runs()[1] == before  # nothing stored
    tab.assert_clean()
    # a refusal is shown in words, as for a queued run (the browser logs the 400 itself)
    p.fill("#input_lens", "40000")
    p.click("#preview-button")
    p.wait_for_selector("#run-error:not([hidden])")
    assert "context" in p.inner_text("#run-error .message")
    assert p.is_hidden("#preview")
