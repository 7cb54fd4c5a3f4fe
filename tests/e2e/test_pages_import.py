"""The Import page in a real headless Chromium: a real GuideLLM result file (and vLLM's own) uploaded from the
form becomes a run whose page says what was imported in the CLI's words; a bad file is refused beside the file
field, naming it, what was expected and what was found, and nothing is stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import pages
from tests.e2e.pages import Tab

pytestmark = pytest.mark.browser

sqlite_store, server, tab = pages.sqlite_store, pages.server, pages.tab

DATA = Path(__file__).resolve().parents[1] / "data"


def test_import_a_guidellm_file_then_open_the_run(tab: Tab, artifacts_dir: Path) -> None:
    tab.sign_in("/runs")
    p = tab.page
    p.click("#import-link")  # the runs page links the import page
    p.wait_for_url(tab.server.url + "/import")
    assert p.locator("nav a.active").inner_text() == "Import"
    tools = p.locator("#tool option").evaluate_all("os => os.map(o => o.value)")
    assert tools[0] == "vllm-bench"
    assert {"guidellm", "aiperf", "inference-perf", "genai-bench", "llm-d-report"} <= set(tools)
    p.select_option("#tool", "guidellm")
    assert "GuideLLM" in p.inner_text("#files-expected")
    p.set_input_files("#files", str(DATA / "guidellm" / "benchmarks.json"))
    p.fill("#label", "guidellm sweep")
    p.click("#import-submit")
    p.wait_for_url(f"{tab.server.url}/runs/*")
    run_id = p.url.rsplit("/", 1)[1]
    run = tab.server.store.get_run(run_id)
    assert (run.kind, run.label, run.extra["files"]) == ("import", "guidellm sweep", ["benchmarks.json"])
    summary = p.inner_text("#imported-summary")
    assert summary.startswith(f"Imported 1 file into run {run_id} (guidellm sweep): input ")
    figures = p.inner_text("#imported-figures")
    assert figures.startswith("Imported figures: ")
    assert "time_per_output_token_ms (ms), kept under the tool's name, not directly comparable:" in figures
    assert p.locator("#results tbody tr").count() == len(tab.server.store.get_results(run_id)) > 0
    p.screenshot(path=str(artifacts_dir / "import-run.png"), full_page=True)
    tab.assert_clean()


def test_vllm_result_files_import_from_the_page(tab: Tab) -> None:
    tab.sign_in("/import")
    p = tab.page
    files = sorted((DATA / "vllm_bench").glob("*.json"))
    p.set_input_files("#files", [str(f) for f in files])  # vllm-bench is the first choice; label left empty
    p.click("#import-submit")
    p.wait_for_url(f"{tab.server.url}/runs/*")
    run = tab.server.store.get_run(p.url.rsplit("/", 1)[1])
    assert run.label == "vllm-bench: " + ", ".join(f.name for f in files)
    assert p.inner_text("#imported-summary").startswith(f"Imported {len(files)} files into run {run.id}")
    tab.assert_clean()


def test_a_bad_file_is_refused_beside_the_file_field_and_nothing_is_stored(
    tab: Tab, tmp_path: Path, artifacts_dir: Path
) -> None:
    bad = tmp_path / "stage_1_lifecycle_metrics.json"
    bad.write_text("{not json")
    tab.sign_in("/import?tool=inference-perf")
    p = tab.page
    assert p.input_value("#tool") == "inference-perf"
    p.set_input_files("#files", [str(DATA / "inference_perf" / "stage_0_lifecycle_metrics.json"), str(bad)])
    p.fill("#label", "half")
    p.click("#import-submit")
    p.wait_for_selector("#files-error:not([hidden])")
    said = p.inner_text("#files-error")
    assert said.startswith("stage_1_lifecycle_metrics.json: expected ") and "not JSON" in said
    assert str(tmp_path) not in said and "accelbench-import-" not in said  # the name as uploaded
    assert "Nothing was imported" in said
    assert p.locator("#files").get_attribute("aria-invalid") == "true"
    label = p.locator("label", has=p.locator("#files"))
    assert said in label.inner_text()  # beside the file field, inside its label
    assert p.url == f"{tab.server.url}/import?tool=inference-perf" and p.input_value("#label") == "half"
    assert tab.server.store.list_runs()[1] == 0
    p.screenshot(path=str(artifacts_dir / "import-refused.png"), full_page=True)
    # another tool's file: what was expected and what was found, the earlier refusal replaced
    p.select_option("#tool", "aiperf")
    p.set_input_files("#files", str(DATA / "guidellm" / "benchmarks.json"))
    p.click("#import-submit")
    p.wait_for_function(
        "() => document.getElementById('files-error').textContent.startsWith('benchmarks.json')"
    )
    said = p.inner_text("#files-error")
    assert (
        said.startswith("benchmarks.json: expected AIPerf statistics") and "found an object with keys" in said
    )
    assert tab.server.store.list_runs()[1] == 0
    # an unknown tool in the address is said beside the tool field
    tab.goto("/import?tool=guidelm")
    assert "Tool 'guidelm' is not one accelbench imports" in p.inner_text("#tool-error")
