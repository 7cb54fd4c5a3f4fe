"""Workload shapes in the datasets: drawn input and output lengths, shared-prefix groups with a known
expected prefix-cache hit rate, and tool definitions sent with chat requests."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from accelbench.bench import build_dataset, run_benchmark
from accelbench.bench.datasets import open_dataset
from accelbench.bench.prompt_lengths import PREFIX_CACHE_BLOCK, draw_lengths, expected_hit_rate, length_rng
from accelbench.bench.runner import request_body
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.bench.tools import BUILTIN_TOOLS, load_tools
from accelbench.bench.word_tokens import shared_prefix_report
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig, EndpointKind, LengthDist
from accelbench.errors import UserInputError
from tests.support.stream_server import FixtureTokenizer, Script, StreamServer


def server_count(fixture: FixtureTokenizer, text: str, endpoint: str) -> int:
    """How the fixture server (independent code) counts a prompt."""
    if endpoint == "chat":
        return len(fixture.encode(fixture.render_chat([{"role": "user", "content": text}]), False))
    return len(fixture.encode(text, True))


DISTS = {
    "uniform": LengthDist(kind="uniform", range_ratio=0.5, min=20, max=200),
    "normal": LengthDist(kind="normal", min=20, max=200),
    "lognormal": LengthDist(kind="lognormal", sigma=0.4, min=20, max=200),
}


# ------------------------------------------------------------------------------------------- input lengths
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("kind", sorted(DISTS))
def test_drawn_input_lengths_are_exact_and_spread_around_input_len(
    tok: LocalTokenizer, tok_dir: Path, endpoint: str, kind: str
) -> None:
    config = BenchConfig(endpoint=endpoint, input_len=80, num_prompts=150, seed=3, input_dist=DISTS[kind])
    ds = build_dataset(config, tok)
    fixture = FixtureTokenizer(tok_dir)
    lengths = [p.prompt_len for p in ds.prompts]
    assert all(n is not None for n in lengths)
    drawn = [int(n) for n in lengths if n is not None]
    assert len(set(drawn)) > 10, "the lengths do not vary"
    assert min(drawn) >= 20 and max(drawn) <= 200
    assert abs(sum(drawn) / len(drawn) - 80) < 0.08 * 80
    for p in ds.prompts:  # each prompt is exactly its drawn length, as the server counts it
        assert server_count(fixture, p.text, endpoint) == p.prompt_len
    note = next(n for n in ds.notes if n.startswith("Input lengths vary"))
    assert f"mean {sum(drawn) / len(drawn):.1f}, min {min(drawn)}, max {max(drawn)}" in note
    # same seed, same lengths and prompts; another seed, other lengths
    again = build_dataset(config, tok)
    assert [p.text for p in again.prompts] == [p.text for p in ds.prompts]
    other = build_dataset(config.model_copy(update={"seed": 4}), tok)
    assert [p.prompt_len for p in other.prompts] != lengths
    # no accidental shared prefix with varying lengths either
    ids = [tok.prompt_token_ids(p.text, EndpointKind(endpoint)) for p in ds.prompts]
    everyone, pair_max = shared_prefix_report(ids)
    assert pair_max == everyone


def test_draw_lengths_respects_the_bounds_and_the_seed() -> None:
    import numpy as np

    for dist in DISTS.values():
        a = draw_lengths(dist, 100, 5000, np.random.default_rng(1))
        b = draw_lengths(dist, 100, 5000, np.random.default_rng(1))
        assert a.tolist() == b.tolist()
        assert a.min() >= 20 and a.max() <= 200
        assert abs(a.mean() - 100) < 5
    fixed = draw_lengths(LengthDist(min=500), 100, 4, np.random.default_rng(1))
    assert fixed.tolist() == [100] * 4  # fixed: the cell's length, whatever min says
    tight = draw_lengths(
        LengthDist(kind="normal", std=50, min=90, max=110), 100, 1000, np.random.default_rng(2)
    )
    assert tight.min() == 90 and tight.max() == 110


def test_min_above_max_is_refused_by_the_schema() -> None:
    with pytest.raises(ValidationError, match=r"min 300 is more than max 200"):
        LengthDist(kind="uniform", min=300, max=200)
    with pytest.raises(ValidationError, match=r"min 9 is more than max 5"):
        BenchConfig(output_dist={"kind": "normal", "min": 9, "max": 5})


def test_too_short_draws_are_clamped_up_with_a_note(tok: LocalTokenizer, tok_dir: Path) -> None:
    front = tok.count_prompt("", EndpointKind.chat)
    config = BenchConfig(
        input_len=front + 4, num_prompts=60, seed=1, input_dist=LengthDist(kind="uniform", range_ratio=0.9)
    )
    ds = build_dataset(config, tok)
    fixture = FixtureTokenizer(tok_dir)
    short = sum(1 for p in ds.prompts if p.prompt_len == front + 1)
    assert short > 0
    assert all(p.prompt_len is not None and p.prompt_len >= front + 1 for p in ds.prompts)
    assert all(server_count(fixture, p.text, "chat") == p.prompt_len for p in ds.prompts)
    note = next(n for n in ds.notes if "were too short for the chat template" in n)
    drawn = draw_lengths(config.input_dist, config.input_len, 60, length_rng(config, "input", "measured"))
    clamped = int((drawn < front + 1).sum())
    assert 0 < clamped <= short
    assert note.startswith(f"{clamped} drawn input lengths")
    assert [max(int(n), front + 1) for n in drawn] == [p.prompt_len for p in ds.prompts]
    assert f"({front + 1} tokens)" in note


def test_fixed_lengths_and_output_draws_leave_the_prompts_as_they_were(tok: LocalTokenizer) -> None:
    base = BenchConfig(input_len=60, prefix_len=10, num_prompts=20, num_warmups=3, seed=8)
    ref = build_dataset(base, tok)
    assert all(p.max_tokens is None for p in ref.warmups + ref.prompts)
    same = build_dataset(
        base.model_copy(
            update={
                "input_dist": LengthDist(kind="fixed", min=3),
                "prefix_groups": 1,
                "output_dist": DISTS["normal"],
            }
        ),
        tok,
    )
    texts = [p.text for p in ref.warmups + ref.prompts]
    assert [p.text for p in same.warmups + same.prompts] == texts
    assert all(p.max_tokens is not None for p in same.prompts)


# ------------------------------------------------------------------------------------------ output lengths
def test_output_lengths_are_drawn_for_file_datasets_too(tok: LocalTokenizer, tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(30)))
    dist = LengthDist(kind="lognormal", sigma=0.5, min=4, max=600)
    config = BenchConfig(dataset="jsonl", dataset_path=str(path), num_prompts=400, num_warmups=5, output_len=100,
                         output_dist=dist, seed=2)  # fmt: skip
    ds = build_dataset(config, tok)
    outs = [p.max_tokens for p in ds.prompts]
    assert all(m is not None and 4 <= m <= 600 for m in outs)
    drawn = [int(m) for m in outs if m is not None]
    assert abs(sum(drawn) / len(drawn) - 100) < 10
    assert all(p.max_tokens is not None for p in ds.warmups)
    assert any(n.startswith("Output lengths (max_tokens) vary (lognormal around 100") for n in ds.notes)
    assert [p.max_tokens for p in build_dataset(config, tok).prompts] == outs
    # the prompts themselves are those of the fixed config
    fixed = build_dataset(config.model_copy(update={"output_dist": LengthDist()}), tok)
    assert [p.text for p in fixed.prompts] == [p.text for p in ds.prompts]
    assert all(p.max_tokens is None for p in fixed.prompts)


# --------------------------------------------------------------------------------------- prefix groups
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_prompts_of_a_group_share_its_prefix_and_groups_share_nothing_more(
    tok: LocalTokenizer, endpoint: str
) -> None:
    groups, per, s = 3, 5, 20
    config = BenchConfig(endpoint=endpoint, input_len=70, prefix_len=s, prefix_groups=groups, num_prompts=groups * per,
                         seed=6)  # fmt: skip
    ds = build_dataset(config, tok)
    kind = EndpointKind(endpoint)
    # what the template puts before a message (nothing for completions with this tokenizer): two probes share it
    template_front, _ = shared_prefix_report(
        [tok.prompt_token_ids(w, kind) for w in ("apple", "zebra", "river")]
    )
    ids = [tok.prompt_token_ids(p.text, kind) for p in ds.prompts]
    assert all(len(t) == 70 for t in ids)
    assert [p.group for p in ds.prompts] == [i % groups for i in range(groups * per)]
    assert len(ds.group_prefix_tokens) == groups
    firsts = []
    for g in range(groups):
        mine = [ids[i] for i in range(len(ids)) if i % groups == g]
        everyone, pair_max = shared_prefix_report(mine)
        assert everyone == pair_max == ds.group_prefix_tokens[g]
        # the group's S-token prefix, its separator line and the template front
        texts = [ds.prompts[i].text for i in range(len(ids)) if i % groups == g]
        prefix = texts[0].split("\n")[0]
        assert all(t.startswith(prefix + "\n") for t in texts)
        assert len(tok.encode(prefix)) == s
        assert s < everyone <= s + 2 + len(tok.prompt_token_ids("", kind))
        firsts.append(mine[0])
    across, across_pair = shared_prefix_report(firsts)
    assert across == across_pair == ds.shared_prefix_tokens  # only the template front (and BOS)
    assert across == template_front
    assert (template_front == 0) == (endpoint == "completions")
    note = next(n for n in ds.notes if n.startswith("Shared prefixes"))
    assert f"{groups} groups" in note and f"of {per} prompts" in note and f"{s}-token prefix" in note
    assert f"{ds.expected_prefix_hit_rate:.1%}" in note


def test_expected_hit_rate_by_hand(tok: LocalTokenizer) -> None:
    # completions, no BOS: a group shares its 20-token prefix and the separator line, 21 tokens -> one block
    config = BenchConfig(
        endpoint="completions", input_len=60, prefix_len=20, prefix_groups=3, num_prompts=12, seed=2
    )
    ds = build_dataset(config, tok)
    assert ds.group_prefix_tokens == [21, 21, 21]
    assert PREFIX_CACHE_BLOCK == 16
    # 3 groups of 4: the first of each misses, the other 3 hit 16 tokens; 12 prompts of 60 tokens
    assert ds.expected_prefix_hit_rate == pytest.approx(3 * 3 * 16 / (12 * 60))
    # two warmups (groups 0 and 1) warm those groups: 4 + 4 + 3 prompts hit
    warm = build_dataset(config.model_copy(update={"num_warmups": 2}), tok)
    assert [p.group for p in warm.warmups] == [0, 1]
    assert warm.expected_prefix_hit_rate == pytest.approx((4 + 4 + 3) * 16 / (12 * 60))
    # a warmup starts with its group's prefix
    assert warm.warmups[0].text.split("\n")[0] == warm.prompts[0].text.split("\n")[0]
    assert warm.warmups[1].text.split("\n")[0] == warm.prompts[1].text.split("\n")[0]
    # the formula: a template front shared by all groups is hit by the first prompt of every later group
    assert expected_hit_rate([100] * 4, 2, [40, 40], 20, 0) == pytest.approx((0 + 16 + 32 + 32) / 400)
    assert expected_hit_rate([100] * 4, 2, [40, 40], 20, 2) == pytest.approx(4 * 32 / 400)
    assert expected_hit_rate([], 1, [0], 0, 0) is None


def test_one_group_is_the_single_shared_prefix_of_before(tok: LocalTokenizer) -> None:
    config = BenchConfig(endpoint="completions", input_len=120, prefix_len=50, num_prompts=20, seed=0)
    ds = build_dataset(config, tok)
    prefix = ds.prompts[0].text.split("\n")[0]
    assert all(p.text.startswith(prefix + "\n") and p.group == 0 for p in ds.prompts)
    assert ds.group_prefix_tokens == [ds.shared_prefix_tokens]
    # 19 of the 20 prompts hit the full blocks of the shared front
    hit = (ds.shared_prefix_tokens // 16) * 16
    assert ds.expected_prefix_hit_rate == pytest.approx(19 * hit / (20 * 120))


def test_more_groups_than_prompts_is_refused(tok: LocalTokenizer) -> None:
    config = BenchConfig(input_len=60, prefix_len=10, prefix_groups=11, num_prompts=10)
    with pytest.raises(UserInputError, match="--prefix-groups 11 is more than the 10 prompts") as info:
        open_dataset(config, tok)
    assert "--prefix-groups 10 or fewer" in (info.value.hint or "")
    with pytest.raises(UserInputError, match="shorter --prefix-len"):
        open_dataset(BenchConfig(endpoint="completions", input_len=30, prefix_len=30, prefix_groups=2,
                                 num_prompts=4), tok)  # fmt: skip


# ---------------------------------------------------------------------------------------------------- tools
def test_request_body_carries_the_tools() -> None:
    config = BenchConfig(tools="builtin")
    body = json.loads(request_body(config, "m", "hello", 7))
    assert body["tools"] == BUILTIN_TOOLS and body["tool_choice"] == "auto" and body["max_tokens"] == 7
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "search"]
    own = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    body = json.loads(request_body(config, "m", "hello", tools=own))
    assert body["tools"] == own
    plain = json.loads(request_body(BenchConfig(), "m", "hello"))
    assert "tools" not in plain and "tool_choice" not in plain


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON"),
        ('{"type": "function"}', "non-empty JSON list"),
        ("[]", "non-empty JSON list"),
        ('[{"type": "retrieval", "function": {"name": "x"}}]', "only \"function\" tools"),
        ('[{"type": "function", "function": {}}]', "no function.name"),
        ('[{"type": "function", "function": {"name": "a", "parameters": 3}}]', "parameters that are not an object"),
        ('[{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}]',
         "appears twice"),
    ],
)  # fmt: skip
def test_a_malformed_tools_file_is_refused_naming_it(
    tok: LocalTokenizer, tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "my-tools.json"
    path.write_text(content)
    with pytest.raises(UserInputError, match=message) as info:
        load_tools(str(path))
    assert str(path) in info.value.message
    with pytest.raises(UserInputError, match=r"my-tools\.json"):  # checked when the dataset is opened
        open_dataset(BenchConfig(input_len=40, num_prompts=2, tools=str(path)), tok)


def test_a_tools_file_is_loaded_once_when_the_dataset_opens(tok: LocalTokenizer, tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    own = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    path.write_text(json.dumps(own))
    source = open_dataset(BenchConfig(input_len=40, num_prompts=2, tools=str(path)), tok)
    assert source.tools == own
    assert any("carries 1 tool (lookup) with tool_choice auto" in n for n in source.notes)
    with pytest.raises(UserInputError, match="does not exist"):
        load_tools(str(tmp_path / "missing.json"))


# --------------------------------------------------------------------------------------- through a server
def test_the_sent_bodies_carry_the_drawn_max_tokens_tools_and_groups(
    tok: LocalTokenizer, tok_dir: Path
) -> None:
    config = BenchConfig(
        input_len=48, num_prompts=18, num_warmups=2, max_concurrency=3, output_len=6, seed=4, prefix_len=8,
        prefix_groups=3, tools="builtin", scrape_metrics=False,
        output_dist=LengthDist(kind="uniform", range_ratio=0.5, min=2),
        input_dist=LengthDist(kind="normal", min=30, max=70),
    )  # fmt: skip
    ds = build_dataset(config, tok)
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(
            Endpoint(base_url=server.base_url, served_model=server.model), config, tokenizer=tok
        )
        sent = [r for r in server.records if r.path.endswith("chat/completions")]
    assert summary.completed == 18 and not summary.interrupted
    assert len(sent) == 20
    assert all(r.body["tools"] == BUILTIN_TOOLS and r.body["tool_choice"] == "auto" for r in sent)
    want = Counter(p.max_tokens for p in ds.warmups + ds.prompts)
    assert Counter(r.body["max_tokens"] for r in sent) == want
    assert len(want) > 1
    by_index = sorted(summary.requests, key=lambda r: r.index)
    assert [r.max_tokens for r in by_index] == [p.max_tokens for p in ds.prompts]
    assert [r.output_tokens for r in by_index] == [
        p.max_tokens for p in ds.prompts
    ]  # ignore_eos: all of them
    assert [r.prefix_group for r in by_index] == [i % 3 for i in range(18)]
    assert [r.prompt_len for r in by_index] == [p.prompt_len for p in ds.prompts]
    assert summary.prompt_token_check.mismatched == 0
