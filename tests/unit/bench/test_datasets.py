"""Datasets: exact token counts as the server counts them (chat template included), no accidental shared prefix,
a deliberate one when asked, distinct warmups, jsonl and ShareGPT files; and the tokenizers behind them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.bench.datasets import DATASETS, build_dataset
from accelbench.bench.tokenizer import LocalTokenizer, ServerTokenizer, load_tokenizer
from accelbench.bench.word_tokens import shared_prefix_report, token_pool
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig, EndpointKind
from accelbench.errors import NotFoundError, UserInputError
from tests.support.stream_server import FixtureTokenizer, StreamServer


def server_count(fixture: FixtureTokenizer, text: str, endpoint: str) -> int:
    """How the fixture server (independent code) counts a prompt."""
    if endpoint == "chat":
        return len(fixture.encode(fixture.render_chat([{"role": "user", "content": text}]), False))
    return len(fixture.encode(text, True))


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("input_len", [40, 128, 513])
def test_random_prompts_have_exactly_input_len_server_tokens(
    tok_dir: Path, endpoint: str, input_len: int
) -> None:
    tok = LocalTokenizer(tok_dir)
    config = BenchConfig(endpoint=endpoint, input_len=input_len, num_prompts=30, seed=5)
    ds = build_dataset(config, tok)
    fixture = FixtureTokenizer(tok_dir)
    assert len(ds.prompts) == 30
    for p in ds.prompts:
        assert p.prompt_len == input_len
        assert server_count(fixture, p.text, endpoint) == input_len


def test_exact_with_a_tokenizer_that_adds_bos(bos_tok_dir: Path) -> None:
    tok = LocalTokenizer(bos_tok_dir)
    fixture = FixtureTokenizer(bos_tok_dir)
    ds = build_dataset(BenchConfig(endpoint="completions", input_len=64, num_prompts=10), tok)
    assert all(server_count(fixture, p.text, "completions") == 64 for p in ds.prompts)
    assert all(fixture.encode(p.text, True)[0] == tok.encode("<|endoftext|>")[0] for p in ds.prompts)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_no_accidental_shared_prefix(tok_dir: Path, endpoint: str) -> None:
    tok = LocalTokenizer(tok_dir)
    ds = build_dataset(BenchConfig(endpoint=endpoint, input_len=100, num_prompts=200, seed=1), tok)
    ids = [tok.prompt_token_ids(p.text, EndpointKind(endpoint)) for p in ds.prompts]
    everyone, pair_max = shared_prefix_report(ids)
    # what every prompt shares is only what the template puts in front of a message (nothing for completions)
    front = tok.prompt_token_ids("", EndpointKind(endpoint))
    if endpoint == "completions":
        assert everyone == 0
    else:
        assert 0 < everyone <= len(front)
    assert pair_max == everyone, "two prompts share more leading tokens than all prompts do"
    # and the first own token of every prompt is different
    firsts = {tuple(t[everyone : everyone + 1]) for t in ids}
    assert len(firsts) == 200
    if endpoint == "chat":
        assert any("chat template puts the same" in n for n in ds.notes)


def test_deliberate_shared_prefix(tok_dir: Path) -> None:
    tok = LocalTokenizer(tok_dir)
    config = BenchConfig(endpoint="completions", input_len=120, prefix_len=50, num_prompts=20)
    ds = build_dataset(config, tok)
    ids = [tok.prompt_token_ids(p.text, EndpointKind.completions) for p in ds.prompts]
    assert all(len(t) == 120 for t in ids)
    everyone, pair_max = shared_prefix_report(ids)
    assert everyone >= 50 and everyone <= 52  # the prefix and its separator line
    assert pair_max == everyone
    texts = [p.text for p in ds.prompts]
    prefix = texts[0].split("\n")[0]
    assert all(t.startswith(prefix + "\n") for t in texts)
    assert len(tok.encode(prefix)) == 50


def test_warmups_are_distinct_from_measured_prompts(tok_dir: Path) -> None:
    tok = LocalTokenizer(tok_dir)
    ds = build_dataset(BenchConfig(input_len=60, num_prompts=10, num_warmups=4), tok)
    assert len(ds.prompts) == 10 and len(ds.warmups) == 4
    assert not {p.text for p in ds.prompts} & {w.text for w in ds.warmups}


def test_same_seed_same_prompts_other_seed_other_prompts(tok_dir: Path) -> None:
    tok = LocalTokenizer(tok_dir)
    a = build_dataset(BenchConfig(input_len=60, num_prompts=5, seed=1), tok)
    b = build_dataset(BenchConfig(input_len=60, num_prompts=5, seed=1), tok)
    c = build_dataset(BenchConfig(input_len=60, num_prompts=5, seed=2), tok)
    assert [p.text for p in a.prompts] == [p.text for p in b.prompts]
    assert not {p.text for p in a.prompts} & {p.text for p in c.prompts}


def test_server_tokenizer_builds_the_same_exact_prompts(tok_dir: Path) -> None:
    local = LocalTokenizer(tok_dir)
    with StreamServer(tokenizer_dir=tok_dir) as server:
        remote = load_tokenizer(Endpoint(base_url=server.base_url, served_model="fixture-model"))
        assert isinstance(remote, ServerTokenizer)
        for endpoint in ("chat", "completions"):
            config = BenchConfig(endpoint=endpoint, input_len=90, num_prompts=12, seed=4)
            via_server = build_dataset(config, remote)
            via_local = build_dataset(config, local)
            assert [p.text for p in via_server.prompts] == [p.text for p in via_local.prompts]
            assert all(remote.count_prompt(p.text, EndpointKind(endpoint)) == 90 for p in via_server.prompts)
        remote.close()


def test_input_len_too_small_for_the_template(tok_dir: Path) -> None:
    tok = LocalTokenizer(tok_dir)
    front = tok.count_prompt("", EndpointKind.chat)
    with pytest.raises(UserInputError, match=f"Use --input-len {front + 1} or more"):
        build_dataset(BenchConfig(input_len=front, num_prompts=2), tok)
    with pytest.raises(UserInputError, match="shorter --prefix-len"):
        build_dataset(BenchConfig(endpoint="completions", input_len=30, prefix_len=30, num_prompts=2), tok)
    # the smallest possible length works
    ds = build_dataset(BenchConfig(input_len=front + 1, num_prompts=3), tok)
    assert all(tok.count_prompt(p.text, EndpointKind.chat) == front + 1 for p in ds.prompts)


def test_random_needs_a_tokenizer() -> None:
    with pytest.raises(UserInputError, match="needs a tokenizer"):
        build_dataset(BenchConfig(num_prompts=2), None)


def test_token_pool_holds_only_plain_word_tokens(tok: LocalTokenizer) -> None:
    pool = token_pool(tok)
    assert len(pool) > 200
    assert not set(pool.tolist()) & tok.special_ids
    for text in tok.decode_batch([[int(i)] for i in pool[:300]]):
        assert text.strip() and "\n" not in text and "\ufffd" not in text


def test_jsonl_dataset(tmp_path: Path, tok: LocalTokenizer) -> None:
    path = tmp_path / "p.jsonl"
    rows = [{"prompt": f"question number {i}", "output_tokens": 9} for i in range(5)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    ds = build_dataset(BenchConfig(dataset="jsonl", dataset_path=str(path), num_prompts=5, seed=2), tok)
    assert sorted(p.text for p in ds.prompts) == sorted(r["prompt"] for r in rows)
    assert all(p.prompt_len == tok.count_prompt(p.text, EndpointKind.chat) for p in ds.prompts)
    assert ds.notes == []
    more = build_dataset(BenchConfig(dataset="jsonl", dataset_path=str(path), num_prompts=8), None)
    assert len(more.prompts) == 8 and more.prompts[0].prompt_len is None
    assert any("prompts repeat" in n for n in more.notes)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "ok"}\nnot json\n', "p.jsonl:2 is not JSON"),
        ('{"text": "x"}\n', 'p.jsonl:1 has no "prompt" string'),
        ("\n\n", "has no prompts"),
    ],
)
def test_jsonl_errors_name_the_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(UserInputError, match=message):
        build_dataset(BenchConfig(dataset="jsonl", dataset_path=str(path), num_prompts=1), None)


def test_file_datasets_need_an_existing_path(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="--dataset-path"):
        build_dataset(BenchConfig(dataset="jsonl", num_prompts=1), None)
    with pytest.raises(UserInputError, match="does not exist"):
        build_dataset(
            BenchConfig(dataset="sharegpt", dataset_path=str(tmp_path / "nope.json"), num_prompts=1), None
        )


def test_sharegpt_dataset_filters_like_vllm(tmp_path: Path, tok: LocalTokenizer) -> None:
    long_text = " ".join(["token"] * 1500)
    data = [
        {
            "id": "a",
            "conversations": [
                {"from": "human", "value": "What is the capital of France, please?"},
                {"from": "gpt", "value": "Paris."},
            ],
        },
        {"id": "b", "conversations": [{"from": "human", "value": "Only one turn"}]},
        {"id": "c", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
        {"id": "d", "conversations": [{"from": "human", "value": long_text}, {"from": "gpt", "value": "ok"}]},
        {
            "id": "e",
            "conversations": [
                {"from": "human", "value": "Tell me about the river and the mountain."},
                {"from": "gpt", "value": "Sure."},
            ],
        },
    ]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    config = BenchConfig(dataset="sharegpt", dataset_path=str(path), endpoint="completions", num_prompts=2)
    ds = build_dataset(config, tok)
    assert {p.text for p in ds.prompts} == {data[0]["conversations"][0]["value"],
                                            data[4]["conversations"][0]["value"]}  # fmt: skip
    assert any("2 ShareGPT prompts were skipped" in n for n in ds.notes)
    # without a tokenizer only the structure is checked
    ds2 = build_dataset(config.model_copy(update={"num_prompts": 4}), None)
    assert len({p.text for p in ds2.prompts}) == 4


def test_sharegpt_not_a_list(tmp_path: Path) -> None:
    path = tmp_path / "sg.json"
    path.write_text('{"conversations": []}')
    with pytest.raises(UserInputError, match="JSON list"):
        build_dataset(BenchConfig(dataset="sharegpt", dataset_path=str(path), num_prompts=1), None)


def test_dataset_registry_has_the_four_and_suggests() -> None:
    assert DATASETS.names() == ["jsonl", "random", "sharegpt", "trace"]
    with pytest.raises(NotFoundError, match="Did you mean 'random'"):
        DATASETS.get("randon")


# ------------------------------------------------------------------------------------------- tokenizers
def test_local_chat_rendering_matches_the_independent_fixture(tok_dir: Path) -> None:
    tok = LocalTokenizer(tok_dir)
    fixture = FixtureTokenizer(tok_dir)
    for text in ["hello", "  spaced  ", "line\nbreak", ""]:
        assert tok.render_chat(text) == fixture.render_chat([{"role": "user", "content": text}])
        assert tok.prompt_token_ids(text, EndpointKind.chat) == fixture.encode(
            fixture.render_chat([{"role": "user", "content": text}]), False
        )


def test_template_that_trims_content_is_rendered_in_full(tmp_path: Path, tok_dir: Path) -> None:
    d = tmp_path / "trim"
    d.mkdir()
    (d / "tokenizer.json").write_text((tok_dir / "tokenizer.json").read_text())
    cfg = json.loads((tok_dir / "tokenizer_config.json").read_text())
    cfg["chat_template"] = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    tok = LocalTokenizer(d)
    assert tok.render_chat("  x  ") == "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
    ds = build_dataset(BenchConfig(input_len=40, num_prompts=5), tok)
    assert all(tok.count_prompt(p.text, EndpointKind.chat) == 40 for p in ds.prompts)


def test_chat_template_from_its_own_file_and_missing_template(tmp_path: Path, tok_dir: Path) -> None:
    d = tmp_path / "jinja"
    d.mkdir()
    (d / "tokenizer.json").write_text((tok_dir / "tokenizer.json").read_text())
    (d / "chat_template.jinja").write_text("{% for m in messages %}[{{ m['content'] }}]{% endfor %}")
    assert LocalTokenizer(d).render_chat("a") == "[a]"
    (d / "chat_template.jinja").unlink()
    bare = LocalTokenizer(d)
    with pytest.raises(UserInputError, match="no chat template"):
        bare.render_chat("a")
    ds = build_dataset(BenchConfig(endpoint="completions", input_len=20, num_prompts=2), bare)
    assert len(ds.prompts) == 2


def test_load_tokenizer_errors(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="does not exist"):
        load_tokenizer(
            Endpoint(base_url="http://127.0.0.1:9", served_model="m", tokenizer=str(tmp_path / "x"))
        )
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserInputError, match=r"no tokenizer\.json"):
        LocalTokenizer(empty)
    with StreamServer() as server, pytest.raises(UserInputError, match="--tokenizer DIR"):
        load_tokenizer(Endpoint(base_url=server.base_url, served_model="fixture-model"))


def test_output_counting(tok: LocalTokenizer) -> None:
    assert tok.count_output([" alpha bravo", ""]) == [2, 0]


def test_special_ids_local_and_server(tok_dir: Path) -> None:
    local = LocalTokenizer(tok_dir)
    markers = {local.encode(m)[0] for m in ("<|im_start|>", "<|im_end|>")}
    assert markers <= local.special_ids
    with StreamServer(tokenizer_dir=tok_dir) as server:
        remote = ServerTokenizer(Endpoint(base_url=server.base_url, served_model="fixture-model"))
        assert remote.special_ids == markers
        remote.close()
