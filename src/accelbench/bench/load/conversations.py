"""Multi-turn conversations: each conversation sends its turns in order, every turn the whole conversation so far
(the answers included) plus a new user message, with think time between an answer and the next turn."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import orjson

from accelbench.bench.client import StreamClient
from accelbench.bench.feeds import request_body
from accelbench.bench.load.sending import Sending, run_interruptible
from accelbench.bench.stream_parse import parse_stream
from accelbench.domain.load import BenchConfig

_pc = time.perf_counter

#: A turn's request bytes from the conversation so far and the turn's ``max_tokens``.
TurnBody = Callable[[list[dict[str, str]], int | None], bytes]


def turn_body(client: StreamClient, path: str, config: BenchConfig, model: str) -> TurnBody:
    """How a turn's request is made: the single-turn body (every setting the same), its messages the
    conversation so far, rendered for ``path``."""

    def body(messages: list[dict[str, str]], max_tokens: int | None) -> bytes:
        one = orjson.loads(request_body(config, model, "", max_tokens))
        one["messages"] = messages
        return client.render(path, orjson.dumps(one))

    return body


async def send_conversations(sending: Sending, n: int, config: BenchConfig, body: TurnBody) -> None:
    """Multi-turn conversations: ``max_concurrency`` of them at a time (all at once when unset), each sending
    its turns in order, every turn the whole conversation (the answers included) plus a new user message, with
    ``think_time_s`` between an answer and the next turn. Request ``s * turns + k`` is turn ``k + 1`` of
    conversation ``s``; a conversation's user messages are the feed's next ``turns`` prompts, taken together,
    so a rerun sends the same conversations. A failed turn ends its conversation (the rest are not sent)."""
    client, feed, col, stop = sending.client, sending.feed, sending.col, sending.stop
    turns = config.turns
    sessions = n // turns
    if sessions == 0:
        return
    take = asyncio.Lock()
    next_s = 0

    async def conversation() -> None:
        nonlocal next_s
        while True:
            async with take:
                if next_s >= sessions or stop.should_stop(_pc()):
                    return
                s = next_s
                next_s += 1
                items = [await feed.get() for _ in range(turns)]
            history: list[dict[str, str]] = []
            for k, item in enumerate(items):
                if item is None or stop.should_stop(_pc()):
                    return
                i = s * turns + k
                history.append({"role": "user", "content": item.text or ""})
                data = body(history, item.max_tokens)
                # only the first turn's prompt has the length the client made; later ones add the history
                col.take(i, item if k == 0 else item._replace(prompt_len=None))
                now = _pc()
                col.eligible[i] = col.scheduled[i] = now
                raw = await client.send(data)
                col.add(i, raw)
                answer = parse_stream(raw, chat=True)  # the answer goes into the next turn
                if not answer.success:
                    return
                history.append({"role": "assistant", "content": answer.answer_text})
                if config.think_time_s and k < turns - 1:
                    due = _pc() + config.think_time_s
                    await asyncio.sleep(config.think_time_s)
                    while _pc() < due:  # the loop's timers may fire a little early
                        await asyncio.sleep(0)

    workers = min(config.max_concurrency or sessions, sessions)

    async def every_conversation() -> None:
        await asyncio.gather(*(conversation() for _ in range(workers)))

    await run_interruptible(every_conversation(), sending.interruptible)
