"""The result page opens with the answer: ``result_context``'s headline is ``report/headline.py``'s
``headline_for`` of the run (its own SLO when it has one), shown above the run's summary, tables and charts;
a run without results has none."""

from __future__ import annotations

import re

from accelbench.domain.run import RunStatus
from accelbench.report.compare_runs import compare_runs
from accelbench.report.headline import headline_for
from accelbench.report.tables import aggregate_results
from accelbench.store import Store
from accelbench.web.views import result_context
from tests.support.api_app import api_for
from tests.support.report_data import make_summary


def _store_sweep(store: Store, *, spec: dict[str, object] | None = None) -> str:
    """A completed run: input 128 at concurrency 1, 2 and 4, TPOT 20, 30 and 50 ms (p50), 12 requests each."""
    run = store.create_run(kind="run", label="cpu-sweep", model="smol", engine="vllm-cpu", spec=spec or {})
    for conc, tpot in ((1, 20.0), (2, 30.0), (4, 50.0)):
        store.save_result(
            run.id, input_len=128, concurrency=conc, repeat=0,
            summary=make_summary(128, conc, tpot_ms=tpot, ttft_ms=100.0, telemetry_start=None),
        )  # fmt: skip
    store.set_status(run.id, RunStatus.completed)
    return run.id


def _expected(store: Store, run_id: str) -> object:
    run = store.get_run(run_id)
    results = store.get_results(run_id)
    cmp = compare_runs(store, [run_id], min_runs=1)
    return headline_for(store, cmp, aggregate_results(results), results, [run])[0]


def test_the_headline_is_headline_for_s(store: Store) -> None:
    run_id = _store_sweep(store)
    ctx = result_context(store, run_id)
    headline = ctx["headline"]
    assert headline is not None and headline == _expected(store, run_id)
    assert headline.title.startswith("Best: input 128, concurrency 4:")
    assert "no SLO known" in headline.title


def test_the_run_s_own_slo_judges_the_cells(store: Store) -> None:
    # the sweep's goodput targets are the run's SLO: TPOT <= 40 ms, met at concurrency 1 and 2 (per request)
    run_id = _store_sweep(store, spec={"sweep": {"goodput": {"tpot_ms": 40.0}}})
    headline = result_context(store, run_id)["headline"]
    assert headline == _expected(store, run_id)
    (r,) = headline.runs
    assert r.slo is not None and r.slo.source == "the run spec's goodput targets"
    assert r.best is not None and r.best.concurrency == 2 and r.best.meets_slo is True
    assert any(
        line.startswith("At input 128 the SLO holds up to concurrency 2 and breaks at 4") for line in r.lines
    )


def test_a_run_without_results_has_no_headline(store: Store) -> None:
    run = store.create_run(kind="run", label="waiting", model="smol", engine="vllm-cpu")
    assert result_context(store, run.id)["headline"] is None
    with api_for(store) as api:
        html = api.client.get(f"/runs/{run.id}").text
    assert 'id="headline"' not in html


def test_the_page_opens_with_the_headline(store: Store) -> None:
    run_id = _store_sweep(store)
    headline = result_context(store, run_id)["headline"]
    with api_for(store) as api:
        page = api.client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    html = page.text
    content = html[html.index("<h1>") :]
    # right under the page's title, above the run's summary, tables and charts
    start = content.index('<section class="card" id="headline"')
    assert start < content.index('id="run-summary"') < content.index('id="results"')
    block = content[start : content.index("</section>", start)]
    assert re.search(r'<p class="answer" id="headline-title">([^<]*)</p>', block).group(1) == headline.title  # type: ignore[union-attr]
    items = re.findall(r"<li>([^<]*)</li>", block)
    assert items == [line.replace("'", "&#39;") for line in headline.lines]
    assert 'id="headline-partial"' not in block  # the run has finished


def test_a_run_still_going_says_its_headline_is_so_far(store: Store) -> None:
    run_id = _store_sweep(store)
    store.set_status(run_id, RunStatus.benchmarking)
    with api_for(store) as api:
        html = api.client.get(f"/runs/{run_id}").text
    block = html[html.index('id="headline"') : html.index("</section>", html.index('id="headline"'))]
    assert 'id="headline-title"' in block and "From the cells finished so far" in block
