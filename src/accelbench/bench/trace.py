"""Trace replay: the ``trace`` dataset sends a recorded workload's requests at the recorded times.

Two formats are read:

- **Mooncake-style JSONL** (``trace_format="mooncake"``, files ``.jsonl``/``.json``): one object per line with
  ``timestamp`` (milliseconds from the trace start), ``input_length``, ``output_length`` and optionally
  ``hash_ids``, the ids of the prompt's consecutive 512-token blocks: prompts sharing an id share that block.
- **BurstGPT CSV** (``trace_format="burstgpt"``, files ``.csv``): a header with at least ``Timestamp``
  (seconds), ``Request tokens`` and ``Response tokens``; other columns (``Model``, ``Log Type``...) are ignored.
  Rows with 0 response tokens are the failed requests of the original data and are skipped (with a note).

Only the first ``num_prompts`` rows are read (a streaming read: a trace of any size costs only those rows); a
trace with fewer rows is replayed whole and ``PromptSource.count`` says how many. Row ``i`` is sent at
``(timestamp_i - timestamp_0) x time_scale`` seconds after the start (``PromptSource.offsets``), with a prompt of
exactly ``input_length`` server-counted tokens (the random dataset's exact-length fitting) and
``max_tokens = output_length``. Bad input is refused with the file, the line and the field.

Shared blocks: the text of block ``h`` is made once, from a generator seeded by the config's seed and ``h``, to
encode to exactly 512 tokens; a row's prompt is its blocks' texts one after the other, the last block cut (or
the prompt extended with the row's own tokens) and the tail fitted so that the total is exact. So two rows that
share leading hash ids send the same text for those blocks, and a server's prefix cache sees the trace's
sharing. Rows without ``hash_ids`` (every BurstGPT row) get text of their own.

Warmups are not trace rows: ``num_warmups`` extra prompts with the lengths of the first rows (cycling), text of
their own (so they do not fill the prefix cache with the trace's blocks), sent before the clock starts.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from accelbench.bench.file_datasets import need_path
from accelbench.bench.prompts import DATASETS, Prompt, PromptSource, StopFn
from accelbench.bench.tokenizer import Tokenizer
from accelbench.bench.word_tokens import (
    BYTES_PER_TOKEN,
    MAX_FIT_ROUNDS,
    common_prefix,
    exact_prefix,
    prompt_seed,
    token_pool,
)
from accelbench.domain.limits import MAX_CELL_PROMPT_TOKENS, MAX_TOKENS
from accelbench.domain.load import BenchConfig, EndpointKind
from accelbench.errors import UserInputError

#: Tokens per hash id of a Mooncake trace.
BLOCK_TOKENS = 512

TraceFormat = Literal["mooncake", "burstgpt"]

_SUFFIXES: dict[str, TraceFormat] = {".jsonl": "mooncake", ".json": "mooncake", ".csv": "burstgpt"}
_BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace: where it is in the file, when it came (seconds from the trace's start, before
    ``time_scale``) and its lengths."""

    line: int
    timestamp_s: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()


@dataclass
class Trace:
    """The first rows of a trace file (at most the ``limit`` asked for)."""

    path: Path
    format: TraceFormat
    rows: list[TraceRow]
    skipped_failures: int = 0  # BurstGPT rows with 0 response tokens (failed requests), among those read
    more: bool = False  # the file has rows beyond those read
    notes: list[str] = field(default_factory=list)


def trace_format(path: Path, fmt: str) -> TraceFormat:
    """The format of ``path``: ``fmt`` when given, else by the file's extension."""
    if fmt == "mooncake":
        return "mooncake"
    if fmt == "burstgpt":
        return "burstgpt"
    if fmt != "auto":
        raise UserInputError(f"Unknown trace format {fmt!r}.", hint="Use auto, mooncake or burstgpt.")
    found = _SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise UserInputError(
            f"Cannot tell the trace format of {path} from its extension {path.suffix or '(none)'!r}.",
            hint="Name it .jsonl (Mooncake) or .csv (BurstGPT), or give --trace-format mooncake|burstgpt.",
        )
    return found


# ------------------------------------------------------------------------------------------------ parsing
def _number(value: Any, where: str, name: str) -> float:
    """A finite, non-negative number (JSON number or CSV text)."""
    if isinstance(value, bool):
        raise UserInputError(f"{where}: {name} must be a number, not {value!r}.")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise UserInputError(f"{where}: {name} must be a number, not {value!r}.") from None
    if not isinstance(value, int | float):
        raise UserInputError(f"{where}: {name} must be a number, not {value!r}.")
    x = float(value)
    if not math.isfinite(x):
        raise UserInputError(f"{where}: {name} must be a finite number, not {value!r}.")
    if x < 0:
        raise UserInputError(f"{where}: {name} must not be negative ({value!r}).")
    return x


def _count(value: Any, where: str, name: str) -> int:
    """A whole, non-negative number of tokens, at most ``MAX_TOKENS``."""
    x = _number(value, where, name)
    if x != int(x):
        raise UserInputError(f"{where}: {name} must be a whole number of tokens, not {value!r}.")
    if x > MAX_TOKENS:
        raise UserInputError(f"{where}: {name} {int(x):,} is more than the {MAX_TOKENS:,} tokens allowed.")
    return int(x)


def _hash_ids(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UserInputError(f"{where}: hash_ids must be a list of block ids, not {value!r}.")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise UserInputError(f"{where}: hash_ids must hold non-negative integers, not {v!r}.")
        out.append(v)
    return tuple(out)


def _mooncake_rows(path: Path) -> Iterator[TraceRow]:
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj: Any = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserInputError(f"{where} is not JSON: {exc.msg}.") from None
            if not isinstance(obj, dict):
                raise UserInputError(f"{where} is not a JSON object.")
            for name in ("timestamp", "input_length", "output_length"):
                if name not in obj:
                    raise UserInputError(
                        f"{where} has no {name!r} field.",
                        hint="Each line must hold timestamp (ms), input_length, output_length (and hash_ids).",
                    )
            out = _count(obj["output_length"], where, "output_length")
            if out < 1:
                raise UserInputError(f"{where}: output_length must be at least 1.")
            yield TraceRow(
                line=lineno,
                timestamp_s=_number(obj["timestamp"], where, "timestamp") / 1000.0,
                input_length=_count(obj["input_length"], where, "input_length"),
                output_length=out,
                hash_ids=_hash_ids(obj.get("hash_ids"), where),
            )


def _burstgpt_rows(path: Path, skipped: list[int]) -> Iterator[TraceRow]:
    """Rows of a BurstGPT CSV; ``skipped[0]`` counts the failed ones (0 response tokens) passed over."""
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header: list[str] | None = None
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            lineno = reader.line_num
            where = f"{path}:{lineno}"
            if header is None:
                header = [c.strip() for c in cells]
                for name in _BURSTGPT_COLUMNS:
                    if name not in header:
                        raise UserInputError(
                            f"{where}: the header has no {name!r} column.",
                            hint="A BurstGPT CSV has the columns Timestamp, Request tokens, Response tokens.",
                        )
                cols = [header.index(name) for name in _BURSTGPT_COLUMNS]
                continue
            vals = []
            for name, col in zip(_BURSTGPT_COLUMNS, cols, strict=True):
                if col >= len(cells) or not cells[col].strip():
                    raise UserInputError(f"{where} has no {name!r} value.")
                vals.append(cells[col])
            ts = _number(vals[0], where, "Timestamp")
            inp = _count(vals[1], where, "Request tokens")
            out = _count(vals[2], where, "Response tokens")
            if out == 0:
                skipped[0] += 1
                continue
            yield TraceRow(line=lineno, timestamp_s=ts, input_length=inp, output_length=out)
        if header is None:
            raise UserInputError(f"{path} is empty: no header and no requests.")


def read_trace(path: Path, fmt: TraceFormat, limit: int) -> Trace:
    """The first ``limit`` rows of the trace (at least one is read, so an empty trace is refused), checked:
    every field present and a non-negative number, timestamps in order. Reads no further than it needs."""
    skipped = [0]
    rows_iter = _mooncake_rows(path) if fmt == "mooncake" else _burstgpt_rows(path, skipped)
    rows: list[TraceRow] = []
    more = False
    want = max(1, limit)
    for row in rows_iter:
        if len(rows) >= want:
            more = True
            break
        if rows and row.timestamp_s < rows[-1].timestamp_s:
            unit = 1000.0 if fmt == "mooncake" else 1.0
            name = "timestamp" if fmt == "mooncake" else "Timestamp"
            raise UserInputError(
                f"{path}:{row.line}: {name} {row.timestamp_s * unit:g} goes backwards (line {rows[-1].line} "
                f"has {rows[-1].timestamp_s * unit:g}); the trace must be sorted by time.",
                hint="Sort the file by its timestamps.",
            )
        rows.append(row)
    if not rows:
        extra = f" ({skipped[0]} failed rows with 0 response tokens were skipped)" if skipped[0] else ""
        raise UserInputError(f"The trace {path} has no requests{extra}.")
    return Trace(path=path, format=fmt, rows=rows[:limit], skipped_failures=skipped[0],
                 more=more or len(rows) > limit)  # fmt: skip


# ------------------------------------------------------------------------------------------------ prompts
def _trace_seed(config: BenchConfig) -> int:
    key = f"{prompt_seed(config)}|trace|{config.time_scale}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


@dataclass
class _Plan:
    """How one prompt is made: ``head`` (whole blocks' texts), then ``tail`` ids fitted to ``target``."""

    target: int
    head: list[int]  # hash ids whose whole text leads the prompt
    tail_block: int | None  # the hash id whose first tokens start the tail (None: the row's own tokens)
    rng: np.random.Generator


@DATASETS.register("trace")
def trace_dataset(config: BenchConfig, tokenizer: Tokenizer | None, count: int, warmups: int) -> PromptSource:
    """Replays the first ``count`` rows of ``config.dataset_path`` (see the module docstring)."""
    path = need_path(config)
    fmt = trace_format(path, config.trace_format)
    if tokenizer is None:
        raise UserInputError(
            "The trace dataset needs a tokenizer to make prompts of the trace's token counts.",
            hint="Give --tokenizer DIR, or use a server that has /tokenize.",
        )
    tok: Tokenizer = tokenizer
    trace = read_trace(path, fmt, count)
    rows = trace.rows
    n = len(rows)
    if n == 0:  # nothing asked for (the file was still checked to hold requests)
        return PromptSource(count=0, num_warmups=0, make=lambda chunk, stop: iter(()), offsets=[])
    endpoint = EndpointKind(config.endpoint)
    pool = token_pool(tok)
    overhead = tok.count_prompt("", endpoint)
    front = shared_front(tok, pool, endpoint)
    check_trace_size(trace, overhead + 1)
    targets = [max(r.input_length, overhead + 1) for r in rows]
    blocks = BlockUse.of(rows, targets, overhead)
    t0 = rows[0].timestamp_s
    offsets = [(r.timestamp_s - t0) * config.time_scale for r in rows]
    notes = trace_notes(
        trace, config, count, warmups, overhead=overhead, span=offsets[-1], sharing=blocks.sharing
    )
    prompts = TracePrompts(
        tok=tok,
        endpoint=endpoint,
        pool=pool,
        block_pool=spaced_pool(tok, pool),
        seed=_trace_seed(config),
        overhead=overhead,
        rows=rows,
        targets=targets,
        blocks=blocks,
        warmups=warmups,
    )
    return PromptSource(
        count=n,
        num_warmups=warmups,
        make=prompts.make,
        notes=notes,
        shared_prefix_tokens=front if n + warmups >= 2 else 0,
        offsets=offsets,
        expected_prefix_hit_rate=blocks.expected_hit_rate(rows, targets, overhead),
        approx_prompt_bytes=BYTES_PER_TOKEN * sum(targets) / len(targets) if targets else None,
    )


def shared_front(tok: Tokenizer, pool: np.ndarray, endpoint: EndpointKind) -> int:
    """The front every prompt shares (special tokens, what the chat template puts before the message): the most
    leading tokens two one-token probes share."""
    probes = tok.prompt_token_ids_batch(
        tok.decode_batch([[int(pool[i])] for i in range(min(4, len(pool)))]), endpoint
    )
    return max(common_prefix(a, b) for j, a in enumerate(probes) for b in probes[j + 1 :])


def check_trace_size(trace: Trace, shortest: int) -> None:
    """Refuse rows that ask for more prompt tokens than one benchmark may send."""
    total_tokens = sum(max(r.input_length, shortest) for r in trace.rows)
    if total_tokens > MAX_CELL_PROMPT_TOKENS:
        raise UserInputError(
            f"The first {len(trace.rows):,} rows of {trace.path} ask for {total_tokens:,} prompt tokens, more "
            f"than the {MAX_CELL_PROMPT_TOKENS:,} one benchmark may send.",
            hint="Replay fewer rows (--num-prompts).",
        )


@dataclass
class BlockUse:
    """Which blocks each row sends whole or in part (``used``), how many rows use each block (``uses``) and
    how many rows share a block with another row (``sharing``)."""

    used: list[list[int]]
    uses: Counter[int]
    sharing: int

    @classmethod
    def of(cls, rows: list[TraceRow], targets: list[int], overhead: int) -> BlockUse:
        def blocks_of(row: TraceRow, target: int) -> list[int]:
            room = max(1, target - overhead)
            return list(row.hash_ids[: min(len(row.hash_ids), math.ceil(room / BLOCK_TOKENS))])

        used = [blocks_of(r, t) for r, t in zip(rows, targets, strict=True)]
        uses: Counter[int] = Counter(h for b in used for h in set(b))
        sharing = sum(1 for b in used if any(uses[h] > 1 for h in b))
        return cls(used=used, uses=uses, sharing=sharing)

    def expected_hit_rate(self, rows: list[TraceRow], targets: list[int], overhead: int) -> float | None:
        """The ideal prefix-cache hit ratio: each row's leading whole blocks that an earlier row already sent;
        None when the trace has no hash ids."""
        seen: set[int] = set()
        hit = 0
        for b, target in zip(self.used, targets, strict=True):
            room = target - overhead
            k = 0
            while k < len(b) and b[k] in seen and (k + 1) * BLOCK_TOKENS <= room:
                k += 1
            hit += k * BLOCK_TOKENS
            seen.update(b)
        return hit / sum(targets) if any(r.hash_ids for r in rows) else None


def trace_notes(
    trace: Trace, config: BenchConfig, count: int, warmups: int, *, overhead: int, span: float, sharing: int
) -> list[str]:
    """What the result notes say of the replay: the trace, how much of it, what was skipped or lengthened."""
    rows, n, shortest = trace.rows, len(trace.rows), overhead + 1
    mean_in = sum(r.input_length for r in rows) / n
    mean_out = sum(r.output_length for r in rows) / n
    what = "Mooncake JSONL" if trace.format == "mooncake" else "BurstGPT CSV"
    notes = [
        f"Trace {trace.path.name} ({what}): {n} rows replayed over {span:.3f} s (time scale {config.time_scale:g}); "
        f"mean input {mean_in:.1f} tokens, mean output {mean_out:.1f} tokens; {sharing} of {n} rows share "
        f"{BLOCK_TOKENS}-token blocks with another row."
    ]
    if n < count:
        notes.append(f"The trace has only {n} rows; {count} were asked for, so all {n} are replayed.")
    elif trace.more:
        notes.append(f"Only the first {n} rows of the trace are replayed (it has more).")
    if trace.skipped_failures:
        notes.append(
            f"{trace.skipped_failures} rows with 0 response tokens (failed requests in BurstGPT) were skipped "
            "among the rows read."
        )
    short = sum(1 for r in rows if r.input_length < shortest)
    if short:
        what_fixed = (
            "the chat template"
            if EndpointKind(config.endpoint) == EndpointKind.chat
            else "the special tokens"
        )
        notes.append(
            f"{short} rows ask for fewer input tokens than {what_fixed} take ({overhead}): they were sent with "
            f"{shortest} tokens."
        )
    if warmups:
        notes.append(
            f"The {warmups} warmup requests have the first rows' lengths and text of their own; they are not "
            "part of the trace's timing."
        )
    return notes


def spaced_pool(tok: Tokenizer, pool: np.ndarray) -> np.ndarray:
    """The tokens blocks are made of: those that start with a space, so each starts a word of its own and a
    block's tokens do not merge with the next block's (text that merged across a boundary would lose the
    block's last tokens); the whole pool when too few do."""
    spaced = [
        int(i) for i, t in zip(pool, tok.decode_batch([[int(i)] for i in pool]), strict=True) if t[:1] == " "
    ]
    return np.array(spaced, dtype=np.int64) if len(spaced) >= 50 else pool


@dataclass
class TracePrompts:
    """Makes the trace's prompts lazily (``make``): a shared block's text made once and kept until the last row
    that uses it was made, every prompt's tail fitted so that its total is exact."""

    tok: Tokenizer
    endpoint: EndpointKind
    pool: np.ndarray
    block_pool: np.ndarray
    seed: int
    overhead: int
    rows: list[TraceRow]
    targets: list[int]
    blocks: BlockUse
    warmups: int
    #: shared blocks still to be sent: (text, ids)
    cache: dict[int, tuple[str, list[int]]] = field(default_factory=dict)
    left: Counter[int] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.left = Counter(self.blocks.uses)

    def block(self, h: int) -> tuple[str, list[int]]:
        got = self.cache.get(h)
        if got is None:
            text = exact_prefix(
                self.tok, self.block_pool, BLOCK_TOKENS, np.random.default_rng([self.seed, 0, h])
            )
            got = (text, self.tok.encode(text, add_special_tokens=False))
            if self.blocks.uses[h] > 1:
                self.cache[h] = got
        return got

    def release(self, hs: list[int]) -> None:
        for h in set(hs):
            self.left[h] -= 1
            if self.left[h] <= 0:
                self.cache.pop(h, None)

    def first_tails(self, plans: list[_Plan], heads: list[list[int]]) -> list[list[int]]:
        """Every plan's tail ids to start from: its tail block's first tokens, then its own draws."""
        tails: list[list[int]] = []
        for p, head in zip(plans, heads, strict=True):
            room = p.target - self.overhead
            ids: list[int] = []
            if p.tail_block is not None:
                ids = self.block(p.tail_block)[1][: max(0, room - len(head) * BLOCK_TOKENS)]
            extra = room - len(head) * BLOCK_TOKENS - len(ids)
            if extra > 0:
                ids = ids + [int(x) for x in p.rng.choice(self.pool, size=extra)]
            tails.append(ids)
        return tails

    def fit(self, plans: list[_Plan], stop: StopFn) -> list[str]:
        """Every plan's text, exactly its target: the head as is, the tail's ids adjusted by the difference."""
        tok, pool = self.tok, self.pool
        heads: list[list[int]] = [list(p.head) for p in plans]
        tails = self.first_tails(plans, heads)
        done: list[str | None] = [None] * len(plans)
        for rnd in range(MAX_FIT_ROUNDS):
            todo = [i for i in range(len(plans)) if done[i] is None]
            if not todo or stop():
                break
            decoded = tok.decode_batch([tails[i] for i in todo])
            cand = [
                "".join(self.block(h)[0] for h in heads[i]) + d for i, d in zip(todo, decoded, strict=True)
            ]
            counted = tok.prompt_token_ids_batch(cand, self.endpoint)
            for i, text, toks in zip(todo, cand, counted, strict=True):
                diff = plans[i].target - len(toks)
                if diff == 0:
                    done[i] = text
                    continue
                rng = plans[i].rng
                cur = tails[i]
                if diff > 0:
                    cur = cur + [int(x) for x in rng.choice(pool, size=diff)]
                elif len(cur) + diff >= 1 or not heads[i]:
                    cur = cur[: max(1, len(cur) + diff)]
                else:  # the tail is used up: the last whole block becomes the tail
                    h = heads[i].pop()
                    cur = self.block(h)[1] + cur
                    cur = cur[: max(1, len(cur) + diff)]
                if rnd >= MAX_FIT_ROUNDS // 2 and len(cur) > 1:
                    cur[-1] = int(rng.choice(pool))  # break a merge that flips back and forth
                tails[i] = cur
        if stop():
            return []
        if any(d is None for d in done):
            raise UserInputError(
                f"{sum(d is None for d in done)} trace prompts could not be made exactly their length with "
                f"{tok.name}.",
                hint="Try another --seed; please report the tokenizer.",
            )
        return [d for d in done if d is not None]

    def plan(self, g: int) -> tuple[_Plan, int | None, int]:
        """Prompt ``g``: (how to make it, its row or None for a warmup, its max_tokens). Warmups are
        ``n..n+warmups-1`` (text of their own, the lengths of the first rows), the rows ``0..n-1``."""
        n, rows, seed = len(self.rows), self.rows, self.seed
        if g >= n:
            w = (g - n) % n
            return (
                _Plan(self.targets[w], [], None, np.random.default_rng([seed, 2, g - n])),
                None,
                rows[w].output_length,
            )
        b = self.blocks.used[g]
        rng = np.random.default_rng([seed, 1, g])
        out = rows[g].output_length
        if not b:
            return _Plan(self.targets[g], [], None, rng), g, out
        return _Plan(self.targets[g], b[:-1], b[-1], rng), g, out

    def make(self, chunk: int, stop: StopFn) -> Iterator[Prompt]:
        n = len(self.rows)
        order = list(range(n, n + self.warmups)) + list(range(n))  # warmups first: they are sent first
        for at in range(0, len(order), chunk):
            if stop():
                return
            planned = [self.plan(g) for g in order[at : at + chunk]]
            texts = self.fit([p for p, _, _ in planned], stop)
            if not texts:
                return
            for (p, row, out), text in zip(planned, texts, strict=True):
                if row is not None:
                    self.release(self.blocks.used[row])
                yield Prompt(text, p.target, max_tokens=out)
