"""The requests of one benchmark cell, made ready for the sender before its clock starts.

Making a prompt costs real CPU (a random prompt is decoded and re-counted by the tokenizer, about half a
millisecond each), and on a machine where the engine and the client share cores that CPU would be taken from the
engine while it is being measured; at high rates the send schedule would be bounded by prompt making rather than
by the load asked for. So the measured window does nothing but send and timestamp:

- ``ReadyFeed``: every request of the cell (warmups first) is made and rendered to bytes before the clock starts,
  in batches of ``MAKE_CHUNK`` prompts (a cancel is seen between batches, so it stops the making within a fraction
  of a second). Only one cell's requests are held at a time, so a sweep of any number of cells runs in the memory
  of its largest cell.
- ``ProcessFeed``: a cell whose rendered requests would exceed ``PREMADE_BUDGET_BYTES`` is made by a separate
  process at most a look-ahead ahead of the sender (bounded memory); the result says that it was, since that
  process used CPU during the measurement.

``open_feed`` chooses between them. Both hand requests out in order with ``get`` (None once there are no more).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import orjson

from accelbench.bench.client import RequestHead, render_request
from accelbench.bench.datasets import PromptSource, StopFn, open_dataset
from accelbench.bench.tokenizer import Tokenizer, tokenizer_from_recipe
from accelbench.domain.load import BenchConfig, EndpointKind
from accelbench.errors import AccelbenchError, UserInputError

#: Rendered requests a cell may hold in memory, made before its clock starts; a larger cell is made by a process.
PREMADE_BUDGET_BYTES = 256 * 1024 * 1024
#: Prompts made per batch of tokenizer work before the clock (a cancel is seen between batches).
MAKE_CHUNK = 64
#: Requests a separate prompt process makes ahead of the sender: twice the concurrency, within these bounds.
LOOKAHEAD_MIN = 16
LOOKAHEAD_MAX = 512
#: Bytes a request carries besides its prompt text (head, JSON keys, sampling settings), for the size estimate.
REQUEST_OVERHEAD_BYTES = 600
#: How long closing a feed waits for its prompt process to end before it is killed.
PROCESS_JOIN_S = 2.0

PATHS = {EndpointKind.chat: "/v1/chat/completions", EndpointKind.completions: "/v1/completions"}


def request_body(
    config: BenchConfig,
    model: str,
    text: str,
    max_tokens: int | None = None,
    *,
    tools: Sequence[dict[str, Any]] | None = None,
) -> bytes:
    """The JSON body of one streaming request (``max_tokens`` for both endpoints: every server knows it). A
    chat request carries ``tools`` (the opened dataset's, ``PromptSource.tools``; when not given, those of
    ``config.tools``, loaded once per process) with ``tool_choice`` auto."""
    body: dict[str, Any] = {"model": model}
    if EndpointKind(config.endpoint) == EndpointKind.chat:
        body["messages"] = [{"role": "user", "content": text}]
        if tools is None and config.tools is not None:
            from accelbench.bench.tools import cached_tools  # here: this function's edit stays self-contained

            tools = cached_tools(config.tools)
        if tools:
            body["tools"] = list(tools)
            body["tool_choice"] = "auto"
    else:
        body["prompt"] = text
    body["max_tokens"] = max_tokens or config.output_len
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if config.ignore_eos:
        body["ignore_eos"] = True
    if config.temperature is not None:
        body["temperature"] = config.temperature
    return orjson.dumps(body)


class ReadyRequest(NamedTuple):
    """One request as the sender takes it."""

    prompt_len: int | None  # expected prompt tokens
    data: bytes  # the rendered request
    max_tokens: int | None = None
    group: int | None = None
    text: str | None = None  # the prompt (a conversation's new user message)


@dataclass(frozen=True)
class RenderPlan:
    """How a cell's prompts become requests (picklable, so a prompt process renders the same bytes)."""

    config: BenchConfig
    model: str
    head: RequestHead

    @property
    def path(self) -> str:
        return PATHS[EndpointKind(self.config.endpoint)]


def rendered_requests(
    source: PromptSource, plan: RenderPlan, stop: StopFn, chunk: int = MAKE_CHUNK
) -> Iterator[ReadyRequest]:
    """The source's prompts (warmups first) rendered to requests, made ``chunk`` at a time until ``stop()``."""
    with_tools: dict[str, Any] = {"tools": source.tools} if source.tools is not None else {}
    path = plan.path
    for p in source.stream(chunk=chunk, stop=stop):
        body = request_body(plan.config, plan.model, p.text, p.max_tokens, **with_tools)
        text = p.text if plan.config.turns > 1 else None  # only a conversation needs it again
        yield ReadyRequest(p.prompt_len, render_request(plan.head, path, body), p.max_tokens, p.group, text)


def estimated_bytes(source: PromptSource, config: BenchConfig) -> float:
    """What the cell's rendered requests will take in memory: the source's own estimate of a prompt's size, else
    eight bytes per input token (a word token decodes to about five characters; JSON escapes some)."""
    per_prompt = source.approx_prompt_bytes
    if per_prompt is None:
        per_prompt = 8.0 * config.input_len
    return source.total * (per_prompt + REQUEST_OVERHEAD_BYTES)


def lookahead(config: BenchConfig) -> int:
    """Requests a prompt process makes ahead of the sender (``LOOKAHEAD_MIN`` .. ``LOOKAHEAD_MAX``)."""
    want = 2 * config.max_concurrency if config.max_concurrency else LOOKAHEAD_MAX
    return max(LOOKAHEAD_MIN, min(LOOKAHEAD_MAX, want))


class Feed(Protocol):
    """What the sender takes requests from."""

    delivered: int
    #: set when making the prompts failed after some were handed out (the runner notes it)
    error: BaseException | None

    async def get(self) -> ReadyRequest | None: ...

    def halt(self) -> None: ...

    async def aclose(self) -> None: ...


class ReadyFeed:
    """Every request of the cell, made before the clock started."""

    def __init__(self, requests: list[ReadyRequest]) -> None:
        self._requests = requests
        self._halted = False
        self.delivered = 0
        self.error: BaseException | None = None

    async def get(self) -> ReadyRequest | None:
        i = self.delivered
        if self._halted or i >= len(self._requests):
            return None
        self.delivered = i + 1
        return self._requests[i]

    def halt(self) -> None:
        self._halted = True

    async def aclose(self) -> None:
        self._halted = True
        self._requests = []


# ------------------------------------------------------------------------------------------ prompt process
@dataclass(frozen=True)
class _Job:
    """What the prompt process needs to make the same requests (picklable)."""

    plan: RenderPlan
    tokenizer: tuple[str, Any] | None  # Tokenizer.recipe(); None: no tokenizer
    count: int
    warmups: int


def _child_main(conn: Any, job: _Job) -> None:
    """The prompt process: make the cell's requests and send them one by one; then its notes; then the end.
    The pipe's buffer and the parent's look-ahead bound what is made ahead (a full pipe blocks ``send``)."""
    try:
        tok = tokenizer_from_recipe(job.tokenizer) if job.tokenizer is not None else None
        source = open_dataset(job.plan.config, tok, count=job.count, warmups=job.warmups)
        for req in rendered_requests(source, job.plan, lambda: False):
            conn.send(("request", req))
        conn.send(("notes", list(source.notes)))
    except AccelbenchError as exc:
        conn.send(("error", exc.message, getattr(exc, "hint", None)))
    except Exception as exc:  # reported to the parent, which notes it; never a traceback on the terminal
        conn.send(("error", f"{type(exc).__name__}: {exc}", None))
    finally:
        with contextlib.suppress(Exception):
            conn.send(("end",))
        conn.close()


class ProcessFeed:
    """Requests made by a separate process, at most ``lookahead`` ahead of the sender. A reader thread of this
    process moves them from the pipe into the event loop's queue (it only unpickles: the making is elsewhere)."""

    def __init__(self, job: _Job, lookahead: int) -> None:
        ctx = multiprocessing.get_context(
            "spawn"
        )  # a fork would copy the event loop and the client's threads
        self._conn, child = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(
            target=_child_main, args=(child, job), name="accelbench-prompts", daemon=True
        )
        self._child_end = child
        self._slots = threading.Semaphore(lookahead)
        self._halt = threading.Event()
        self._queue: asyncio.Queue[ReadyRequest | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._read, name="accelbench-prompt-reader", daemon=True)
        self.delivered = 0
        self.error: BaseException | None = None
        self.notes: list[str] = []
        self.ended = False

    def start(self) -> None:
        self._proc.start()
        self._child_end.close()  # the child holds the only writing end now: its exit ends our reads
        self._thread.start()

    def _put(self, item: ReadyRequest | None) -> None:
        if item is None:
            self.ended = True
        self._queue.put_nowait(item)

    def _read(self) -> None:
        try:
            while not self._halt.is_set():
                while not self._slots.acquire(timeout=0.05):
                    if self._halt.is_set():
                        return
                msg = self._next()
                if msg is None or msg[0] == "end":
                    return
                if msg[0] == "request":
                    self._loop.call_soon_threadsafe(self._put, msg[1])
                    continue
                self._slots.release()  # not a request: the place is still free
                if msg[0] == "notes":
                    self.notes = list(msg[1])
                elif msg[0] == "error":
                    self.error = UserInputError(msg[1], hint=msg[2]) if msg[2] else UserInputError(msg[1])
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
                self._loop.call_soon_threadsafe(self._put, None)

    def _next(self) -> tuple[Any, ...] | None:
        while not self._halt.is_set():
            try:
                if self._conn.poll(0.05):
                    return tuple(self._conn.recv())
            except (EOFError, OSError):
                if self.error is None and not self._halt.is_set():
                    self.error = UserInputError("The prompt process ended before making every prompt.")
                return None
        return None

    @property
    def ready(self) -> int:
        """Requests made and not yet taken."""
        return self._queue.qsize() - (1 if self.ended else 0)

    async def get(self) -> ReadyRequest | None:
        item = await self._queue.get()
        if item is None:
            self._queue.put_nowait(None)  # every later get answers None too
            return None
        self._slots.release()
        self.delivered += 1
        return item

    async def fill(self, k: int, stopped: StopFn) -> None:
        """Wait until ``k`` requests are ready (or the process ended, or a stop)."""
        while self._queue.qsize() < k and not self.ended and not stopped():
            await asyncio.sleep(0.005)

    def halt(self) -> None:
        self._halt.set()
        self._queue.put_nowait(None)

    async def aclose(self) -> None:
        self._halt.set()
        loop = asyncio.get_running_loop()
        if self._thread.is_alive():
            await loop.run_in_executor(None, self._thread.join, PROCESS_JOIN_S)
        if self._proc.is_alive():
            self._proc.terminate()
            await loop.run_in_executor(None, self._proc.join, PROCESS_JOIN_S)
            if self._proc.is_alive():
                self._proc.kill()
        with contextlib.suppress(OSError):
            self._conn.close()


# --------------------------------------------------------------------------------------------- choosing
@dataclass
class OpenedFeed:
    """The feed a cell sends from, and what the result should say about how its prompts were made."""

    feed: ReadyFeed | ProcessFeed
    notes: list[str]


def _mib(n: float) -> str:
    return f"{n / (1024 * 1024):,.0f} MiB"


def make_all(source: PromptSource, plan: RenderPlan, stop: StopFn) -> list[ReadyRequest]:
    """Every request of the source, made now (blocking; run it off the event loop). Stops early on ``stop()``."""
    return list(rendered_requests(source, plan, stop))


async def open_feed(
    source: PromptSource, plan: RenderPlan, tokenizer: Tokenizer | None, stop: StopFn
) -> OpenedFeed:
    """The cell's requests made ready before its clock starts: all of them when they fit the memory budget, else
    a prompt process started and its first look-ahead made. A user error in the prompts raises here, before
    anything is sent."""
    size = estimated_bytes(source, plan.config)
    recipe = tokenizer.recipe() if tokenizer is not None else None
    loop = asyncio.get_running_loop()
    if size <= PREMADE_BUDGET_BYTES or (tokenizer is not None and recipe is None):
        notes: list[str] = []
        if size > PREMADE_BUDGET_BYTES:
            notes.append(
                f"This cell's requests (about {_mib(size)}) were made before the clock started although they "
                f"exceed the {_mib(PREMADE_BUDGET_BYTES)} budget: its tokenizer cannot be loaded in another process."
            )
        made = await loop.run_in_executor(None, make_all, source, plan, stop)
        return OpenedFeed(ReadyFeed(made), notes)
    ahead = lookahead(plan.config)
    feed = ProcessFeed(_Job(plan, recipe, source.count, source.num_warmups), ahead)
    feed.start()
    await feed.fill(min(ahead, source.total), stop)
    if feed.error is not None and feed.ready == 0:
        await feed.aclose()
        raise feed.error
    note = (
        f"This cell's {source.total:,} requests (about {_mib(size)}) exceed the {_mib(PREMADE_BUDGET_BYTES)} "
        f"budget for making them before the clock starts, so a separate process made them while the cell ran, at "
        f"most {ahead} ahead of the sender; that process used CPU during the measurement."
    )
    return OpenedFeed(feed, [note])
