"""What happened to each request of a benchmark as the client saw it (RequestRecord). Times in seconds,
relative to the benchmark start, as ``vllm bench serve`` keeps them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from accelbench.domain.strict import StrictModel


class RequestRecord(StrictModel):
    """One request as the client saw it. Times in seconds, relative to the benchmark start."""

    index: int
    session: int | None = Field(default=None, description="Multi-turn: the conversation it belongs to.")
    turn: int | None = Field(default=None, description="Multi-turn: its turn in the conversation, from 1.")
    prefix_group: int | None = Field(default=None, description="Shared prefixes: its prefix group.")
    stage: int | None = Field(default=None, description="Load plans: the stage it was sent in.")
    ramp: bool = Field(
        default=False,
        description="Started within the staggered start (LoadSettings.ramp_up_s): left out of the figures.",
    )
    prompt_len: int = Field(description="Input tokens as counted by the client's tokenizer.")
    server_prompt_tokens: int | None = Field(
        default=None, description="usage.prompt_tokens reported by the server."
    )
    max_tokens: int | None = None
    output_tokens: int = 0
    output_tokens_source: Literal["usage", "tokenizer", "chunks", "none"] = "none"
    planned_send_s: float = Field(
        default=0.0,
        description="When it became due: its scheduled time, or when a concurrency slot freed up if that was "
        "later. start_s minus this is the scheduling lag, the client's own delay.",
    )
    queue_s: float = Field(
        default=0.0,
        description="Time it waited for a concurrency slot after its scheduled time (vLLM's client queue time).",
    )
    start_s: float = Field(default=0.0, description="When it was actually sent.")
    ttft_s: float = Field(
        default=0.0,
        description="Time to first token: sent -> first chunk carrying generated text (content, reasoning or "
        "a tool-call delta; a role-only chunk does not count). With metrics_definition 'vllm': sent -> first "
        "chunk with a non-empty choices list, whatever it carries.",
    )
    itl_s: list[float] = Field(
        default_factory=list,
        description="Gaps between consecutive text-carrying chunks (metrics_definition 'vllm': between "
        "consecutive chunks with choices).",
    )
    latency_s: float = Field(
        default=0.0,
        description="End-to-end latency: sent -> last text-carrying chunk (metrics_definition 'vllm': last "
        "chunk with choices).",
    )
    success: bool = False
    error: str = ""
    generated_text: str = ""
    ttfo_s: float | None = Field(
        default=None,
        description="Time to first output: sent -> first chunk carrying answer content (delta.content for "
        "chat, text for completions); reasoning and tool-call deltas do not count. The same in both metrics "
        "definitions; None when no content came (e.g. tool calls only).",
    )
    reasoning_tokens: int = Field(
        default=0,
        description="Output tokens of reasoning (delta.reasoning_content / delta.reasoning); see "
        "token_split_source.",
    )
    answer_tokens: int = Field(
        default=0,
        description="Output tokens that are not reasoning: content and tool-call arguments.",
    )
    reasoning_chunks: int = Field(default=0, description="Chunks carrying reasoning text.")
    answer_chunks: int = Field(default=0, description="Chunks carrying content or tool-call deltas.")
    token_split_source: Literal["usage", "tokenizer", "chunks", "none"] = Field(
        default="none",
        description="Where reasoning_tokens/answer_tokens came from: usage (completion_tokens_details."
        "reasoning_tokens; answer = completion_tokens minus it), tokenizer (reasoning and answer text counted "
        "separately), chunks (chunks of each). Without reasoning, answer_tokens is output_tokens and this is "
        "output_tokens_source.",
    )

    @property
    def scheduling_lag_s(self) -> float:
        return self.start_s - self.planned_send_s

    @property
    def tpot_s(self) -> float | None:
        if not self.success or self.output_tokens <= 1:
            return None
        return (self.latency_s - self.ttft_s) / (self.output_tokens - 1)
