"""One benchmark against an OpenAI-compatible streaming server: prompts -> schedule -> requests -> summary.

``arun_benchmark`` (and its blocking twin ``run_benchmark``) does, in order:

1. loads a tokenizer unless one is given (a sweep loads it once and passes it to every call);
2. computes every send time from the seed (``schedule``) and makes every request of the cell before its clock
   starts (``feeds``: prompts from ``datasets`` rendered to bytes, a cancel seen between batches; a cell too large
   for the memory budget is made by a separate process a bounded look-ahead ahead of the sender, and the result
   says so), so the measured window does nothing but send and timestamp;
3. sends the warmup requests (distinct prompts, results discarded);
4. starts scraping ``/metrics`` (``telemetry.prometheus``) with a baseline sample, and, when the engine runs on
   this machine, sampling its devices on a background thread (``telemetry.devices``: CPU, GPUs, Neuron);
5. sends the measured requests. With an infinite rate, ``max_concurrency`` workers take the next prompt as soon
   as they are free (with ``ramp_up_s`` they start one by one over the ramp, and the requests that start within
   it are left out of the figures: ``bench.ramp``); with a finite rate a dispatcher releases each request at its planned time and a semaphore
   bounds concurrency. Raw responses are kept and parsed after the run (a memory budget switches to parsing
   as responses end, for very long runs);
6. builds one ``RequestRecord`` per request sent and the summary (``metrics``), with notes: scheduling lag when
   the client could not keep up, prompt-token deviations, where output token counts came from, interruptions.

Cancellation (``cancel``, a ``threading.Event``, e.g. set from a Ctrl-C handler or an API call) stops sending,
fails the requests in flight with the reason ``cancelled`` and returns the summary of what was sent, marked
``interrupted``. A server that goes away makes requests fail with the connection error; the call still returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import orjson

from accelbench.bench import ramp
from accelbench.bench import stages as stages_mod
from accelbench.bench.client import ParsedStream, RawResponse, StreamClient, parse_stream
from accelbench.bench.datasets import PromptSource, open_dataset
from accelbench.bench.feeds import (
    PATHS,
    Feed,
    ProcessFeed,
    ReadyFeed,
    ReadyRequest,
    RenderPlan,
    lookahead,
    open_feed,
    request_body,
)
from accelbench.bench.metrics import compute_metrics
from accelbench.bench.schedule import send_times
from accelbench.bench.tokenizer import ServerTokenizer, Tokenizer, load_tokenizer
from accelbench.bench.turns import turn_metrics
from accelbench.domain.bench import (
    ITL_COUNTING,
    BenchConfig,
    BenchmarkSummary,
    DatasetKind,
    Endpoint,
    EndpointKind,
    LoadStage,
    RequestRecord,
    TelemetrySummary,
)
from accelbench.domain.device import DeviceTelemetry, device_notes
from accelbench.errors import AccelbenchError
from accelbench.redact import redact_url
from accelbench.telemetry.devices import DeviceMonitor, collectors_for
from accelbench.telemetry.prometheus import PrometheusScraper

ProgressFn = Callable[[int, int], None]
T = TypeVar("T")

#: Raw response bytes kept for parsing after the run; beyond this, responses are parsed as they end.
RAW_BUDGET_BYTES = 256 * 1024 * 1024
#: A run whose scheduling lag exceeds these (ms) gets a note that the client was the bottleneck.
LAG_NOTE_P50_MS = 2.0
LAG_NOTE_P99_MS = 10.0
#: A run whose /metrics scrapes took longer than this on average (ms) gets a note about the cost of scraping.
SCRAPE_NOTE_MS = 10.0
CANCELLED = "cancelled"
#: Connections opened before the measurement starts (at most; one per concurrent request).
PRECONNECT_MAX = 256
_pc = time.perf_counter


def server_root(base_url: str) -> str:
    """The server root: trailing slashes and a trailing ``/v1`` removed (routes are added to it)."""
    root = base_url.strip().rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


class _Collector:
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


class _Stop:
    def __init__(self, deadline: float | None) -> None:
        self.flag = False
        self.deadline = deadline
        self.cancelled = False
        self.duration_hit = False

    def should_stop(self, now: float) -> bool:
        if self.flag:
            return True
        if self.deadline is not None and now >= self.deadline:
            self.duration_hit = True
            return True
        return False


async def _send_all(
    client: StreamClient,
    feed: Feed,
    n: int,
    offsets: Sequence[float],
    max_concurrency: int | None,
    col: _Collector,
    stop: _Stop,
    t0: float,
    interruptible: list[asyncio.Task[Any]],
    ramp_s: float = 0.0,
) -> None:
    """Send ``n`` requests from ``feed`` by the plan and collect the outcomes into ``col``. A task that only
    waits to send (the dispatcher of a finite rate) is put in ``interruptible`` so a cancel can wake it. A
    closed loop with a ramp starts its workers one by one over ``ramp_s`` seconds (``bench.ramp``)."""
    if n == 0:
        return
    if all(o == 0.0 for o in offsets):
        # Everything is due at once: a fixed set of workers, each takes the next request when free.
        workers = min(max_concurrency or n, n)
        next_i = 0
        starts = ramp.stream_starts(workers, ramp_s)

        async def worker(k: int) -> None:
            nonlocal next_i
            send = client.send
            if starts[k] and not await _wait_until(t0 + starts[k], stop):
                return
            while True:
                if next_i >= n or stop.should_stop(_pc()):
                    return
                item = await feed.get()
                if item is None:
                    return
                i = next_i  # taken right after the item, without a pause: item k is request k
                if i >= n:
                    return
                next_i = i + 1
                now = _pc()
                if stop.should_stop(now):
                    return
                col.take(i, item)
                col.eligible[i] = now
                col.scheduled[i] = t0
                col.add(i, await send(item.data))

        await asyncio.gather(*(worker(k) for k in range(workers)))
        return

    sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    tasks: set[asyncio.Task[None]] = set()

    async def one(i: int, data: bytes) -> None:
        try:
            col.add(i, await client.send(data))
        finally:
            if sem is not None:
                sem.release()

    loop = asyncio.get_running_loop()

    async def dispatch() -> None:
        for i in range(n):
            item = await feed.get()  # made before the clock (or by the prompt process, ahead of its time)
            if item is None:
                return
            due = t0 + offsets[i]
            delay = due - _pc()
            if delay > 0:
                await asyncio.sleep(delay)
            while _pc() < due:  # the loop's timers have millisecond resolution and may fire early
                await asyncio.sleep(0)
            if stop.should_stop(_pc()):
                return
            eligible = due
            if sem is not None:
                if sem.locked():
                    await sem.acquire()
                    eligible = max(due, _pc())
                else:
                    await sem.acquire()
            if stop.should_stop(_pc()):
                if sem is not None:
                    sem.release()
                return
            col.take(i, item)
            col.eligible[i] = eligible
            col.scheduled[i] = due
            task = loop.create_task(one(i, item.data))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    dispatcher = loop.create_task(dispatch())
    interruptible.append(dispatcher)
    try:
        await asyncio.wait([dispatcher])  # returns when it ends, also when a cancel interrupted it
        if not dispatcher.cancelled() and dispatcher.exception() is not None:
            raise dispatcher.exception()  # type: ignore[misc]
    finally:
        if not dispatcher.done():
            dispatcher.cancel()
        while tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)


async def _wait_until(due: float, stop: _Stop) -> bool:
    """Sleep until ``due`` (perf_counter) in short slices, so that a cancel or the deadline ends the wait;
    whether it is still time to send."""
    while (left := due - _pc()) > 0:
        if stop.should_stop(_pc()):
            return False
        await asyncio.sleep(min(left, 0.05))
    return not stop.should_stop(_pc())


async def _send_staged(
    client: StreamClient,
    feed: Feed,
    n: int,
    stages: Sequence[LoadStage],
    col: _Collector,
    stop: _Stop,
    t0: float,
) -> None:
    """A concurrency load plan: send while fewer requests are in flight than the plan allows now, else wait for
    a completion or the next change of the allowed level; stop at the plan's end (``stop.deadline``)."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()
    freed = asyncio.Event()
    in_flight = 0

    async def one(i: int, data: bytes) -> None:
        nonlocal in_flight
        try:
            col.add(i, await client.send(data))
        finally:
            in_flight -= 1
            freed.set()

    i = 0
    try:
        while i < n:
            now = _pc()
            if stop.should_stop(now):
                break
            cap, change = stages_mod.allowed(stages, now - t0)
            if in_flight < cap:
                item = await feed.get()
                if item is None:
                    break
                col.take(i, item)
                col.eligible[i] = col.scheduled[i] = _pc()
                in_flight += 1
                task = loop.create_task(one(i, item.data))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                i += 1
                continue
            freed.clear()
            wait = max(0.0, min(t0 + change, stop.deadline or math.inf) - _pc())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(freed.wait(), timeout=wait)
    finally:
        while tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)


async def _send_sessions(
    client: StreamClient,
    feed: Feed,
    n: int,
    config: BenchConfig,
    body: Callable[[list[dict[str, str]], int | None], bytes],
    col: _Collector,
    stop: _Stop,
    interruptible: list[asyncio.Task[Any]],
) -> None:
    """Multi-turn conversations: ``max_concurrency`` of them at a time (all at once when unset), each sending
    its turns in order, every turn the whole conversation (the answers included) plus a new user message, with
    ``think_time_s`` between an answer and the next turn. Request ``s * turns + k`` is turn ``k + 1`` of
    conversation ``s``; a conversation's user messages are the feed's next ``turns`` prompts, taken together,
    so a rerun sends the same conversations. A failed turn ends its conversation (the rest are not sent)."""
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

    task = asyncio.get_running_loop().create_task(every_conversation())
    interruptible.append(task)
    try:
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    finally:
        if not task.done():
            task.cancel()


async def _warmup(client: StreamClient, feed: Feed, count: int, concurrency: int) -> list[RawResponse]:
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


async def _to_thread(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"}


def engine_is_local(endpoint: Endpoint) -> bool:
    """Whether the engine runs on this machine: a local target gave its pids, or the URL is a loopback one."""
    if endpoint.engine_pids:
        return True
    host = httpx.URL(endpoint.base_url).host
    return host in _LOOPBACK or host.startswith("127.")


def device_monitor(endpoint: Endpoint, config: BenchConfig) -> DeviceMonitor:
    """The monitor of this machine's devices (whatever is present), with the engine's cgroups when its pids
    are known; it samples every ``scrape_interval_s``."""
    collectors, missing = collectors_for(None, pids=endpoint.engine_pids)
    if not endpoint.engine_pids:
        missing.append(
            "cgroup: the engine's process ids are not known (not started by accelbench), so its own "
            "CPU time and memory are not measured"
        )
    return DeviceMonitor(collectors, interval_s=config.scrape_interval_s, missing=missing)


async def arun_benchmark(
    endpoint: Endpoint,
    config: BenchConfig,
    *,
    tokenizer: Tokenizer | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    scrape: bool | None = None,
    devices: bool | None = None,
) -> BenchmarkSummary:
    """Run one benchmark and return its summary (see the module docstring). Errors a user can fix before
    anything is sent (no tokenizer, a bad dataset file, an input length the template cannot fit) raise
    ``AccelbenchError``; failures of requests never raise. ``devices`` samples this machine's devices (None:
    when the engine runs here, ``engine_is_local``)."""
    date = datetime.now(UTC)
    root = server_root(endpoint.base_url)
    endpoint = endpoint.model_copy(update={"base_url": root})
    kind = EndpointKind(config.endpoint)
    notes: list[str] = []

    own_tokenizer = tokenizer is None
    if tokenizer is None:
        try:
            tokenizer = await _to_thread(load_tokenizer, endpoint)
        except AccelbenchError as exc:
            if DatasetKind(config.dataset) in (DatasetKind.random, DatasetKind.trace):
                raise
            notes.append(f"No tokenizer ({exc.message}); output tokens come from the server's usage.")
    # what can be checked without making every prompt is checked here, before anything is sent
    source: PromptSource = await _to_thread(open_dataset, config, tokenizer)
    n, n_warm = source.count, source.num_warmups

    client = StreamClient(
        root, headers=endpoint.headers, api_key=endpoint.api_key, timeout_s=config.timeout_s
    )
    path = PATHS[kind]
    model = endpoint.served_model
    plan = RenderPlan(config, model, client.request_head)
    feed: Feed = ReadyFeed([])
    making_notes: list[str] = []  # how the prompts were made, when that needs saying
    stages = config.stages or []
    rate_plan = bool(stages) and stages[0].request_rate is not None
    if rate_plan:
        offsets = stages_mod.rate_offsets(stages, config.burstiness, config.seed, n)
    elif stages:
        offsets = [0.0] * n  # a closed loop: sent as the plan lets in-flight requests through
    elif source.offsets is not None:
        offsets = source.offsets
    else:
        offsets = send_times(n, config.request_rate, config.burstiness, config.seed, kind=config.schedule)
    col = _Collector(n, kind == EndpointKind.chat, RAW_BUDGET_BYTES, config.metrics_definition)
    do_scrape = config.scrape_metrics if scrape is None else scrape
    scraper = (
        PrometheusScraper(
            root,
            interval_s=config.scrape_interval_s,
            headers={
                **endpoint.headers,
                **({"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}),
            },
        )
        if do_scrape
        else None
    )
    do_devices = engine_is_local(endpoint) if devices is None else devices
    monitor: DeviceMonitor | None = None
    device_tel: DeviceTelemetry | None = None
    stop = _Stop(None)
    loop = asyncio.get_running_loop()
    background: list[asyncio.Task[None]] = []

    async def watch_cancel() -> None:
        assert cancel is not None
        while not cancel.is_set():
            await asyncio.sleep(0.05)
        stop.flag = stop.cancelled = True
        feed.halt()
        client.abort_all(CANCELLED)
        for t in interruptible:
            t.cancel()

    async def tick() -> None:
        assert progress is not None
        while True:
            progress(col.done, n)
            await asyncio.sleep(0.2)

    interruptible: list[asyncio.Task[Any]] = []  # tasks a cancel may interrupt (warmup, dispatcher)
    if cancel is not None and cancel.is_set():
        stop.flag = stop.cancelled = True
    gc_threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()  # long-lived objects out of the collector's way; fewer, shorter pauses while timing
    gc.set_threshold(max(gc_threshold[0], 50_000), gc_threshold[1], gc_threshold[2])
    t0 = _pc()
    wall0 = time.time()
    try:
        if cancel is not None:
            background.append(loop.create_task(watch_cancel()))
        if not stop.flag:
            # every request is made before the first is sent (a user error in them raises here); a cancel stops
            # the making between batches
            opened = await open_feed(
                source, plan, tokenizer, lambda: stop.flag or bool(cancel and cancel.is_set())
            )
            feed, making_notes = opened.feed, opened.notes
        if n_warm and not stop.flag:
            warm_task = loop.create_task(_warmup(client, feed, n_warm, config.max_concurrency or n_warm))
            interruptible.append(warm_task)
            await asyncio.wait([warm_task])
            if not warm_task.cancelled():
                outs = warm_task.result()
                bad = [r for r in outs if r.error or (r.status and r.status != 200)]
                if bad and len(bad) == len(outs):
                    reason = bad[0].error or parse_stream(bad[0], chat=kind == EndpointKind.chat).error
                    notes.append(f"Every warmup request failed (first: {reason}).")
            interruptible.clear()
        if not stop.flag:
            if isinstance(feed, ProcessFeed):  # refilled while the warmups ran
                await feed.fill(min(lookahead(config), n), lambda: stop.flag)
            await client.preconnect(min(config.max_concurrency or n, n, PRECONNECT_MAX))
        if scraper is not None:
            await scraper.start(_pc())
        if do_devices and not stop.flag:
            # the collectors' probes and the baseline sample block (files, NVML): off the event loop
            monitor = await _to_thread(device_monitor, endpoint, config)
            await _to_thread(monitor.start, _pc())
        if progress is not None:
            background.append(loop.create_task(tick()))
        t0 = _pc()
        wall0 = time.time()
        if monitor is not None:
            monitor.restart_clock(t0)
        if config.duration_s is not None:
            stop.deadline = t0 + config.duration_s
        if stages:
            stop.deadline = t0 + stages_mod.stage_starts(stages)[-1]
        if not stop.flag:
            if config.turns > 1:

                def body(messages: list[dict[str, str]], max_tokens: int | None) -> bytes:
                    # the single-turn body (every setting the same), its messages the conversation so far
                    one = orjson.loads(request_body(config, model, "", max_tokens))
                    one["messages"] = messages
                    return client.render(path, orjson.dumps(one))

                await _send_sessions(client, feed, n, config, body, col, stop, interruptible)
            elif stages and not rate_plan:
                await _send_staged(client, feed, n, stages, col, stop, t0)
            else:
                await _send_all(
                    client,
                    feed,
                    min(n, len(offsets)),
                    offsets,
                    config.max_concurrency,
                    col,
                    stop,
                    t0,
                    interruptible,
                    config.ramp_up_s,
                )
    finally:
        feed.halt()
        await feed.aclose()
        for t in background:
            t.cancel()
        for t in background:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        if scraper is not None:
            with contextlib.suppress(Exception):
                await scraper.stop()
        if monitor is not None:
            try:
                device_tel = await _to_thread(monitor.stop)
            except Exception as exc:  # never lose a benchmark to its telemetry
                device_tel = DeviceTelemetry(
                    missing=[f"device telemetry failed: {type(exc).__name__}: {exc}"]
                )
        await client.aclose()
        gc.unfreeze()
        gc.set_threshold(*gc_threshold)
    if progress is not None:
        progress(col.done, n)
    if feed.error is not None and not stop.cancelled:
        if not isinstance(feed.error, AccelbenchError):
            raise feed.error
        notes.append(f"Making the prompts failed after {feed.delivered} of {n + n_warm}: {feed.error}")
    # complete now: the making has stopped (a prompt process sent its own notes at its end)
    notes.extend(feed.notes if isinstance(feed, ProcessFeed) else source.notes)
    notes.extend(making_notes)
    try:
        return await _to_thread(
            _summarize,
            endpoint,
            config,
            tokenizer,
            n,
            col,
            offsets,
            t0,
            wall0,
            stop,
            scraper,
            notes,
            date,
            source.expected_prefix_hit_rate,
            device_tel,
        )
    finally:
        if own_tokenizer and isinstance(tokenizer, ServerTokenizer):
            tokenizer.close()  # its HTTP client and threads; a tokenizer passed in stays the caller's


def _summarize(
    endpoint: Endpoint,
    config: BenchConfig,
    tokenizer: Tokenizer | None,
    n: int,
    col: _Collector,
    offsets: Sequence[float],
    t0: float,
    wall0: float,
    stop: _Stop,
    scraper: PrometheusScraper | None,
    notes: list[str],
    date: datetime,
    expected_hit: float | None = None,
    device_tel: DeviceTelemetry | None = None,
) -> BenchmarkSummary:
    sent = [i for i in range(n) if col.sent[i]]
    parsed: dict[int, ParsedStream] = {}
    for i in sent:
        if col.raw[i] is None and col.parsed[i] is None:
            # sent but never finished: only possible when the run was cancelled mid-request
            parsed[i] = ParsedStream(error=CANCELLED)
            col.times[i] = (col.eligible[i], col.eligible[i])
        else:
            parsed[i] = col.result(i)
    # Output tokens: the server's usage, else the tokenizer on the text, else the number of text chunks.
    need_count = [i for i in sent if parsed[i].success and parsed[i].completion_tokens is None]
    counted: dict[int, int] = {}
    if need_count and tokenizer is not None:
        counts = tokenizer.count_output([parsed[i].text for i in need_count])
        counted = dict(zip(need_count, counts, strict=True))
    records: list[RequestRecord] = []
    for i in sent:
        p = parsed[i]
        start = col.times[i][0]
        if p.success and p.completion_tokens is not None:
            out_tokens, source = p.completion_tokens, "usage"
        elif p.success and i in counted:
            out_tokens, source = counted[i], "tokenizer"
        elif p.success:
            out_tokens, source = p.text_chunks, "chunks"
        else:
            out_tokens, source = 0, "none"
        records.append(
            RequestRecord(
                index=i,
                prefix_group=col.group[i],
                prompt_len=col.prompt_len[i] or 0,
                server_prompt_tokens=p.prompt_tokens,
                max_tokens=col.max_tokens[i] or config.output_len,
                output_tokens=out_tokens,
                output_tokens_source=source,
                planned_send_s=col.eligible[i] - t0,
                queue_s=max(0.0, col.eligible[i] - col.scheduled[i]),
                start_s=start - t0,
                ttft_s=p.ttft or 0.0,
                itl_s=p.itl,
                latency_s=p.latency or 0.0,
                success=p.success,
                error=p.error or "",
                generated_text=p.text,
                **col.token_split(i, parsed, tokenizer, out_tokens, source),
            )
        )
    if config.stages:
        for r in records:
            r.stage = stages_mod.stage_of(config.stages, r.planned_send_s)  # when the plan let it go
    if config.turns > 1:
        for r in records:
            r.session, r.turn = divmod(r.index, config.turns)
            r.turn += 1
    left_out = ramp.mark(records, config.ramp_up_s)
    kept = {r.index for r in ramp.measured(records)}
    ends = [col.times[i][1] for i in sent if i in kept]
    starts = [col.times[i][0] for i in sent if i in kept]
    first = min(starts) if starts else t0
    last = max(ends) if ends else t0
    duration = max(0.0, last - first)
    m = compute_metrics(ramp.measured(records), duration, config.goodput)

    notes = list(notes)
    if config.ramp_up_s:
        streams = min(config.max_concurrency or n, n)
        notes.append(ramp.note(streams, config.ramp_up_s, left_out, len(records)))
    lag = m.scheduling_lag_ms
    if lag.count and (lag.p50 > LAG_NOTE_P50_MS or lag.p99 > LAG_NOTE_P99_MS):
        notes.append(
            f"The client sent requests late (scheduling lag p50 {lag.p50:.1f} ms, p99 {lag.p99:.1f} ms): "
            "the client, not the server, limited how fast requests went out; latencies are still measured "
            "from the actual send."
        )
    check = m.prompt_token_check
    if check.mismatched:
        notes.append(
            f"{check.mismatched} of {check.checked} requests: the server counted a different number of prompt "
            f"tokens than the client expected (largest difference {check.max_abs_deviation}, mean "
            f"{check.mean_deviation:+.2f}); throughput uses the server's counts."
        )
    if m.output_tokens_source in ("tokenizer", "mixed"):
        notes.append(
            "The server sent no usage for some requests; their output tokens were counted with the tokenizer."
        )
    elif m.output_tokens_source == "chunks":
        notes.append(
            "The server sent no usage and no tokenizer was available: output tokens are the number of text "
            "chunks (TPOT and token throughput may be off)."
        )
    n_sent = len(sent)
    interrupted = stop.cancelled or n_sent < n
    if stop.cancelled:
        notes.append(f"Cancelled: {n_sent} of {n} requests were sent; unfinished ones are failed.")
    elif config.stages:
        end = stages_mod.stage_starts(config.stages)[-1]
        notes.append(
            f"Load plan: {len(config.stages)} stage(s) over {end:g} s ("
            + "; ".join(stages_mod.describe(st) + f" for {st.duration_s:g} s" for st in config.stages)
            + f"); {n_sent} requests sent"
            + (
                f", all {n} that num_prompts allows, so the plan ran out of requests early"
                if n_sent >= n
                else ""
            )
            + "."
        )
        interrupted = False  # the plan's end is what was asked for
    elif stop.duration_hit:
        notes.append(f"--duration {config.duration_s:g} s reached: {n_sent} of {n} requests were sent.")
        interrupted = False  # stopping at the duration is what was asked for
    elif n_sent < n:
        notes.append(f"Only {n_sent} of {n} requests were sent.")
    if m.failed:
        top = next(iter(m.errors.items()))
        notes.append(
            f"{m.failed} request{'s' if m.failed != 1 else ''} failed; most common reason ({top[1]}x): {top[0]}"
        )
    if config.stages and len(records) >= n:
        plan_end = stages_mod.stage_starts(config.stages)[-1]
        last_sent = max((r.start_s for r in records), default=0.0)
        if last_sent < plan_end - 1.0:
            notes.append(
                f"The load plan stopped after {n} requests, {last_sent:.0f} s into its {plan_end:.0f} s: the "
                "request cap ended it (num_prompts; in a sweep, concurrency x prompts_per_concurrency); raise it "
                "to run the whole plan."
            )
    if scraper is not None:
        telemetry = scraper.summary()
        scrape_ms = telemetry.derived.get("scrape_ms_mean", 0.0)
        if scrape_ms > SCRAPE_NOTE_MS:
            notes.append(
                f"Each /metrics scrape took {scrape_ms:.0f} ms on average (every {config.scrape_interval_s:g} s); "
                "rendering metrics costs the server CPU, which can slow a server with few CPUs: compare with "
                "--no-scrape or a longer --scrape-interval."
            )
        samples = [s.model_copy(update={"t_s": s.wall - wall0}) for s in scraper.samples]
        measured_hit = telemetry.derived.get("prefix_cache_hit_rate")
        if config.prefix_len and expected_hit is not None and measured_hit is not None:
            notes.append(
                f"Prefix cache: the server found {measured_hit:.1%} of the prompt tokens cached; these prompts "
                f"should give {expected_hit:.1%} to a server that keeps every shared block"
                + (
                    " (lower: blocks were evicted, or prefix caching is off)."
                    if measured_hit < expected_hit - 0.05
                    else "."
                )
            )
    else:
        telemetry = TelemetrySummary(available=False, error="scraping was turned off")
        samples = []
    if device_tel is not None:
        notes.extend(device_notes(device_tel, m.total_output_tokens))
    return BenchmarkSummary(
        label=config.label,
        date=date.isoformat(timespec="seconds"),
        base_url=redact_url(endpoint.base_url),  # the record never keeps a URL's password
        model_id=endpoint.served_model,
        tokenizer_id=tokenizer.name if tokenizer is not None else "",
        config=config,
        started_at=wall0 + (first - t0),
        finished_at=wall0 + (last - t0),
        duration_s=duration,
        num_prompts=n,  # a trace shorter than num_prompts replays what it has
        **dict(m),
        telemetry=telemetry,
        telemetry_samples=samples,
        device_telemetry=device_tel,
        requests=records,
        notes=notes,
        interrupted=interrupted,
        ramp_requests=left_out,
        itl_counting=ITL_COUNTING[config.metrics_definition],
        expected_prefix_hit_rate=expected_hit,
        per_turn=turn_metrics(records),
        per_stage=stages_mod.stage_metrics(config.stages, records) if config.stages else [],
    )


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
        return asyncio.new_event_loop()


def run_blocking(coro_fn: Callable[[], Any]) -> Any:
    """Run a coroutine on a fresh (uv)loop; from a thread that already runs a loop, on a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        with asyncio.Runner(loop_factory=_new_loop) as runner:
            return runner.run(coro_fn())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            with asyncio.Runner(loop_factory=_new_loop) as runner:
                box["value"] = runner.run(coro_fn())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    th = threading.Thread(target=target, name="accelbench-bench")
    th.start()
    th.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_benchmark(
    endpoint: Endpoint,
    config: BenchConfig,
    *,
    tokenizer: Tokenizer | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    scrape: bool | None = None,
    devices: bool | None = None,
) -> BenchmarkSummary:
    """Blocking ``arun_benchmark`` on its own event loop (uvloop when available)."""
    result: BenchmarkSummary = run_blocking(
        lambda: arun_benchmark(
            endpoint,
            config,
            tokenizer=tokenizer,
            progress=progress,
            cancel=cancel,
            scrape=scrape,
            devices=devices,
        )
    )
    return result


__all__ = ["arun_benchmark", "request_body", "run_benchmark", "server_root"]
