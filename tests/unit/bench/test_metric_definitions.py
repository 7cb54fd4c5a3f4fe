"""TTFT vs TTFO, reasoning vs answer tokens, and ``metrics_definition="vllm"``: parse_stream on hand-built reads
(exact times) and whole runs against the scripted server (lower bounds from the server's own write times, never
upper bounds on how fast a loaded machine is)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.bench import run_benchmark
from accelbench.bench.metrics import compute_metrics
from accelbench.bench.stream_parse import parse_stream
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from tests.support.stream_server import Script, StreamServer
from tests.unit.bench.test_client_parse import DONE, USAGE, chat_event, comp_event, raw


def delta_event(delta: dict, *, usage: dict | None = None) -> bytes:
    obj: dict = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def tool_delta(args: str, *, first: bool = False) -> dict:
    call: dict = {"index": 0, "function": {"arguments": args}}
    if first:
        call.update(id="call_1", type="function")
        call["function"]["name"] = "lookup"
    return {"tool_calls": [call]}


USAGE_ONLY = chat_event(usage=USAGE, choices=False)


# ----------------------------------------------------------------------------------------- parse_stream
@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_reasoning_ends_ttft_content_ends_ttfo(key: str) -> None:
    p = parse_stream(
        raw(
            [
                (100.005, chat_event("", role=True)),
                (100.010, delta_event({key: "Let me"})),
                (100.020, delta_event({key: " think"})),
                (100.080, chat_event("The")),
                (100.090, chat_event(" answer") + USAGE_ONLY + DONE),
            ]
        ),
        chat=True,
    )
    assert p.success
    assert p.ttft == pytest.approx(0.010)
    assert p.ttfo == pytest.approx(0.080)
    assert p.itl == pytest.approx([0.010, 0.060, 0.010])
    assert p.latency == pytest.approx(0.090)
    assert (p.reasoning_chunks, p.answer_chunks, p.text_chunks) == (2, 2, 4)
    assert p.reasoning_text == "Let me think"
    assert p.answer_text == "The answer"
    assert p.text == "Let me thinkThe answer"
    assert p.reasoning_tokens is None


def test_chunk_with_reasoning_and_content_counts_for_both() -> None:
    p = parse_stream(
        raw(
            [
                (100.01, delta_event({"reasoning_content": "hmm", "content": "A"})),
                (100.02, chat_event("B") + DONE),
            ]
        ),
        chat=True,
    )
    assert p.ttft == pytest.approx(0.01) and p.ttfo == pytest.approx(0.01)
    assert (p.reasoning_chunks, p.answer_chunks, p.text_chunks) == (1, 2, 2)
    assert (p.reasoning_text, p.answer_text) == ("hmm", "AB")


def test_role_only_chunk_ends_neither_ttft_nor_ttfo_but_ends_vllm_ttft() -> None:
    reads = [
        (100.010, chat_event("", role=True)),
        (100.210, chat_event("Hi")),
        (100.220, chat_event(" there")),
        (100.230, USAGE_ONLY + DONE),
    ]
    ours = parse_stream(raw(reads), chat=True)
    assert ours.ttft == pytest.approx(0.210) and ours.ttfo == pytest.approx(0.210)
    assert ours.itl == pytest.approx([0.010])
    vllm = parse_stream(raw(reads), chat=True, definition="vllm")
    assert vllm.ttft == pytest.approx(0.010)
    assert vllm.ttfo == pytest.approx(0.210)  # TTFO is the same in both definitions
    assert vllm.itl == pytest.approx([0.200, 0.010])  # one gap per chunk with choices after the first
    assert vllm.latency == pytest.approx(0.220)  # the usage-only chunk (choices: []) does not count
    assert vllm.text == "Hi there" and vllm.completion_tokens == 3


def test_vllm_counts_every_chunk_with_choices() -> None:
    chunks = [
        (100.01, chat_event("", role=True)),
        (100.02, chat_event("a")),
        (100.03, chat_event("")),  # empty content
        (100.04, chat_event("b")),
        (100.05, chat_event(None, finish="length")),  # finish only
        (100.06, chat_event("", usage=USAGE, finish="length")),  # usage on a chunk that has a choice
        (100.07, USAGE_ONLY + DONE),
    ]
    with_choices = 6
    p = parse_stream(raw(chunks), chat=True, definition="vllm")
    assert p.success
    assert p.ttft == pytest.approx(0.01)
    assert len(p.itl) == with_choices - 1
    assert p.itl == pytest.approx([0.01] * 5)
    assert p.latency == pytest.approx(0.06)
    ours = parse_stream(raw(chunks), chat=True)
    assert (
        ours.ttft == pytest.approx(0.02)
        and ours.itl == pytest.approx([0.02])
        and ours.latency == pytest.approx(0.04)
    )


def test_vllm_stream_of_role_chunk_only_succeeds_as_in_vllm() -> None:
    reads = [(100.01, chat_event("", role=True)), (100.02, USAGE_ONLY + DONE)]
    assert parse_stream(raw(reads), chat=True, definition="vllm").success
    assert not parse_stream(raw(reads), chat=True).success


def test_completions_vllm_counts_empty_text_choices() -> None:
    reads = [
        (100.01, comp_event("")),
        (100.02, comp_event("x")),
        (100.03, comp_event("y")),
        (100.04, b'data: {"choices": [], "usage": {"completion_tokens": 2}}\n\n' + DONE),
    ]
    vllm = parse_stream(raw(reads), chat=False, definition="vllm")
    assert vllm.ttft == pytest.approx(0.01) and vllm.itl == pytest.approx([0.01, 0.01])
    assert vllm.latency == pytest.approx(0.03)
    ours = parse_stream(raw(reads), chat=False)
    assert (
        ours.ttft == pytest.approx(0.02)
        and ours.ttfo == pytest.approx(0.02)
        and ours.itl == pytest.approx([0.01])
    )
    assert vllm.ttfo == pytest.approx(0.02)


def test_tool_call_deltas_are_output_but_not_ttfo() -> None:
    p = parse_stream(
        raw(
            [
                (100.01, chat_event("", role=True)),
                (100.02, delta_event(tool_delta("", first=True))),
                (100.03, delta_event(tool_delta('{"q": '))),
                (100.04, delta_event(tool_delta('"x"}')) + USAGE_ONLY + DONE),
            ]
        ),
        chat=True,
    )
    assert p.success
    assert p.ttft == pytest.approx(0.02)
    assert p.ttfo is None
    assert p.itl == pytest.approx([0.01, 0.01])
    assert p.answer_chunks == 3 and p.reasoning_chunks == 0
    assert '{"q": "x"}' in p.text and p.answer_text == p.text


def test_usage_reasoning_tokens_are_read() -> None:
    usage = {**USAGE, "completion_tokens_details": {"reasoning_tokens": 2}}
    p = parse_stream(
        raw(
            [
                (100.01, delta_event({"reasoning": "r"})),
                (100.02, chat_event("a") + chat_event(usage=usage, choices=False)),
            ]
        ),
        chat=True,
    )
    assert p.reasoning_tokens == 2 and p.completion_tokens == 3


def test_unknown_definition_is_refused() -> None:
    with pytest.raises(ValueError, match="metrics definition"):
        parse_stream(raw([(100.01, chat_event("a"))]), chat=True, definition="sglang")


def test_compute_metrics_ttfo_and_token_split() -> None:
    recs = [
        RequestRecord(
            index=0,
            prompt_len=5,
            output_tokens=10,
            ttft_s=0.1,
            ttfo_s=0.3,
            latency_s=1.0,
            success=True,
            reasoning_tokens=4,
            answer_tokens=6,
        ),
        RequestRecord(
            index=1,
            prompt_len=5,
            output_tokens=3,
            ttft_s=0.2,
            ttfo_s=None,
            latency_s=1.0,
            success=True,
            reasoning_tokens=0,
            answer_tokens=3,
        ),
        RequestRecord(index=2, prompt_len=5, ttfo_s=0.05, error="x", reasoning_tokens=9),
    ]
    m = compute_metrics(recs, 2.0)
    assert m.ttfo_ms.count == 1 and m.ttfo_ms.mean == pytest.approx(300.0)
    assert m.ttft_ms.count == 2
    assert (m.total_reasoning_tokens, m.total_answer_tokens, m.total_output_tokens) == (4, 9, 13)


# ---------------------------------------------------------------------------------- against the server
def run(server: StreamServer, tok_dir: Path, tmp_path: Path, script: dict, n: int = 2, **config: object
        ) -> BenchmarkSummary:  # fmt: skip
    data = tmp_path / f"p{len(list(tmp_path.iterdir()))}.jsonl"
    prompt = f"Tell me a story [[fixture:{json.dumps(script)}]]"
    data.write_text("".join(json.dumps({"prompt": prompt}) + "\n" for _ in range(n)))
    cfg = BenchConfig(dataset="jsonl", dataset_path=str(data), num_prompts=n, output_len=6, max_concurrency=1,
                      seed=1, **config)  # type: ignore[arg-type]  # fmt: skip
    server.reset()
    endpoint = Endpoint(base_url=server.base_url, served_model=server.model, tokenizer=str(tok_dir))
    summary = run_benchmark(endpoint, cfg, tokenizer=LocalTokenizer(tok_dir))
    assert summary.completed == n and summary.failed == 0, summary.errors
    return summary


@pytest.fixture
def server(tok_dir: Path) -> StreamServer:
    with StreamServer(Script(ttft_ms=5, itl_ms=2), tokenizer_dir=tok_dir) as s:
        yield s  # type: ignore[misc]


def test_reasoning_deltas_end_ttft_before_ttfo_by_the_scripted_gap(
    server: StreamServer, tok_dir: Path, tmp_path: Path
) -> None:
    script = {"ttft_ms": 10, "itl_ms": 5, "reasoning_chunks": 3, "answer_gap_ms": 150}
    scripted_gap_s = (3 * 5 + 150) / 1000
    summary = run(server, tok_dir, tmp_path, script)
    logs = [r for r in server.records if r.path.endswith("completions")]
    assert len(logs) == len(summary.requests)
    for rec, log in zip(summary.requests, logs, strict=True):
        assert rec.ttfo_s is not None and rec.ttfo_s > rec.ttft_s
        # the content cannot be read before the server wrote it, nor the request sent after it arrived
        assert rec.ttfo_s >= log.times_of("text")[0] - log.received
        assert rec.ttfo_s >= (10 + 3 * 5 + 150) / 1000
        # a late first reasoning write shortens the gap by as much; the client's own delay (a busy machine reading
        # the first chunk late) gets 80 ms, half the 165 ms gap that a TTFO ended with the TTFT would lose
        late = max(0.0, log.times_of("reasoning")[0] - (log.received + 0.010))
        assert rec.ttfo_s - rec.ttft_s >= scripted_gap_s - late - 0.080
        assert (rec.reasoning_chunks, rec.answer_chunks) == (3, 6)
        assert (rec.reasoning_tokens, rec.answer_tokens, rec.token_split_source) == (3, 6, "usage")
        assert rec.output_tokens == 9
    assert summary.ttfo_ms.count == 2
    assert summary.ttfo_ms.mean > summary.ttft_ms.mean
    assert (summary.total_reasoning_tokens, summary.total_answer_tokens) == (6, 12)


def test_reasoning_tokens_from_the_tokenizer_without_usage_details(
    server: StreamServer, tok_dir: Path, tmp_path: Path
) -> None:
    tok = LocalTokenizer(tok_dir)
    summary = run(server, tok_dir, tmp_path, {"reasoning_chunks": 4, "reasoning_usage": False})
    for rec in summary.requests:
        assert rec.token_split_source == "tokenizer"
        assert rec.output_tokens_source == "usage" and rec.output_tokens == 10
        reasoning = "".join(f" think{j}" for j in range(4))
        assert rec.generated_text.startswith(reasoning)
        answer = rec.generated_text[len(reasoning) :]
        assert (rec.reasoning_tokens, rec.answer_tokens) == tuple(tok.count_output([reasoning, answer]))
    # no usage at all: the output tokens are counted on all the text, reasoning included
    summary = run(server, tok_dir, tmp_path, {"reasoning_chunks": 4, "usage": "none"})
    for rec in summary.requests:
        assert rec.output_tokens_source == "tokenizer" and rec.token_split_source == "tokenizer"
        assert rec.output_tokens == tok.count_output([rec.generated_text])[0]
        assert rec.reasoning_tokens > 0 and rec.answer_tokens > 0


def test_role_chunk_200ms_early_shortens_ttft_only_in_the_vllm_definition(
    server: StreamServer, tok_dir: Path, tmp_path: Path
) -> None:
    script = {"role_ms": 10, "ttft_ms": 210, "itl_ms": 2}
    ours = run(server, tok_dir, tmp_path, script)
    for rec, log in zip(ours.requests, server.records, strict=True):
        # the server really sent it early: 200 ms before the text as scripted, 100 ms of it left for a busy
        # machine writing the role chunk late (glued to the text it would be 0 ms before)
        assert log.times_of("role")[0] + 0.1 < log.times_of("text")[0]
        assert rec.ttft_s >= 0.210  # the first text chunk is never written before then
        assert rec.ttfo_s == rec.ttft_s  # content only: the same event ends both
        assert len(rec.itl_s) == 6 - 1  # one gap per text chunk after the first
    vllm = run(server, tok_dir, tmp_path, script, metrics_definition="vllm")
    for rec in vllm.requests:
        assert rec.ttfo_s is not None and rec.ttfo_s >= 0.210
        assert rec.ttft_s < rec.ttfo_s  # ended by the role-only chunk
        # chunks with choices: the role chunk and 6 text chunks (the usage chunk has choices: [])
        assert len(rec.itl_s) == 7 - 1
        assert rec.tpot_s is not None


def test_vllm_itl_count_is_chunks_with_choices_minus_one(
    server: StreamServer, tok_dir: Path, tmp_path: Path
) -> None:
    script = {"empty_chunks": True, "finish_chunk": True, "usage": "with_choices", "reasoning_chunks": 2}
    summary = run(server, tok_dir, tmp_path, script, metrics_definition="vllm")
    logs = [r for r in server.records if r.path.endswith("completions")]
    for rec, log in zip(summary.requests, logs, strict=True):
        with_choices = sum(
            1 for c in log.chunks if c.kind in ("role", "reasoning", "text", "empty", "finish", "usage")
        )
        assert with_choices == 1 + 2 + 6 + 5 + 1 + 1
        assert len(rec.itl_s) == with_choices - 1
    ours = run(server, tok_dir, tmp_path, script)
    for rec in ours.requests:
        assert len(rec.itl_s) == 2 + 6 - 1  # text-carrying chunks only


def test_tool_calls_count_as_output_without_usage_and_have_no_ttfo(
    server: StreamServer, tok_dir: Path, tmp_path: Path
) -> None:
    tok = LocalTokenizer(tok_dir)
    summary = run(server, tok_dir, tmp_path, {"output_tokens": 0, "tool_call_chunks": 3, "usage": "none"})
    for rec in summary.requests:
        assert rec.ttfo_s is None and rec.ttft_s > 0
        assert rec.answer_chunks == 3 and rec.reasoning_chunks == 0
        assert '"a0""a1""a2"' in rec.generated_text
        assert rec.output_tokens_source == "tokenizer"
        assert rec.output_tokens == tok.count_output([rec.generated_text])[0] > 0
        assert rec.answer_tokens == rec.output_tokens and rec.reasoning_tokens == 0
    assert summary.ttfo_ms.count == 0 and summary.ttft_ms.count == 2
