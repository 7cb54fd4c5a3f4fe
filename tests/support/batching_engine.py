"""A continuous-batching engine with a known cost model, for the fixture server (a TEST FIXTURE).

``BatchingEngine(slots, step_ms, per_seq_ms, prefill_ms_per_token)`` runs on the server's event loop: every
step takes ``step_ms + per_seq_ms x running`` plus ``prefill_ms_per_token`` x the prompt tokens of the
requests admitted in that step; at most ``slots`` requests run, the rest wait in arrival order; every running
request gets one token per step (a newcomer its first token at the end of its admitting step). So, in a closed
loop of C <= slots users with no prefill cost, TPOT is exactly ``step_ms + per_seq_ms x C``; above ``slots``
TPOT stops growing, throughput flattens (the knee) and requests queue.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass
class _Seq:
    prompt_tokens: int
    remaining: int
    tokens: asyncio.Queue[int] = field(default_factory=asyncio.Queue)


class BatchingEngine:
    def __init__(
        self, *, slots: int, step_ms: float, per_seq_ms: float = 0.0, prefill_ms_per_token: float = 0.0
    ) -> None:
        self.slots = slots
        self.step_ms = step_ms
        self.per_seq_ms = per_seq_ms
        self.prefill_ms_per_token = prefill_ms_per_token
        self.waiting: collections.deque[_Seq] = collections.deque()
        self.running: list[_Seq] = []
        self.steps = 0
        self.max_running = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def step_cost_ms(self, running: int, admitted_prompt_tokens: int = 0) -> float:
        return self.step_ms + self.per_seq_ms * running + self.prefill_ms_per_token * admitted_prompt_tokens

    async def generate(self, prompt_tokens: int, n_tokens: int) -> AsyncIterator[int]:
        """Yields once per token of this request, as the engine produces them."""
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._loop())
        seq = _Seq(prompt_tokens, n_tokens)
        self.waiting.append(seq)
        assert self._wake is not None
        self._wake.set()
        for _ in range(n_tokens):
            yield await seq.tokens.get()

    async def _loop(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        due: float | None = None  # when the last step ended on the engine's own clock; None when it went idle
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                due = None
            admitted = 0
            while self.waiting and len(self.running) < self.slots:
                seq = self.waiting.popleft()
                admitted += seq.prompt_tokens
                self.running.append(seq)
            self.max_running = max(self.max_running, len(self.running))
            # back-to-back steps follow the engine's clock, not the moment the loop woke: a busy machine waking
            # one step late does not push every later step back, so the TPOT stays the cost model's
            start = loop.time() if due is None else due
            due = start + self.step_cost_ms(len(self.running), admitted) / 1000
            await asyncio.sleep(max(0.0, due - loop.time()))
            self.steps += 1
            for seq in self.running:
                seq.remaining -= 1
                seq.tokens.put_nowait(self.steps)
            self.running = [s for s in self.running if s.remaining > 0]

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
