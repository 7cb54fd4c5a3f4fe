"""Is the load generator fast enough for this run? A loopback self-test, and where the client and the engine run.

When the engine runs on this machine's CPUs the load generator competes with it for cores, and a client that
cannot keep up inflates the latencies it reports. Two checks, both cheap:

- ``client_self_test``: accelbench's own client (``StreamClient`` and ``parse_stream``, as the runner uses them)
  against an in-process, zero-delay OpenAI-compatible streaming server on 127.0.0.1, at the run's load (its
  ``max_concurrency`` as a closed loop, or its ``request_rate`` as the same gamma/Poisson schedule) for about a
  second. What the client sustained there (``ClientCertificate``) is the ceiling of what it can measure;
  ``ClientCertificate.verdict`` compares a finished run against it.
- ``core_overlap`` / ``isolate_client``: the CPUs this process may use against those the engine is bound to
  (``engine_cpus_from_bind`` reads vLLM CPU's ``VLLM_CPU_OMP_THREADS_BIND``), and moving the client off the
  engine's cores when there are others.

The loopback server runs in this process, on its own thread and event loop. It is kept as cheap as it can be (a
response is rendered once per shape; one batched step writes one ready-made chunk to every open stream, like an
engine step producing one token for each running request), but its thread still shares the cores and the GIL
with the client: what it costs is counted against the client, so the certificate is conservative (the client
alone would do at least as well). The client's CPU time per chunk is taken from the client thread's own clock
(``time.thread_time``), which leaves the server's work out.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

import orjson

from accelbench.bench.client import StreamClient, parse_stream
from accelbench.bench.runner import PRECONNECT_MAX, request_body, run_blocking
from accelbench.bench.schedule import send_times
from accelbench.domain.bench import (
    BenchConfig,
    BenchmarkSummary,
    ClientCertificate,
    CoreOverlap,
    EndpointKind,
)

_pc = time.perf_counter

#: the model name the loopback server answers to
SELFTEST_MODEL = "accelbench-selftest"
#: most requests in flight in the self-test (each has its own connection)
MAX_SELFTEST_CONCURRENCY = 1024
#: most requests a finite-rate self-test plans
MAX_SELFTEST_REQUESTS = 200_000
#: the self-test prompt: small and fixed (the client's per-chunk work, not prompt making, is what is measured)
PROMPT = "Say something."


# --------------------------------------------------------------------------------------- loopback server
def _chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


_LAST_CHUNK = b"0\r\n\r\n"
_HEAD_STREAM = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
_WORDS = [" alpha", " bravo", " charlie", " delta", " echo", " foxtrot", " golf", " hotel"]


def _event(chat: bool, *, text: str | None = None, role: bool = False, finish: str | None = None,
           usage: dict[str, int] | None = None) -> bytes:  # fmt: skip
    """One SSE event shaped as vLLM's (same keys, similar size)."""
    obj: dict[str, Any] = {
        "id": "chatcmpl-selftest0123456789abcdef" if chat else "cmpl-selftest0123456789abcdef",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": 1764518400,
        "model": SELFTEST_MODEL,
    }
    if usage is not None:
        obj["choices"] = []
        obj["usage"] = usage
    elif chat:
        delta: dict[str, Any] = {"role": "assistant"} if role else {}
        delta["content"] = text or ""
        obj["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    else:
        obj["choices"] = [{"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish,
                           "stop_reason": None}]  # fmt: skip
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _error(status: int, message: str) -> bytes:
    body = orjson.dumps({"error": {"message": message, "code": status}})
    reason = {400: "Bad Request", 404: "Not Found"}.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class _Stream:
    """One response in progress: its ready-made chunks, written one per server step."""

    __slots__ = ("conn", "next", "parts")

    def __init__(self, conn: _ServerConn, parts: list[bytes]) -> None:
        self.conn = conn
        self.parts = parts
        self.next = 0


class LoopbackServer:
    """A zero-delay OpenAI-compatible streaming server on 127.0.0.1 (an ephemeral port), on its own thread with
    its own event loop. ``POST /v1/chat/completions`` and ``POST /v1/completions`` with ``stream: true``
    answer ``max_tokens`` one-token text chunks (chat: the first one also carries the role), a usage chunk when
    ``stream_options.include_usage`` is set, then ``data: [DONE]``; connections are kept alive. Every loop
    iteration writes the next chunk of every open stream, as an engine step emits one token per request."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.requests = 0
        self._streams: list[_Stream] = []
        self._stepping = False
        self._rendered: dict[tuple[bool, int], list[bytes]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -------------------------------------------------------------- lifecycle
    def start(self) -> LoopbackServer:
        self._thread = threading.Thread(target=self._main, name="accelbench-selftest-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self._error is not None:
            raise RuntimeError(f"the self-test server did not start: {self._error or 'timed out'}")
        return self

    def _main(self) -> None:
        loop: asyncio.AbstractEventLoop
        try:
            import uvloop

            loop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover - uvloop is a dependency except on Windows
            loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            server = loop.run_until_complete(
                loop.create_server(lambda: _ServerConn(self), self.host, self.port, backlog=4096)
            )
            self._server = server
            self.port = server.sockets[0].getsockname()[1]
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def stop(self) -> None:
        loop, server, thread = self._loop, self._server, self._thread
        if loop is None or thread is None:
            return

        def close() -> None:
            if server is not None:
                server.close()
            for st in self._streams:
                st.conn.close()
            self._streams.clear()
            loop.stop()

        with contextlib.suppress(RuntimeError):  # the loop has already stopped
            loop.call_soon_threadsafe(close)
        thread.join(5)
        self._thread = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -------------------------------------------------------------- responses
    def _parts(self, chat: bool, n_tokens: int) -> list[bytes]:
        """The chunks of one response up to (not including) its usage chunk; rendered once per shape."""
        key = (chat, n_tokens)
        parts = self._rendered.get(key)
        if parts is None:
            parts = []
            for i in range(n_tokens):
                finish = "length" if i == n_tokens - 1 else None
                ev = _event(chat, text=_WORDS[i % len(_WORDS)], role=chat and i == 0, finish=finish)
                parts.append(_chunk(ev))
            parts[0] = _HEAD_STREAM + parts[0]
            self._rendered[key] = parts
        return parts

    def handle(self, conn: _ServerConn, method: str, path: str, body: bytes) -> None:
        path = path.split("?", 1)[0]
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
            conn.write(_error(404, f"no route {method} {path}"))
            conn.idle()
            return
        try:
            req = orjson.loads(body)
            n_tokens = max(1, int(req.get("max_completion_tokens") or req.get("max_tokens") or 16))
            stream = bool(req.get("stream"))
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            conn.write(_error(400, "the body is not a JSON completion request"))
            conn.idle()
            return
        if not stream:
            conn.write(_error(400, "the self-test server only streams (stream: true)"))
            conn.idle()
            return
        chat = path.endswith("chat/completions")
        self.requests += 1
        parts = list(self._parts(chat, n_tokens))
        tail = b""
        if (req.get("stream_options") or {}).get("include_usage"):
            prompt = len(str(req.get("messages") or req.get("prompt") or "").split())
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": n_tokens,
                "total_tokens": prompt + n_tokens,
            }
            tail = _chunk(_event(chat, usage=usage))
        parts.append(tail + _chunk(b"data: [DONE]\n\n") + _LAST_CHUNK)
        self._streams.append(_Stream(conn, parts))
        conn.busy = True
        if not self._stepping:
            self._stepping = True
            asyncio.get_running_loop().call_soon(self._step)

    def _step(self) -> None:
        """Write the next chunk of every open stream; again on the next loop iteration while any is open. A
        connection whose stream ends may start its next request here (``handle`` adds it for the next step)."""
        streams, self._streams = self._streams, []
        alive: list[_Stream] = []
        for st in streams:
            conn = st.conn
            if conn.closed:
                continue
            conn.write(st.parts[st.next])
            st.next += 1
            if st.next < len(st.parts):
                alive.append(st)
            else:
                conn.busy = False
                conn.idle()
        self._streams = alive + self._streams
        if self._streams:
            asyncio.get_running_loop().call_soon(self._step)
        else:
            self._stepping = False


class _ServerConn(asyncio.Protocol):
    """One keep-alive connection to the loopback server (Content-Length request bodies, one at a time)."""

    def __init__(self, server: LoopbackServer) -> None:
        self.server = server
        self.buf = b""
        self.busy = False
        self.closed = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.closed = True

    def data_received(self, data: bytes) -> None:
        self.buf = self.buf + data if self.buf else data
        self.idle()

    def idle(self) -> None:
        """Answer the next complete request in the buffer, if the connection is not busy streaming one."""
        while self.buf and not self.busy and not self.closed:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            try:
                method, target, _ = lines[0].split(" ", 2)
            except ValueError:
                self.close()
                return
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip() or 0)
            total = end + 4 + length
            if len(self.buf) < total:
                return
            body = self.buf[end + 4 : total]
            self.buf = self.buf[total:]
            self.server.handle(self, method, target, body)


# ---------------------------------------------------------------------------------------------- self-test
def _percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), linear between the closest ranks (numpy's default)."""
    s = sorted(values)
    if not s:
        return 0.0
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (all of them where affinity is not available)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


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


# -------------------------------------------------------------------------------------------- core overlap
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def _cpu_list(text: str) -> set[int] | None:
    """``"0-3,8,10-11"`` to a set; None when malformed."""
    out: set[int] = set()
    for item in text.split(","):
        if not item.strip():
            continue
        m = _RANGE.match(item)
        if m is None:
            return None
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            return None
        out.update(range(lo, hi + 1))
    return out or None


def engine_cpus_from_bind(bind: str | None, threads: int | None, cpu_count: int) -> set[int] | None:
    """The CPUs a vLLM CPU engine's OpenMP threads run on, from ``VLLM_CPU_OMP_THREADS_BIND``.

    ``"auto"`` (vLLM binds each rank to its NUMA node's cores; together, all of them), ``"all"`` and ``"nobind"``
    (no pinning: the threads may run anywhere) mean every CPU, ``range(cpu_count)``; a CPU list (``"0-3"``,
    ``"0,2,4"``) is those CPUs; one list per rank separated by ``|`` (``"0-3|4-7"``) is their union. With no
    bind string, an explicit ``threads`` count means the first ``threads`` cores (what
    ``accelbench.runtimes.vllm_cpu`` sets for it). None when it cannot be known (no bind and no threads, or
    a malformed string)."""
    if bind is None or not bind.strip():
        if threads and threads > 0:
            return set(range(threads))
        return None
    b = bind.strip().lower()
    if b in ("auto", "all", "nobind"):
        return set(range(max(1, cpu_count)))
    out: set[int] = set()
    for rank in b.split("|"):
        cpus = _cpu_list(rank)
        if cpus is None:
            return None
        out |= cpus
    return out or None


def _count(n: int) -> str:
    return f"{n} core{'s' if n != 1 else ''}"


def core_overlap(engine_cpus: Iterable[int] | None, client_cpus: Iterable[int] | None = None) -> CoreOverlap:
    """The CPUs this process (the load generator) may run on against the engine's (None: unknown), how many
    they share, and a sentence saying what that means for the latencies. ``client_cpus`` defaults to this
    process's affinity."""
    client = set(client_cpus) if client_cpus is not None else allowed_cpus()
    if engine_cpus is None:
        return CoreOverlap(
            client_cpus=sorted(client),
            sentence=f"the engine's cores are unknown; the client may run on {_count(len(client))}: measured "
            "latencies may include contention with the load generator",
        )
    engine = set(engine_cpus)
    shared = len(client & engine)
    if shared == 0:
        sentence = (
            f"the client ({_count(len(client))}) and the engine ({_count(len(engine))}) share no core: "
            "the load generator does not compete with the engine for CPU"
        )
    else:
        sentence = (
            f"the client and the engine share {shared} of {_count(len(engine))}: measured latencies include "
            "contention with the load generator"
        )
    return CoreOverlap(
        client_cpus=sorted(client), engine_cpus=sorted(engine), shared=shared, sentence=sentence
    )


def set_process_affinity(cpus: Iterable[int]) -> None:
    """Restrict every thread of this process to ``cpus`` (``os.sched_setaffinity(0, ...)`` alone moves only the
    calling thread on Linux; the threads already running are moved one by one through ``/proc/self/task``)."""
    mask = set(cpus)
    tids: list[int] = []
    with contextlib.suppress(OSError):
        tids = [int(t) for t in os.listdir("/proc/self/task") if t.isdigit()]
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that has just ended
            os.sched_setaffinity(tid, mask)
    os.sched_setaffinity(0, mask)


def isolate_client(engine_cpus: set[int]) -> set[int] | None:
    """Move this process off the engine's cores: when its affinity has CPUs the engine does not use, restrict
    it to those (every thread, and so every thread started afterwards) and return them; else (or without
    affinity support) change nothing and return None."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    free = allowed_cpus() - set(engine_cpus)
    if not free:
        return None
    set_process_affinity(free)
    return free


__all__ = [
    "LoopbackServer",
    "allowed_cpus",
    "client_self_test",
    "core_overlap",
    "engine_cpus_from_bind",
    "isolate_client",
    "set_process_affinity",
]


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
