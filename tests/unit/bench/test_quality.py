"""The quality probe: the seeded task set, its scoring, the Wilson interval, greedy agreement, the setting."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from accelbench.bench.quality import (
    KINDS,
    agreement,
    make_tasks,
    pieces,
    run_probe,
    same_prompts,
    score,
    wilson,
)
from accelbench.bench.quality_run import (
    QualitySetting,
    lm_eval_installed,
    lm_eval_score,
    measure_quality,
    parse_quality,
    quality_line,
)
from accelbench.domain.endpoint import Endpoint
from accelbench.errors import UserInputError
from tests.support.stream_server import StreamServer


def _oracle(wrong: set[str] | None = None) -> httpx.MockTransport:
    """A server that answers every probe task right (except the prompts in ``wrong``), naming its tokens."""
    tasks = {t.prompt: t for t in make_tasks(0, 200)}

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        prompt = body["messages"][-1]["content"]
        task = tasks[prompt]
        text = "I do not know" if wrong and prompt in wrong else task.expected
        tokens = [{"token": p} for p in re.findall(r"\S+|\s+", text)]
        message = {"role": "assistant", "content": text}
        return httpx.Response(200, json={"choices": [{"message": message, "logprobs": {"content": tokens}}]})

    return httpx.MockTransport(handle)


def test_tasks_are_seeded_and_cover_every_kind() -> None:
    a, b = make_tasks(0, 24), make_tasks(0, 24)
    assert a == b
    assert make_tasks(1, 24) != a
    assert {t.kind for t in a} == set(KINDS)
    assert len({t.prompt for t in a}) == 24
    with pytest.raises(UserInputError):
        make_tasks(0, 0)


@pytest.mark.parametrize(
    ("kind", "answer", "ok"),
    [
        ("arithmetic", "12", True),
        ("arithmetic", "5 + 7 = 12", True),
        ("arithmetic", "The answer is 13.", False),
        ("format", 'The word "river" is a noun.', True),
        ("format", "river", False),
        ("copy", "River.", True),
        ("copy", "rivers", False),
        ("reverse", "Stone, apple", True),
        ("reverse", "apple, stone", False),
        ("reverse", "stone", False),
        ("kth_item", "The second item is river.", True),
        ("kth_item", "apple, then river", False),
    ],
)
def test_score(kind: str, answer: str, ok: bool) -> None:
    from accelbench.bench.quality import QualityTask

    tasks = {
        "arithmetic": QualityTask("a", "arithmetic", "", "12"),
        "format": QualityTask("f", "format", "", '"river"'),
        "copy": QualityTask("c", "copy", "", "river"),
        "reverse": QualityTask("r", "reverse", "", "stone apple", ("apple", "stone")),
        "kth_item": QualityTask("k", "kth_item", "", "river", ("apple", "river", "stone")),
    }
    assert score(tasks[kind], answer) is ok


def test_wilson_interval() -> None:
    lo, hi = wilson(0, 24)
    assert lo == 0.0 and 0.13 < hi < 0.15
    lo, hi = wilson(24, 24)
    assert 0.85 < lo < 0.87 and hi == 1.0
    lo, hi = wilson(12, 24)
    assert lo < 0.5 < hi and abs((0.5 - lo) - (hi - 0.5)) < 1e-9
    assert wilson(0, 0) == (0.0, 1.0)


def test_agreement_counts_identical_leading_tokens() -> None:
    assert agreement({"a": ["x", "y"], "b": ["z"]}, {"a": ["x", "y"], "b": ["z"]}) == 1.0
    assert agreement({"a": ["x", "y", "z", "w"]}, {"a": ["x", "y", "q", "w"]}) == 0.5
    assert agreement({"a": ["x"]}, {"b": ["x"]}) is None
    assert pieces("ANSWER: 12") == ["ANSWER", ":", "12"]


def test_probe_against_a_server_that_answers_right() -> None:
    endpoint = Endpoint(base_url="http://127.0.0.1:9", served_model="m")
    result = run_probe(endpoint, transport=_oracle())
    assert (result["tasks"], result["correct"], result["accuracy"], result["failed"]) == (24, 24, 1.0, 0)
    assert result["accuracy_ci95"][0] > 0.85 and result["accuracy_ci95"][1] == 1.0
    assert result["agreement_unit"] == "tokens"
    assert set(result["by_task"]) == set(KINDS)
    assert all(item["correct"] for item in result["items"])


def test_probe_against_filler_text_scores_low() -> None:
    with StreamServer(model="filler") as server:
        endpoint = Endpoint(base_url=server.base_url, served_model="filler")
        result = run_probe(endpoint)
        bodies = [r.body for r in server.records]
    assert result["tasks"] == 24 and result["failed"] == 0
    assert result["correct"] == 0 and result["accuracy_ci95"][1] < 0.15
    assert result["agreement_unit"] == "words"
    assert all(b["temperature"] == 0.0 and not b.get("stream") for b in bodies)


def test_measure_quality_states_agreement_with_an_earlier_run() -> None:
    from accelbench.store import get_store

    store = get_store()
    endpoint = Endpoint(base_url="http://127.0.0.1:9", served_model="m")
    first = store.create_run(kind="bench", model="m", served_model="m")
    second = store.create_run(kind="bench", model="m", served_model="m")
    other = store.create_run(kind="bench", model="other", served_model="other")
    import accelbench.bench.quality_run as qr

    wrong = {t.prompt for t in make_tasks(0, 24)[:6]}
    original = qr.run_probe
    try:
        qr.run_probe = lambda ep, **kw: original(ep, transport=_oracle(), **kw)  # type: ignore[assignment]
        a = measure_quality(store, first.id, endpoint, QualitySetting("probe"))
        qr.run_probe = lambda ep, **kw: original(ep, transport=_oracle(wrong), **kw)  # type: ignore[assignment]
        b = measure_quality(store, second.id, endpoint, QualitySetting("probe"))
        c = measure_quality(store, other.id, endpoint, QualitySetting("probe"))
    finally:
        qr.run_probe = original  # type: ignore[assignment]
    assert a["agreement"] is None and a["reference_run"] is None
    assert b["reference_run"] == first.id and b["correct"] == 18
    assert b["agreement"] is not None and 0.7 < b["agreement"] < 0.8  # 18 of 24 answers identical
    assert c["reference_run"] is None  # another model is never a reference
    assert store.get_run(second.id).extra["quality"]["accuracy"] == 0.75
    assert same_prompts(a, b)
    assert "18 of 24 right" in quality_line(b) and first.id in quality_line(b)


def test_parse_quality() -> None:
    assert parse_quality(None) is None and parse_quality("off") is None
    assert parse_quality("probe") == QualitySetting("probe", 24)
    assert parse_quality("probe:10") == QualitySetting("probe", 10)
    for bad in ("probe:0", "probe:x", "mmlu", "lm-eval:"):
        with pytest.raises(UserInputError):
            parse_quality(bad)
    if not lm_eval_installed():
        with pytest.raises(UserInputError, match="not installed"):
            parse_quality("lm-eval:gsm8k")


def test_lm_eval_results_are_stored_like_the_probe() -> None:
    results = {"results": {"gsm8k": {"exact_match,strict-match": 0.25, "alias": "gsm8k"}},
               "n-samples": {"gsm8k": {"original": 1319, "effective": 100}}}  # fmt: skip
    out = lm_eval_score(results, "gsm8k")
    assert (out["tasks"], out["correct"], out["accuracy"], out["source"]) == (100, 25, 0.25, "lm-eval:gsm8k")
    assert out["accuracy_ci95"][0] < 0.25 < out["accuracy_ci95"][1]
    with pytest.raises(UserInputError, match="no accuracy"):
        lm_eval_score({"results": {"t": {"perplexity,none": 3.0}}, "n-samples": {"t": {"effective": 5}}}, "t")


def test_sweep_asks_the_probe_before_the_load_and_records_what_it_served(tmp_path: object) -> None:
    from pathlib import Path

    from accelbench.bench.sweep import create_sweep_run, run_sweep
    from accelbench.domain.run import RunStatus, SweepSpec
    from accelbench.store import get_store
    from tests.support.stream_server import Script, make_tokenizer_dir

    tok = make_tokenizer_dir(Path(str(tmp_path)) / "tok")
    spec = SweepSpec(
        input_lens=[48],
        concurrency=[2],
        prompts_per_concurrency=2,
        output_len=4,
        num_warmups=0,
        quality="probe:5",
    )
    store = get_store()
    with StreamServer(Script(ttft_ms=2, itl_ms=1), tokenizer_dir=tok, model="smol") as server:
        endpoint = Endpoint(base_url=server.base_url, served_model="smol", tokenizer=str(tok))
        run = create_sweep_run(store, endpoint, spec)
        outcome = run_sweep(store, run.id, endpoint, spec)
        paths = [r.path for r in server.records if r.path.endswith("completions")]
        streamed = [bool(r.body.get("stream")) for r in server.records if r.path.endswith("completions")]
    assert outcome.status == RunStatus.completed
    extra = store.get_run(run.id).extra
    assert extra["quality"]["tasks"] == 5 and extra["quality"]["correct"] == 0  # filler text answers nothing
    assert extra["served"]["served_model"]["value"] == "smol"
    assert extra["served"]["sampling"]["value"]["max_tokens"] == 4
    assert len(paths) == 5 + 4 and streamed[:5] == [False] * 5 and all(streamed[5:])  # the probe came first


def test_a_server_that_refuses_logprobs_is_asked_again_without() -> None:
    oracle = _oracle()

    def handle(request: httpx.Request) -> httpx.Response:
        if "logprobs" in json.loads(request.content):
            return httpx.Response(400, json={"error": {"message": "logprobs is not supported"}})
        return oracle.handle_request(request)

    result = run_probe(
        Endpoint(base_url="http://127.0.0.1:9", served_model="m"), transport=httpx.MockTransport(handle)
    )
    assert result["correct"] == 24 and result["failed"] == 0
