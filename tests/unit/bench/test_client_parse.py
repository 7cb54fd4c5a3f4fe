"""parse_stream: the timing rules (what ends TTFT, what an ITL gap is) and the stream's content, from reads whose
timestamps the test chooses."""

from __future__ import annotations

import json

import pytest

from accelbench.bench.client import RawResponse
from accelbench.bench.stream_parse import error_message, parse_stream


def chat_event(content: str | None = None, *, role: bool = False, usage: dict | None = None,
               choices: bool = True, finish: str | None = None) -> bytes:  # fmt: skip
    obj: dict = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    if choices:
        delta: dict = {}
        if role:
            delta["role"] = "assistant"
        if content is not None:
            delta["content"] = content
        obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    else:
        obj["choices"] = []
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def comp_event(text: str, usage: dict | None = None) -> bytes:
    obj: dict = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": text}]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def raw(reads: list[tuple[float, bytes]], *, start: float = 100.0, status: int = 200) -> RawResponse:
    """A response whose body arrived in ``reads`` (time, bytes)."""
    r = RawResponse()
    r.start = start
    r.status = status
    r.headers_done = True
    for t, data in reads:
        r.times.append(t)
        r.parts.append(data)
        r.body_len += len(data)
        r.ends.append(r.body_len)
    return r


def test_role_only_first_chunk_does_not_end_ttft() -> None:
    p = parse_stream(
        raw(
            [
                (100.010, chat_event("", role=True)),
                (100.050, chat_event("Hi")),
                (100.070, chat_event(" there")),
                (100.100, chat_event("!") + chat_event(usage=USAGE, choices=False) + DONE),
            ]
        ),
        chat=True,
    )
    assert p.success
    assert p.ttft == pytest.approx(0.050)
    assert p.itl == pytest.approx([0.020, 0.030])
    assert p.latency == pytest.approx(0.100)
    assert p.text == "Hi there!"
    assert p.completion_tokens == 3 and p.prompt_tokens == 7


def test_usage_chunk_with_choices_is_read_and_is_not_a_token() -> None:
    with_choices = chat_event("", usage=USAGE, finish="length")
    p = parse_stream(
        raw([(100.01, chat_event("a")), (100.02, chat_event("b")), (100.09, with_choices + DONE)]), chat=True
    )
    assert p.completion_tokens == 3
    assert p.latency == pytest.approx(0.02)  # the usage chunk carries no text: E2EL ends at "b"
    assert p.itl == pytest.approx([0.01])


def test_usage_on_the_last_text_chunk() -> None:
    p = parse_stream(
        raw([(100.01, chat_event("a")), (100.03, chat_event("b", usage=USAGE) + DONE)]), chat=True
    )
    assert p.completion_tokens == 3 and p.latency == pytest.approx(0.03)


def test_comments_and_blank_keepalives_are_skipped() -> None:
    body = [
        (100.001, b": ping\n\n"),
        (100.002, b"\n\n"),
        (100.010, chat_event("x")),
        (100.011, b": keep-alive\n\n\n"),
        (100.020, chat_event("y")),
        (100.021, b"\n" + DONE),
    ]
    p = parse_stream(raw(body), chat=True)
    assert p.success and p.text == "xy"
    assert p.ttft == pytest.approx(0.010) and p.itl == pytest.approx([0.010])
    assert p.events == 2


def test_several_tokens_in_one_chunk_count_as_one_gap() -> None:
    p = parse_stream(
        raw(
            [
                (100.01, chat_event("one two")),
                (
                    100.03,
                    chat_event(" three four")
                    + chat_event(usage={"prompt_tokens": 2, "completion_tokens": 4}, choices=False)
                    + DONE,
                ),
            ]
        ),
        chat=True,
    )
    assert p.itl == pytest.approx([0.02]) and p.text_chunks == 2 and p.completion_tokens == 4


def test_events_in_one_read_share_its_timestamp_and_split_events_take_the_completing_read() -> None:
    e1, e2, e3 = chat_event("a"), chat_event("b"), chat_event("c")
    reads = [
        (100.010, e1 + e2[:10]),  # e2 starts here but completes in the next read
        (100.030, e2[10:] + e3),  # e2 and e3 complete together
        (100.050, DONE),
    ]
    p = parse_stream(raw(reads), chat=True)
    assert p.ttft == pytest.approx(0.010)
    assert p.itl == pytest.approx([0.020, 0.0])
    assert p.latency == pytest.approx(0.030)


def test_header_only_read_before_the_body() -> None:
    r = raw([(100.04, chat_event("a")), (100.05, chat_event("b") + DONE)])
    r.times.insert(0, 100.001)  # the status line and headers came alone
    r.ends.insert(0, 0)
    p = parse_stream(r, chat=True)
    assert p.ttft == pytest.approx(0.04)


def test_crlf_line_endings() -> None:
    def crlf(b: bytes) -> bytes:
        return b.replace(b"\n", b"\r\n")

    p = parse_stream(
        raw([(100.01, crlf(chat_event("a"))), (100.02, crlf(chat_event("b"))), (100.03, crlf(DONE))]),
        chat=True,
    )
    assert p.text == "ab" and p.ttft == pytest.approx(0.01) and p.itl == pytest.approx([0.01])


def test_data_without_space_and_multiline_events() -> None:
    ev1 = b'data:{"choices":[{"delta":{"content":"a"}}]}\n\n'
    ev2 = b'event: message\nid: 7\ndata: {"choices":[{"delta":\ndata: {"content":"b"}}]}\n\n'
    p = parse_stream(raw([(100.01, ev1), (100.02, ev2 + DONE)]), chat=True)
    assert p.text == "ab" and p.itl == pytest.approx([0.01])


def test_completions_text_and_empty_text_chunks() -> None:
    reads = [(100.01, comp_event("")), (100.02, comp_event("x")), (100.03, comp_event("")),
             (100.04, comp_event("y")), (100.05, comp_event("", usage=USAGE) + DONE)]  # fmt: skip
    p = parse_stream(raw(reads), chat=False)
    assert p.ttft == pytest.approx(0.02)
    assert p.itl == pytest.approx([0.02])
    assert p.latency == pytest.approx(0.04)
    assert p.text == "xy" and p.completion_tokens == 3


def test_reasoning_and_tool_calls_carry_output() -> None:
    reason = b'data: {"choices":[{"delta":{"reasoning_content":"think"}}]}\n\n'
    tool = b'data: {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}\n\n'
    p = parse_stream(raw([(100.01, reason), (100.02, tool + DONE)]), chat=True)
    assert p.ttft == pytest.approx(0.01) and p.itl == pytest.approx([0.01])


def test_malformed_json_line_fails_the_request_with_the_line() -> None:
    bad = b'data: {"choices": [{"delta": {"content": "oops"\n\n'
    p = parse_stream(
        raw([(100.01, chat_event("a")), (100.02, bad), (100.03, chat_event("b") + DONE)]), chat=True
    )
    assert not p.success
    assert p.error is not None and "malformed JSON in stream event 2" in p.error and "oops" in p.error


def test_error_event_in_stream() -> None:
    err = b'data: {"error": {"message": "engine died", "code": 500}}\n\n'
    p = parse_stream(raw([(100.01, chat_event("a")), (100.02, err + DONE)]), chat=True)
    assert not p.success and p.error == "server error in stream: engine died"


def test_stream_without_text_is_a_failure() -> None:
    p = parse_stream(raw([(100.01, chat_event("", role=True) + chat_event(usage=USAGE, choices=False) + DONE)]),
                     chat=True)  # fmt: skip
    assert not p.success and p.error is not None and "no generated text" in p.error


def test_transport_error_wins_and_partial_timing_is_kept() -> None:
    r = raw([(100.01, chat_event("a")), (100.02, chat_event("b")[:20])])
    r.error = "connection closed mid-stream after 99 body bytes"
    p = parse_stream(r, chat=True)
    assert not p.success and p.error == r.error and p.ttft == pytest.approx(0.01)


def test_events_after_done_are_ignored() -> None:
    p = parse_stream(raw([(100.01, chat_event("a") + DONE + b"data: garbage\n\n")]), chat=True)
    assert p.success and p.text == "a"


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (500, b'{"error": {"message": "boom", "type": "x", "code": 500}}', "HTTP 500: boom"),
        (400, b'{"object": "error", "message": "too long", "code": 400}', "HTTP 400: too long"),
        (422, b'{"detail": "bad field"}', "HTTP 422: bad field"),
        (503, b"  service\n unavailable ", "HTTP 503: service unavailable"),
        (404, b"", "HTTP 404"),
    ],
)
def test_http_error_messages(status: int, body: bytes, expected: str) -> None:
    assert error_message(status, body) == expected
    p = parse_stream(raw([(100.01, body)], status=status), chat=True)
    assert p.error == expected


def test_long_error_message_is_shortened() -> None:
    msg = error_message(500, json.dumps({"error": {"message": "x" * 1000}}).encode())
    assert len(msg) < 320 and msg.endswith("...")
