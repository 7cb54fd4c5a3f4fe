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

Workload shapes: ``input_dist`` draws each random prompt's exact length around ``input_len`` and
``output_dist`` each request's ``max_tokens`` around ``output_len`` (every dataset), from separate seeded
streams (``length_rng``), so a config with fixed lengths makes exactly the prompts it made before; the lengths
are drawn up front (measured and warmup prompts from streams of their own), so the notes give their realised
mean/min/max before the first prompt is made. ``prefix_groups`` G with ``prefix_len`` S: measured prompt i
belongs to group i mod G and starts with its group's own S-token prefix (the groups' prefixes differ from their
first token); warmup w belongs to group w mod G too, so the warmups warm the prefix cache for the groups they
cover. ``PromptSource.expected_prefix_hit_rate`` is then the share of the measured prompt tokens a server that
caches every full ``PREFIX_CACHE_BLOCK``-token block of what it has seen would find cached (see
``expected_hit_rate``). ``tools`` are loaded and checked when the dataset is opened (``PromptSource.tools``).
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
from accelbench.bench.tools import load_tools, tool_names
from accelbench.domain.bench import BenchConfig, DatasetKind, EndpointKind, LengthDist
from accelbench.domain.limits import MAX_TOKENS
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

#: Bytes of text a word token decodes to, at most (about five characters, some escaped in JSON): a size estimate.
BYTES_PER_TOKEN = 8

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
    group_prefix_tokens: list[int] = field(default_factory=list)  # per prefix group: tokens its prompts share
    expected_prefix_hit_rate: float | None = None  # see PromptSource


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
    #: per prefix group (random dataset): the leading tokens every prompt of the group shares
    group_prefix_tokens: list[int] = field(default_factory=list)
    #: the OpenAI tools every chat request carries (``config.tools`` loaded and checked); None: no tools
    tools: list[dict[str, Any]] | None = None
    #: about how many bytes a prompt's text takes (the memory a cell's requests need); None: not known
    approx_prompt_bytes: float | None = None

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
    tools = load_tools(config.tools) if config.tools is not None else None
    builder = DATASETS.get(DatasetKind(config.dataset).value)
    source = builder(config, tokenizer, n, w)
    if tools is not None:
        source.tools = tools
        names = tool_names(tools)
        source.notes.append(
            f"Every chat request carries {len(tools)} tool{'s' if len(tools) != 1 else ''} "
            f"({', '.join(names[:8])}{', ...' if len(names) > 8 else ''}) with tool_choice auto; the server's "
            "chat template renders their definitions into the prompt, so its prompt tokens include them and "
            "the client's count does not."
        )
    return source


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
        group_prefix_tokens=source.group_prefix_tokens,
        expected_prefix_hit_rate=source.expected_prefix_hit_rate,
    )


# ---------------------------------------------------------------------------------------- workload shapes
#: Tokens per KV-cache block of the server's prefix cache: vLLM's default ``--block-size`` (16 on GPUs). A prefix
#: cache reuses whole blocks only, so a prompt can hit at most floor(shared tokens / block) * block tokens.
PREFIX_CACHE_BLOCK = 16


def length_rng(config: BenchConfig, what: str, part: str) -> np.random.Generator:
    """A generator for the ``what`` lengths ("input", "output") of the ``part`` prompts ("measured",
    "warmup"): from the config's seed and the cell's shape, and a stream apart from the prompts' own."""
    key = (
        f"{config.seed}|{config.input_len}|{config.output_len}|{config.prefix_len}|{config.num_prompts}|"
        f"{config.max_concurrency}|{what}|{part}"
    )
    return np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little"))


def draw_lengths(dist: LengthDist, mean: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` lengths around ``mean`` as ``dist`` says (``LengthDist``), rounded and kept inside [min, max]
    (and at most ``MAX_TOKENS``); fixed: ``mean`` every time, whatever min and max say."""
    if dist.kind == "fixed" or n <= 0:
        return np.full(max(0, n), mean, dtype=np.int64)
    if dist.kind == "uniform":
        x = rng.uniform(mean * (1 - dist.range_ratio), mean * (1 + dist.range_ratio), size=n)
    elif dist.kind == "normal":
        x = rng.normal(mean, dist.std if dist.std is not None else mean / 4, size=n)
    else:  # lognormal with the given mean: mu = ln(mean) - sigma^2 / 2
        x = rng.lognormal(math.log(mean) - dist.sigma**2 / 2, dist.sigma, size=n)
    hi = min(dist.max if dist.max is not None else MAX_TOKENS, MAX_TOKENS)
    return np.clip(np.rint(x), dist.min, hi).astype(np.int64)


def length_note(what: str, dist: LengthDist, mean: int, drawn: np.ndarray) -> str:
    """The realised spread of drawn lengths, for the dataset notes."""
    bounds = f", kept in [{dist.min}, {dist.max if dist.max is not None else 'no bound'}]"
    return (
        f"{what} vary ({dist.kind} around {mean}{bounds}): mean {float(drawn.mean()):.1f}, min {int(drawn.min())}, "
        f"max {int(drawn.max())} over the {len(drawn)} measured prompts."
    )


def output_lengths(config: BenchConfig, count: int, warmups: int) -> tuple[list[int] | None, list[str]]:
    """Per-prompt ``max_tokens`` from ``output_dist`` (index g: the measured prompts 0..count-1, then the
    warmups) and the note on them; (None, []) when the output length is fixed (the config's ``output_len``)."""
    dist = config.output_dist
    if dist.kind == "fixed":
        return None, []
    measured = draw_lengths(dist, config.output_len, count, length_rng(config, "output", "measured"))
    warm = draw_lengths(dist, config.output_len, warmups, length_rng(config, "output", "warmup"))
    notes = [length_note("Output lengths (max_tokens)", dist, config.output_len, measured)] if count else []
    return [int(x) for x in measured] + [int(x) for x in warm], notes


def expected_hit_rate(
    lengths: Sequence[int],
    groups: int,
    group_shared: Sequence[int],
    common: int,
    warm_groups: int,
    block: int = PREFIX_CACHE_BLOCK,
) -> float | None:
    """The share of the measured prompt tokens (``lengths``, in sending order; prompt i in group i mod
    ``groups``) a server caching every full ``block`` of what it has seen finds cached: a prompt whose group has
    been seen before (an earlier prompt, or one of the first ``warm_groups`` groups a warmup covered) hits
    floor(``group_shared[group]`` / block) * block tokens; the first of a group after any other prompt
    (warmups included) hits the blocks of the ``common`` tokens all groups share (the template front); the
    very first prompt hits nothing. None without prompts."""
    total = sum(lengths)
    if total <= 0:
        return None
    seen = set(range(min(warm_groups, groups)))
    anything = warm_groups > 0
    hits = 0
    for i, n in enumerate(lengths):
        g = i % groups
        shared = group_shared[g] if g in seen else (common if anything else 0)
        hits += min((shared // block) * block, max(0, n - 1))
        seen.add(g)
        anything = True
    return hits / total


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


def _exact_prefix(
    tokenizer: Tokenizer, pool: np.ndarray, length: int, rng: np.random.Generator, first: int | None = None
) -> str:
    """Text that encodes (without special tokens) to exactly ``length`` tokens: the deliberate shared prefix
    (``first``: the id it starts with, so the prefixes of prefix groups differ from their first token)."""
    ids = [int(x) for x in rng.choice(pool, size=length)]
    if first is not None:
        ids[0] = first
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
    docstring; with ``input_dist``, each exactly its own drawn length), made lazily: prompt ``g`` has its own
    seeded generator (the config's seed and ``g``), so it is the same whichever prompts were made before it and
    however many are made at once. With ``prefix_len`` S and ``prefix_groups`` G, measured prompt i (warmup w)
    starts with group i mod G's (w mod G's) own S-token prefix."""
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
    n_groups = config.prefix_groups if config.prefix_len else 1
    if config.prefix_len and n_groups > max(count, 1):
        raise UserInputError(
            f"--prefix-groups {n_groups} is more than the {count} prompts: some groups would have no prompt.",
            hint=f"Use --prefix-groups {max(count, 1)} or fewer, or more --num-prompts.",
        )
    if n_groups > len(pool) - 1:
        raise UserInputError(
            f"--prefix-groups {n_groups} needs as many distinct first tokens; the tokenizer {tok.name} has "
            f"{len(pool)} word tokens.",
            hint=f"Use --prefix-groups {len(pool) - 1} or fewer.",
        )
    prefixes = [""]
    sep = ""
    if config.prefix_len:
        prefixes = [_exact_prefix(tok, pool, config.prefix_len, rng)]
        sep = "\n"  # keeps the first own token from merging with the prefix's last one
    if n_groups > 1:
        # the other groups' prefixes: their own generators, each starting with a token no other group starts with
        order = np.random.default_rng([seed, 1]).permutation(len(pool))
        firsts = {tok.encode(prefixes[0])[0]}
        cand = (int(pool[i]) for i in order if int(pool[i]) not in firsts)
        prefixes += [
            _exact_prefix(tok, pool, config.prefix_len, np.random.default_rng([seed, 1, j]), first=next(cand))
            for j in range(1, n_groups)
        ]
    if n_groups == 1:
        fixed_of = [tok.count_prompt(prefixes[0] + sep, endpoint) if prefixes[0] else overhead]
    else:
        fixed_of = [len(t) for t in tok.prompt_token_ids_batch([p + sep for p in prefixes], endpoint)]
    fixed = max(fixed_of)
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

    def group_of(g: int) -> int:
        return (g if g < count else g - count) % n_groups

    # every prompt's exact length: input_len, or drawn (measured and warmups from streams of their own)
    notes: list[str] = []
    dist = config.input_dist
    lengths = np.concatenate(
        [
            draw_lengths(dist, target, count, length_rng(config, "input", "measured")),
            draw_lengths(dist, target, warmups, length_rng(config, "input", "warmup")),
        ]
    )
    if dist.kind != "fixed" and total:
        floor_of = np.array([fixed_of[group_of(g)] + 1 for g in range(total)], dtype=np.int64)
        short = lengths < floor_of
        if short.any():
            lengths = np.maximum(lengths, floor_of)
            what = "chat template" if endpoint == EndpointKind.chat else "special tokens"
            notes.append(
                f"{int(short.sum())} drawn input lengths were too short for the {what}"
                + (" and the prefix" if config.prefix_len else "")
                + f" and were made the shortest possible ({int(floor_of.min())} tokens"
                + (f" to {int(floor_of.max())}" if floor_of.max() != floor_of.min() else "")
                + ")."
            )
        if count:
            notes.insert(0, length_note("Input lengths", dist, target, lengths[:count]))
    max_tokens, out_notes = output_lengths(config, count, warmups)
    notes += out_notes

    starts = _Starts(rng, pool, max(total, 1))
    # The front every prompt of a group shares (special tokens, the group's prefix, what the chat template puts
    # before the message): the most leading tokens two one-token probes share.
    probe_words = tok.decode_batch([[int(pool[i])] for i in range(min(4, len(pool)))])
    probes = tok.prompt_token_ids_batch([p + sep + t for p in prefixes for t in probe_words], endpoint)
    fronts: list[list[int]] = []
    for j in range(n_groups):
        mine = probes[j * len(probe_words) : (j + 1) * len(probe_words)]
        best = max(
            ((a, _common_prefix(a, b)) for i, a in enumerate(mine) for b in mine[i + 1 :]),
            key=lambda x: x[1],
        )
        fronts.append(best[0][: best[1]])
    front_lens = [len(f) for f in fronts]
    common, pair_max = shared_prefix_report(fronts) if n_groups > 1 else (front_lens[0], front_lens[0])
    if n_groups > 1 and pair_max > common:
        raise UserInputError(
            f"Two of the {n_groups} group prefixes share their first tokens with {tok.name}.",
            hint="Try another --seed or --prefix-groups.",
        )
    k = starts.k
    if total >= 2 and k > 1:
        notes.append(
            f"The tokenizer has {len(pool)} word tokens for {total} prompts: prompts may share up to {k - 1} "
            f"leading token{'s' if k > 2 else ''} after the common front."
        )
    if endpoint == EndpointKind.chat and total >= 2:
        template_front = (
            front_lens[0] - (config.prefix_len + 1 if config.prefix_len else 0) if n_groups == 1 else common
        )
        if template_front > 0:
            notes.append(
                f"The chat template puts the same {template_front} tokens in front of every prompt "
                "(a server with prefix caching may reuse them)."
            )
    hit_rate = expected_hit_rate(
        [int(x) for x in lengths[:count]], n_groups, front_lens, common, min(warmups, n_groups)
    )
    if config.prefix_len:
        per, extra = divmod(count, n_groups)
        shared = f"{min(front_lens)}" + (f"..{max(front_lens)}" if max(front_lens) != min(front_lens) else "")
        notes.append(
            f"Shared prefixes: {n_groups} group{'s' if n_groups > 1 else ''} (measured prompt i in group i mod "
            f"{n_groups}) of {per}{f'..{per + 1}' if extra else ''} prompts, each group with its own "
            f"{config.prefix_len}-token prefix ({shared} leading tokens shared within a group, template front "
            f"included); warmups use the group prefixes too ({min(warmups, n_groups)} of {n_groups} groups warm). "
            f"Expected prefix-cache hit rate {hit_rate or 0.0:.1%} of the measured prompt tokens (a server "
            f"caching every full {PREFIX_CACHE_BLOCK}-token block)."
        )
    seen: set[tuple[int, ...]] = set()  # the first own token(s) of every prompt made: no accidental sharing
    noted = False

    Job = tuple[list[int], np.random.Generator, int, int]  # ids, generator, exact length, group

    def fit(batch: list[Job], stop: StopFn) -> list[tuple[str, list[int]]]:
        """Each job's ids made exactly its length in tokens: decode, re-count, add or remove the difference."""
        ids = [b[0] for b in batch]
        done: list[tuple[str, list[int]] | None] = [None] * len(batch)
        for rnd in range(MAX_FIT_ROUNDS):
            todo = [i for i in range(len(batch)) if done[i] is None]
            if not todo or stop():
                break
            decoded = tok.decode_batch([ids[i] for i in todo])
            cand = [prefixes[batch[i][3]] + sep + d for i, d in zip(todo, decoded, strict=True)]
            counted = tok.prompt_token_ids_batch(cand, endpoint)
            for i, text, toks in zip(todo, cand, counted, strict=True):
                diff = batch[i][2] - len(toks)
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
            bad = sorted({batch[i][2] for i, d in enumerate(done) if d is None})
            raise UserInputError(
                f"{sum(d is None for d in done)} random prompts could not be made exactly "
                f"{', '.join(map(str, bad[:5]))} tokens long with {tok.name}.",
                hint="Try another --seed or --input-len; please report the tokenizer.",
            )
        return [d for d in done if d is not None]

    def key(toks: list[int], j: int) -> tuple[int, ...] | None:
        """The prompt's first own token(s); None when its front differs from its group's (a merge)."""
        if total < 2:
            return ()
        front = front_lens[j]
        if _common_prefix(toks, fronts[j]) < front:
            return None
        return tuple(toks[front : front + k])

    def make(chunk: int, stop: StopFn) -> Iterator[Prompt]:
        nonlocal noted
        # warmups first (they are sent first): prompts count..total-1, then the measured 0..count-1
        order = list(range(count, total)) + list(range(count))
        for at in range(0, len(order), chunk):
            if stop():
                return
            batch: list[Job] = []
            gs = order[at : at + chunk]
            for g in gs:
                g_rng = np.random.default_rng([seed, g])
                j = group_of(g)
                n = int(lengths[g])
                own = n - fixed_of[j]
                s = starts(g)
                batch.append(
                    (s[:own] + [int(x) for x in g_rng.choice(pool, size=max(0, own - len(s)))], g_rng, n, j)
                )
            fitted = fit(batch, stop)
            if not fitted:
                return
            for (text, toks), (_ids, g_rng, n, j), g in zip(fitted, batch, gs, strict=True):
                kk = key(toks, j)
                for _ in range(5):  # an accidental shared start (a merge): draw this prompt afresh
                    if kk is not None and kk not in seen:
                        break
                    own = n - fixed_of[j]
                    redone = fit([([int(x) for x in g_rng.choice(pool, size=own)], g_rng, n, j)], stop)
                    if not redone:
                        return
                    text, toks = redone[0]
                    kk = key(toks, j)
                if kk is None or kk in seen:
                    if not noted:
                        notes.append(
                            f"Some random prompts share more than the {front_lens[j]} leading tokens all "
                            f"{'of their group ' if n_groups > 1 else ''}share."
                        )
                        noted = True
                else:
                    seen.add(kk)
                yield Prompt(
                    text,
                    n,
                    max_tokens=max_tokens[g] if max_tokens is not None else None,
                    group=j if config.prefix_len else None,
                )

    return PromptSource(
        count=count,
        num_warmups=warmups,
        make=make,
        notes=notes,
        shared_prefix_tokens=(front_lens[0] if n_groups == 1 else common) if total >= 2 else 0,
        expected_prefix_hit_rate=hit_rate,
        group_prefix_tokens=front_lens if total >= 2 else [],
        approx_prompt_bytes=BYTES_PER_TOKEN * float(lengths.mean()) if total else None,
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
    max_tokens, out_notes = output_lengths(config, count, warmups)
    notes += out_notes

    def make(chunk: int, stop: StopFn) -> Iterator[Prompt]:
        picks = list(range(count, total)) + list(range(count))  # warmups first: they are sent first
        for at in range(0, len(picks), chunk):
            if stop():
                return
            picked = [texts[order[i % len(order)]] for i in picks[at : at + chunk]]
            lens: list[int | None] = [None] * len(picked)
            if tokenizer is not None:
                lens = [len(c) for c in tokenizer.prompt_token_ids_batch(picked, endpoint)]
            outs: Sequence[int | None] = (
                [max_tokens[i] for i in picks[at : at + chunk]]
                if max_tokens is not None
                else [None] * len(picked)
            )
            yield from (Prompt(t, n, max_tokens=m) for t, n, m in zip(picked, lens, outs, strict=True))

    size = sum(len(t.encode("utf-8", "replace")) for t in texts) / len(texts) if texts else None
    return PromptSource(count=count, num_warmups=warmups, make=make, notes=notes, approx_prompt_bytes=size)


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
