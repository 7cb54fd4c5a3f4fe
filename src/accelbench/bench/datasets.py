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
difference until the count is exact (usually one or two rounds; a round works on all prompts at once).

No accidental shared prefix: every prompt starts (after the deliberate ``prefix_len`` tokens and what the chat
template puts in front of every message) with a different token, and the finished set is checked: no two prompts
share more leading tokens than all of them share. Warmup prompts are drawn the same way and are distinct from the
measured ones, so warming up does not fill the prefix cache with them.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import weakref
from collections.abc import Callable, Sequence
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


@dataclass
class Dataset:
    """Prompts for the measured requests and for the warmup, plus notes for the result."""

    prompts: list[Prompt]
    warmups: list[Prompt] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shared_prefix_tokens: int = 0  # tokens every prompt shares (deliberate prefix + chat template front)


DatasetBuilder = Callable[[BenchConfig, "Tokenizer | None", int], Dataset]
DATASETS: Registry[DatasetBuilder] = Registry("dataset")


def build_dataset(
    config: BenchConfig, tokenizer: Tokenizer | None, *, count: int | None = None, warmups: int | None = None
) -> Dataset:
    """Prompts for ``config``: ``count`` (default ``num_prompts``) measured ones and ``warmups`` (default
    ``num_warmups``) more, all distinct. The random dataset needs a tokenizer; the file datasets use one, when
    given, to know each prompt's token count."""
    n = config.num_prompts if count is None else count
    w = config.num_warmups if warmups is None else warmups
    builder = DATASETS.get(DatasetKind(config.dataset).value)
    ds = builder(config, tokenizer, n + w)
    if w:
        ds.warmups = ds.prompts[n:]
        ds.prompts = ds.prompts[:n]
    return ds


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


def _distinct_starts(rng: np.random.Generator, pool: np.ndarray, count: int) -> list[list[int]]:
    """``count`` distinct first-token tuples (one token when the pool is big enough, else pairs, ...)."""
    p = len(pool)
    k = 1
    while p**k < count * 4:
        k += 1
    seen: set[tuple[int, ...]] = set()
    out: list[list[int]] = []
    if k == 1:
        return [[int(x)] for x in rng.permutation(pool)[:count]]
    while len(out) < count:
        t = tuple(int(x) for x in rng.choice(pool, size=k))
        if t not in seen:
            seen.add(t)
            out.append(list(t))
    return out


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


@DATASETS.register("random")
def random_dataset(config: BenchConfig, tokenizer: Tokenizer | None, count: int) -> Dataset:
    """``count`` prompts of exactly ``config.input_len`` server-counted tokens (see the module docstring)."""
    if tokenizer is None:
        raise UserInputError(
            "The random dataset needs a tokenizer to make prompts of an exact token count.",
            hint="Give --tokenizer DIR, or use a server that has /tokenize.",
        )
    endpoint = EndpointKind(config.endpoint)
    target = config.input_len
    rng = np.random.default_rng(_random_seed(config))
    pool = token_pool(tokenizer)
    overhead = tokenizer.count_prompt("", endpoint)
    prefix_text = ""
    sep = ""
    if config.prefix_len:
        prefix_text = _exact_prefix(tokenizer, pool, config.prefix_len, rng)
        sep = "\n"  # keeps the first own token from merging with the prefix's last one
    fixed = tokenizer.count_prompt(prefix_text + sep, endpoint) if prefix_text else overhead
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
    starts = _distinct_starts(rng, pool, count)
    ids: list[list[int]] = []
    for s in starts:
        body = s[:room] + [int(x) for x in rng.choice(pool, size=max(0, room - len(s)))]
        ids.append(body)
    texts: list[str] = [""] * count
    exact: list[bool] = [False] * count
    token_lists: list[list[int]] = [[] for _ in range(count)]
    for rnd in range(MAX_FIT_ROUNDS):
        todo = [i for i in range(count) if not exact[i]]
        if not todo:
            break
        decoded = tokenizer.decode_batch([ids[i] for i in todo])
        cand = [prefix_text + sep + d for d in decoded]
        counted = tokenizer.prompt_token_ids_batch(cand, endpoint)
        for i, text, toks in zip(todo, cand, counted, strict=True):
            diff = target - len(toks)
            if diff == 0:
                texts[i], token_lists[i], exact[i] = text, toks, True
                continue
            cur = ids[i]
            if diff > 0:
                cur = cur + [int(x) for x in rng.choice(pool, size=diff)]
            else:
                cur = cur[: max(1, len(cur) + diff)]
            if rnd >= MAX_FIT_ROUNDS // 2 and len(cur) > 1:
                cur[-1] = int(rng.choice(pool))  # break a merge that flips back and forth
            ids[i] = cur
    if not all(exact):
        bad = exact.count(False)
        raise UserInputError(
            f"{bad} of {count} random prompts could not be made exactly {target} tokens long with "
            f"{tokenizer.name}.",
            hint="Try another --seed or --input-len; please report the tokenizer.",
        )
    # No two prompts may share more leading tokens than all of them share (the deliberate part).
    for _ in range(5):
        everyone, pair_max = shared_prefix_report(token_lists)
        if pair_max <= everyone or count < 2:
            break
        order = sorted(range(count), key=lambda i: tuple(token_lists[i]))
        for j in range(count - 1):
            a, b = order[j], order[j + 1]
            if _common_prefix(token_lists[a], token_lists[b]) > everyone:
                redo = b
                fresh = [int(x) for x in rng.choice(pool, size=room)]
                for _r in range(MAX_FIT_ROUNDS):
                    text = prefix_text + sep + tokenizer.decode(fresh)
                    toks = tokenizer.prompt_token_ids(text, endpoint)
                    diff = target - len(toks)
                    if diff == 0:
                        texts[redo], token_lists[redo] = text, toks
                        break
                    fresh = (
                        fresh + [int(x) for x in rng.choice(pool, size=diff)]
                        if diff > 0
                        else fresh[: max(1, len(fresh) + diff)]
                    )
    everyone, pair_max = shared_prefix_report(token_lists)
    notes: list[str] = []
    if count >= 2 and pair_max > everyone:
        notes.append(f"Some random prompts share {pair_max} leading tokens (all share {everyone}).")
    if endpoint == EndpointKind.chat and count >= 2:
        template_front = everyone - (config.prefix_len + 1 if config.prefix_len else 0)
        if template_front > 0:
            notes.append(
                f"The chat template puts the same {template_front} tokens in front of every prompt "
                "(a server with prefix caching may reuse them)."
            )
    return Dataset(
        prompts=[Prompt(t, target) for t in texts],
        notes=notes,
        shared_prefix_tokens=everyone if count >= 2 else 0,
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
    texts: list[str], config: BenchConfig, count: int, tokenizer: Tokenizer | None, what: str
) -> Dataset:
    """Shuffle with the seed, take ``count`` (cycling when the file has fewer), count tokens when possible."""
    rng = random.Random(config.seed)
    order = list(range(len(texts)))
    rng.shuffle(order)
    notes: list[str] = []
    picked = [texts[order[i % len(order)]] for i in range(count)]
    if count > len(texts):
        notes.append(
            f"The {what} has {len(texts)} usable prompts; {count} were needed, so prompts repeat "
            "(a server with prefix caching will reuse them)."
        )
    lens: list[int | None] = [None] * count
    if tokenizer is not None:
        counted = tokenizer.prompt_token_ids_batch(picked, EndpointKind(config.endpoint))
        lens = [len(c) for c in counted]
    return Dataset(prompts=[Prompt(t, n) for t, n in zip(picked, lens, strict=True)], notes=notes)


@DATASETS.register("jsonl")
def jsonl_dataset(config: BenchConfig, tokenizer: Tokenizer | None, count: int) -> Dataset:
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
    return _sample(texts, config, count, tokenizer, "jsonl file")


#: ShareGPT pruning of ``vllm bench serve`` (kept so results stay comparable): prompts of 4..1024 tokens,
#: prompt + output at most 2048 tokens.
SHAREGPT_MIN_PROMPT = 4
SHAREGPT_MAX_PROMPT = 1024
SHAREGPT_MAX_TOTAL = 2048


@DATASETS.register("sharegpt")
def sharegpt_dataset(config: BenchConfig, tokenizer: Tokenizer | None, count: int) -> Dataset:
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
    ds = _sample(texts, config, count, tokenizer, "ShareGPT file")
    ds.notes = notes + ds.notes
    return ds
