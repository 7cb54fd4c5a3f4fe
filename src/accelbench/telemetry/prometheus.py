"""Scrape an inference server's Prometheus ``/metrics`` while a benchmark runs.

Every ``interval_s`` (1 s by default) the scraper reads ``/metrics``, keeps the metrics that explain serving
performance under one canonical name each (vLLM's names first, SGLang's and TGI's as aliases), and stores the
sample. After the run, ``summary()`` gives the increase of every counter (prompt and generation tokens,
preemptions, prefix-cache queries and hits), the peak and mean of every gauge (running and waiting requests,
KV-cache usage) and the prefix-cache hit rate. A server without ``/metrics`` gives ``available=False`` with the
reason; the benchmark goes on without it.

The text is filtered to the wanted families before ``prometheus_client``'s parser sees it: a vLLM ``/metrics``
page is tens of kilobytes of histograms, and parsing all of it every second would stall the benchmark's event
loop (and with it the timestamps of streamed tokens).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

from accelbench.domain.bench_summary import TelemetrySample, TelemetrySummary
from accelbench.redact import redact_text, redact_url

#: canonical name -> sample names that carry it, in order of preference. Labelled series are summed.
COUNTERS: dict[str, tuple[str, ...]] = {
    "prompt_tokens": (
        "vllm:prompt_tokens_total",
        "sglang:prompt_tokens_total",
        "tgi_request_input_length_sum",
    ),
    "generation_tokens": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "tgi_request_generated_tokens_sum",
    ),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "requests_finished": ("vllm:request_success_total", "sglang:num_requests_total", "tgi_request_success"),
}
GAUGES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size"),
    "kv_cache_usage": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "vllm:cpu_cache_usage_perc",
        "sglang:token_usage",
    ),
}
_WANTED_SAMPLES = {name for names in (*COUNTERS.values(), *GAUGES.values()) for name in names}
# Family names as they appear in "# TYPE" lines (counters lose their _total suffix in the parser).
_WANTED_FAMILIES = (
    _WANTED_SAMPLES
    | {n.removesuffix("_total") for n in _WANTED_SAMPLES}
    | {n.removesuffix("_sum") for n in _WANTED_SAMPLES}
)


def _sample_name(line: str) -> str:
    end = len(line)
    for sep in ("{", " "):
        k = line.find(sep)
        if 0 <= k < end:
            end = k
    return line[:end]


def filter_metrics_text(text: str) -> str:
    """Only the lines of the wanted families (their # TYPE/# HELP lines included)."""
    keep = []
    for line in text.splitlines():
        if not line:
            continue
        if line[0] == "#":
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[2] in _WANTED_FAMILIES:
                keep.append(line)
        elif _sample_name(line) in _WANTED_SAMPLES:
            keep.append(line)
    return "\n".join(keep) + "\n"


def parse_metrics(text: str) -> dict[str, float]:
    """Canonical values (see ``COUNTERS`` and ``GAUGES``) found in a Prometheus text page."""
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(filter_metrics_text(text)):
        for sample in family.samples:
            if sample.name in _WANTED_SAMPLES:
                sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
    values: dict[str, float] = {}
    for canonical, names in (*COUNTERS.items(), *GAUGES.items()):
        for name in names:
            if name in sums:
                values[canonical] = sums[name]
                break
    return values


def summarize(samples: list[TelemetrySample], *, error: str | None = None) -> TelemetrySummary:
    """Counter increases (restarts of a counter are bridged), gauge peaks and means, the prefix-cache hit rate."""
    if not samples:
        return TelemetrySummary(available=False, error=error or "no samples")
    deltas: dict[str, float] = {}
    for name in COUNTERS:
        series = [s.values[name] for s in samples if name in s.values]
        if len(series) >= 2:
            total = 0.0
            for prev, cur in itertools.pairwise(series):
                total += cur - prev if cur >= prev else cur  # a reset: count from zero again
            deltas[name] = total
    peaks: dict[str, float] = {}
    means: dict[str, float] = {}
    for name in GAUGES:
        series = [s.values[name] for s in samples if name in s.values]
        if series:
            peaks[name] = max(series)
            means[name] = sum(series) / len(series)
    derived: dict[str, float] = {}
    q = deltas.get("prefix_cache_queries")
    if q:
        derived["prefix_cache_hit_rate"] = deltas.get("prefix_cache_hits", 0.0) / q
    return TelemetrySummary(
        available=True,
        error=error,
        samples=len(samples),
        deltas=deltas,
        peaks=peaks,
        means=means,
        derived=derived,
    )


class PrometheusScraper:
    """Samples ``/metrics`` in the background of a running event loop.

    ``await start(t0)`` takes a first sample (the baseline for counter increases) and starts the loop;
    ``await stop()`` takes a last sample and ends it. ``t0`` is the benchmark's ``time.perf_counter()`` origin."""

    def __init__(
        self,
        base_url: str,
        *,
        interval_s: float = 1.0,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.shown = redact_url(self.url)  # what error messages name: never the URL's password
        self.interval_s = interval_s
        self.samples: list[TelemetrySample] = []
        self.error: str | None = None
        self.available = False
        self.failures = 0
        self.durations: list[float] = []  # seconds each successful scrape took (request, transfer, parsing)
        self._client = httpx.AsyncClient(timeout=timeout_s, headers=dict(headers or {}))
        self._task: asyncio.Task[None] | None = None
        self._t0 = time.perf_counter()

    async def scrape_once(self) -> TelemetrySample | None:
        t = time.perf_counter()
        try:
            r = await self._client.get(self.url)
        except httpx.HTTPError as exc:
            self._note_failure(f"{self.shown} unreachable: {redact_text(str(exc)) or type(exc).__name__}")
            return None
        if r.status_code != 200:
            self._note_failure(f"{self.shown} answered HTTP {r.status_code}")
            return None
        try:
            values = parse_metrics(r.text)
        except (ValueError, TypeError, IndexError, KeyError, UnicodeError) as exc:
            self._note_failure(f"{self.shown} is not Prometheus text: {redact_text(str(exc))[:200]}")
            return None
        if not values:
            self._note_failure(f"{self.shown} has none of the serving metrics accelbench knows")
            return None
        now = time.perf_counter()
        self.durations.append(now - t)
        sample = TelemetrySample(t_s=now - self._t0, wall=time.time(), values=values)
        self.samples.append(sample)
        self.available = True
        return sample

    def _note_failure(self, reason: str) -> None:
        self.failures += 1
        if self.error is None:
            self.error = reason

    async def start(self, t0: float) -> bool:
        """Baseline sample; the periodic loop runs only when the server has usable metrics."""
        self._t0 = t0
        if await self.scrape_once() is None:
            return False
        self.error = None
        self._task = asyncio.create_task(self._loop())
        return True

    async def _loop(self) -> None:
        next_due = time.perf_counter() + self.interval_s
        while True:
            await asyncio.sleep(max(0.0, next_due - time.perf_counter()))
            next_due += self.interval_s
            await self.scrape_once()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            await self.scrape_once()
        await self._client.aclose()

    def summary(self) -> TelemetrySummary:
        if not self.available:
            return TelemetrySummary(available=False, error=self.error or "not scraped")
        summary = summarize(self.samples)
        if self.durations:
            # How long the server took to answer: rendering /metrics costs it CPU, which matters on small machines.
            summary.derived["scrape_ms_mean"] = 1000 * sum(self.durations) / len(self.durations)
            summary.derived["scrape_ms_max"] = 1000 * max(self.durations)
        if self.failures:
            summary.error = f"{self.failures} scrapes failed; first: {self.error}"
        return summary
