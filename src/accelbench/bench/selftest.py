"""Is the load generator fast enough for this run? A loopback self-test of the client, and its verdict on a run.

When the engine runs on this machine's CPUs the load generator competes with it for cores, and a client that
cannot keep up inflates the latencies it reports. Two checks, both cheap:

- ``client_self_test``: accelbench's own client (``StreamClient`` and ``parse_stream``, as the runner uses them)
  against an in-process, zero-delay OpenAI-compatible streaming server on 127.0.0.1 (``bench.loopback_server``),
  at the run's load (its ``max_concurrency`` as a closed loop, or its ``request_rate`` as the same gamma/Poisson
  schedule) for about a second. What the client sustained there (``ClientCertificate``) is the ceiling of what it
  can measure; ``ClientCertificate.verdict`` compares a finished run against it (``certify``).
- where the client and the engine run (``core_overlap``, ``isolate_client``): ``bench.cpu_affinity``.

The loopback server runs in this process, on its own thread and event loop; its thread shares the cores and the
GIL with the client: what it costs is counted against the client, so the certificate is conservative (the client
alone would do at least as well). The client's CPU time per chunk is taken from the client thread's own clock
(``time.thread_time``), which leaves the server's work out.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from accelbench.bench.client import StreamClient
from accelbench.bench.cpu_affinity import allowed_cpus
from accelbench.bench.event_loop import run_blocking
from accelbench.bench.feeds import request_body
from accelbench.bench.loopback_server import SELFTEST_MODEL, LoopbackServer
from accelbench.bench.runner import PRECONNECT_MAX
from accelbench.bench.schedule import send_times
from accelbench.bench.stream_parse import parse_stream
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.client_certificate import ClientCertificate
from accelbench.domain.load import BenchConfig, EndpointKind

_pc = time.perf_counter

#: most requests in flight in the self-test (each has its own connection)
MAX_SELFTEST_CONCURRENCY = 1024
#: most requests a finite-rate self-test plans
MAX_SELFTEST_REQUESTS = 200_000
#: the self-test prompt: small and fixed (the client's per-chunk work, not prompt making, is what is measured)
PROMPT = "Say something."


def _percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks (numpy's default)."""
    s = sorted(values)
    if not s:
        return 0.0
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


async def _measure(config: BenchConfig, base_url: str, duration_s: float) -> dict[str, Any]:
    chat = EndpointKind(config.endpoint) == EndpointKind.chat
    path = "/v1/chat/completions" if chat else "/v1/completions"
    definition = config.metrics_definition
    client = StreamClient(base_url, timeout_s=max(30.0, 10 * duration_s))
    data = client.render(path, request_body(config, SELFTEST_MODEL, PROMPT, config.output_len))
    rate = config.request_rate
    finite = not math.isinf(rate)
    if finite:
        n_planned = max(1, min(MAX_SELFTEST_REQUESTS, math.ceil(rate * duration_s)))
        planned_offsets = send_times(n_planned, rate, config.burstiness, config.seed)
        # the first request at once (a single request at a low rate is not kept waiting 1/rate seconds)
        offsets = [o - planned_offsets[0] for o in planned_offsets]
        concurrency = config.max_concurrency
    else:
        n_planned = 0
        offsets = []
        concurrency = min(config.max_concurrency or config.num_prompts, MAX_SELFTEST_CONCURRENCY)
    width = concurrency or min(n_planned, MAX_SELFTEST_CONCURRENCY)
    completed = failed = chunks = 0
    lags: list[float] = []
    last_error = ""

    async def one() -> float:
        """Send one request and parse its response; returns when it was written (perf_counter)."""
        nonlocal completed, failed, chunks, last_error
        raw = await client.send(data)
        parsed = parse_stream(raw, chat=chat, definition=definition)
        if parsed.success:
            completed += 1
            chunks += parsed.text_chunks
        else:
            failed += 1
            last_error = parsed.error or "failed"
        return raw.start

    try:
        await client.preconnect(min(width, PRECONNECT_MAX))
        for _ in range(2):  # warm the server's rendering and the client's paths
            await one()
        completed = failed = chunks = 0
        cpu0, proc0, t0 = time.thread_time(), time.process_time(), _pc()
        if finite:
            sem = asyncio.Semaphore(concurrency) if concurrency else None

            async def planned(due: float) -> None:
                if sem is None:
                    lags.append(await one() - due)
                    return
                async with sem:  # waiting for a slot under the concurrency cap counts as lag
                    lags.append(await one() - due)

            tasks = []
            for off in offsets:
                due = t0 + off
                delay = due - _pc()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.ensure_future(planned(due)))
            await asyncio.gather(*tasks)
        else:
            stop = t0 + duration_s

            async def worker() -> None:
                while _pc() < stop:
                    await one()

            await asyncio.gather(*(worker() for _ in range(concurrency or 1)))
        elapsed = _pc() - t0
        cpu, proc = time.thread_time() - cpu0, time.process_time() - proc0
    finally:
        await client.aclose()
    return {
        "completed": completed,
        "failed": failed,
        "chunks": chunks,
        "lags": lags,
        "elapsed": elapsed,
        "cpu": cpu,
        "proc": proc,
        "concurrency": concurrency,
        "last_error": last_error,
    }


def client_self_test(config: BenchConfig, *, duration_s: float = 1.0) -> ClientCertificate:
    """Drive an in-process zero-delay loopback server with accelbench's client at ``config``'s load for about
    ``duration_s`` and report what the client sustained.

    The load: ``max_concurrency`` workers in a closed loop when ``request_rate`` is infinite (no concurrency
    limit: ``num_prompts`` workers, at most ``MAX_SELFTEST_CONCURRENCY``), else the run's gamma schedule at
    ``request_rate`` (capped by ``max_concurrency`` when set) for ``duration_s`` and until those requests are
    done. Each request asks ``output_len`` tokens with a small fixed prompt, on the run's endpoint (chat or
    completions), and each response goes through ``parse_stream`` as in a real run.

    The server runs in this process, on another thread: its (small) work shares the cores and the GIL with the
    client, so the figures are conservative. ``cpu_us_per_chunk`` is the client thread's own CPU time
    (``time.thread_time``); ``process_cpu_us_per_chunk`` includes the server's. Raises ``RuntimeError`` when
    every request failed (the client could not talk to the loopback server).

    In a closed loop the rates reached are the client's ceiling (``capacity_*``); at a finite rate they are the
    offered load, and the ceiling is estimated as ``1e6 / process_cpu_us_per_chunk`` (see ``ClientCertificate``)."""
    if duration_s <= 0:
        raise ValueError("duration_s must be positive")
    with LoopbackServer() as server:
        m: dict[str, Any] = run_blocking(lambda: _measure(config, server.base_url, duration_s))
    if m["completed"] == 0:
        raise RuntimeError(
            f"the client self-test completed no request: {m['last_error'] or 'no request sent'}"
        )
    elapsed = max(m["elapsed"], 1e-9)
    chunks = m["chunks"]
    lags_ms = [x * 1000 for x in m["lags"]]
    finite = not math.isinf(config.request_rate)
    chunks_per_s = chunks / elapsed
    requests_per_s = m["completed"] / elapsed
    process_us = 1e6 * m["proc"] / max(chunks, 1)
    if finite:  # it only kept a schedule: the ceiling from the CPU it spent (the server's included)
        capacity = max(chunks_per_s, 1e6 / process_us) if process_us > 0 else chunks_per_s
        capacity_req = capacity / max(chunks / m["completed"], 1.0)
    else:  # it ran flat out: what it reached is the ceiling
        capacity, capacity_req = chunks_per_s, requests_per_s
    return ClientCertificate(
        requests_per_s=requests_per_s,
        chunks_per_s=chunks_per_s,
        lag_p50_ms=_percentile(lags_ms, 50) if finite and lags_ms else None,
        lag_p99_ms=_percentile(lags_ms, 99) if finite and lags_ms else None,
        cpu_us_per_chunk=1e6 * m["cpu"] / max(chunks, 1),
        process_cpu_us_per_chunk=process_us,
        capacity_chunks_per_s=capacity,
        capacity_requests_per_s=capacity_req,
        completed=m["completed"],
        failed=m["failed"],
        concurrency=m["concurrency"],
        request_rate=config.request_rate,
        output_len=config.output_len,
        duration_s=elapsed,
        cores=sorted(allowed_cpus()),
    )


def certify(summary: BenchmarkSummary, cert: ClientCertificate) -> BenchmarkSummary:
    """``summary`` with the client's certificate, judged against what the run needed (its text-carrying chunks
    and completions per second); a run the client could not certify gets a note with the figures."""
    ok = [r for r in summary.requests if r.success]
    duration = summary.duration_s or 0.0
    chunks = sum(len(r.itl_s) + 1 for r in ok)
    chunk_rate = chunks / duration if duration > 0 else 0.0
    good, sentence = cert.verdict(chunk_rate, summary.request_throughput)
    notes = list(summary.notes)
    if not good:
        notes.append(sentence)
    return summary.model_copy(update={"client_certificate": cert, "client_verdict": sentence, "notes": notes})


__all__ = ["certify", "client_self_test"]
