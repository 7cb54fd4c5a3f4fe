"""One streamed response, parsed after it has ended: its reads (``client.RawResponse``) to TTFT, TTFO, ITL, E2EL,
text and usage (``parse_stream``). Nothing here runs while a stream is being read, so none of it delays the
timestamp of another stream's read (``bench.client``).

Timing rules, definition ``"accelbench"`` (the default, ``LoadSettings.metrics_definition``):
- a request's start is taken right before its bytes are written to the socket;
- every SSE event is timestamped with the read that completed it; events that arrived in one read share its
  timestamp (they arrived together);
- an event "carries generated text" when its first choice has non-empty text (``delta.content``,
  ``delta.reasoning_content``/``delta.reasoning``, tool-call deltas; ``text`` for completions). A role-only
  chunk (``{"role": "assistant"}``, with or without ``content: ""``), however early, empty-text chunks and the
  usage chunk carry none;
- TTFT (time to first token) ends at the first text-carrying event, E2EL at the last one, and there is one ITL
  gap per text-carrying event after the first: a chunk carrying several tokens counts as one gap.

Definition ``"vllm"``: TTFT, ITL and E2EL chunk for chunk as ``vllm bench serve`` computes them
(``async_request_openai_chat_completions``/``async_request_openai_completions`` in vLLM's
``vllm/benchmarks/lib/endpoint_request_func.py``): every event whose ``choices`` list is non-empty counts,
whatever it carries (a role-only first chunk, an empty text, a finish-only chunk, a usage chunk that still has a
choice); the first one ends TTFT, each later one adds one ITL gap from the previous one, and E2EL ends at the
last one (a usage-only event with ``choices: []`` does not count). vLLM times each event when its client has
decoded it; here events of one read share that read's timestamp. TPOT is ``(E2EL - TTFT) / (output_tokens - 1)``
in both definitions (``RequestRecord.tpot_s``).

In both definitions:
- TTFO (time to first output) ends at the first event carrying visible answer text: ``delta.content`` for chat,
  ``text`` for completions. Reasoning deltas and tool-call deltas do not end it (a response of tool calls
  only has no TTFO); a role-only chunk does not either.
- Reasoning text is ``delta.reasoning_content``/``delta.reasoning``; answer text is everything else generated
  (content and tool-call arguments). ``ParsedStream`` keeps both and counts the chunks carrying each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from accelbench.bench.client import RawResponse

#: Most characters of a server's error message kept in a failure reason.
MAX_REASON = 300


@dataclass(slots=True)
class ParsedStream:
    """The timing and content of one streamed response. Times in seconds from the request's start; which events
    end TTFT and E2EL and which make ITL gaps depends on the definition (see the module docstring)."""

    ttft: float | None = None
    latency: float | None = None
    itl: list[float] = field(default_factory=list)
    text: str = ""
    text_chunks: int = 0
    events: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    error: str | None = None
    ttfo: float | None = None  # to the first event with answer content (never a reasoning or tool-call delta)
    reasoning_text: str = ""  # delta.reasoning_content / delta.reasoning
    answer_text: str = ""  # the rest of the generated text: content and tool-call arguments
    reasoning_chunks: int = 0  # events carrying reasoning text
    answer_chunks: int = 0  # events carrying content or tool-call deltas
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens

    @property
    def success(self) -> bool:
        return self.error is None and self.ttft is not None


def error_message(status: int, body: bytes) -> str:
    """``HTTP <status>: <the server's message>`` from an error body (OpenAI, vLLM, FastAPI or plain text)."""
    message = ""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        message = body.decode("utf-8", "replace").strip()
    else:
        message = _message_of(data) or body.decode("utf-8", "replace").strip()
    message = " ".join(message.split())
    if len(message) > MAX_REASON:
        message = message[: MAX_REASON - 3] + "..."
    return f"HTTP {status}: {message}" if message else f"HTTP {status}"


def _message_of(data: Any) -> str:
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err)
        if isinstance(err, str):
            return err
        for key in ("message", "detail"):
            if key in data:
                return str(data[key])
    return ""


def _normalize_newlines(body: bytes, ends: list[int]) -> tuple[bytes, list[int]]:
    """CRLF/CR line endings to LF, keeping each read's end offset in step (rare path)."""

    def norm(b: bytes) -> bytes:
        return b.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    return norm(body), [len(norm(body[:e])) for e in ends]


def _event_payload(ev: bytes) -> bytes | None:
    """The data of one SSE event (several ``data:`` lines joined), or None for comments and other fields."""
    data = [line[5:].removeprefix(b" ") for line in ev.split(b"\n") if line.startswith(b"data:")]
    if not data:
        return None
    return b"\n".join(data)


def _delta_parts(delta: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(content, reasoning, tool-call arguments) of a chat delta, each None when absent (the slow, general
    case). A tool call is generated output even with empty arguments (then its text is one space)."""
    content = delta.get("content")
    if not (content and isinstance(content, str)):
        content = None
    reasoning = None
    for key in ("reasoning_content", "reasoning"):
        v = delta.get(key)
        if v and isinstance(v, str):
            reasoning = v if reasoning is None else reasoning + v
    tools = None
    calls = delta.get("tool_calls")
    if calls and isinstance(calls, list):
        args = "".join(
            str((c.get("function") or {}).get("arguments") or "") for c in calls if isinstance(c, dict)
        )
        tools = args or " "
    return content, reasoning, tools


def _split_events(raw: RawResponse) -> tuple[list[bytes], list[float]]:
    """The data payloads of the SSE events, each with the timestamp of the read that completed it."""
    body = raw.body
    ends = raw.ends
    times = raw.times
    if b"\r" in body:
        body, ends = _normalize_newlines(body, ends)
    blen = len(body)
    last_read = len(ends) - 1
    payloads: list[bytes] = []
    ptimes: list[float] = []
    off = 0
    ri = 0
    for ev in body.split(b"\n\n"):
        off += len(ev) + 2
        if not ev:
            continue
        if ev[:6] == b"data: " and b"\n" not in ev:
            p = ev[6:]
        else:
            maybe = _event_payload(ev)
            if maybe is None or not maybe.strip():
                continue  # comment, keep-alive, id/event/retry fields
            p = maybe
        if not p:
            continue
        if p == b"[DONE]":
            break
        if ri < last_read:
            target = off if off <= blen else blen
            while ri < last_read and ends[ri] < target:
                ri += 1
        payloads.append(p)
        ptimes.append(times[ri])
    return payloads, ptimes


def _decode_events(payloads: list[bytes], out: ParsedStream) -> list[Any]:
    """All payloads in one orjson call (as a JSON array); on failure, one by one to name the bad event."""
    try:
        objs: list[Any] = orjson.loads(b"[" + b",".join(payloads) + b"]")
        if len(objs) == len(payloads):
            return objs
    except orjson.JSONDecodeError:
        pass
    objs = []
    for k, p in enumerate(payloads):
        try:
            obj = orjson.loads(p)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            snippet = p[:80].decode("utf-8", "replace")
            out.error = f"malformed JSON in stream event {k + 1}: {snippet!r}"
            break
        objs.append(obj)
    return objs


DEFINITIONS = ("accelbench", "vllm")


class _Walk(NamedTuple):
    """What ``_walk_events`` gathered besides what it wrote into the ``ParsedStream``."""

    first: float | None  # the first event that counts (ends TTFT)
    first_content: float | None  # the first event with answer content (ends TTFO)
    last: float  # the last event that counts (ends E2EL)
    texts: list[str]
    answers: list[str]
    reasonings: list[str]
    answer_chunks: int


def parse_stream(raw: RawResponse, *, chat: bool, definition: str = "accelbench") -> ParsedStream:
    """Turn the reads of one response into TTFT/TTFO/ITL/E2EL, text and usage. ``definition``: ``"accelbench"``
    (text-carrying events) or ``"vllm"`` (every event with choices, as ``vllm bench serve``); see the module's
    timing rules."""
    if definition not in DEFINITIONS:
        raise ValueError(f"unknown metrics definition {definition!r} (expected one of {DEFINITIONS})")
    out = ParsedStream()
    if raw.status and raw.status != 200:
        out.error = error_message(raw.status, raw.body)
        return out
    payloads, ptimes = _split_events(raw)
    out.events = len(payloads)
    objs = _decode_events(payloads, out)
    walk = _walk_events(objs, payloads, ptimes, out, chat=chat, vllm=definition == "vllm")
    _finish(out, walk, raw)
    return out


def _walk_events(
    objs: list[Any], payloads: list[bytes], ptimes: list[float], out: ParsedStream, *, chat: bool, vllm: bool
) -> _Walk:
    """Go through the decoded events once: their ITL gaps and usage into ``out`` (an error event or a malformed
    chunk sets ``out.error`` and ends the walk), the rest returned."""
    first: float | None = None
    first_content: float | None = None
    last = 0.0
    texts: list[str] = []
    answers: list[str] = []
    reasonings: list[str] = []
    answer_chunks = 0
    itl = out.itl
    k = 0
    try:
        for k, obj in enumerate(objs):
            choices = obj.get("choices")
            if choices:
                c0 = choices[0]
                reasoning = tools = None
                if chat:
                    delta = c0.get("delta")
                    if not delta:
                        content = None
                    else:
                        content = delta.get("content")
                        if len(delta) > 1 or not content:
                            content, reasoning, tools = _delta_parts(delta)
                else:
                    content = c0.get("text")
                if vllm or content or reasoning or tools:
                    t = ptimes[k]
                    if first is None:
                        first = t
                    else:
                        itl.append(t - last)
                    last = t
                if content and reasoning is None and tools is None:  # the common chunk: content only
                    if first_content is None:
                        first_content = ptimes[k]
                    texts.append(content)
                    answers.append(content)
                    answer_chunks += 1
                elif content or reasoning or tools:
                    if content and first_content is None:
                        first_content = ptimes[k]
                    texts.append((content or "") + (reasoning or "") + (tools or ""))
                    if reasoning:
                        reasonings.append(reasoning)
                    if content or tools:
                        answers.append((content or "") + (tools or ""))
                        answer_chunks += 1
            usage = obj.get("usage")
            if usage:
                _read_usage(usage, out)
            if "error" in obj or (not choices and obj.get("object") == "error"):
                msg = _message_of(obj) or "error event in the stream"
                if obj.get("error") or obj.get("object") == "error":
                    out.error = f"server error in stream: {' '.join(msg.split())[:MAX_REASON]}"
                    break
    except (AttributeError, TypeError, IndexError, KeyError):
        snippet = payloads[k][:80].decode("utf-8", "replace")
        out.error = f"malformed event {k + 1} in stream (not an OpenAI chunk): {snippet!r}"
    return _Walk(first, first_content, last, texts, answers, reasonings, answer_chunks)


def _read_usage(usage: Any, out: ParsedStream) -> None:
    """The token counts of a usage block into ``out`` (those that are integers)."""
    ct = usage.get("completion_tokens")
    pt = usage.get("prompt_tokens")
    if isinstance(ct, int):
        out.completion_tokens = ct
    if isinstance(pt, int):
        out.prompt_tokens = pt
    details = usage.get("completion_tokens_details")
    if details and isinstance(details, dict):
        rt = details.get("reasoning_tokens")
        if isinstance(rt, int):
            out.reasoning_tokens = rt


def _finish(out: ParsedStream, walk: _Walk, raw: RawResponse) -> None:
    """The times from the request's start, the texts joined, and the failure reason, into ``out``."""
    start = raw.start
    if walk.first is not None:
        out.ttft = walk.first - start
    if walk.first_content is not None:
        out.ttfo = walk.first_content - start
    texts = walk.texts
    out.text_chunks = len(texts)
    out.text = "".join(t if isinstance(t, str) else str(t) for t in texts)
    out.reasoning_chunks = len(walk.reasonings)
    out.answer_chunks = walk.answer_chunks
    if walk.reasonings:
        out.reasoning_text = "".join(walk.reasonings)
        out.answer_text = "".join(t if isinstance(t, str) else str(t) for t in walk.answers)
    else:
        out.answer_text = out.text
    if out.ttft is not None:
        out.latency = walk.last - start
    if raw.error is not None:
        out.error = raw.error  # the transport's reason wins over a half-parsed last event
    elif out.error is None and out.ttft is None:
        out.error = f"no generated text in the stream ({out.events} events)"
