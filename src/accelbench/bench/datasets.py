"""Prompt sources for a benchmark: ``random`` (exact token counts), ``jsonl`` and ``sharegpt`` files.

Each source is an entry of ``DATASETS`` (a Registry), so another one is one more registered function.

What ``input_len`` means (random dataset): the number of prompt tokens **the server counts** for the request,
i.e. its ``usage.prompt_tokens``. For the completions endpoint that is the prompt with the special tokens the
tokenizer adds (BOS, ...); for the chat endpoint it is the whole chat-templated prompt (one user message, the
template's default system prompt if it adds one, and the generation prompt). vLLM's random dataset makes the
*text* ``input_len`` tokens long and lets the chat template add more; accelbench instead fits the text so that
the total is exact, so ``--input-len 128`` means 128 tokens of prefill on every endpoint, and the result checks
it against the server's own count (``PromptTokenCheck``).

How a random prompt is made exact: token ids are drawn from a pool of ordinary word tokens of the tokenizer,
decoded to text, and the text re-counted the way the server counts it; ids are added or removed by the
difference until the count is exact (usually one or two rounds; a round works on a chunk of prompts at once).

No accidental shared prefix: every prompt starts (after the deliberate ``prefix_len`` tokens and what the chat
template puts in front of every message) with a different token, and each prompt is checked as it is made: one
whose first own token another prompt already has (a merge on re-tokenizing) is drawn afresh. Warmup prompts are
drawn the same way and are distinct from the measured ones, so warming up does not fill the prefix cache with them.

Prompts are made lazily (``open_dataset`` -> ``PromptSource.stream``): a benchmark takes them as it sends, a
small look-ahead ahead of the sender, so a cell of any size holds only that look-ahead in memory and a cancel
stops the tokenizer work too. Every prompt has its own seeded generator (the seed and its index), so the prompts
do not depend on how many are made at once; ``build_dataset`` makes them all, the same ones.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accelbench.bench.tokenizer import Tokenizer
from accelbench.domain.bench import BenchConfig, DatasetKind, EndpointKind
from accelbench.errors import UserInputError
from accelbench.registry import Registry

#: Ordinary English words: their tokens make the pool random prompts are drawn from (see ``token_pool``).
_WORDS_TEXT = """the of and to in is was he for it with as his on be at by had are but from or have an they which
one you were her all she there would their we him been has when who will more no if out so said what up its about
into than them can only other new some could time these two may then do first any my now such like our over man
me even most made after also did many before must through back years where much your way well down should because
each just those people how too little state good very make world still own see men work long get here between both
life being under never day same another know while last might us great old year off come since against go came
right used take three states himself few house use during without again place american around however home small
found thought went say part once general high upon school every united left number course war until always away
something fact though water less public put think almost hand enough far took head yet government system better set
told nothing night end why called didn't eyes find going look asked later knew point next program city business
give group toward young days let room president side social given present several order national possible rather
second face per among form important often things looked early white case john become large big need four within
felt along children saw best church ever least power development light thing seemed family interest want members
mind country area others done turned although open problem sense began help hands whole fire above already
dark river mountain music number garden engine signal market window silver yellow paper winter summer bridge island
"""
_WORDS = _WORDS_TEXT.split()

#: Text of special-token look-alikes (``<|im_start|>``, ``<s>``): never in a random prompt.
_MARKER = re.compile(r"^<[^<>]*>$")

#: How many rounds of decode/re-count a prompt may take before the dataset gives up on exactness.
MAX_FIT_ROUNDS = 40

_pools: weakref.WeakKeyDictionary[Tokenizer, np.ndarray] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt to send, with the prompt tokens the server is expected to count (None: no tokenizer)."""

    text: str
    prompt_len: int | None = None
    max_tokens: int | None = None  # this request's output length; None = the config's output_len
    group: int | None = None  # shared-prefix group


@dataclass
class Dataset:
    """Prompts for the measured requests and for the warmup, plus notes for the result (all made up front:
    ``build_dataset``; a benchmark takes them one by one from a ``PromptSource`` instead)."""

    prompts: list[Prompt]
    warmups: list[Prompt] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shared_prefix_tokens: int = 0  # tokens every prompt shares (deliberate prefix + chat template front)


#: A function the source calls between prompts (and between rounds of tokenizer work): True means stop.
StopFn = Callable[[], bool]
#: Prompts a source makes per round of tokenizer work (one batch call); a stop is seen between rounds.
PROMPT_CHUNK = 16


def _never() -> bool:
    return False


@dataclass
class PromptSource:
    """The prompts of one benchmark, made lazily: ``stream()`` yields the ``num_warmups`` warmup prompts, then
    the ``count`` measured ones, each made (tokenizer work included) only when the consumer asks for it, at
    most ``chunk`` at a time. What is known before any prompt is made (the counts, the shared prefix) is here
    up front; ``notes`` may grow while prompts are made (read them once the stream is done). The prompts
    depend on the config's seed only: the same for any chunk size, consumer speed or look-ahead."""

    count: int
    num_warmups: int
    make: Callable[[int, StopFn], Iterator[Prompt]]  # (chunk, stop) -> warmups then measured prompts
    notes: list[str] = field(default_factory=list)
    shared_prefix_tokens: int = 0
    made: int = 0  # prompts made so far (handed to the consumer)
    #: send times of the measured prompts, seconds from the start (a trace's); None = from the config's rate
    offsets: list[float] | None = None
    #: the prefix-cache hit ratio the prompts should give a server that caches every shared block (None: unknown)
    expected_prefix_hit_rate: float | None = None

    @property
    def total(self) -> int:
        return self.count + self.num_warmups

    def stream(self, *, chunk: int = PROMPT_CHUNK, stop: StopFn | None = None) -> Iterator[Prompt]:
        """Warmups then measured prompts; ends early (without making the rest) once ``stop()`` is true."""
        halt = stop or _never
        for p in self.make(max(1, chunk), halt):
            if halt():
                return
            self.made += 1
            yield p


DatasetBuilder = Callable[[BenchConfig, "Tokenizer | None", int, int], PromptSource]
DATASETS: Registry[DatasetBuilder] = Registry("dataset")


def open_dataset(
    config: BenchConfig, tokenizer: Tokenizer | None, *, count: int | None = None, warmups: int | None = None
) -> PromptSource:
    """The lazy prompts for ``config``: ``count`` (default ``num_prompts``) measured ones and ``warmups``
    (default ``num_warmups``) more, all distinct. What can be checked without making every prompt (a
    tokenizer for the random dataset, the file, an input length the template leaves room for) is checked
    here, before the first prompt is made."""
    n = config.num_prompts if count is None else count
    w = config.num_warmups if warmups is None else warmups
    builder = DATASETS.get(DatasetKind(config.dataset).value)
    return builder(config, tokenizer, n, w)


def build_dataset(
    config: BenchConfig, tokenizer: Tokenizer | None, *, count: int | None = None, warmups: int | None = None
) -> Dataset:
    """Every prompt of ``open_dataset`` made at once (the same prompts a benchmark sends, for the same seed).
    The random dataset needs a tokenizer; the file datasets use one, when given, to know each prompt's token
    count."""
    source = open_dataset(config, tokenizer, count=count, warmups=warmups)
    made = list(source.stream())
    return Dataset(
        prompts=made[source.num_warmups :],
        warmups=made[: source.num_warmups],
        notes=source.notes,
        shared_prefix_tokens=source.shared_prefix_tokens,
    )


# ------------------------------------------------------------------------------------------------- random
def token_pool(tokenizer: Tokenizer) -> np.ndarray:
    """Ids of ordinary word tokens (no special-token look-alikes, no bytes that decode to nothing or to U+FFFD,
    no line breaks), found by tokenizing common words and seeded pseudo-words. Cached per tokenizer."""
    cached = _pools.get(tokenizer)
    if cached is not None:
        return cached
    rng = random.Random(20240601)
    letters = "abcdefghijklmnopqrstuvwxyz"
    pseudo = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(1500)]
    words = _WORDS + [w.capitalize() for w in _WORDS[:200]] + pseudo + [str(i) for i in range(100)]
    texts = [" ".join(words[i : i + 50]) for i in range(0, len(words), 50)]
    ids: set[int] = set()
    for enc in tokenizer.encode_batch(texts, add_special_tokens=False):
        ids.update(enc)
    # Plain words never encode to special tokens, and the pool must not depend on how a tokenizer (local or the
    # server's) lists its specials: then the same seed gives the same prompts through either.
    candidates = sorted(ids)
    decoded = tokenizer.decode_batch([[i] for i in candidates])
    keep = [
        i
        for i, s in zip(candidates, decoded, strict=True)
        if s.strip()
        and "\ufffd" not in s
        and "\n" not in s
        and "\r" not in s
        and s.isprintable()
        and not _MARKER.match(s.strip())
    ]
    if len(keep) < 50:
        raise UserInputError(
            f"The tokenizer {tokenizer.name} yields only {len(keep)} ordinary word tokens; cannot build random "
            "prompts with it.",
            hint="Use a jsonl or sharegpt dataset, or another tokenizer directory.",
        )
    pool = np.array(keep, dtype=np.int64)
    _pools[tokenizer] = pool
    return pool


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def shared_prefix_report(token_lists: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(tokens all prompts share, most tokens any two prompts share): equal when nothing is shared by accident."""
    if len(token_lists) < 2:
        return (len(token_lists[0]) if token_lists else 0, len(token_lists[0]) if token_lists else 0)
    order = sorted(range(len(token_lists)), key=lambda i: tuple(token_lists[i]))
    pair_max = max(
        _common_prefix(token_lists[order[j]], token_lists[order[j + 1]]) for j in range(len(order) - 1)
    )
    everyone = _common_prefix(token_lists[order[0]], token_lists[order[-1]])
    return everyone, pair_max


def _exact_prefix(tokenizer: Tokenizer, pool: np.ndarray, length: int, rng: np.random.Generator) -> str:
    """Text that encodes (without special tokens) to exactly ``length`` tokens: the deliberate shared prefix."""
    ids = [int(x) for x in rng.choice(pool, size=length)]
    for _ in range(MAX_FIT_ROUNDS):
        text = tokenizer.decode(ids)
        got = len(tokenizer.encode(text, add_special_tokens=False))
        if got == length:
            return text
        if got < length:
            ids = ids + [int(x) for x in rng.choice(pool, size=length - got)]
        else:
            ids = ids[: max(1, len(ids) - (got - length))]
    raise UserInputError(f"Could not build a shared prefix of exactly {length} tokens with {tokenizer.name}.")


def _random_seed(config: BenchConfig) -> int:
    """Seed for prompts: the user's seed mixed with the cell's shape, so cells of a sweep that share a seed
    (same input length, other concurrency) do not send the same first prompts (a prefix-cache hit)."""
    key = (
        f"{config.seed}|{config.input_len}|{config.prefix_len}|{config.num_prompts}|{config.max_concurrency}"
    )
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


class _Starts:
    """The distinct first own token(s) of prompt ``g`` (0..total-1), without holding one per prompt: one
    token from a seeded permutation of the pool when the pool is big enough, else a ``k``-token tuple, the
    base-``len(pool)`` digits of a seeded bijection of ``g`` (an affine map modulo ``len(pool) ** k``)."""

    def __init__(self, rng: np.random.Generator, pool: np.ndarray, total: int) -> None:
        self.pool = pool
        p = len(pool)
        self.k = 1
        while p**self.k < total * 4:
            self.k += 1
        self.order = rng.permutation(p)
        self.space = p**self.k
        self.a = int(rng.integers(1, 2**62)) % self.space or 1
        while math.gcd(self.a, self.space) != 1:
            self.a += 1
        self.b = int(rng.integers(0, 2**62)) % self.space

    def __call__(self, g: int) -> list[int]:
        p = len(self.pool)
        if self.k == 1:
            return [int(self.pool[self.order[g]])]
        v = (self.a * g + self.b) % self.space
        out = []
        for _ in range(self.k):
            v, d = divmod(v, p)
            out.append(int(self.pool[self.order[d]]))
        return out


@DATASETS.register("random")
def random_dataset(
    config: BenchConfig, tokenizer: Tokenizer | None, count: int, warmups: int
) -> PromptSource:
    """``count`` (+ ``warmups``) prompts of exactly ``config.input_len`` server-counted tokens (see the module
    docstring), made lazily: prompt ``g`` has its own seeded generator (the config's seed and ``g``), so it is
    the same whichever prompts were made before it and however many are made at once."""
    if tokenizer is None:
        raise UserInputError(
            "The random dataset needs a tokenizer to make prompts of an exact token count.",
            hint="Give --tokenizer DIR, or use a server that has /tokenize.",
        )
    tok: Tokenizer = tokenizer
    endpoint = EndpointKind(config.endpoint)
    target = config.input_len
    seed = _random_seed(config)
    rng = np.random.default_rng(seed)
    pool = token_pool(tok)
    overhead = tok.count_prompt("", endpoint)
    prefix_text = ""
    sep = ""
    if config.prefix_len:
        prefix_text = _exact_prefix(tok, pool, config.prefix_len, rng)
        sep = "\n"  # keeps the first own token from merging with the prefix's last one
    fixed = tok.count_prompt(prefix_text + sep, endpoint) if prefix_text else overhead
    room = target - fixed
    if room < 1:
        what = "the chat template" if endpoint == EndpointKind.chat else "the special tokens"
        raise UserInputError(
            f"--input-len {target} is too small: {what}"
            + (f" and the {config.prefix_len}-token prefix" if config.prefix_len else "")
            + f" already take up {fixed} of the {target} tokens.",
            hint=f"Use --input-len {fixed + 1} or more"
            + (", or a shorter --prefix-len." if config.prefix_len else "."),
        )
    total = count + warmups
    starts = _Starts(rng, pool, max(total, 1))
    # The front every prompt shares (special tokens, the deliberate prefix, what the chat template puts before
    # the message): the most leading tokens two one-token probes share.
    probes = tok.prompt_token_ids_batch(
        [prefix_text + sep + t for t in tok.decode_batch([[int(pool[i])] for i in range(min(4, len(pool)))])],
        endpoint,
    )
    front_ids = max(
        ((a, _common_prefix(a, b)) for j, a in enumerate(probes) for b in probes[j + 1 :]),
        key=lambda x: x[1],
    )
    front_toks, front = front_ids[0][: front_ids[1]], front_ids[1]
    k = starts.k
    notes: list[str] = []
    if total >= 2 and k > 1:
        notes.append(
            f"The tokenizer has {len(pool)} word tokens for {total} prompts: prompts may share up to {k - 1} "
            f"leading token{'s' if k > 2 else ''} after the common front."
        )
    if endpoint == EndpointKind.chat and total >= 2:
        template_front = front - (config.prefix_len + 1 if config.prefix_len else 0)
        if template_front > 0:
            notes.append(
                f"The chat template puts the same {template_front} tokens in front of every prompt "
                "(a server with prefix caching may reuse them)."
            )
    seen: set[tuple[int, ...]] = set()  # the first own token(s) of every prompt made: no accidental sharing
    noted = False

    def fit(batch: list[tuple[list[int], np.random.Generator]], stop: StopFn) -> list[tuple[str, list[int]]]:
        """Each (ids, generator) made exactly ``target`` tokens: decode, re-count, add or remove the difference."""
        ids = [b[0] for b in batch]
        done: list[tuple[str, list[int]] | None] = [None] * len(batch)
        for rnd in range(MAX_FIT_ROUNDS):
            todo = [i for i in range(len(batch)) if done[i] is None]
            if not todo or stop():
                break
            decoded = tok.decode_batch([ids[i] for i in todo])
            cand = [prefix_text + sep + d for d in decoded]
            counted = tok.prompt_token_ids_batch(cand, endpoint)
            for i, text, toks in zip(todo, cand, counted, strict=True):
                diff = target - len(toks)
                if diff == 0:
                    done[i] = (text, toks)
                    continue
                g_rng = batch[i][1]
                cur = ids[i]
                if diff > 0:
                    cur = cur + [int(x) for x in g_rng.choice(pool, size=diff)]
                else:
                    cur = cur[: max(1, len(cur) + diff)]
                if rnd >= MAX_FIT_ROUNDS // 2 and len(cur) > 1:
                    cur[-1] = int(g_rng.choice(pool))  # break a merge that flips back and forth
                ids[i] = cur
        if stop():
            return []
        if any(d is None for d in done):
            raise UserInputError(
                f"{sum(d is None for d in done)} random prompts could not be made exactly {target} tokens long "
                f"with {tok.name}.",
                hint="Try another --seed or --input-len; please report the tokenizer.",
            )
        return [d for d in done if d is not None]

    def key(toks: list[int]) -> tuple[int, ...] | None:
        """The prompt's first own token(s); None when its front differs from every other prompt's (a merge)."""
        if total < 2:
            return ()
        if _common_prefix(toks, front_toks) < front:
            return None
        return tuple(toks[front : front + k])

    def make(chunk: int, stop: StopFn) -> Iterator[Prompt]:
        nonlocal noted
        # warmups first (they are sent first): prompts count..total-1, then the measured 0..count-1
        order = list(range(count, total)) + list(range(count))
        for at in range(0, len(order), chunk):
            if stop():
                return
            batch = []
            for g in order[at : at + chunk]:
                g_rng = np.random.default_rng([seed, g])
                s = starts(g)
                batch.append(
                    (s[:room] + [int(x) for x in g_rng.choice(pool, size=max(0, room - len(s)))], g_rng)
                )
            fitted = fit(batch, stop)
            if not fitted:
                return
            for (text, toks), (_ids, g_rng) in zip(fitted, batch, strict=True):
                kk = key(toks)
                for _ in range(5):  # an accidental shared start (a merge): draw this prompt afresh
                    if kk is not None and kk not in seen:
                        break
                    redone = fit([([int(x) for x in g_rng.choice(pool, size=room)], g_rng)], stop)
                    if not redone:
                        return
                    text, toks = redone[0]
                    kk = key(toks)
                if kk is None or kk in seen:
                    if not noted:
                        notes.append(
                            f"Some random prompts share more than the {front} leading tokens all share."
                        )
                        noted = True
                else:
                    seen.add(kk)
                yield Prompt(text, target)

    return PromptSource(
        count=count,
        num_warmups=warmups,
        make=make,
        notes=notes,
        shared_prefix_tokens=front if total >= 2 else 0,
    )


# ---------------------------------------------------------------------------------------------- files
def _need_path(config: BenchConfig) -> Path:
    if not config.dataset_path:
        raise UserInputError(
            f"The {config.dataset} dataset needs a file.", hint="Give it with --dataset-path FILE."
        )
    path = Path(config.dataset_path).expanduser()
    if not path.is_file():
        raise UserInputError(f"Dataset file {path} does not exist.")
    return path


def _sample(
    texts: list[str], config: BenchConfig, count: int, warmups: int, tokenizer: Tokenizer | None, what: str
) -> PromptSource:
    """Shuffle with the seed, take ``count`` + ``warmups`` (cycling when the file has fewer; the warmups are
    the last ones), count tokens when possible, a chunk at a time as the prompts are asked for."""
    rng = random.Random(config.seed)
    order = list(range(len(texts)))
    rng.shuffle(order)
    total = count + warmups
    notes: list[str] = []
    if total > len(texts):
        notes.append(
            f"The {what} has {len(texts)} usable prompts; {total} were needed, so prompts repeat "
            "(a server with prefix caching will reuse them)."
        )
    endpoint = EndpointKind(config.endpoint)

    def make(chunk: int, stop: StopFn) -> Iterator[Prompt]:
        picks = list(range(count, total)) + list(range(count))  # warmups first: they are sent first
        for at in range(0, len(picks), chunk):
            if stop():
                return
            picked = [texts[order[i % len(order)]] for i in picks[at : at + chunk]]
            lens: list[int | None] = [None] * len(picked)
            if tokenizer is not None:
                lens = [len(c) for c in tokenizer.prompt_token_ids_batch(picked, endpoint)]
            yield from (Prompt(t, n) for t, n in zip(picked, lens, strict=True))

    return PromptSource(count=count, num_warmups=warmups, make=make, notes=notes)


@DATASETS.register("jsonl")
def jsonl_dataset(config: BenchConfig, tokenizer: Tokenizer | None, count: int, warmups: int) -> PromptSource:
    """One JSON object per line with a ``prompt`` string (vLLM's custom dataset); other keys are ignored."""
    path = _need_path(config)
    texts: list[str] = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row: Any = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserInputError(f"{path}:{lineno} is not JSON: {exc.msg}.") from None
            if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
                raise UserInputError(
                    f'{path}:{lineno} has no "prompt" string.', hint='Each line must be {"prompt": "..."}.'
                )
            if row["prompt"]:
                texts.append(row["prompt"])
    if not texts:
        raise UserInputError(f"{path} has no prompts.")
    return _sample(texts, config, count, warmups, tokenizer, "jsonl file")


#: ShareGPT pruning of ``vllm bench serve`` (kept so results stay comparable): prompts of 4..1024 tokens,
#: prompt + output at most 2048 tokens.
SHAREGPT_MIN_PROMPT = 4
SHAREGPT_MAX_PROMPT = 1024
SHAREGPT_MAX_TOTAL = 2048


@DATASETS.register("sharegpt")
def sharegpt_dataset(
    config: BenchConfig, tokenizer: Tokenizer | None, count: int, warmups: int
) -> PromptSource:
    """The usual ShareGPT file: a JSON list of ``{"conversations": [{"from": ..., "value": ...}, ...]}``; the
    first turn of every conversation with at least two turns is a prompt."""
    path = _need_path(config)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserInputError(f"{path} is not a JSON file: {exc.msg} (line {exc.lineno}).") from None
    if not isinstance(data, list):
        raise UserInputError(f"{path} must hold a JSON list of conversations.")
    texts = []
    for entry in data:
        conv = entry.get("conversations") if isinstance(entry, dict) else None
        if isinstance(conv, list) and len(conv) >= 2 and isinstance(conv[0], dict):
            value = conv[0].get("value")
            if isinstance(value, str) and value.strip():
                texts.append(value)
    if not texts:
        raise UserInputError(f"{path} has no conversation with at least two turns.")
    notes = []
    if tokenizer is not None:
        endpoint = EndpointKind(config.endpoint)
        lens = [len(x) for x in tokenizer.prompt_token_ids_batch(texts, endpoint)]
        kept = [
            t
            for t, n in zip(texts, lens, strict=True)
            if SHAREGPT_MIN_PROMPT <= n <= SHAREGPT_MAX_PROMPT and n + config.output_len <= SHAREGPT_MAX_TOTAL
        ]
        if len(kept) < len(texts):
            notes.append(
                f"{len(texts) - len(kept)} ShareGPT prompts were skipped (vLLM's limits: "
                f"{SHAREGPT_MIN_PROMPT}..{SHAREGPT_MAX_PROMPT} prompt tokens, at most {SHAREGPT_MAX_TOTAL} "
                "with the output)."
            )
        if not kept:
            raise UserInputError(f"No prompt of {path} is within vLLM's ShareGPT length limits.")
        texts = kept
    ds = _sample(texts, config, count, warmups, tokenizer, "ShareGPT file")
    ds.notes = notes + ds.notes
    return ds
