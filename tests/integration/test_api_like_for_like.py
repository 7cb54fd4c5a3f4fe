"""The compare API says whether runs are like for like, keeps a mismatched run out of the ratios unless
allow_mismatch, and a run spec's quality setting is checked on submission."""

from __future__ import annotations

import pytest

from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.support.api_app import api_for, summary


@pytest.fixture
def api(store: Store):
    with api_for(store) as a:
        yield a


def test_compare_names_the_difference_and_allow_mismatch_keeps_the_ratios(api) -> None:
    store = api.store
    ids = []
    for dtype in ("bf16", "fp16"):
        run = store.create_run(kind="run", model="smollm2", engine="vllm-cpu", status=RunStatus.completed)
        store.merge_run_extra(run.id, served={"weights_dtype": {"value": dtype, "source": "launch command"}})
        store.save_result(run.id, input_len=128, concurrency=1, repeat=0, summary=summary(128, 1, tpot=20.0))
        ids.append(run.id)
    strict = api.client.get("/api/v1/compare", params={"runs": ids}).json()
    assert strict["like_for_like"] is False and strict["pairs"] == []
    assert strict["mismatches"] == [
        {
            "run": ids[1],
            "field": "weights_precision",
            "baseline": "bf16",
            "value": "fp16",
            "text": f"{ids[1]} serves fp16 weights, {ids[0]} bf16",
        }
    ]
    allowed = api.client.get("/api/v1/compare", params={"runs": ids, "allow_mismatch": "true"}).json()
    assert allowed["pairs"] and allowed["like_for_like"] is False
    csv_text = api.client.get("/api/v1/compare", params={"runs": ids, "format": "csv"}).text
    assert "# Like for like: no" in csv_text and "serves fp16 weights" in csv_text


def test_a_run_spec_quality_setting_is_checked(api) -> None:
    headers = {"Authorization": f"Bearer {api.token}"}
    body = {"model": "smollm2-135m-instruct", "quality": "trivia"}
    bad = api.client.post("/api/v1/runs?dry_run=true", json=body, headers=headers)
    assert bad.status_code in (400, 422) and "quality" in bad.text
