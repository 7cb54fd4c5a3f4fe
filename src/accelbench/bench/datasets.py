"""Prompt sources for a benchmark: ``random`` (exact token counts), ``jsonl`` and ``sharegpt`` files.

Each source is an entry of ``DATASETS`` (a Registry, ``bench/prompts.py``), so another one is one more
registered function in a module of its own (``docs/extending.md``): ``random`` in ``bench/random_prompts.py``,
the files in ``bench/file_datasets.py``, a replayed trace in ``bench/trace.py``. This module opens the one a
config names (``open_dataset``) and makes all its prompts at once (``build_dataset``).

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

from accelbench.bench.prompts import (
    DATASETS,
    FILE_DATASETS,
    Dataset,
    Prompt,
    PromptSource,
    StopFn,
    check_dataset,
)
from accelbench.bench.tokenizer import Tokenizer
from accelbench.bench.tools import load_tools, tool_names
from accelbench.domain.load import BenchConfig

#: what callers import from here (the types and the registry live in ``bench/prompts.py``)
__all__ = [
    "DATASETS",
    "FILE_DATASETS",
    "Dataset",
    "Prompt",
    "PromptSource",
    "StopFn",
    "build_dataset",
    "check_dataset",
    "open_dataset",
]


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
    builder = check_dataset(config.dataset)
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
