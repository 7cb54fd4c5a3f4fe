"""Text of an exact token count, made from a pool of ordinary word tokens of the tokenizer.

The random dataset and the synthetic trace prompts draw token ids from ``token_pool`` (words, no special-token
look-alikes), decode them to text and re-count it the way the server counts it, adding or removing ids by the
difference until the count is exact (``exact_prefix``; ``MAX_FIT_ROUNDS`` rounds at most). ``DistinctStarts``
gives every prompt its own first token(s), so no two prompts share a prefix by accident, and
``shared_prefix_report`` checks that they do not.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import weakref
from collections.abc import Sequence

import numpy as np

from accelbench.bench.tokenizer import Tokenizer
from accelbench.domain.load import BenchConfig
from accelbench.errors import UserInputError

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


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
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
        common_prefix(token_lists[order[j]], token_lists[order[j + 1]]) for j in range(len(order) - 1)
    )
    everyone = common_prefix(token_lists[order[0]], token_lists[order[-1]])
    return everyone, pair_max


def exact_prefix(
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


def prompt_seed(config: BenchConfig) -> int:
    """Seed for prompts: the user's seed mixed with the cell's shape, so cells of a sweep that share a seed
    (same input length, other concurrency) do not send the same first prompts (a prefix-cache hit)."""
    key = (
        f"{config.seed}|{config.input_len}|{config.prefix_len}|{config.num_prompts}|{config.max_concurrency}"
    )
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


class DistinctStarts:
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
