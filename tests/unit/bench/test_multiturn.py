"""Multi-turn conversations: every turn sends the whole history with the answers, concurrency counts
conversations, think time separates an answer from the next turn, metrics per turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from accelbench.bench import run_benchmark
from accelbench.bench.client import StreamClient
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from tests.support.stream_server import Script, StreamServer


def _body(data: bytes) -> dict[str, Any]:
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every request body the client sends, in order."""
    bodies: list[dict[str, Any]] = []
    real = StreamClient.send

    async def recording(self: StreamClient, data: bytes):  # type: ignore[no-untyped-def]
        bodies.append(_body(data))
        return await real(self, data)

    monkeypatch.setattr(StreamClient, "send", recording)
    return bodies


def test_each_turn_carries_the_conversation_so_far_with_the_answers(tok_dir: Path, sent) -> None:
    tok = LocalTokenizer(tok_dir)
    config = BenchConfig(input_len=40, output_len=6, num_prompts=6, turns=3, max_concurrency=1, seed=3)
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(
            Endpoint(base_url=server.base_url, served_model=server.model), config, tokenizer=tok
        )
    assert summary.completed == 6 and summary.failed == 0
    by_index = {r.index: r for r in summary.requests}
    assert [(r.session, r.turn) for r in sorted(summary.requests, key=lambda r: r.index)] == [
        (0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3),
    ]  # fmt: skip
    # with one conversation at a time the bodies are in request order
    for s in range(2):
        first, second, third = sent[3 * s : 3 * s + 3]
        assert [m["role"] for m in first["messages"]] == ["user"]
        assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
        assert second["messages"][0] == first["messages"][0]
        assert second["messages"][1]["content"] == by_index[3 * s].generated_text != ""
        assert third["messages"][:3] == second["messages"]
        assert third["messages"][3]["content"] == by_index[3 * s + 1].generated_text
        # the new user message of each turn is a fresh prompt, not a repeat
        assert len({m["content"] for m in third["messages"] if m["role"] == "user"}) == 3
    # the first turn's prompt has the exact client length; later turns grow with the history
    first_turns = [r for r in summary.requests if r.turn == 1]
    assert all(r.server_prompt_tokens == 40 for r in first_turns)
    later = [r for r in summary.requests if r.turn == 3]
    assert all((r.server_prompt_tokens or 0) > 80 for r in later)
    assert summary.prompt_token_check.mismatched == 0  # only first turns are checked


def test_concurrency_counts_conversations_and_think_time_spaces_the_turns(tok_dir: Path) -> None:
    tok = LocalTokenizer(tok_dir)
    config = BenchConfig(
        input_len=50, output_len=4, num_prompts=8, turns=2, max_concurrency=2, think_time_s=0.2, seed=1
    )
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(
            Endpoint(base_url=server.base_url, served_model=server.model), config, tokenizer=tok
        )
    assert summary.completed == 8
    # at most two requests in flight at any moment (vLLM's max_concurrent_requests counts 1-second buckets)
    events = sorted(
        [(r.start_s, 1) for r in summary.requests] + [(r.start_s + r.latency_s, -1) for r in summary.requests]
    )
    in_flight = peak = 0
    for _, step in events:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak <= 2
    recs = {(r.session, r.turn): r for r in summary.requests}
    for s in range(4):
        one, two = recs[(s, 1)], recs[(s, 2)]
        # the second turn goes out only after the first answer and the think time (never earlier)
        assert two.start_s >= one.start_s + one.latency_s + 0.2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"turns": 3, "num_prompts": 10}, "multiple of 3"),
        ({"turns": 2, "num_prompts": 4, "endpoint": "completions"}, "chat endpoint"),
    ],
)
def test_conversations_that_cannot_be_sent_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        BenchConfig(**fields)


def test_the_summary_gives_each_turn_its_own_figures(tok_dir: Path) -> None:
    tok = LocalTokenizer(tok_dir)
    config = BenchConfig(input_len=50, output_len=5, num_prompts=9, turns=3, max_concurrency=3, seed=4)
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(
            Endpoint(base_url=server.base_url, served_model=server.model), config, tokenizer=tok
        )
    assert [t.turn for t in summary.per_turn] == [1, 2, 3]
    assert all(t.completed == 3 and t.failed == 0 and t.ttft_ms.count == 3 for t in summary.per_turn)
    prompts = [t.mean_prompt_tokens for t in summary.per_turn]
    assert prompts[0] == 50 and prompts[0] < prompts[1] < prompts[2]  # the history grows
    single = BenchConfig(input_len=50, output_len=5, num_prompts=3, seed=4)
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir) as server:
        one = run_benchmark(
            Endpoint(base_url=server.base_url, served_model=server.model), single, tokenizer=tok
        )
    assert one.per_turn == [] and all(r.turn is None for r in one.requests)
