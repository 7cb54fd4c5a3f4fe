"""The staggered start of a closed loop (``LoadSettings.ramp_up_s``): when each stream starts, and which
requests the figures leave out.

A closed loop whose streams all start at once runs in waves: the streams' requests reach the server together,
are prefilled together (or one after another), decode in step and end together, so the next requests arrive
together again, and one request's TTFT is short or long by its place in a wave. With a ramp of ``R`` seconds,
stream ``k`` of ``C`` starts ``k x R / C`` after the clock (a stream sends its next request as soon as its last
one ends, as in any closed loop), so requests reach the server one at a time and keep that spacing. Every
request that starts before the ramp's end is left out of the figures: it is kept in the records, marked
``ramp``, counted in the summary's ``ramp_requests`` and named in a note. The window the throughputs divide by
is then the measured requests' own, first send to last completion.

The rule is one comparison of a request's start with the ramp's end, so another client's per-request start
times can be judged the same way: ``benchmarks/vllm_agreement.py`` leaves out the same requests from vLLM's
client, whose streams it staggers with ``RampGate`` (this module imports nothing of accelbench at run time, so
that client's Python can import it from the source tree).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # nothing of accelbench at run time: vLLM's Python imports this module for RampGate
    from accelbench.domain.request_record import RequestRecord


def stream_starts(streams: int, ramp_s: float) -> list[float]:
    """When each of ``streams`` streams sends its first request, seconds from the clock: evenly over the ramp,
    the first at once (all at once without a ramp)."""
    if streams <= 0:
        return []
    return [k * ramp_s / streams for k in range(streams)]


def allowed(streams: int, ramp_s: float, t: float) -> int:
    """Streams started ``t`` seconds after the clock: the requests a staggered closed loop lets be in flight."""
    if ramp_s <= 0 or t >= ramp_s:
        return streams
    return min(streams, 1 + math.floor(t * streams / ramp_s + 1e-9))


def in_ramp(start_s: float, ramp_s: float) -> bool:
    """Whether a request that started ``start_s`` seconds after the clock started within the ramp: the rule of
    ``domain.bench.in_ramp`` (which the store uses), repeated so that this module imports nothing of accelbench
    at run time; a test holds the two equal."""
    return ramp_s > 0 and start_s < ramp_s


def mark(records: Sequence[RequestRecord], ramp_s: float) -> int:
    """Mark the records that started within the ramp (``RequestRecord.ramp``); how many they are."""
    for r in records:
        r.ramp = in_ramp(r.start_s, ramp_s)
    return sum(1 for r in records if r.ramp)


def measured(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The records the figures count: those that did not start within the ramp."""
    return [r for r in records if not r.ramp]


def note(streams: int, ramp_s: float, left_out: int, sent: int) -> str:
    """The sentence a result carries about its staggered start."""
    every = ramp_s / streams if streams else ramp_s
    text = (
        f"Staggered start: the {streams} stream{'s' if streams != 1 else ''} started one every {every:.3g} s over "
        f"{ramp_s:g} s; the {left_out} of {sent} requests that started within it are left out of the figures "
        "(kept in the records, marked ramp)."
    )
    if sent and left_out >= sent:
        text += (
            " Every request started within the ramp, so there are no figures: shorten --ramp-up or send more."
        )
    return text


class RampGate:
    """A semaphore whose count rises one stream at a time over the ramp (``allowed``), then stays at
    ``streams``: the same staggered closed loop for a client that bounds its requests with a semaphore (vLLM's
    benchmark client). The clock starts at the first acquire; acquirers go in arrival order."""

    def __init__(self, streams: int, ramp_s: float) -> None:
        self.streams = streams
        self.ramp_s = ramp_s
        self.t0: float | None = None
        self.in_flight = 0
        self._order = asyncio.Lock()
        self._freed = asyncio.Event()

    async def acquire(self) -> None:
        async with self._order:
            while True:
                now = time.perf_counter()
                if self.t0 is None:
                    self.t0 = now
                into = now - self.t0
                if self.in_flight < allowed(self.streams, self.ramp_s, into):
                    break
                # wait for a request to end or the next stream's start, whichever comes first
                step = self.ramp_s / self.streams if self.streams else 0.0
                next_start = (
                    (math.floor(into / step + 1e-9) + 1) * step if step and into < self.ramp_s else math.inf
                )
                self._freed.clear()
                wait = None if math.isinf(next_start) else max(0.0, next_start - into)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._freed.wait(), timeout=wait)
            self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1
        self._freed.set()

    def locked(self) -> bool:
        t = 0.0 if self.t0 is None else time.perf_counter() - self.t0
        return self.in_flight >= allowed(self.streams, self.ramp_s, t)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
