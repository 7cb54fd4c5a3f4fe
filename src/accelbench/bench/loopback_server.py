"""A zero-delay OpenAI-compatible streaming server on 127.0.0.1, in this process (``LoopbackServer``): what the
client self-test (``bench.selftest``) drives accelbench's client against.

It is kept as cheap as it can be (a response is rendered once per shape; one batched step writes one ready-made
chunk to every open stream, like an engine step producing one token for each running request), but its thread
still shares the cores and the GIL with the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import orjson

from accelbench.bench.event_loop import new_event_loop

#: the model name the loopback server answers to
SELFTEST_MODEL = "accelbench-selftest"


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
        loop = new_event_loop()
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
