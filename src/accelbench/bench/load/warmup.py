"""The warmup requests: the first ones of the feed, sent before the clock starts, their results only checked for
a server that fails every one."""

from __future__ import annotations

import asyncio

from accelbench.bench.client import RawResponse, StreamClient
from accelbench.bench.feeds import Feed
from accelbench.bench.stream_parse import parse_stream


async def warmup(client: StreamClient, feed: Feed, count: int, concurrency: int) -> list[RawResponse]:
    """Send the first ``count`` requests of ``feed`` (the warmups) with ``concurrency`` workers."""
    out: list[RawResponse] = []
    taken = 0

    async def worker() -> None:
        nonlocal taken
        while taken < count:
            taken += 1  # claimed before waiting: exactly ``count`` items are taken, the warmups
            item = await feed.get()
            if item is None:
                return
            out.append(await client.send(item.data))

    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, count)))))
    return out


def warmup_note(outs: list[RawResponse], chat: bool) -> str | None:
    """The note for warmups that all failed (with the first one's reason), else None."""
    bad = [r for r in outs if r.error or (r.status and r.status != 200)]
    if bad and len(bad) == len(outs):
        reason = bad[0].error or parse_stream(bad[0], chat=chat).error
        return f"Every warmup request failed (first: {reason})."
    return None
