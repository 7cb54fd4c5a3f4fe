"""The ``random`` dataset: prompts of exactly ``input_len`` server-counted tokens, with optional shared prefixes.

What ``input_len`` means and how a prompt is made exact: see ``bench/datasets.py``. Built in named steps:
the groups and their prefixes (``group_prefixes``), the tokens a group's prompts cannot avoid
(``fixed_tokens``), every prompt's exact length (``prompt_lengths``), the front a group's prompts share
(``group_fronts``) and what the result notes say of them (``front_notes``); ``RandomPrompts`` then makes the
prompts lazily, a chunk at a time, each fitted to its length and checked for an accidental shared start.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from accelbench.bench.prompt_lengths import (
    PREFIX_CACHE_BLOCK,
    draw_lengths,
    expected_hit_rate,
    length_note,
    length_rng,
    output_lengths,
)
from accelbench.bench.prompts import DATASETS, Prompt, PromptSource, StopFn
from accelbench.bench.tokenizer import Tokenizer
from accelbench.bench.word_tokens import (
    BYTES_PER_TOKEN,
    MAX_FIT_ROUNDS,
    DistinctStarts,
    common_prefix,
    exact_prefix,
    prompt_seed,
    shared_prefix_report,
    token_pool,
)
from accelbench.domain.load import BenchConfig, EndpointKind
from accelbench.errors import UserInputError

#: one prompt to fit: its ids so far, its own generator, its exact length, its group
Job = tuple[list[int], np.random.Generator, int, int]


@dataclass
class Groups:
    """The prefix groups of a random dataset: each group's prefix text, the separator after it, and how many
    tokens of every prompt of the group are fixed (special tokens, prefix, chat template) before its own."""

    prefixes: list[str]
    sep: str
    fixed_of: list[int]

    @property
    def count(self) -> int:
        return len(self.prefixes)


@dataclass
class Fronts:
    """The leading tokens every prompt of a group shares (``fronts``, ``lens``) and those all groups share."""

    fronts: list[list[int]]
    lens: list[int]
    common: int


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
    seed = prompt_seed(config)
    rng = np.random.default_rng(seed)
    pool = token_pool(tok)
    overhead = tok.count_prompt("", endpoint)
    groups = group_prefixes(config, tok, pool, rng, seed, count)
    groups.fixed_of = fixed_tokens(tok, endpoint, groups, overhead)
    check_room(config, endpoint, max(groups.fixed_of))
    total = count + warmups
    lengths, notes = prompt_lengths(config, count, warmups, groups)
    max_tokens, out_notes = output_lengths(config, count, warmups)
    notes += out_notes
    starts = DistinctStarts(rng, pool, max(total, 1))
    fronts = group_fronts(tok, pool, endpoint, groups)
    hit_rate = expected_hit_rate(
        [int(x) for x in lengths[:count]],
        groups.count,
        fronts.lens,
        fronts.common,
        min(warmups, groups.count),
    )
    notes += front_notes(config, tok, pool, count, warmups, groups, fronts, starts.k, hit_rate)
    prompts = RandomPrompts(
        config=config,
        tok=tok,
        pool=pool,
        seed=seed,
        count=count,
        total=total,
        groups=groups,
        fronts=fronts,
        lengths=lengths,
        max_tokens=max_tokens,
        starts=starts,
        notes=notes,
    )
    return PromptSource(
        count=count,
        num_warmups=warmups,
        make=prompts.make,
        notes=notes,
        shared_prefix_tokens=(fronts.lens[0] if groups.count == 1 else fronts.common) if total >= 2 else 0,
        expected_prefix_hit_rate=hit_rate,
        group_prefix_tokens=fronts.lens if total >= 2 else [],
        approx_prompt_bytes=BYTES_PER_TOKEN * float(lengths.mean()) if total else None,
    )


def group_prefixes(
    config: BenchConfig, tok: Tokenizer, pool: np.ndarray, rng: np.random.Generator, seed: int, count: int
) -> Groups:
    """The prefix groups (one group with no prefix when ``prefix_len`` is 0): the first group's prefix from the
    dataset's generator, the others' from their own, each starting with a token no other group starts with.
    Refused when there are more groups than prompts or than distinct first tokens."""
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
        prefixes = [exact_prefix(tok, pool, config.prefix_len, rng)]
        sep = "\n"  # keeps the first own token from merging with the prefix's last one
    if n_groups > 1:
        # the other groups' prefixes: their own generators, each starting with a token no other group starts with
        order = np.random.default_rng([seed, 1]).permutation(len(pool))
        firsts = {tok.encode(prefixes[0])[0]}
        cand = (int(pool[i]) for i in order if int(pool[i]) not in firsts)
        prefixes += [
            exact_prefix(tok, pool, config.prefix_len, np.random.default_rng([seed, 1, j]), first=next(cand))
            for j in range(1, n_groups)
        ]
    return Groups(prefixes=prefixes, sep=sep, fixed_of=[])


def fixed_tokens(tok: Tokenizer, endpoint: EndpointKind, groups: Groups, overhead: int) -> list[int]:
    """Per group, the tokens the server counts before a prompt's own: its prefix and separator with the special
    tokens and chat template (``overhead`` alone when there is no prefix)."""
    prefixes, sep = groups.prefixes, groups.sep
    if groups.count == 1:
        return [tok.count_prompt(prefixes[0] + sep, endpoint) if prefixes[0] else overhead]
    return [len(t) for t in tok.prompt_token_ids_batch([p + sep for p in prefixes], endpoint)]


def check_room(config: BenchConfig, endpoint: EndpointKind, fixed: int) -> None:
    """Refuse an input length the fixed tokens leave no room in for a prompt's own token."""
    target = config.input_len
    if target - fixed >= 1:
        return
    what = "the chat template" if endpoint == EndpointKind.chat else "the special tokens"
    raise UserInputError(
        f"--input-len {target} is too small: {what}"
        + (f" and the {config.prefix_len}-token prefix" if config.prefix_len else "")
        + f" already take up {fixed} of the {target} tokens.",
        hint=f"Use --input-len {fixed + 1} or more"
        + (", or a shorter --prefix-len." if config.prefix_len else "."),
    )


def group_of(g: int, count: int, n_groups: int) -> int:
    """The group of prompt ``g`` (measured 0..count-1, then the warmups): index mod groups, within its part."""
    return (g if g < count else g - count) % n_groups


def prompt_lengths(
    config: BenchConfig, count: int, warmups: int, groups: Groups
) -> tuple[np.ndarray, list[str]]:
    """Every prompt's exact length, measured then warmups: ``input_len``, or drawn (measured and warmups from
    streams of their own) and raised to the shortest its group allows; and the notes on them."""
    notes: list[str] = []
    dist, target, total = config.input_dist, config.input_len, count + warmups
    lengths = np.concatenate(
        [
            draw_lengths(dist, target, count, length_rng(config, "input", "measured")),
            draw_lengths(dist, target, warmups, length_rng(config, "input", "warmup")),
        ]
    )
    if dist.kind == "fixed" or not total:
        return lengths, notes
    floor_of = np.array(
        [groups.fixed_of[group_of(g, count, groups.count)] + 1 for g in range(total)], dtype=np.int64
    )
    short = lengths < floor_of
    if short.any():
        lengths = np.maximum(lengths, floor_of)
        what = "chat template" if EndpointKind(config.endpoint) == EndpointKind.chat else "special tokens"
        notes.append(
            f"{int(short.sum())} drawn input lengths were too short for the {what}"
            + (" and the prefix" if config.prefix_len else "")
            + f" and were made the shortest possible ({int(floor_of.min())} tokens"
            + (f" to {int(floor_of.max())}" if floor_of.max() != floor_of.min() else "")
            + ")."
        )
    if count:
        notes.insert(0, length_note("Input lengths", dist, target, lengths[:count]))
    return lengths, notes


def group_fronts(tok: Tokenizer, pool: np.ndarray, endpoint: EndpointKind, groups: Groups) -> Fronts:
    """The front every prompt of a group shares (special tokens, the group's prefix, what the chat template puts
    before the message): the most leading tokens two one-token probes share. Refused when two groups' fronts
    share their first tokens."""
    n_groups, sep = groups.count, groups.sep
    probe_words = tok.decode_batch([[int(pool[i])] for i in range(min(4, len(pool)))])
    probes = tok.prompt_token_ids_batch([p + sep + t for p in groups.prefixes for t in probe_words], endpoint)
    fronts: list[list[int]] = []
    for j in range(n_groups):
        mine = probes[j * len(probe_words) : (j + 1) * len(probe_words)]
        best = max(
            ((a, common_prefix(a, b)) for i, a in enumerate(mine) for b in mine[i + 1 :]),
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
    return Fronts(fronts=fronts, lens=front_lens, common=common)


def front_notes(
    config: BenchConfig,
    tok: Tokenizer,
    pool: np.ndarray,
    count: int,
    warmups: int,
    groups: Groups,
    fronts: Fronts,
    k: int,
    hit_rate: float | None,
) -> list[str]:
    """What the result notes say of the prompts' shared fronts: leading tokens prompts may share when the pool
    is small (``k`` tokens per start), the chat template's front, the prefix groups and their expected hits."""
    notes: list[str] = []
    total, n_groups, front_lens = count + warmups, groups.count, fronts.lens
    if total >= 2 and k > 1:
        notes.append(
            f"The tokenizer has {len(pool)} word tokens for {total} prompts: prompts may share up to {k - 1} "
            f"leading token{'s' if k > 2 else ''} after the common front."
        )
    if EndpointKind(config.endpoint) == EndpointKind.chat and total >= 2:
        template_front = (
            front_lens[0] - (config.prefix_len + 1 if config.prefix_len else 0)
            if n_groups == 1
            else fronts.common
        )
        if template_front > 0:
            notes.append(
                f"The chat template puts the same {template_front} tokens in front of every prompt "
                "(a server with prefix caching may reuse them)."
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
    return notes


@dataclass
class RandomPrompts:
    """Makes the random prompts lazily (``make``): a chunk at a time, each fitted to its exact length and its
    first own token(s) checked against every prompt made before (an accidental shared start is drawn afresh)."""

    config: BenchConfig
    tok: Tokenizer
    pool: np.ndarray
    seed: int
    count: int
    total: int
    groups: Groups
    fronts: Fronts
    lengths: np.ndarray
    max_tokens: list[int] | None
    starts: DistinctStarts
    notes: list[str]
    #: the first own token(s) of every prompt made: no accidental sharing
    seen: set[tuple[int, ...]] = field(default_factory=set)
    noted: bool = False

    def fit(self, batch: list[Job], stop: StopFn) -> list[tuple[str, list[int]]]:
        """Each job's ids made exactly its length in tokens: decode, re-count, add or remove the difference."""
        tok, pool, endpoint = self.tok, self.pool, EndpointKind(self.config.endpoint)
        ids = [b[0] for b in batch]
        done: list[tuple[str, list[int]] | None] = [None] * len(batch)
        for rnd in range(MAX_FIT_ROUNDS):
            todo = [i for i in range(len(batch)) if done[i] is None]
            if not todo or stop():
                break
            decoded = tok.decode_batch([ids[i] for i in todo])
            cand = [
                self.groups.prefixes[batch[i][3]] + self.groups.sep + d
                for i, d in zip(todo, decoded, strict=True)
            ]
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

    def key(self, toks: list[int], j: int) -> tuple[int, ...] | None:
        """The prompt's first own token(s); None when its front differs from its group's (a merge)."""
        if self.total < 2:
            return ()
        front = self.fronts.lens[j]
        if common_prefix(toks, self.fronts.fronts[j]) < front:
            return None
        return tuple(toks[front : front + self.starts.k])

    def job(self, g: int) -> Job:
        """Prompt ``g``'s first ids: its distinct start, then draws from its own generator."""
        g_rng = np.random.default_rng([self.seed, g])
        j = group_of(g, self.count, self.groups.count)
        n = int(self.lengths[g])
        own = n - self.groups.fixed_of[j]
        s = self.starts(g)
        return s[:own] + [int(x) for x in g_rng.choice(self.pool, size=max(0, own - len(s)))], g_rng, n, j

    def make(self, chunk: int, stop: StopFn) -> Iterator[Prompt]:
        # warmups first (they are sent first): prompts count..total-1, then the measured 0..count-1
        order = list(range(self.count, self.total)) + list(range(self.count))
        for at in range(0, len(order), chunk):
            if stop():
                return
            gs = order[at : at + chunk]
            batch = [self.job(g) for g in gs]
            fitted = self.fit(batch, stop)
            if not fitted:
                return
            for (text, toks), (_ids, g_rng, n, j), g in zip(fitted, batch, gs, strict=True):
                made = self.distinct(text, toks, g_rng, n, j, stop)
                if made is None:
                    return
                yield Prompt(
                    made,
                    n,
                    max_tokens=self.max_tokens[g] if self.max_tokens is not None else None,
                    group=j if self.config.prefix_len else None,
                )

    def distinct(
        self, text: str, toks: list[int], g_rng: np.random.Generator, n: int, j: int, stop: StopFn
    ) -> str | None:
        """The prompt's text, drawn afresh (up to five times) while its start is one another prompt has (a merge);
        None when a stop came meanwhile. Still shared after that: kept, and said once in the notes."""
        kk = self.key(toks, j)
        for _ in range(5):  # an accidental shared start (a merge): draw this prompt afresh
            if kk is not None and kk not in self.seen:
                break
            own = n - self.groups.fixed_of[j]
            redone = self.fit([([int(x) for x in g_rng.choice(self.pool, size=own)], g_rng, n, j)], stop)
            if not redone:
                return None
            text, toks = redone[0]
            kk = self.key(toks, j)
        if kk is None or kk in self.seen:
            if not self.noted:
                self.notes.append(
                    f"Some random prompts share more than the {self.fronts.lens[j]} leading tokens all "
                    f"{'of their group ' if self.groups.count > 1 else ''}share."
                )
                self.noted = True
        else:
            self.seen.add(kk)
        return text
