"""Prompt sources read from a file: ``jsonl`` (one ``{"prompt": ...}`` a line, vLLM's custom dataset) and
``sharegpt`` (the first turn of every conversation, pruned as ``vllm bench serve`` prunes it).

The prompts are shuffled with the config's seed and taken ``count`` + ``warmups`` at a time (cycling when the file
has fewer); with a tokenizer each prompt's token count is known, a chunk at a time as the prompts are asked for.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from accelbench.bench.prompt_lengths import output_lengths
from accelbench.bench.prompts import DATASETS, Prompt, PromptSource, StopFn
from accelbench.bench.tokenizer import Tokenizer
from accelbench.domain.load import BenchConfig, EndpointKind
from accelbench.errors import UserInputError


def need_path(config: BenchConfig) -> Path:
    """The dataset file the config names; refused when it names none or it does not exist."""
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
    path = need_path(config)
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
    path = need_path(config)
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
