"""What a benchmark keeps of each request while it runs (``Collector``): its raw response (parsed after the run,
or as it ends once the raw-bytes budget is used up), when it was due and sent, and what it asked for."""

from __future__ import annotations

from typing import Any

from accelbench.bench.client import RawResponse
from accelbench.bench.feeds import ReadyRequest
from accelbench.bench.stream_parse import ParsedStream, parse_stream
from accelbench.bench.tokenizer import Tokenizer

#: The failure reason of a request a cancel interrupted (or that was in flight when the run was cancelled).
CANCELLED = "cancelled"


class Collector:
    """Holds each request's outcome; parses right away only once the raw-bytes budget is used up."""

    def __init__(self, n: int, chat: bool, budget: int, definition: str = "accelbench") -> None:
        self.chat = chat
        self.definition = definition  # LoadSettings.metrics_definition, passed to parse_stream
        self._split: dict[int, tuple[int, int]] | None = None  # tokenizer counts of reasoning/answer text
        self.budget = budget
        self.held = 0
        self.raw: list[RawResponse | None] = [None] * n
        self.parsed: list[ParsedStream | None] = [None] * n
        self.times: list[tuple[float, float]] = [(0.0, 0.0)] * n  # (start, end) perf_counter
        self.sent = [False] * n
        self.eligible = [0.0] * n
        self.scheduled = [0.0] * n
        self.prompt_len: list[int | None] = [None] * n
        self.max_tokens: list[int | None] = [None] * n
        self.group: list[int | None] = [None] * n
        self.done = 0

    def take(self, i: int, item: ReadyRequest) -> None:
        """What a request carries besides its bytes, noted when it is sent."""
        self.prompt_len[i] = item.prompt_len
        self.max_tokens[i] = item.max_tokens
        self.group[i] = item.group
        self.sent[i] = True

    def add(self, i: int, raw: RawResponse) -> None:
        self.times[i] = (raw.start, raw.end)
        if self.held < self.budget:
            self.raw[i] = raw
            self.held += raw.body_len
        else:
            self.parsed[i] = parse_stream(raw, chat=self.chat, definition=self.definition)
        self.done += 1

    def result(self, i: int) -> ParsedStream:
        p = self.parsed[i]
        if p is None:
            raw = self.raw[i]
            assert raw is not None
            p = parse_stream(raw, chat=self.chat, definition=self.definition)
            self.raw[i] = None
        return p

    def token_split(
        self,
        i: int,
        parsed: dict[int, ParsedStream],
        tokenizer: Tokenizer | None,
        output_tokens: int,
        output_source: str,
    ) -> dict[str, Any]:
        """RequestRecord's reasoning/answer fields of request ``i``: from usage.completion_tokens_details when
        the server sent it, else the tokenizer on the reasoning and the answer text separately (all requests
        in one batch, on the first call), else the chunks of each. Without reasoning the answer is the whole
        output."""
        p = parsed[i]
        fields: dict[str, Any] = {
            "ttfo_s": p.ttfo,
            "reasoning_chunks": p.reasoning_chunks,
            "answer_chunks": p.answer_chunks,
        }
        if not p.success:
            return fields
        if p.reasoning_tokens is not None and p.completion_tokens is not None:
            r, a, src = p.reasoning_tokens, max(0, p.completion_tokens - p.reasoning_tokens), "usage"
        elif p.reasoning_chunks == 0:
            r, a, src = 0, output_tokens, output_source
        elif tokenizer is not None:
            if self._split is None:
                need = [
                    j
                    for j, q in parsed.items()
                    if q.success
                    and q.reasoning_chunks
                    and (q.reasoning_tokens is None or q.completion_tokens is None)
                ]
                counts = tokenizer.count_output(
                    [t for j in need for t in (parsed[j].reasoning_text, parsed[j].answer_text)]
                )
                self._split = {j: (counts[2 * x], counts[2 * x + 1]) for x, j in enumerate(need)}
            r, a = self._split[i]
            src = "tokenizer"
        else:
            r, a, src = p.reasoning_chunks, p.answer_chunks, "chunks"
        fields.update(reasoning_tokens=r, answer_tokens=a, token_split_source=src)
        return fields
