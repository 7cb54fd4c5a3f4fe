"""Prompts are made lazily (issue 14): a benchmark takes them as it sends, a bounded look-ahead ahead of the
sender; a cancel stops the prompt making too; the prompts for a seed are the same however they are made."""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import accelbench.bench.runner as runner_mod
from accelbench.bench import build_dataset, run_benchmark
from accelbench.bench.datasets import open_dataset
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.domain.bench import BenchConfig, Endpoint, EndpointKind
from tests.support.stream_server import Script, StreamServer


class CountingTokenizer(LocalTokenizer):
    """Counts the prompts it is asked to count (one per prompt made, for a file dataset); sleeps per prompt."""

    def __init__(self, directory: Path, sleep_s: float = 0.0) -> None:
        super().__init__(directory)
        self.sleep_s = sleep_s
        self.counted = 0
        self._lock = threading.Lock()

    def prompt_token_ids_batch(self, texts: Sequence[str], endpoint: EndpointKind) -> list[list[int]]:
        with self._lock:
            self.counted += len(texts)
        if self.sleep_s:
            time.sleep(self.sleep_s * len(texts))
        return super().prompt_token_ids_batch(texts, endpoint)


def _jsonl(path: Path, n: int) -> Path:
    path.write_text(
        "".join(json.dumps({"prompt": f"prompt number {i} of the file"}) + "\n" for i in range(n))
    )
    return path


def _ep(server: StreamServer) -> Endpoint:
    return Endpoint(base_url=server.base_url, served_model=server.model)


# --------------------------------------------------------------------------------------------- cancel
def test_cancel_while_prompts_are_slow_to_make_returns_with_what_was_sent(
    tok_dir: Path, tmp_path: Path
) -> None:
    # 500 prompts at 20 ms each take 10 s to make: the old runner made them all before the first send
    n = 500
    tok = CountingTokenizer(tok_dir, sleep_s=0.02)
    config = BenchConfig(
        dataset="jsonl", dataset_path=str(_jsonl(tmp_path / "p.jsonl", n)), num_prompts=n, max_concurrency=2,
        output_len=2, scrape_metrics=False,
    )  # fmt: skip
    cancel = threading.Event()

    def on_progress(done: int, total: int) -> None:
        if done >= 3:
            cancel.set()

    with StreamServer(Script(ttft_ms=1, itl_ms=1)) as server:
        t = time.monotonic()
        summary = run_benchmark(_ep(server), config, tokenizer=tok, cancel=cancel, progress=on_progress)
        elapsed = time.monotonic() - t
    assert summary.interrupted
    assert summary.completed >= 3
    assert len(summary.requests) < n
    assert all(r.success or r.error == "cancelled" for r in summary.requests)
    assert all(r.prompt_len > 0 for r in summary.requests)  # each request kept its prompt's token count
    # the rest was never made: at most the look-ahead and one round beyond what was sent
    bound = len(summary.requests) + runner_mod.lookahead(config) + runner_mod.PROMPT_CHUNK + 2
    assert tok.counted <= bound < n
    assert elapsed < 8.0  # generous: the old runner needed 10 s to make the prompts alone


def test_cancel_before_the_first_send_stops_the_prompt_making(tok_dir: Path, tmp_path: Path) -> None:
    n = 600  # 12 s of prompt making at 20 ms each
    tok = CountingTokenizer(tok_dir, sleep_s=0.02)
    config = BenchConfig(
        dataset="jsonl",
        dataset_path=str(_jsonl(tmp_path / "p.jsonl", n)),
        num_prompts=n,
        output_len=2,
        scrape_metrics=False,
    )  # fmt: skip  (no max_concurrency: a look-ahead of LOOKAHEAD_MAX requests is made before the first send)
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    with StreamServer(Script(ttft_ms=1, itl_ms=1)) as server:
        t = time.monotonic()
        timer.start()
        summary = run_benchmark(_ep(server), config, tokenizer=tok, cancel=cancel)
        elapsed = time.monotonic() - t
        timer.join()
        assert not [r for r in server.records if r.path.endswith("completions")]
    assert summary.interrupted and summary.requests == []
    assert tok.counted < n // 2
    assert elapsed < 6.0  # generous: making every prompt takes 12 s


# ------------------------------------------------------------------------------------ bounded memory
def test_a_large_cell_makes_prompts_only_a_look_ahead_ahead_of_sending(tok_dir: Path, tmp_path: Path) -> None:
    n = 5000
    tok = CountingTokenizer(tok_dir)
    config = BenchConfig(
        dataset="jsonl", dataset_path=str(_jsonl(tmp_path / "p.jsonl", 100)), num_prompts=n, max_concurrency=2,
        output_len=2, scrape_metrics=False,
    )  # fmt: skip
    cancel = threading.Event()
    ahead: list[int] = []

    def on_progress(done: int, total: int) -> None:
        ahead.append(tok.counted - done)
        if done >= 60:
            cancel.set()

    with StreamServer(Script(ttft_ms=1, itl_ms=1)) as server:
        summary = run_benchmark(_ep(server), config, tokenizer=tok, cancel=cancel, progress=on_progress)
    sent = len(summary.requests)
    assert 60 <= sent < n
    bound = runner_mod.lookahead(config) + runner_mod.PROMPT_CHUNK + config.max_concurrency + 2
    assert tok.counted <= sent + bound
    assert ahead and max(ahead) <= bound


def test_the_random_source_makes_only_what_is_taken(tok_dir: Path) -> None:
    tok = CountingTokenizer(tok_dir)
    config = BenchConfig(endpoint="completions", input_len=40, num_prompts=100_000, seed=5)
    source = open_dataset(config, tok)
    assert source.count == 100_000 and source.shared_prefix_tokens >= 0
    before = tok.counted
    taken = list(itertools.islice(source.stream(chunk=4), 10))
    assert len(taken) == 10 and source.made == 10
    assert all(tok.count_prompt(p.text, EndpointKind.completions) == 40 for p in taken)
    # at most 3 chunks of 4, each a few fit rounds: nowhere near 100,000 prompts
    assert tok.counted - before < 12 * 10
    stopped = list(source.stream(chunk=4, stop=lambda: True))
    assert stopped == []


# ------------------------------------------------------------------------------- same seed, same prompts
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_random_prompts_do_not_depend_on_how_they_are_made(tok: LocalTokenizer, endpoint: str) -> None:
    config = BenchConfig(endpoint=endpoint, input_len=50, prefix_len=6, num_prompts=40, num_warmups=5, seed=9)
    eager = build_dataset(config, tok)
    texts = [p.text for p in eager.warmups + eager.prompts]
    assert len(texts) == 45 and len(set(texts)) == 45
    for chunk in (1, 3, 16, 64):
        source = open_dataset(config, tok)
        assert [p.text for p in source.stream(chunk=chunk)] == texts
    again = build_dataset(config, tok)
    assert [p.text for p in again.prompts] == [p.text for p in eager.prompts]
    assert again.shared_prefix_tokens == eager.shared_prefix_tokens > 6
    # the measured prompts are the same with or without warmups asked for (no accidental sharing assumed)
    alone = build_dataset(config, tok, warmups=0)
    assert [p.text for p in alone.prompts] == [p.text for p in eager.prompts]
    other = build_dataset(config.model_copy(update={"seed": 10}), tok)
    assert not {p.text for p in other.prompts} & set(texts)


def test_file_prompts_are_the_ones_the_eager_sampler_picked(tok: LocalTokenizer, tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "p.jsonl", 7)
    config = BenchConfig(dataset="jsonl", dataset_path=str(path), num_prompts=10, num_warmups=3, seed=4)
    texts = [json.loads(line)["prompt"] for line in path.read_text().splitlines()]
    # what the sampler has always done: shuffle with the seed, cycle, the warmups are the last ones
    order = list(range(len(texts)))
    random.Random(4).shuffle(order)
    picked = [texts[order[i % len(order)]] for i in range(13)]
    ds = build_dataset(config, tok)
    assert [p.text for p in ds.prompts] == picked[:10]
    assert [p.text for p in ds.warmups] == picked[10:]
    assert all(p.prompt_len == tok.count_prompt(p.text, EndpointKind.chat) for p in ds.prompts)
    assert [p.text for p in open_dataset(config, tok).stream(chunk=2)] == picked[10:] + picked[:10]


def test_the_runner_sends_the_eager_prompts_in_order_and_counts_right(
    tok: LocalTokenizer, tok_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = BenchConfig(input_len=48, num_prompts=30, num_warmups=4, max_concurrency=3, output_len=3, seed=2)
    eager = build_dataset(config, tok)
    sent: list[str] = []
    real = runner_mod.request_body

    def recording(cfg: BenchConfig, model: str, text: str, max_tokens: int | None = None) -> bytes:
        sent.append(text)
        return real(cfg, model, text, max_tokens)

    monkeypatch.setattr(runner_mod, "request_body", recording)
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(_ep(server), config, tokenizer=tok)
    assert sent == [p.text for p in eager.warmups] + [p.text for p in eager.prompts]
    assert summary.completed == 30 and not summary.interrupted
    assert all(r.prompt_len == 48 for r in summary.requests)
    assert summary.prompt_token_check.mismatched == 0 and summary.prompt_token_check.checked == 30
    assert summary.total_input_tokens == 30 * 48


def test_a_burst_has_every_request_made_before_the_clock_starts() -> None:
    """All at once with no concurrency limit: sent as they are made, the burst would be paced by the tokenizer."""
    from accelbench.bench.runner import LOOKAHEAD_MAX, lookahead
    from accelbench.domain.bench import BenchConfig

    assert lookahead(BenchConfig(num_prompts=2000)) == 2000
    assert lookahead(BenchConfig(num_prompts=2000, request_rate=5.0)) == LOOKAHEAD_MAX
    assert lookahead(BenchConfig(num_prompts=2000, max_concurrency=4)) < 2000
