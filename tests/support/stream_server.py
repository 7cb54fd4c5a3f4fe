"""An OpenAI-compatible streaming server for tests and the client benchmark. A TEST FIXTURE, never product code.

It speaks just enough HTTP/1.1 (keep-alive, Content-Length request bodies, chunked responses) on a raw asyncio
protocol, so that it is fast (the client benchmark must measure the client, not this server) and so that every
byte it sends, and when, is under the test's control:

- ``POST /v1/chat/completions`` and ``POST /v1/completions`` with SSE streaming and
  ``stream_options.include_usage``; ``/tokenize`` and ``/detokenize`` (vLLM's bodies) when a tokenizer directory
  is given; ``/metrics`` (Prometheus text with vLLM's names); ``/v1/models``; ``/health``.
- Scripted timing: the first text chunk ``ttft_ms`` after the request arrived, then one chunk every ``itl_ms``.
  Every chunk's actual write time (``time.perf_counter``, the same clock as the client's on Linux) is
  recorded, so tests compare the client's figures against what really happened.
- Fault injection: HTTP errors with a JSON body, hanging (a timeout), cutting the connection mid-stream, a
  malformed JSON line, SSE comments and blank keep-alives, a role-only first chunk, a usage chunk with or
  without ``choices``, several tokens per chunk, no usage at all, CRLF line endings, an error event, reasoning
  deltas before the content (with or without ``completion_tokens_details.reasoning_tokens``), tool-call deltas.
- A zero-delay mode: the whole response is rendered once per shape and written with one ``transport.write``.

A request's behaviour is the server's default ``Script`` updated by a directive anywhere in the prompt:
``[[fixture:{"cut_after": 3}]]``. Tests build prompts (for example a jsonl dataset) that carry directives,
so each request of one benchmark run can behave differently while the run goes on.

Run it in a thread (``StreamServer(...).start()``) or in its own process
(``python -m tests.support.stream_server --port 0``, or ``spawn_server(...)``), which prints
``PORT <n>`` once listening; records are then at ``GET /_fixture/records``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

try:  # the fixture is fast with uvloop, correct without it
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

DIRECTIVE = re.compile(r"\[\[fixture:(\{.*?\})\]\]")
WORDS = [" alpha", " bravo", " charlie", " delta", " echo", " foxtrot", " golf", " hotel"]


@dataclass
class Script:
    """How the server answers one request. Times in milliseconds, measured from the request's arrival."""

    ttft_ms: float = 0.0  # first text chunk after this
    itl_ms: float = 0.0  # then one chunk every itl_ms
    tokens_per_chunk: int = 1  # several tokens in one chunk (the last chunk may carry fewer)
    output_tokens: int | None = None  # None: max_tokens of the request (default 16)
    role_chunk: bool = True  # chat: a first chunk carrying only the role (content "")
    role_ms: float | None = None  # when the role chunk goes out; None: together with the first text chunk
    usage: str = (
        "separate"  # separate (choices: []), with_choices, none, on_last (usage in the last text chunk)
    )
    comments: bool = False  # an SSE comment and a blank keep-alive before every chunk
    crlf: bool = False  # CRLF line endings
    status: int = 200  # an HTTP error status with a JSON body
    error_message: str = "fixture error"
    error_style: str = "openai"  # openai: {"error": {...}}; vllm: {"object": "error", "message": ...}
    hang: bool = False  # never answer (client timeout)
    hang_after: int | None = None  # send this many text chunks, then stall forever
    cut_after: int | None = None  # send this many text chunks, then close the connection
    malformed_after: int | None = None  # send this many text chunks, then a line that is not JSON
    error_event_after: int | None = None  # send this many text chunks, then an in-stream error event
    empty_chunks: bool = False  # after every text chunk, a chunk whose content is "" (not text)
    finish_chunk: bool = False  # a final chunk with finish_reason and no text (after the last text chunk)
    # chat: this many reasoning deltas (one token each) before the content; they take the first slots of the
    # ttft_ms/itl_ms schedule, and the content's chunks come answer_gap_ms later than the schedule says
    reasoning_chunks: int = 0
    reasoning_key: str = "reasoning_content"  # or "reasoning" (vLLM's newer name)
    answer_gap_ms: float = 0.0
    reasoning_usage: bool = True  # usage carries completion_tokens_details.reasoning_tokens (when reasoning)
    # chat: this many tool-call deltas (one token each) after the content, on the same schedule; the first one
    # names the function, each carries a piece of its arguments
    tool_call_chunks: int = 0

    def updated(self, changes: dict[str, Any]) -> Script:
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown fixture directive keys: {sorted(unknown)}")
        return dataclasses.replace(self, **changes)


@dataclass
class ChunkRecord:
    t: float  # perf_counter right before the write
    kind: str  # role, text, empty, finish, usage, done, comment, malformed, error
    tokens: int = 0
    t_after: float | None = None  # perf_counter right after the write: the truth lies in [t, t_after]


@dataclass
class RequestLog:
    path: str
    received: float  # perf_counter when the full request was in
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: int = 200
    chunks: list[ChunkRecord] = field(default_factory=list)
    script: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    head: str = ""  # request line and headers as received
    prompt: str = ""  # the prompt text (the last message's content for chat)

    def text_times(self) -> list[float]:
        return [c.t for c in self.chunks if c.kind == "text"]

    def times_of(self, kind: str) -> list[float]:
        """Write times (before the write) of the chunks of one kind: role, reasoning, text, tool, usage, ..."""
        return [c.t for c in self.chunks if c.kind == kind]

    def text_windows(self) -> list[tuple[float, float]]:
        """(before, after) the write of every text chunk: when the process was descheduled around a write, the
        moment the bytes left lies somewhere in this window."""
        return [(c.t, c.t_after if c.t_after is not None else c.t) for c in self.chunks if c.kind == "text"]

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return d


# --------------------------------------------------------------------------------------------- tokenizer
class FixtureTokenizer:
    """The server side of /tokenize: a tokenizers.Tokenizer plus the chat template, rendered independently
    of accelbench's own code (so tests of accelbench's tokenizer are not circular)."""

    def __init__(self, directory: Path) -> None:
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        cfg = json.loads((directory / "tokenizer_config.json").read_text())
        self.template = cfg.get("chat_template")
        self.bos = cfg.get("bos_token")
        self.eos = cfg.get("eos_token")

    def render_chat(self, messages: list[dict[str, Any]]) -> str:
        import jinja2
        import jinja2.sandbox

        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(self.template).render(
            messages=messages, add_generation_prompt=True, bos_token=self.bos, eos_token=self.eos
        )

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self.tok.decode(ids, skip_special_tokens=False))


def make_tokenizer_dir(directory: Path, *, add_bos: bool = False, vocab_size: int = 1200) -> Path:
    """Train a small byte-level BPE tokenizer (deterministic) and save it like a model's tokenizer files:
    tokenizer.json + tokenizer_config.json with a ChatML template that adds a default system prompt when
    there is none (as SmolLM2's does). ``add_bos`` makes the encoder add a BOS token (completions count it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    directory.mkdir(parents=True, exist_ok=True)
    import random

    rng = random.Random(1234)
    base = [w.strip() for w in WORDS] + [
        "the", "cat", "sat", "on", "mat", "model", "token", "serve", "bench", "latency", "throughput",
        "prompt", "cache", "prefix", "hardware", "accelerator", "memory", "kernel", "batch", "stream",
    ]  # fmt: skip
    letters = "abcdefghijklmnopqrstuvwxyz"
    corpus = []
    for _ in range(3000):
        words = []
        for _ in range(12):
            if rng.random() < 0.6:
                words.append(rng.choice(base))
            else:
                words.append("".join(rng.choice(letters) for _ in range(rng.randint(2, 9))))
        corpus.append(" ".join(words) + rng.choice([".", ",", "!", "?", ""]))
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    if add_bos:
        bos_id = tok.token_to_id("<|endoftext|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|endoftext|> $A", pair="<|endoftext|> $A $B", special_tokens=[("<|endoftext|>", bos_id)]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.save(str(directory / "tokenizer.json"))
    template = (
        "{% for message in messages %}"
        "{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}"
        "{% endif %}"
        "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )
    cfg = {
        "tokenizer_class": "GPT2Tokenizer",
        "bos_token": "<|endoftext|>" if add_bos else "<|im_start|>",
        "eos_token": "<|im_end|>",
        "unk_token": "<|endoftext|>",
        "chat_template": template,
        "model_max_length": 8192,
        "added_tokens_decoder": {str(tok.token_to_id(s)): {"content": s, "special": True} for s in specials},
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1))
    return directory


# ------------------------------------------------------------------------------------------------- server
def _chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


_LAST_CHUNK = b"0\r\n\r\n"
_STATUS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 411: "Length Required",
           429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}  # fmt: skip


def _head(status: int, content_type: str, length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} {_STATUS.get(status, 'Status')}", f"content-type: {content_type}"]
    lines.append(f"content-length: {length}" if length is not None else "transfer-encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class StreamServer:
    """The fixture server. ``start()`` runs it on a thread with its own event loop; ``serve_forever`` in the
    current thread (the subprocess entry point)."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        tokenizer_dir: Path | str | None = None,
        model: str = "fixture-model",
        metrics: bool = True,
        record: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        idle_timeout_s: float | None = None,
        drop_after_idle_s: float | None = None,
        engine: Any = None,
        model_root: str | None = None,
    ) -> None:
        self.script = script or Script()
        self.model_root = model_root  # what /v1/models says the model was loaded from (vLLM's "root")
        # a ``BatchingEngine`` (tests/support/batching_engine.py): tokens come when its steps produce them,
        # instead of at the script's fixed times
        self.engine = engine
        self.idle_timeout_s = idle_timeout_s  # close keep-alive connections idle this long (as uvicorn does)
        # a request arriving on a connection idle this long is dropped unanswered: the race of a server closing
        # an idle connection just as the client reuses it
        self.drop_after_idle_s = drop_after_idle_s
        self.model = model
        self.metrics_enabled = metrics
        self.record = record
        self.host = host
        self.port = port
        self.tokenizer = FixtureTokenizer(Path(tokenizer_dir)) if tokenizer_dir else None
        self.records: list[RequestLog] = []
        self.connections = 0  # TCP connections accepted (keep-alive reuse shows as few)
        self.running = 0
        self.counters = {"prompt_tokens": 0, "generation_tokens": 0, "requests": 0}
        self._prerendered: dict[tuple[Any, ...], tuple[bytes, bytes, int]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # -------------------------------------------------------------- lifecycle
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> StreamServer:
        self._thread = threading.Thread(target=self._thread_main, name="stream-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fixture server did not start")
        return self

    def _thread_main(self) -> None:
        loop = uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        loop.run_until_complete(self._listen())
        self._ready.set()
        loop.run_forever()
        loop.close()

    async def _listen(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._server = await loop.create_server(lambda: _Conn(self), self.host, self.port, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def _close() -> None:
            if self._server is not None:
                self._server.close()
                self._server.abort_clients() if hasattr(self._server, "abort_clients") else None
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(5)
        self._thread = None

    def __enter__(self) -> StreamServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self, announce: bool = True) -> None:
        async def main() -> None:
            await self._listen()
            if announce:
                sys.stdout.write(f"PORT {self.port}\n")
                sys.stdout.flush()
            await asyncio.Event().wait()

        if uvloop is not None:
            uvloop.run(main())
        else:  # pragma: no cover
            asyncio.run(main())

    def reset(self) -> None:
        self.records.clear()

    # ------------------------------------------------------------ dispatching
    def handle(self, conn: _Conn, method: str, path: str, body: bytes) -> None:
        path = path.split("?", 1)[0]
        if method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            self._completion(conn, path, body)
        elif method == "POST" and path == "/tokenize":
            self._tokenize(conn, body)
        elif method == "POST" and path == "/detokenize":
            self._detokenize(conn, body)
        elif method == "GET" and path == "/metrics" and self.metrics_enabled:
            conn.send_simple(200, self.metrics_text().encode(), "text/plain; version=0.0.4")
        elif method == "GET" and path == "/v1/models":
            listed = {"id": self.model, "object": "model", "max_model_len": 8192}
            if self.model_root is not None:
                listed["root"] = self.model_root
            conn.send_json(200, {"object": "list", "data": [listed]})
        elif method == "GET" and path == "/health":
            conn.send_simple(200, b"", "text/plain")
        elif method == "GET" and path == "/_fixture/records":
            conn.send_json(200, [r.to_json() for r in self.records])
        elif method == "POST" and path == "/_fixture/reset":
            self.reset()
            conn.send_json(200, {"ok": True})
        elif method == "POST" and path == "/_fixture/script":
            self.script = self.script.updated(orjson.loads(body))
            conn.send_json(200, {"ok": True})
        else:
            conn.send_json(404, {"error": {"message": f"no route {method} {path}", "code": 404}})

    def metrics_text(self) -> str:
        lbl = f'{{engine="0",model_name="{self.model}"}}'
        gen = self.counters["generation_tokens"]
        prompt = self.counters["prompt_tokens"]
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{lbl} {float(self.running)}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{lbl} 0.0",
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{lbl} {min(1.0, self.running / 64):.4f}",
            "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.",
            "# TYPE vllm:num_preemptions_total counter",
            f"vllm:num_preemptions_total{lbl} 0.0",
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{lbl} {float(prompt)}",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{lbl} {float(gen)}",
            "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.",
            "# TYPE vllm:prefix_cache_queries_total counter",
            f"vllm:prefix_cache_queries_total{lbl} {float(prompt)}",
            "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.",
            "# TYPE vllm:prefix_cache_hits_total counter",
            f"vllm:prefix_cache_hits_total{lbl} {float(prompt // 4)}",
            "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
            "# TYPE vllm:time_to_first_token_seconds histogram",
            f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="{self.model}"}} 0.0',
            f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="{self.model}"}} 0.0',
            f"vllm:time_to_first_token_seconds_count{lbl} 0.0",
            f"vllm:time_to_first_token_seconds_sum{lbl} 0.0",
        ]
        return "\n".join(lines) + "\n"

    # ----------------------------------------------------------- tokenization
    def count_prompt(self, path: str, req: dict[str, Any]) -> int:
        if path.endswith("chat/completions"):
            messages = req.get("messages") or []
            if self.tokenizer is not None:
                return len(self.tokenizer.encode(self.tokenizer.render_chat(messages), False))
            return sum(len(str(m.get("content", "")).split()) for m in messages)
        prompt = req.get("prompt", "")
        if self.tokenizer is not None:
            return len(self.tokenizer.encode(prompt, True))
        return len(str(prompt).split())

    def _tokenize(self, conn: _Conn, body: bytes) -> None:
        if self.tokenizer is None:
            conn.send_json(404, {"error": {"message": "no tokenizer", "code": 404}})
            return
        req = orjson.loads(body)
        if "messages" in req:
            text = self.tokenizer.render_chat(req["messages"])
            ids = self.tokenizer.encode(text, bool(req.get("add_special_tokens", False)))
        else:
            ids = self.tokenizer.encode(req["prompt"], bool(req.get("add_special_tokens", True)))
        conn.send_json(200, {"count": len(ids), "max_model_len": 8192, "tokens": ids})

    def _detokenize(self, conn: _Conn, body: bytes) -> None:
        if self.tokenizer is None:
            conn.send_json(404, {"error": {"message": "no tokenizer", "code": 404}})
            return
        req = orjson.loads(body)
        conn.send_json(200, {"prompt": self.tokenizer.decode(list(req["tokens"]))})

    # ------------------------------------------------------------ completions
    def _completion(self, conn: _Conn, path: str, body: bytes) -> None:
        received = time.perf_counter()
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError:
            conn.send_json(400, {"error": {"message": "body is not JSON", "code": 400}})
            return
        chat = path.endswith("chat/completions")
        script = self.script
        text = ""
        if chat:
            msgs = req.get("messages") or []
            text = str(msgs[-1].get("content", "")) if msgs else ""
        else:
            text = str(req.get("prompt", ""))
        if "[[fixture:" in text:
            for m in DIRECTIVE.finditer(text):
                script = script.updated(json.loads(m.group(1)))
        max_tokens = req.get("max_completion_tokens") or req.get("max_tokens") or 16
        n_tokens = script.output_tokens if script.output_tokens is not None else int(max_tokens)
        prompt_tokens = self.count_prompt(path, req)
        log = RequestLog(
            path=path, received=received, prompt_tokens=prompt_tokens, completion_tokens=n_tokens
        )
        if self.record:
            log.script = dataclasses.asdict(script)
            log.body = {k: v for k, v in req.items() if k not in ("messages", "prompt")}
            log.prompt = text
            log.head = conn.last_head.decode("latin-1")
            self.records.append(log)
        self.counters["requests"] += 1
        self.counters["prompt_tokens"] += prompt_tokens
        if req.get("model") not in (None, self.model):
            log.status = 404
            conn.send_json(404, {"error": {"message": f"The model `{req.get('model')}` does not exist.",
                                           "type": "NotFoundError", "code": 404}})  # fmt: skip
            return
        if script.hang:
            return
        if script.status != 200:
            log.status = script.status
            if script.error_style == "vllm":
                err: dict[str, Any] = {"object": "error", "message": script.error_message,
                                       "type": "BadRequestError", "code": script.status}  # fmt: skip
            else:
                err = {"error": {"message": script.error_message, "type": "error", "code": script.status}}
            conn.send_json(script.status, err)
            return
        if not req.get("stream"):
            words = "".join(WORDS[i % len(WORDS)] for i in range(n_tokens))
            self.counters["generation_tokens"] += n_tokens
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n_tokens,
                     "total_tokens": prompt_tokens + n_tokens}  # fmt: skip
            choice: dict[str, Any] = (
                {"index": 0, "message": {"role": "assistant", "content": words}, "finish_reason": "length"}
                if chat
                else {"index": 0, "text": words, "finish_reason": "length"}
            )
            conn.send_json(200, {"id": "cmpl-fixture", "object": "chat.completion" if chat else "text_completion",
                                 "model": self.model, "choices": [choice], "usage": usage})  # fmt: skip
            return
        include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
        zero = self.engine is None and (
            script.ttft_ms == 0 and script.itl_ms == 0 and script.hang_after is None
            and script.cut_after is None and script.malformed_after is None
            and script.error_event_after is None and not script.crlf and not self.record
        )  # fmt: skip
        if zero:
            self._zero_delay(conn, chat, n_tokens, script, include_usage, prompt_tokens)
            return
        self.running += 1
        conn.busy = True
        task = asyncio.get_running_loop().create_task(
            self._timed(conn, chat, n_tokens, script, include_usage, prompt_tokens, log)
        )
        conn.task = task

    # One SSE event, rendered the way vLLM renders it (same keys, similar size).
    def _event(self, chat: bool, *, text: str | None = None, role: bool = False, finish: str | None = None,
               usage: dict[str, Any] | None = None, choices: bool = True,
               delta_extra: dict[str, Any] | None = None) -> bytes:  # fmt: skip
        obj: dict[str, Any] = {
            "id": "chatcmpl-fixture0123456789abcdef" if chat else "cmpl-fixture0123456789abcdef",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": 1764518400,
            "model": self.model,
        }
        if choices:
            if chat:
                delta: dict[str, Any] = {}
                if role:
                    delta["role"] = "assistant"
                if text is not None:
                    delta["content"] = text
                if delta_extra:
                    delta.update(delta_extra)
                obj["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
            else:
                obj["choices"] = [{"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish,
                                   "stop_reason": None}]  # fmt: skip
        else:
            obj["choices"] = []
        if usage is not None:
            obj["usage"] = usage
        return b"data: " + orjson.dumps(obj) + b"\n\n"

    def _plan(self, chat: bool, n_tokens: int, script: Script, include_usage: bool, prompt_tokens: int
              ) -> list[tuple[str, bytes, int]]:  # fmt: skip
        """The stream as (kind, bytes, tokens) in order; timing is applied by the caller."""
        out: list[tuple[str, bytes, int]] = []
        if chat and script.role_chunk:
            out.append(("role", self._event(chat, text="", role=True), 0))
        k = max(1, script.tokens_per_chunk)
        i = 0
        usage = self._usage(chat, script, n_tokens, prompt_tokens)
        if chat:
            for j in range(script.reasoning_chunks):
                word = {script.reasoning_key: f" think{j}"}
                out.append(("reasoning", self._event(chat, delta_extra=word), 1))
        while i < n_tokens:
            n = min(k, n_tokens - i)
            words = "".join(WORDS[(i + j) % len(WORDS)] for j in range(n))
            last = i + n >= n_tokens
            finish = "length" if last and not script.finish_chunk else None
            u = usage if (last and include_usage and script.usage == "on_last") else None
            out.append(("text", self._event(chat, text=words, finish=finish, usage=u), n))
            if script.empty_chunks and not last:
                out.append(("empty", self._event(chat, text=""), 0))
            i += n
        if chat:
            for j in range(script.tool_call_chunks):
                call: dict[str, Any] = {"index": 0, "function": {"arguments": f'"a{j}"'}}
                if j == 0:
                    call.update(id="call_fixture", type="function")
                    call["function"]["name"] = "lookup"
                out.append(("tool", self._event(chat, delta_extra={"tool_calls": [call]}), 1))
        if script.finish_chunk:
            out.append(("finish", self._event(chat, text="", finish="length"), 0))
        if include_usage and script.usage == "separate":
            out.append(("usage", self._event(chat, usage=usage, choices=False), 0))
        elif include_usage and script.usage == "with_choices":
            # Some servers put usage on a chunk that still has a choice (with no text).
            out.append(("usage", self._event(chat, text="", finish="length", usage=usage), 0))
        out.append(("done", b"data: [DONE]\n\n", 0))
        if script.comments:
            out = [x for item in out for x in (("comment", b": ping\n\n\n", 0), item)]
        if script.crlf:
            out = [(kind, data.replace(b"\n", b"\r\n"), n) for kind, data, n in out]
        return out

    @staticmethod
    def _usage(chat: bool, script: Script, n_tokens: int, prompt_tokens: int) -> dict[str, Any]:
        """The usage of a response: content tokens plus the reasoning and tool-call ones (chat)."""
        extra = script.reasoning_chunks + script.tool_call_chunks if chat else 0
        usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + n_tokens + extra,
                                 "completion_tokens": n_tokens + extra}  # fmt: skip
        if chat and script.reasoning_chunks and script.reasoning_usage:
            usage["completion_tokens_details"] = {"reasoning_tokens": script.reasoning_chunks}
        return usage

    def _zero_delay(self, conn: _Conn, chat: bool, n_tokens: int, script: Script, include_usage: bool,
                    prompt_tokens: int) -> None:  # fmt: skip
        key = (chat, n_tokens, dataclasses.astuple(script), include_usage)
        pre = self._prerendered.get(key)
        if pre is None:
            plan = self._plan(chat, n_tokens, script, include_usage, 0)
            head = b"".join(_chunk(d) for kind, d, _ in plan if kind not in ("usage", "done"))
            tail = b"".join(_chunk(d) for kind, d, _ in plan if kind == "done") + _LAST_CHUNK
            has_usage = any(kind == "usage" for kind, _, _ in plan)
            pre = (_head(200, "text/event-stream", None) + head, tail, int(has_usage))
            self._prerendered[key] = pre
        head, tail, has_usage = pre
        self.counters["generation_tokens"] += n_tokens
        if has_usage:
            usage = self._event(chat, usage=self._usage(chat, script, n_tokens, prompt_tokens), choices=False)
            conn.transport.write(head + _chunk(usage) + tail)
        else:
            conn.transport.write(head + tail)
        conn.done_response()

    async def _timed(self, conn: _Conn, chat: bool, n_tokens: int, script: Script, include_usage: bool,
                     prompt_tokens: int, log: RequestLog) -> None:  # fmt: skip
        loop = asyncio.get_running_loop()
        t0 = log.received
        write = conn.transport.write
        try:
            plan = self._plan(chat, n_tokens, script, include_usage, prompt_tokens)
            write(_head(200, "text/event-stream", None))
            produced = self.engine.generate(prompt_tokens, n_tokens) if self.engine is not None else None
            text_index = 0
            role_pending: bytes | None = None
            for kind, data, ntok in plan:
                if kind == "role" and script.role_ms is None:
                    role_pending = data  # goes out glued to the first text chunk, as vLLM does
                    continue
                if kind == "role":
                    await _sleep_until(loop, t0 + script.role_ms / 1000)  # type: ignore[operator]
                if kind in _TIMED:
                    if script.hang_after is not None and text_index >= script.hang_after:
                        await asyncio.Event().wait()
                    if script.cut_after is not None and text_index >= script.cut_after:
                        conn.transport.close()  # no terminating chunk: the body is incomplete
                        return
                    if script.malformed_after is not None and text_index >= script.malformed_after:
                        write(_chunk(b'data: {"id": "x", "choices": [{"delta": {"content": "oops"\n\n'))
                        log.chunks.append(ChunkRecord(time.perf_counter(), "malformed"))
                        script = dataclasses.replace(script, malformed_after=None)
                    if script.error_event_after is not None and text_index >= script.error_event_after:
                        err = {"error": {"message": "fixture in-stream error", "type": "InternalServerError",
                                         "code": 500}}  # fmt: skip
                        write(_chunk(b"data: " + orjson.dumps(err) + b"\n\n"))
                        log.chunks.append(ChunkRecord(time.perf_counter(), "error"))
                        write(_chunk(b"data: [DONE]\n\n") + _LAST_CHUNK)
                        return
                    if produced is not None:
                        for _ in range(ntok):  # the engine's steps, one token each
                            await produced.__anext__()
                    else:
                        gap = script.answer_gap_ms if text_index >= script.reasoning_chunks > 0 else 0.0
                        due = t0 + (script.ttft_ms + text_index * script.itl_ms + gap) / 1000
                        await _sleep_until(loop, due)
                    text_index += 1
                    if role_pending is not None:
                        before = time.perf_counter()
                        write(_chunk(role_pending))
                        log.chunks.append(ChunkRecord(before, "role", 0, time.perf_counter()))
                        role_pending = None
                if conn.transport.is_closing():
                    return
                before = time.perf_counter()
                write(_chunk(data))
                log.chunks.append(ChunkRecord(before, kind, ntok, time.perf_counter()))
                if kind in _TIMED:
                    self.counters["generation_tokens"] += ntok
            write(_LAST_CHUNK)
        finally:
            self.running -= 1
            conn.busy = False
            conn.task = None
        conn.done_response()


_TIMED = ("reasoning", "text", "tool")  # the chunks that carry generated tokens, on the script's schedule


async def _sleep_until(loop: asyncio.AbstractEventLoop, due: float) -> None:
    """Sleep until perf_counter() reaches ``due``; the last stretch is a short spin so chunk times are exact to
    well under a millisecond (the loop's timer resolution alone is about 1 ms)."""
    delay = due - time.perf_counter()
    if delay > 0.002:
        await asyncio.sleep(delay - 0.0015)
    while time.perf_counter() < due:
        await asyncio.sleep(0)


class _Conn(asyncio.Protocol):
    """One client connection: parses requests (Content-Length bodies), answers them in order."""

    def __init__(self, server: StreamServer) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.busy = False
        self.task: asyncio.Task[None] | None = None
        self.last_head = b""  # the last request's head, for tests that check what the client sent
        self.idle_timer: asyncio.TimerHandle | None = None
        self.idle_since = time.perf_counter()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections += 1
        self._arm_idle()

    def _arm_idle(self) -> None:
        self.idle_since = time.perf_counter()
        if self.server.idle_timeout_s is not None:
            if self.idle_timer is not None:
                self.idle_timer.cancel()
            loop = asyncio.get_running_loop()
            self.idle_timer = loop.call_later(self.server.idle_timeout_s, self.transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.task is not None:
            self.task.cancel()

    def data_received(self, data: bytes) -> None:
        drop = self.server.drop_after_idle_s
        if (
            drop is not None
            and not self.busy
            and not self.buf
            and time.perf_counter() - self.idle_since > drop
        ):
            self.transport.close()
            return
        if self.idle_timer is not None:
            self.idle_timer.cancel()
            self.idle_timer = None
        self.buf = self.buf + data if self.buf else data
        self._process()

    def _process(self) -> None:
        while self.buf and not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self.last_head = self.buf[:end]
            head = self.last_head.decode("latin-1")
            lines = head.split("\r\n")
            try:
                method, target, _ = lines[0].split(" ", 2)
            except ValueError:
                self.transport.close()
                return
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                lname = name.strip().lower()
                if lname == "content-length":
                    length = int(value.strip())
                elif lname == "transfer-encoding" and "chunked" in value.lower():
                    self.send_simple(411, b"chunked request bodies are not supported", "text/plain")
                    self.transport.close()
                    return
            total = end + 4 + length
            if len(self.buf) < total:
                return
            body = self.buf[end + 4 : total]
            self.buf = self.buf[total:]
            self.server.handle(self, method, target, body)

    def done_response(self) -> None:
        if self.buf and not self.busy:
            self._process()
        elif not self.busy:
            self._arm_idle()

    def send_simple(self, status: int, body: bytes, content_type: str) -> None:
        self.transport.write(_head(status, content_type, len(body)) + body)

    def send_json(self, status: int, obj: Any) -> None:
        self.send_simple(status, orjson.dumps(obj), "application/json")


# ---------------------------------------------------------------------------------------- subprocess
class ServerProcess:
    """The fixture server in its own process (no GIL shared with the client under test)."""

    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc = proc
        self.port = port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def records(self) -> list[RequestLog]:
        import urllib.request

        with urllib.request.urlopen(self.base_url + "/_fixture/records", timeout=10) as r:
            raw = json.loads(r.read())
        out = []
        for item in raw:
            chunks = [ChunkRecord(**c) for c in item.pop("chunks")]
            out.append(RequestLog(**item, chunks=chunks))
        return out

    def reset(self) -> None:
        import urllib.request

        req = urllib.request.Request(self.base_url + "/_fixture/reset", data=b"{}", method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@contextlib.contextmanager
def spawn_server(*args: str, cpu: int | None = None, python: str | None = None) -> Iterator[ServerProcess]:
    """Start ``python -m tests.support.stream_server`` with ``args``; yields once it is listening."""
    root = Path(__file__).resolve().parents[2]
    cmd = [python or sys.executable, "-m", "tests.support.stream_server", "--port", "0", *args]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, text=True, cwd=root, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"fixture server did not start: {line!r}")
        server = ServerProcess(proc, int(line.split()[1]))
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--model", default="fixture-model")
    p.add_argument("--tokenizer-dir", default=None)
    p.add_argument("--script", default="{}", help="JSON: the default Script's fields")
    p.add_argument("--no-metrics", action="store_true")
    p.add_argument("--record", action="store_true", help="record chunk times (off: fastest zero-delay path)")
    p.add_argument("--cpu", type=int, default=None, help="pin this process to one CPU")
    a = p.parse_args(argv)
    if a.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {a.cpu})
    server = StreamServer(
        Script().updated(json.loads(a.script)),
        tokenizer_dir=a.tokenizer_dir,
        model=a.model,
        metrics=not a.no_metrics,
        record=a.record,
        host=a.host,
        port=a.port,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
