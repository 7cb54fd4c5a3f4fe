"""Imports and result exports over the API on SQLite and PostgreSQL: uploaded files become one run (a companion
file read through its partner), a bad file is refused naming it and stores nothing, writes need a token, and an
exported run's llm-d reports import back with the same cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.store import Store
from tests.support.api_app import api_for

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def api(store: Store):  # type: ignore[no-untyped-def]
    with api_for(store) as a:
        yield a


def _files(*paths: Path) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("files", (p.name, p.read_bytes(), "application/json")) for p in paths]


def test_upload_aiperf_with_its_companion(api) -> None:  # type: ignore[no-untyped-def]
    run1 = DATA / "aiperf" / "run1"
    res = api.client.post(
        "/api/v1/imports/aiperf",
        files=_files(run1 / "profile_export.jsonl", run1 / "profile_export_aiperf.json"),
        data={"label": "aiperf upload", "engine": "vllm"},
        headers=api.auth,
    )
    assert res.status_code == 201, res.text
    body = res.json()
    assert body["cells"] == [
        "input 550 x concurrency 100 (1)"
    ]  # the statistics file is the records' companion
    run = api.store.get_run(body["run_id"])
    assert (run.label, run.engine, run.model, run.extra["files"]) == (
        "aiperf upload", "vllm", "openai/gpt-oss-20b", ["profile_export.jsonl", "profile_export_aiperf.json"],
    )  # fmt: skip
    (result,) = api.store.get_results(run.id)
    assert (result.completed, result.failed) == (89, 11)


def test_bad_upload_is_refused_and_stores_nothing(api) -> None:  # type: ignore[no-untyped-def]
    good = DATA / "inference_perf" / "stage_0_lifecycle_metrics.json"
    files = [*_files(good), ("files", ("stage_1_lifecycle_metrics.json", b"{not json", "application/json"))]
    res = api.client.post(
        "/api/v1/imports/inference-perf", files=files, data={"label": "x"}, headers=api.auth
    )
    assert res.status_code == 400
    detail = json.dumps(res.json())
    assert "stage_1_lifecycle_metrics.json" in detail and "expected" in detail and "not JSON" in detail
    assert api.store.list_runs()[1] == 0
    res = api.client.post(
        "/api/v1/imports/guidelm", files=_files(good), data={"label": "x"}, headers=api.auth
    )
    assert res.status_code == 404 and "guidellm" in res.text
    res = api.client.post("/api/v1/imports/inference-perf", files=_files(good), data={"label": "x"})
    assert res.status_code == 401


def test_export_and_import_back(api) -> None:  # type: ignore[no-untyped-def]
    stages = sorted((DATA / "inference_perf").glob("stage_*_lifecycle_metrics.json"))
    res = api.client.post(
        "/api/v1/imports/inference-perf", files=_files(*stages), data={"label": "ip"}, headers=api.auth
    )
    run_id = res.json()["run_id"]
    out = api.client.get(f"/api/v1/runs/{run_id}/results-export", params={"format": "llm-d-report"})
    assert out.status_code == 200, out.text
    files = out.json()["files"]
    assert len(files) == 3 and all(f["name"].endswith(".llm-d-report.json") for f in files)
    upload = [("files", (f["name"], f["content"].encode(), "application/json")) for f in files]
    back = api.client.post(
        "/api/v1/imports/llm-d-report", files=upload, data={"label": "back"}, headers=api.auth
    )
    assert back.status_code == 201, back.text
    before = api.store.get_results(run_id)
    after = api.store.get_results(back.json()["run_id"])
    assert [(r.input_len, r.concurrency, r.ttft_p50_ms, r.output_throughput) for r in after] == [
        (r.input_len, r.concurrency, r.ttft_p50_ms, r.output_throughput) for r in before
    ]
    csv = api.client.get(f"/api/v1/runs/{run_id}/results-export", params={"format": "csv"})
    assert csv.json()["files"][0]["content"].startswith("run_id,input_len")
    assert (
        api.client.get(f"/api/v1/runs/{run_id}/results-export", params={"format": "xml"}).status_code == 422
    )
