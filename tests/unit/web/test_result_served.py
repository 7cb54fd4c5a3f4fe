"""The run page shows what the run served (each field with where it was read, unknown as unknown) and its
quality probe's score with the interval and each kind of task."""

from __future__ import annotations

from accelbench.bench.quality import make_tasks, tally
from accelbench.domain.run import RunStatus
from accelbench.report.served_view import quality_rows, quality_text, served_rows
from accelbench.store import Store
from accelbench.web.views import result_context
from tests.support.api_app import api_for
from tests.support.report_data import make_summary


def _run(store: Store) -> str:
    run = store.create_run(kind="sweep", model="smol", engine="vllm-cpu")
    store.save_result(run.id, input_len=128, concurrency=1, repeat=0,
                      summary=make_summary(128, 1, tpot_ms=20.0, ttft_ms=100.0, telemetry_start=None))  # fmt: skip
    tasks = make_tasks(0, 5)
    quality = tally(tasks, [t.expected for t in tasks[:4]] + ["no idea"], [None] * 5) | {"source": "probe"}
    store.merge_run_extra(
        run.id,
        served={
            "max_model_len": {"value": 2048, "source": "/v1/models"},
            "kv_cache_dtype": {"value": None, "source": None},
        },
        quality=quality,
    )
    store.set_status(run.id, RunStatus.completed)
    return run.id


def test_what_the_run_served_and_its_quality(store: Store) -> None:
    run_id = _run(store)
    run = store.get_run(run_id)
    rows = served_rows(run)
    assert ("Max model length", "2,048", "/v1/models") in rows
    assert ("KV cache dtype", "unknown", "-") in rows
    assert quality_text(run) is not None and "4 of 5 right (80%" in quality_text(run)
    assert ("copy", "1 of 1", "100%") in quality_rows(run)
    ctx = result_context(store, run_id)
    assert ctx["served"] == rows and ctx["quality"]["text"] == quality_text(run)
    with api_for(store) as api:
        html = api.client.get(f"/runs/{run_id}").text
    assert 'id="served"' in html and "/v1/models" in html and 'id="quality"' in html


def test_a_run_that_recorded_nothing_shows_neither(store: Store) -> None:
    run = store.create_run(kind="sweep", model="smol")
    assert served_rows(run) == [] and quality_text(run) is None and quality_rows(run) == []
