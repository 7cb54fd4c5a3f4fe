"""The streaming HTTP client: the measurement hot path.

Why not aiohttp here: aiohttp's response stream runs several Python calls for every HTTP chunk it receives, and an
OpenAI-compatible server sends one chunk per token. Measured against the in-repo zero-delay server, that per-chunk
work, not the network, bounded the completion rate and inflated TTFT under concurrency. This client keeps the
HTTP/1.1 parsing in C (``httptools``, the llhttp parser that aiohttp and uvicorn also use) and does, per network
read, only this: take ``time.perf_counter()``, feed the parser, note how many body bytes have arrived. Splitting
SSE events, JSON decoding and text assembly happen after the stream has ended (``bench.stream_parse``), so they never
delay the timestamp of another stream's read.

The timing rules (which event ends TTFT, what makes an ITL gap, under accelbench's and vLLM's definitions) are
``bench.stream_parse``'s.

The pool keeps one keep-alive connection per concurrent request (callers bound concurrency), retries a request
once when a reused idle connection turns out to be closed before any response byte, and fails a request with a
readable reason for timeouts, refused connections and connections cut mid-stream (HTTP errors, malformed JSON
and error events inside the stream are named when the response is parsed: ``bench.stream_parse``).
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

import httptools

from accelbench import __version__

_pc = time.perf_counter


class RequestFailed(Exception):
    """A request ended without a complete response; the message is the failure reason."""


class _RetryableClose(RequestFailed):
    """A reused keep-alive connection was closed before the first response byte (safe to resend once)."""


class RawResponse:
    """What the wire delivered for one request, untouched: filled by the connection, parsed after the stream."""

    __slots__ = ("body_len", "ends", "error", "headers_done", "parts", "start", "status", "times")

    def __init__(self) -> None:
        self.start = 0.0  # perf_counter right before the request was written
        self.status = 0
        self.headers_done = False
        self.times: list[float] = []  # perf_counter of every network read
        self.ends: list[int] = []  # body bytes received by the end of each read (cumulative)
        self.parts: list[bytes] = []  # body pieces (chunked framing removed)
        self.body_len = 0
        self.error: str | None = None

    @property
    def body(self) -> bytes:
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)

    @property
    def end(self) -> float:
        """perf_counter of the last read (the end of the response), or the start when nothing arrived."""
        return self.times[-1] if self.times else self.start

    @property
    def nbytes(self) -> int:
        return self.body_len


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection, carrying one request at a time."""

    __slots__ = (
        "closed",
        "eof_body",
        "fut",
        "keep_alive",
        "parser",
        "pool",
        "pooled",
        "resp",
        "transport",
        "uses",
    )

    def __init__(self, pool: StreamClient) -> None:
        self.pool = pool
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.resp: RawResponse | None = None
        self.fut: asyncio.Future[None] | None = None
        self.keep_alive = True
        self.closed = False
        self.uses = 0
        self.pooled = (
            False  # it waited in the pool (opened ahead, or used before): the server may have closed it
        )
        self.eof_body = True  # body delimited by the connection's end (no length, not chunked)

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        resp = self.resp
        if resp is None:  # bytes while idle: the connection is out of step, drop it
            self.abort()
            return
        resp.times.append(_pc())
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(RequestFailed(f"invalid HTTP response: {exc}"))
            self.abort()
        finally:
            resp.ends.append(resp.body_len)

    def eof_received(self) -> bool | None:
        return False  # close the transport; connection_lost decides what that meant

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._busy.discard(self)
        fut = self.fut
        if fut is None or fut.done():
            return
        resp = self.resp
        assert resp is not None
        if resp.headers_done and self.eof_body:
            self._complete()  # a body delimited by the end of the connection
        elif not resp.times and self.pooled:
            self._fail(_RetryableClose("the server closed an idle keep-alive connection"))
        elif not resp.headers_done:
            why = f": {exc}" if exc else ""
            self._fail(RequestFailed(f"server closed the connection before responding{why}"))
        else:
            why = f" ({exc})" if exc else ""
            self._fail(RequestFailed(f"connection closed mid-stream after {resp.body_len} body bytes{why}"))

    # ------------------------------------------------------------------ httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        lname = name.lower()
        if lname == b"content-length" or (lname == b"transfer-encoding" and b"chunked" in value.lower()):
            self.eof_body = False

    def on_headers_complete(self) -> None:
        resp = self.resp
        assert resp is not None
        resp.status = self.parser.get_status_code()
        resp.headers_done = True
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        resp = self.resp
        assert resp is not None
        resp.parts.append(body)
        resp.body_len += len(body)

    def on_message_complete(self) -> None:
        self._complete()

    # ------------------------------------------------------------------ requests
    def send(self, data: bytes, resp: RawResponse, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        self.resp = resp
        self.eof_body = True
        fut: asyncio.Future[None] = loop.create_future()
        self.fut = fut
        resp.start = _pc()
        assert self.transport is not None
        if self.transport.is_closing():
            # the peer closed it and connection_lost has not run yet: writing would raise (uvloop); a pooled
            # connection is retried on a new one, as when the close arrives after the write
            self._fail(_RetryableClose("the server closed an idle keep-alive connection"))
            return fut
        self.transport.write(data)
        return fut

    def _complete(self) -> None:
        fut = self.fut
        self.fut = None
        self.uses += 1
        if fut is not None and not fut.done():
            fut.set_result(None)

    def _fail(self, exc: Exception) -> None:
        fut = self.fut
        self.fut = None
        self.keep_alive = False
        if fut is not None and not fut.done():
            fut.set_exception(exc)

    def timeout(self, seconds: float) -> None:
        if self.fut is not None and not self.fut.done():
            self._fail(RequestFailed(f"timeout: no complete response within {seconds:g} s"))
            self.abort()

    def abort(self) -> None:
        self.keep_alive = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def finish(self) -> None:
        """Forget the request; the connection is either idle again or closed."""
        self.resp = None
        self.fut = None


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    prefix: str  # path prefix of the base URL, without a trailing slash
    netloc: str


def _target(base_url: str) -> _Target:
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http(s) URL, got {base_url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    prefix = parts.path.rstrip("/")
    return _Target(parts.scheme, parts.hostname, port, prefix, parts.netloc)


class RequestHead(NamedTuple):
    """The parts of a request head that do not change between requests (picklable)."""

    prefix: str  # the base URL's path, before each route
    fields: str  # the header lines, each ending in CRLF


def render_request(head: RequestHead, path: str, body: bytes) -> bytes:
    """The complete HTTP/1.1 request (head and body) for POST ``path`` (relative to the base URL)."""
    full = head.prefix + "/" + path.lstrip("/")
    return (
        f"POST {full} HTTP/1.1\r\n{head.fields}Content-Length: {len(body)}\r\n\r\n".encode("latin-1") + body
    )


class StreamClient:
    """A pool of HTTP/1.1 keep-alive connections to one server, for streaming POSTs.

    Requests are rendered to bytes before the benchmark starts (``render``) and sent with ``send``. The pool has no
    limit of its own: callers bound concurrency, and every request in flight has its own connection.
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 30.0,
        verify_tls: bool = True,
    ) -> None:
        self.target = _target(base_url)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        hdrs: dict[str, str] = {
            "Host": self.target.netloc,
            "User-Agent": f"accelbench/{__version__}",
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
        }
        if api_key:
            hdrs["Authorization"] = f"Bearer {api_key}"
        for k, v in (headers or {}).items():
            # A user header replaces ours of the same name (HTTP names are case-insensitive).
            for existing in [h for h in hdrs if h.lower() == k.lower()]:
                del hdrs[existing]
            hdrs[k] = v
        self._head_fields = "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
        self._ssl: _ssl.SSLContext | None = None
        if self.target.scheme == "https":
            self._ssl = _ssl.create_default_context()
            if not verify_tls:
                self._ssl.check_hostname = False
                self._ssl.verify_mode = _ssl.CERT_NONE
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._aborted: str | None = None

    def render(self, path: str, body: bytes) -> bytes:
        """The complete request (head and body) for POST ``path`` (relative to the base URL)."""
        return render_request(self.request_head, path, body)

    @property
    def request_head(self) -> RequestHead:
        """What every request's head carries: enough for another process to render the same requests."""
        return RequestHead(self.target.prefix, self._head_fields)

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        t = self.target
        try:
            _, proto = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(self),
                    t.host,
                    t.port,
                    ssl=self._ssl,
                    server_hostname=t.host if self._ssl else None,
                ),
                self.connect_timeout_s,
            )
        except TimeoutError:
            raise RequestFailed(f"cannot connect to {t.netloc}: timed out") from None
        except OSError as exc:
            raise RequestFailed(f"cannot connect to {t.netloc}: {exc.strerror or exc}") from None
        return proto

    async def preconnect(self, n: int) -> int:
        """Open up to ``n`` idle connections ahead of the measurement (so TCP set-up is not in the first
        requests' timing); returns how many are idle now. Failures are left for the requests to report."""
        loop = asyncio.get_running_loop()
        missing = n - sum(1 for c in self._idle if not c.closed)
        if missing > 0:
            results = await asyncio.gather(
                *(self._connect(loop) for _ in range(missing)), return_exceptions=True
            )
            for c in results:
                if isinstance(c, _Connection):
                    c.pooled = True
                    self._idle.append(c)
        return sum(1 for c in self._idle if not c.closed)

    async def send(self, data: bytes) -> RawResponse:
        """Send one rendered request and collect its response. Never raises for a failed request:
        the reason is in ``RawResponse.error`` (``asyncio.CancelledError`` still propagates)."""
        resp = RawResponse()
        loop = asyncio.get_running_loop()
        for attempt in (0, 1):
            if self._aborted is not None:
                resp.error = self._aborted
                resp.start = _pc()
                return resp
            conn = None
            while self._idle:
                candidate = self._idle.pop()
                if not candidate.closed:
                    conn = candidate
                    break
            if conn is None:
                try:
                    conn = await self._connect(loop)
                except RequestFailed as exc:
                    resp.start = resp.start or _pc()
                    resp.error = str(exc)
                    return resp
            self._busy.add(conn)
            fut = conn.send(data, resp, loop)
            timer = loop.call_later(self.timeout_s, conn.timeout, self.timeout_s)
            try:
                await fut
            except _RetryableClose:
                timer.cancel()
                conn.finish()
                self._busy.discard(conn)
                if attempt == 0:
                    resp = RawResponse()
                    continue
                resp.error = "the server closed the connection before responding"
                return resp
            except RequestFailed as exc:
                resp.error = str(exc)
            except BaseException:
                conn.abort()
                raise
            finally:
                timer.cancel()
            self._busy.discard(conn)
            conn.finish()
            if resp.error is None and conn.keep_alive and not conn.closed:
                conn.pooled = True
                self._idle.append(conn)
            else:
                conn.abort()
            return resp
        raise AssertionError("unreachable")  # pragma: no cover

    def abort_all(self, reason: str) -> None:
        """Fail every request in flight with ``reason`` (and every later one): used to cancel a benchmark."""
        self._aborted = reason
        for conn in list(self._busy):
            conn._fail(RequestFailed(reason))
            conn.abort()

    async def aclose(self) -> None:
        for conn in self._idle + list(self._busy):
            conn.abort()
        self._idle.clear()
        self._busy.clear()
        await asyncio.sleep(0)
