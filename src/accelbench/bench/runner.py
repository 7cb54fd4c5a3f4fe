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
5. sends the measured requests by one of the load patterns of ``bench.load``: with an infinite rate,
   ``max_concurrency`` workers take the next prompt as soon as they are free (``closed_loop``; with ``ramp_up_s``
   they start one by one over the ramp, and the requests that start within it are left out of the figures:
   ``bench.ramp``); with a finite rate or a trace a dispatcher releases each request at its planned time and a
   semaphore bounds concurrency (``arrivals``); a concurrency load plan (``staged``) and multi-turn conversations
   (``conversations``) have their own. Raw responses are kept (``bench.collector``) and parsed after the run (a
   memory budget switches to parsing as responses end, for very long runs);
6. builds one ``RequestRecord`` per request sent and the summary (``bench.summary``), with notes: scheduling lag
   when the client could not keep up, prompt-token deviations, where output token counts came from,
   interruptions.

Cancellation (``cancel``, a ``threading.Event``, e.g. set from a Ctrl-C handler or an API call) stops sending,
fails the requests in flight with the reason ``cancelled`` and returns the summary of what was sent, marked
``interrupted``. A server that goes away makes requests fail with the connection error; the call still returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypedDict, TypeVar, Unpack

import httpx

from accelbench.bench import stages as stages_mod
from accelbench.bench.client import StreamClient
from accelbench.bench.collector import CANCELLED, Collector
from accelbench.bench.datasets import PromptSource, open_dataset
from accelbench.bench.event_loop import run_blocking
from accelbench.bench.feeds import (
    PATHS,
    ProcessFeed,
    ReadyFeed,
    RenderPlan,
    lookahead,
    open_feed,
    request_body,
)
from accelbench.bench.load.arrivals import send_at_times
from accelbench.bench.load.closed_loop import send_closed_loop
from accelbench.bench.load.conversations import send_conversations, turn_body
from accelbench.bench.load.sending import Sending, Stop
from accelbench.bench.load.staged import send_staged
from accelbench.bench.load.warmup import warmup, warmup_note
from accelbench.bench.schedule import send_times
from accelbench.bench.summary import summarize
from accelbench.bench.tokenizer import ServerTokenizer, Tokenizer, load_tokenizer
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.device import DeviceTelemetry
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig, EndpointKind
from accelbench.errors import AccelbenchError
from accelbench.telemetry.devices import DeviceMonitor, collectors_for
from accelbench.telemetry.prometheus import PrometheusScraper

ProgressFn = Callable[[int, int], None]
T = TypeVar("T")

#: Raw response bytes kept for parsing after the run; beyond this, responses are parsed as they end.
RAW_BUDGET_BYTES = 256 * 1024 * 1024
#: Connections opened before the measurement starts (at most; one per concurrent request).
PRECONNECT_MAX = 256
_pc = time.perf_counter


def server_root(base_url: str) -> str:
    """The server root: trailing slashes and a trailing ``/v1`` removed (routes are added to it)."""
    root = base_url.strip().rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


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


def plan_offsets(config: BenchConfig, source: PromptSource, n: int) -> list[float]:
    """Every request's send time from the clock's start: a rate load plan's, none for a concurrency plan (a
    closed loop), a trace's own, else the request rate's arrivals (all 0 for an infinite rate)."""
    stages = config.stages or []
    if stages and stages[0].request_rate is not None:
        return stages_mod.rate_offsets(stages, config.burstiness, config.seed, n)
    if stages:
        return [0.0] * n  # a closed loop: sent as the plan lets in-flight requests through
    if source.offsets is not None:
        return source.offsets
    return send_times(n, config.request_rate, config.burstiness, config.seed, kind=config.schedule)


def _scraper(endpoint: Endpoint, config: BenchConfig) -> PrometheusScraper:
    """The scraper of the server's ``/metrics`` (with the endpoint's headers and key)."""
    return PrometheusScraper(
        endpoint.base_url,
        interval_s=config.scrape_interval_s,
        headers=endpoint.request_headers(),
    )


async def send_planned(
    s: Sending, n: int, offsets: Sequence[float], max_concurrency: int | None, ramp_s: float = 0.0
) -> None:
    """Send ``n`` requests by the plan: a closed loop when everything is due at once, else each at its time."""
    if n == 0:
        return
    if all(o == 0.0 for o in offsets):
        # Everything is due at once: a fixed set of workers, each takes the next request when free.
        await send_closed_loop(s, n, max_concurrency, ramp_s)
    else:
        await send_at_times(s, n, offsets, max_concurrency)


class _Run:
    """One benchmark in progress: its requests made, sent and collected (``measure``), then handed to the
    summary. The steps share the state here; a cancel (``watch_cancel``) reaches every one of them."""

    def __init__(
        self,
        endpoint: Endpoint,
        config: BenchConfig,
        source: PromptSource,
        tokenizer: Tokenizer | None,
        notes: list[str],
        date: datetime,
    ) -> None:
        self.endpoint = endpoint
        self.date = date
        self.config = config
        self.source = source
        self.tokenizer = tokenizer
        self.n, self.n_warm = source.count, source.num_warmups
        self.kind = EndpointKind(config.endpoint)
        client = StreamClient(
            endpoint.base_url, headers=endpoint.headers, api_key=endpoint.api_key, timeout_s=config.timeout_s
        )
        self.plan = RenderPlan(config, endpoint.served_model, client.request_head)
        self.offsets = plan_offsets(config, source, self.n)
        col = Collector(self.n, self.kind == EndpointKind.chat, RAW_BUDGET_BYTES, config.metrics_definition)
        # what every load pattern sends with; s.interruptible: the tasks a cancel may interrupt (warmup, dispatcher)
        self.sending = Sending(client, ReadyFeed([]), col, Stop(None))
        self.notes = notes
        self.making_notes: list[str] = []  # how the prompts were made, when that needs saying
        self.scraper: PrometheusScraper | None = None
        self.monitor: DeviceMonitor | None = None
        self.device_tel: DeviceTelemetry | None = None
        self.background: list[asyncio.Task[None]] = []
        self.wall0 = time.time()

    async def watch_cancel(self, cancel: threading.Event) -> None:
        while not cancel.is_set():
            await asyncio.sleep(0.05)
        s = self.sending
        s.stop.flag = s.stop.cancelled = True
        s.feed.halt()
        s.client.abort_all(CANCELLED)
        for t in s.interruptible:
            t.cancel()

    async def tick(self, progress: ProgressFn) -> None:
        while True:
            progress(self.sending.col.done, self.n)
            await asyncio.sleep(0.2)

    async def measure(
        self, progress: ProgressFn | None, cancel: threading.Event | None, do_devices: bool
    ) -> None:
        """Make the requests, warm up, start the telemetry, send the measured requests; the run is then the
        ``RunOutcome`` the summary reads."""
        s, n = self.sending, self.n
        if cancel is not None and cancel.is_set():
            s.stop.flag = s.stop.cancelled = True
        gc_threshold = gc.get_threshold()
        gc.collect()
        gc.freeze()  # long-lived objects out of the collector's way; fewer, shorter pauses while timing
        gc.set_threshold(max(gc_threshold[0], 50_000), gc_threshold[1], gc_threshold[2])
        s.t0 = _pc()
        self.wall0 = time.time()
        try:
            await self._before_clock(progress, cancel, do_devices)
            await self._send()
        finally:
            await self._close()
            gc.unfreeze()
            gc.set_threshold(*gc_threshold)
        if progress is not None:
            progress(s.col.done, n)
        feed = s.feed
        if feed.error is not None and not s.stop.cancelled:
            if not isinstance(feed.error, AccelbenchError):
                raise feed.error
            self.notes.append(
                f"Making the prompts failed after {feed.delivered} of {n + self.n_warm}: {feed.error}"
            )
        # complete now: the making has stopped (a prompt process sent its own notes at its end)
        self.notes.extend(feed.notes if isinstance(feed, ProcessFeed) else self.source.notes)
        self.notes.extend(self.making_notes)

    async def _before_clock(
        self, progress: ProgressFn | None, cancel: threading.Event | None, do_devices: bool
    ) -> None:
        """Everything before the clock starts: the requests made, the warmups sent, the connections opened,
        the telemetry started."""
        s, n, config = self.sending, self.n, self.config
        loop = asyncio.get_running_loop()
        if cancel is not None:
            self.background.append(loop.create_task(self.watch_cancel(cancel)))
        if not s.stop.flag:
            # every request is made before the first is sent (a user error in them raises here); a cancel stops
            # the making between batches
            opened = await open_feed(
                self.source,
                self.plan,
                self.tokenizer,
                lambda: s.stop.flag or bool(cancel and cancel.is_set()),
            )
            s.feed, self.making_notes = opened.feed, opened.notes
        if self.n_warm and not s.stop.flag:
            await self._warmup()
        if not s.stop.flag:
            if isinstance(s.feed, ProcessFeed):  # refilled while the warmups ran
                await s.feed.fill(min(lookahead(config), n), lambda: s.stop.flag)
            await s.client.preconnect(min(config.max_concurrency or n, n, PRECONNECT_MAX))
        if self.scraper is not None:
            await self.scraper.start(_pc())
        if do_devices and not s.stop.flag:
            # the collectors' probes and the baseline sample block (files, NVML): off the event loop
            self.monitor = await _to_thread(device_monitor, self.endpoint, config)
            await _to_thread(self.monitor.start, _pc())
        if progress is not None:
            self.background.append(loop.create_task(self.tick(progress)))

    async def _warmup(self) -> None:
        s = self.sending
        warm_task = asyncio.get_running_loop().create_task(
            warmup(s.client, s.feed, self.n_warm, self.config.max_concurrency or self.n_warm)
        )
        s.interruptible.append(warm_task)
        await asyncio.wait([warm_task])
        if not warm_task.cancelled():
            note = warmup_note(warm_task.result(), chat=self.kind == EndpointKind.chat)
            if note is not None:
                self.notes.append(note)
        s.interruptible.clear()

    async def _send(self) -> None:
        """Start the clock and send the measured requests by the run's load pattern."""
        s, n, config = self.sending, self.n, self.config
        s.t0 = _pc()
        self.wall0 = time.time()
        if self.monitor is not None:
            self.monitor.restart_clock(s.t0)
        stages = config.stages or []
        if config.duration_s is not None:
            s.stop.deadline = s.t0 + config.duration_s
        if stages:
            s.stop.deadline = s.t0 + stages_mod.stage_starts(stages)[-1]
        if s.stop.flag:
            return
        if config.turns > 1:
            body = turn_body(s.client, PATHS[self.kind], config, self.endpoint.served_model)
            await send_conversations(s, n, config, body)
        elif stages and stages[0].request_rate is None:
            await send_staged(s, n, stages)
        else:
            offsets = self.offsets
            await send_planned(s, min(n, len(offsets)), offsets, config.max_concurrency, config.ramp_up_s)

    async def _close(self) -> None:
        """Stop the feed, the background tasks, the scraper and the device monitor; close the connections."""
        s = self.sending
        s.feed.halt()
        await s.feed.aclose()
        for t in self.background:
            t.cancel()
        for t in self.background:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        if self.scraper is not None:
            with contextlib.suppress(Exception):
                await self.scraper.stop()
        if self.monitor is not None:
            try:
                self.device_tel = await _to_thread(self.monitor.stop)
            except Exception as exc:  # never lose a benchmark to its telemetry
                self.device_tel = DeviceTelemetry(
                    missing=[f"device telemetry failed: {type(exc).__name__}: {exc}"]
                )
        await s.client.aclose()


class BenchOptions(TypedDict, total=False):
    """What a caller may add to a benchmark (each None or left out: the default): ``tokenizer`` (loaded from
    the endpoint otherwise; a sweep passes one for all its cells), ``progress`` (called with requests done and
    planned), ``cancel``, ``scrape`` (the server's ``/metrics``; default: the config's ``scrape_metrics``) and
    ``devices`` (sample this machine's devices; default: when the engine runs here, ``engine_is_local``)."""

    tokenizer: Tokenizer | None
    progress: ProgressFn | None
    cancel: threading.Event | None
    scrape: bool | None
    devices: bool | None


async def arun_benchmark(
    endpoint: Endpoint, config: BenchConfig, **options: Unpack[BenchOptions]
) -> BenchmarkSummary:
    """Run one benchmark and return its summary (see the module docstring). Errors a user can fix before
    anything is sent (no tokenizer, a bad dataset file, an input length the template cannot fit) raise
    ``AccelbenchError``; failures of requests never raise."""
    date = datetime.now(UTC)
    endpoint = endpoint.model_copy(update={"base_url": server_root(endpoint.base_url)})
    notes: list[str] = []
    tokenizer = options.get("tokenizer")
    own_tokenizer = tokenizer is None
    if tokenizer is None:
        try:
            tokenizer = await _to_thread(load_tokenizer, endpoint)
        except AccelbenchError as exc:
            if config.dataset in ("random", "trace"):
                raise
            notes.append(f"No tokenizer ({exc.message}); output tokens come from the server's usage.")
    # what can be checked without making every prompt is checked here, before anything is sent
    source: PromptSource = await _to_thread(open_dataset, config, tokenizer)
    run = _Run(endpoint, config, source, tokenizer, notes, date)
    scrape, devices = options.get("scrape"), options.get("devices")
    if config.scrape_metrics if scrape is None else scrape:
        run.scraper = _scraper(endpoint, config)
    do_devices = engine_is_local(endpoint) if devices is None else devices
    await run.measure(options.get("progress"), options.get("cancel"), do_devices)
    try:
        return await _to_thread(summarize, run)
    finally:
        if own_tokenizer and isinstance(tokenizer, ServerTokenizer):
            tokenizer.close()  # its HTTP client and threads; a tokenizer passed in stays the caller's


def run_benchmark(
    endpoint: Endpoint, config: BenchConfig, **options: Unpack[BenchOptions]
) -> BenchmarkSummary:
    """Blocking ``arun_benchmark`` on its own event loop (uvloop when available)."""
    result: BenchmarkSummary = run_blocking(lambda: arun_benchmark(endpoint, config, **options))
    return result


__all__ = ["arun_benchmark", "request_body", "run_benchmark", "server_root"]
