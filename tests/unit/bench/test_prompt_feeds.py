"""How a cell's requests are made: all of them before its clock starts (nothing but sending and timestamping in
the measured window), or by a separate process a bounded look-ahead ahead of the sender when they would not fit
the memory budget; a cancel stops the making within a fraction of a second; a sweep of 10,000 cells runs in
bounded memory; the prompts for a seed are the same however they are made (the sources stay lazy)."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import random
import threading
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import pytest

import accelbench.bench.feeds as feeds_mod
from accelbench.bench import build_dataset, run_benchmark
from accelbench.bench.datasets import open_dataset
from accelbench.bench.sweep import create_sweep_run, run_sweep, sweep_keys
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig, EndpointKind
from accelbench.domain.run import RunStatus, SweepSpec
from accelbench.domain.sweep_events import SweepEvent
from accelbench.store.repo import Store
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir


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


def _tok(tmp_path: Path) -> Path:
    return make_tokenizer_dir(tmp_path / "tok")


def _ep(server: StreamServer) -> Endpoint:
    return Endpoint(base_url=server.base_url, served_model=server.model)


# ------------------------------------------------------------------------------------ before the clock
def test_every_request_is_made_before_the_first_is_sent(tok_dir: Path, tmp_path: Path) -> None:
    n = 200
    tok = CountingTokenizer(tok_dir)
    config = BenchConfig(
        dataset="jsonl", dataset_path=str(_jsonl(tmp_path / "p.jsonl", n)), num_prompts=n, num_warmups=3,
        max_concurrency=4, output_len=2, scrape_metrics=False,
    )  # fmt: skip
    seen: list[int] = []

    def on_progress(done: int, total: int) -> None:
        seen.append(tok.counted)

    with StreamServer(Script(ttft_ms=1, itl_ms=1)) as server:
        summary = run_benchmark(_ep(server), config, tokenizer=tok, progress=on_progress)
    assert summary.completed == n
    # from the first progress tick on (the clock runs), no prompt was made: all 203 were made before it
    assert seen and set(seen) == {n + 3}
    assert not any("separate process" in note for note in summary.notes)


def test_cancel_while_the_prompts_are_made_stops_the_making_within_a_second(
    tok_dir: Path, tmp_path: Path
) -> None:
    n = 600  # 12 s of prompt making at 20 ms each
    tok = CountingTokenizer(tok_dir, sleep_s=0.02)
    config = BenchConfig(
        dataset="jsonl", dataset_path=str(_jsonl(tmp_path / "p.jsonl", n)), num_prompts=n, max_concurrency=8,
        output_len=2, scrape_metrics=False,
    )  # fmt: skip
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
    # one batch of MAKE_CHUNK prompts (1.3 s at 20 ms each) at most beyond the cancel
    assert tok.counted <= (0.3 / 0.02) + 2 * feeds_mod.MAKE_CHUNK < n
    # the batch's 20 ms sleeps run long on a busy machine: 3 s for that and the run's start and end, against the
    # 12 s of making them all
    assert elapsed < 0.3 + feeds_mod.MAKE_CHUNK * 0.02 + 3.0


# ------------------------------------------------------------------------------------ bounded memory
def test_a_cell_over_the_memory_budget_is_made_by_a_separate_process(
    tok_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 400
    config = BenchConfig(
        input_len=40, num_prompts=n, num_warmups=2, max_concurrency=2, output_len=2, scrape_metrics=False, seed=3,
    )  # fmt: skip
    tok = LocalTokenizer(tok_dir)
    expected = build_dataset(config, tok)
    monkeypatch.setattr(feeds_mod, "PREMADE_BUDGET_BYTES", 10_000)  # about 15 requests
    with StreamServer(Script(ttft_ms=0, itl_ms=0), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(_ep(server), config, tokenizer=tok)
        sent = [r.prompt for r in server.records if r.path.endswith("completions")]
    assert summary.completed == n and not summary.interrupted
    assert any("separate process" in note for note in summary.notes)
    # the same prompts (two workers may swap neighbours on the wire), the warmups first
    assert sorted(sent) == sorted(p.text for p in expected.warmups + expected.prompts)
    assert set(sent[:2]) == {p.text for p in expected.warmups}
    assert summary.prompt_token_check.mismatched == 0
    assert not multiprocessing.active_children()  # the prompt process is gone


def test_cancel_stops_a_prompt_process_at_once(
    tok_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 20_000
    config = BenchConfig(
        dataset="jsonl", dataset_path=str(_jsonl(tmp_path / "p.jsonl", 100)), num_prompts=n, max_concurrency=2,
        output_len=2, scrape_metrics=False,
    )  # fmt: skip
    monkeypatch.setattr(feeds_mod, "PREMADE_BUDGET_BYTES", 10_000)
    cancel = threading.Event()
    stamp: list[float] = []

    def on_progress(done: int, total: int) -> None:
        if done >= 60 and not cancel.is_set():
            stamp.append(time.monotonic())
            cancel.set()

    with StreamServer(Script(ttft_ms=1, itl_ms=1)) as server:
        summary = run_benchmark(_ep(server), config, tokenizer=LocalTokenizer(_tok(tmp_path)), cancel=cancel,
                                progress=on_progress)  # fmt: skip
        ended = time.monotonic()
    assert summary.interrupted and 60 <= len(summary.requests) < n
    assert stamp and ended - stamp[0] < 1.5  # well within a second or so, with the teardown
    assert not multiprocessing.active_children()


def test_a_sweep_of_ten_thousand_cells_runs_in_bounded_memory_and_cancels_within_a_second(
    store: Store, tok_dir: Path
) -> None:
    spec = SweepSpec(
        input_lens=list(range(40, 90)), concurrency=list(range(1, 51)), repeats=4, prompts_per_concurrency=1,
        output_len=1, num_warmups=0, scrape_interval_s=0.5,
    )  # fmt: skip
    assert len(sweep_keys(spec)) == 10_000
    with StreamServer(Script(ttft_ms=0, itl_ms=0), tokenizer_dir=tok_dir, model="smol") as server:
        ep = Endpoint(base_url=server.base_url, served_model="smol", tokenizer=str(tok_dir))
        run = create_sweep_run(store, ep, spec)
        cancel = threading.Event()
        cells: list[int] = []
        stamp: list[float] = []

        def progress(ev: SweepEvent) -> None:
            if ev.kind == "cell_done":
                cells.append(1)
            if len(cells) >= 40 and not cancel.is_set():
                stamp.append(time.monotonic())
                cancel.set()

        tracemalloc.start()
        try:
            outcome = run_sweep(store, run.id, ep, spec, cancel=cancel, progress=progress)
            ended = time.monotonic()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert outcome.status == RunStatus.interrupted
    assert 40 <= len(outcome.ran) < 10_000
    assert stamp and ended - stamp[0] < 1.0
    # the cells run so far are small; nothing of the 9,960 cells not run was made or held
    assert peak < 64 * 1024 * 1024


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
    real = feeds_mod.request_body

    def recording(cfg: BenchConfig, model: str, text: str, max_tokens: int | None = None) -> bytes:
        sent.append(text)
        return real(cfg, model, text, max_tokens)

    monkeypatch.setattr(feeds_mod, "request_body", recording)
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(_ep(server), config, tokenizer=tok)
    assert sent == [p.text for p in eager.warmups] + [p.text for p in eager.prompts]
    assert summary.completed == 30 and not summary.interrupted
    assert all(r.prompt_len == 48 for r in summary.requests)
    assert summary.prompt_token_check.mismatched == 0 and summary.prompt_token_check.checked == 30
    assert summary.total_input_tokens == 30 * 48


def test_a_prompt_process_makes_twice_the_concurrency_ahead_within_bounds() -> None:
    from accelbench.bench.feeds import LOOKAHEAD_MAX, LOOKAHEAD_MIN, lookahead

    assert lookahead(BenchConfig(num_prompts=2000)) == LOOKAHEAD_MAX
    assert lookahead(BenchConfig(num_prompts=2000, max_concurrency=64)) == 128
    assert lookahead(BenchConfig(num_prompts=2000, max_concurrency=2)) == LOOKAHEAD_MIN


# ------------------------------------------------------------------------------------------ peak in flight
def test_the_true_peak_in_flight_is_its_own_figure(tok_dir: Path) -> None:
    """vLLM's max_concurrent_requests counts every request that touched a one-second bucket, so a zero-delay
    server at concurrency 8 reads far above 8; peak_in_flight is what was really in flight at once."""
    config = BenchConfig(input_len=48, num_prompts=600, max_concurrency=8, output_len=2, scrape_metrics=False)
    with StreamServer(Script(ttft_ms=0, itl_ms=0), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(_ep(server), config, tokenizer=LocalTokenizer(tok_dir))
    assert summary.completed == 600
    assert 1 <= summary.peak_in_flight <= 8
    assert summary.max_concurrent_requests > 8  # vLLM's per-second definition, kept for compatibility


def test_peak_in_flight_counts_overlaps_at_one_instant() -> None:
    from accelbench.bench.metrics import peak_in_flight
    from accelbench.domain.request_record import RequestRecord

    def rec(i: int, start: float, latency: float) -> RequestRecord:
        return RequestRecord(
            index=i, prompt_len=1, output_tokens=1, start_s=start, latency_s=latency, success=True
        )

    # [0, 2), [1, 3), [2, 4): at most two at once (one ends as the third starts); [1.5, 1.6) makes three
    recs = [rec(0, 0.0, 2.0), rec(1, 1.0, 2.0), rec(2, 2.0, 2.0)]
    assert peak_in_flight(recs) == 2
    assert peak_in_flight([*recs, rec(3, 1.5, 0.1)]) == 3
    assert peak_in_flight([]) == 0
