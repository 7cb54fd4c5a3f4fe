"""Workload shapes: how long each prompt and each answer is, and the prefix-cache hits the prompts should give.

``input_dist`` draws each random prompt's exact length around ``input_len`` and ``output_dist`` each request's
``max_tokens`` around ``output_len`` (every dataset), from separate seeded streams (``length_rng``), so a config
with fixed lengths makes exactly the prompts it made before; the lengths are drawn up front (measured and warmup
prompts from streams of their own), so the notes give their realised mean/min/max before the first prompt is
made. ``expected_hit_rate`` is the share of the measured prompt tokens a server that caches every full
``PREFIX_CACHE_BLOCK``-token block of what it has seen would find cached.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from accelbench.domain.limits import MAX_TOKENS
from accelbench.domain.load import BenchConfig, LengthDist

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
