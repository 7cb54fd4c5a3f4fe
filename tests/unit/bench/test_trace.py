"""Trace replay (the ``trace`` dataset): Mooncake-style JSONL and BurstGPT CSV are parsed and checked, prompts
have the rows' exact lengths, rows sharing hash ids share those blocks' tokens, and a replay sends each request
at the trace's time."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from accelbench.bench import build_dataset, run_benchmark
from accelbench.bench.datasets import open_dataset
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.bench.trace import BLOCK_TOKENS, read_trace, trace_format
from accelbench.bench.word_tokens import common_prefix
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig, EndpointKind
from accelbench.errors import UserInputError
from tests.support.stream_server import Script, StreamServer

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
MOONCAKE = TRACES / "mooncake_small.jsonl"
BURSTGPT = TRACES / "burstgpt_small.csv"


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _config(path: Path, **kw: object) -> BenchConfig:
    base: dict[str, object] = {"dataset": "trace", "dataset_path": str(path), "num_prompts": 100, "seed": 3}
    base.update(kw)
    return BenchConfig.model_validate(base)


# --------------------------------------------------------------------------------------------- parsing
def test_mooncake_rows_are_read_in_seconds_with_their_blocks() -> None:
    raw = _rows(MOONCAKE)
    trace = read_trace(MOONCAKE, "mooncake", 100)
    assert len(trace.rows) == len(raw) == 20 and not trace.more
    for row, obj in zip(trace.rows, raw, strict=True):
        assert row.timestamp_s == pytest.approx(float(obj["timestamp"]) / 1000.0)  # type: ignore[arg-type]
        assert row.input_length == obj["input_length"] and row.output_length == obj["output_length"]
        assert row.hash_ids == tuple(obj.get("hash_ids") or ())  # type: ignore[arg-type]
    first = read_trace(MOONCAKE, "mooncake", 5)
    assert [r.line for r in first.rows] == [1, 2, 3, 4, 5] and first.more


def test_burstgpt_rows_skip_the_failed_requests_and_ignore_other_columns() -> None:
    trace = read_trace(BURSTGPT, "burstgpt", 100)
    assert [(r.timestamp_s, r.input_length, r.output_length) for r in trace.rows] == [
        (0.0, 472, 18), (0.25, 125, 3), (1.0, 60, 5), (1.5, 338, 2), (2.5, 210, 4), (3.0, 88, 1),
    ]  # fmt: skip
    assert trace.skipped_failures == 2
    assert [r.line for r in trace.rows] == [2, 3, 5, 6, 8, 9]
    assert all(r.hash_ids == () for r in trace.rows)


def test_auto_format_goes_by_the_extension() -> None:
    assert trace_format(Path("a.jsonl"), "auto") == "mooncake"
    assert trace_format(Path("a.JSON"), "auto") == "mooncake"
    assert trace_format(Path("a.csv"), "auto") == "burstgpt"
    assert trace_format(Path("a.txt"), "burstgpt") == "burstgpt"  # given: the extension does not matter
    with pytest.raises(UserInputError, match="extension"):
        trace_format(Path("a.txt"), "auto")


@pytest.mark.parametrize(
    ("name", "fmt", "needles"),
    [
        ("unsorted.jsonl", "auto", ["unsorted.jsonl:3", "timestamp", "backwards", "line 2"]),
        ("missing_field.jsonl", "auto", ["missing_field.jsonl:2", "'input_length'"]),
        ("non_numeric.csv", "auto", ["non_numeric.csv:3", "Request tokens", "number", "'lots'"]),
        ("negative.jsonl", "auto", ["negative.jsonl:2", "input_length", "negative"]),
        ("missing_column.csv", "auto", ["missing_column.csv:1", "'Response tokens'", "column"]),
        ("empty.jsonl", "auto", ["empty.jsonl", "no requests"]),
        ("trace.txt", "auto", ["trace.txt", "extension", "'.txt'"]),
        ("burstgpt_small.csv", "mooncake", ["burstgpt_small.csv:1", "not JSON"]),
    ],
)
def test_bad_traces_are_refused_naming_the_file_line_and_field(
    tok: LocalTokenizer, name: str, fmt: str, needles: list[str]
) -> None:
    with pytest.raises(UserInputError) as err:
        open_dataset(_config(TRACES / name, trace_format=fmt), tok)
    for needle in needles:
        assert needle in err.value.message, (needle, err.value.message)


def test_more_bad_values_are_refused(tok: LocalTokenizer, tmp_path: Path) -> None:
    cases = {
        '{"timestamp": 0, "input_length": 10.5, "output_length": 2}': "whole number",
        '{"timestamp": "soon", "input_length": 10, "output_length": 2}': "timestamp must be a number",
        '{"timestamp": 0, "input_length": 10, "output_length": 0}': "output_length must be at least 1",
        '{"timestamp": 0, "input_length": 10, "output_length": true}': "output_length must be a number",
        '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1, -2]}': "hash_ids",
        '{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": 7}': "hash_ids",
        "[1, 2, 3]": "not a JSON object",
    }
    for line, needle in cases.items():
        path = tmp_path / "bad.jsonl"
        path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2}\n' + line + "\n")
        with pytest.raises(UserInputError) as err:
            open_dataset(_config(path), tok)
        assert "bad.jsonl:2" in err.value.message and needle in err.value.message, err.value.message
    only_failures = tmp_path / "failed.csv"
    only_failures.write_text("Timestamp,Request tokens,Response tokens\n0,10,0\n1,12,0\n")
    with pytest.raises(UserInputError, match=r"no requests.*2 failed rows"):
        open_dataset(_config(only_failures), tok)


def test_only_the_rows_replayed_are_read(tok: LocalTokenizer, tmp_path: Path) -> None:
    """A streaming read: what lies after the rows needed (here a broken line) is never parsed."""
    path = tmp_path / "big.jsonl"
    good = "".join(
        json.dumps({"timestamp": i, "input_length": 30, "output_length": 1}) + "\n" for i in range(4)
    )
    path.write_text(good + "this is not json\n" + good)
    source = open_dataset(_config(path, num_prompts=3, num_warmups=2), tok)
    assert source.count == 3 and len(list(source.stream())) == 5
    assert any("Only the first 3 rows" in n for n in source.notes)
    with pytest.raises(UserInputError, match=r"big\.jsonl:5 is not JSON"):
        open_dataset(_config(path, num_prompts=10), tok)


# --------------------------------------------------------------------------------------------- prompts
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_prompts_have_the_rows_exact_lengths_and_max_tokens(tok: LocalTokenizer, endpoint: str) -> None:
    rows = _rows(MOONCAKE)
    config = _config(MOONCAKE, endpoint=endpoint, num_prompts=50, num_warmups=3)
    ds = build_dataset(config, tok)
    kind = EndpointKind(endpoint)
    assert len(ds.prompts) == 20 and len(ds.warmups) == 3  # the trace has only 20 rows: all are replayed
    for p, row in zip(ds.prompts, rows, strict=True):
        assert p.prompt_len == row["input_length"] == tok.count_prompt(p.text, kind)
        assert p.max_tokens == row["output_length"]
    for w, row in zip(ds.warmups, rows, strict=False):  # warmups: the first rows' lengths, text of their own
        assert w.prompt_len == row["input_length"] == tok.count_prompt(w.text, kind)
        assert w.max_tokens == row["output_length"]
    texts = {p.text for p in ds.prompts}
    assert len(texts) == 20 and not texts & {w.text for w in ds.warmups}
    notes = " ".join(ds.notes)
    assert "mooncake_small.jsonl" in notes and "Mooncake JSONL" in notes and "20 rows replayed" in notes
    assert "over 0.645 s" in notes and "time scale 1" in notes and "only 20 rows; 50 were asked" in notes
    mean_in = sum(int(r["input_length"]) for r in rows) / 20  # type: ignore[call-overload]
    assert f"mean input {mean_in:.1f} tokens" in notes
    assert "10 of 20 rows share 512-token blocks" in notes
    # the same prompts however they are made
    again = open_dataset(config, tok)
    assert [p.text for p in again.stream(chunk=3)][3:] == [p.text for p in ds.prompts]


def test_burstgpt_prompts_have_the_rows_lengths(tok: LocalTokenizer) -> None:
    config = _config(BURSTGPT, endpoint="completions", num_prompts=4)
    ds = build_dataset(config, tok)
    assert [(p.prompt_len, p.max_tokens) for p in ds.prompts] == [(472, 18), (125, 3), (60, 5), (338, 2)]
    assert all(tok.count_prompt(p.text, EndpointKind.completions) == p.prompt_len for p in ds.prompts)
    notes = " ".join(ds.notes)
    assert "BurstGPT CSV" in notes and "4 rows replayed" in notes and "Only the first 4 rows" in notes
    assert "2 rows with 0 response tokens" in notes


def test_a_row_shorter_than_the_template_is_sent_at_the_shortest_length(
    tok: LocalTokenizer, tmp_path: Path
) -> None:
    path = tmp_path / "short.csv"
    path.write_text("Timestamp,Request tokens,Response tokens\n0,0,3\n0.5,40,2\n")
    ds = build_dataset(_config(path, endpoint="chat"), tok)
    shortest = tok.count_prompt("", EndpointKind.chat) + 1
    assert [p.prompt_len for p in ds.prompts] == [shortest, 40]
    assert all(tok.count_prompt(p.text, EndpointKind.chat) == p.prompt_len for p in ds.prompts)
    assert any(f"sent with {shortest} tokens" in n for n in ds.notes)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_rows_sharing_hash_ids_share_exactly_those_blocks(tok: LocalTokenizer, endpoint: str) -> None:
    rows = _rows(MOONCAKE)
    kind = EndpointKind(endpoint)
    source = open_dataset(_config(MOONCAKE, endpoint=endpoint), tok)
    ds = build_dataset(_config(MOONCAKE, endpoint=endpoint), tok)
    front = source.shared_prefix_tokens
    ids = [tok.prompt_token_ids(p.text, kind) for p in ds.prompts]
    checked = 0
    for a in range(20):
        for b in range(a + 1, 20):
            ha = list(rows[a].get("hash_ids") or [])  # type: ignore[call-overload]
            hb = list(rows[b].get("hash_ids") or [])  # type: ignore[call-overload]
            k = common_prefix(ha, hb)
            # only whole blocks count (a row's last block is cut to its length)
            room = min(int(rows[a]["input_length"]), int(rows[b]["input_length"])) - front  # type: ignore[call-overload]
            k = min(k, room // BLOCK_TOKENS)
            common = common_prefix(ids[a], ids[b])
            if k:
                checked += 1
                # the shared blocks' tokens, all of them, and not much more (the next blocks differ)
                assert front + k * BLOCK_TOKENS <= common < front + k * BLOCK_TOKENS + 4, (a, b, k, common)
            else:
                assert common < front + 4, (a, b, common)
    assert checked == 10 + 10  # 5 rows share blocks 1 and 2 (10 pairs), 5 others share block 10 (10 pairs)
    # the sharing the notes promise, and the ideal hit ratio of a cache that keeps every block
    assert source.expected_prefix_hit_rate is not None and 0 < source.expected_prefix_hit_rate < 1


def test_blocks_depend_on_the_seed(tok: LocalTokenizer) -> None:
    a = build_dataset(_config(MOONCAKE, num_prompts=5), tok)
    b = build_dataset(_config(MOONCAKE, num_prompts=5, seed=4), tok)
    assert not {p.text for p in a.prompts} & {p.text for p in b.prompts}


# --------------------------------------------------------------------------------------------- timing
def test_offsets_are_the_trace_times_scaled(tok: LocalTokenizer) -> None:
    rows = _rows(MOONCAKE)
    t0 = float(rows[0]["timestamp"])  # type: ignore[arg-type]
    want = [(float(r["timestamp"]) - t0) / 1000.0 for r in rows]  # type: ignore[arg-type]
    one = open_dataset(_config(MOONCAKE), tok)
    half = open_dataset(_config(MOONCAKE, time_scale=0.5), tok)
    slow = open_dataset(_config(MOONCAKE, time_scale=3.0), tok)
    assert one.offsets is not None and half.offsets is not None and slow.offsets is not None
    assert one.offsets == pytest.approx(want) and one.offsets[0] == 0.0
    assert half.offsets == pytest.approx([x * 0.5 for x in want])
    assert slow.offsets == pytest.approx([x * 3.0 for x in want])
    assert any("time scale 0.5" in n and "over 0.323 s" in n for n in half.notes)
    burst = open_dataset(_config(BURSTGPT, time_scale=2.0), tok)
    assert burst.offsets == pytest.approx([0.0, 0.5, 2.0, 3.0, 5.0, 6.0])


def test_a_replay_sends_each_request_at_its_trace_time(tok: LocalTokenizer, tok_dir: Path) -> None:
    """The client's sends against the trace: planned times are the trace's offsets; the scheduling lag
    (start_s - planned_send_s) is small; the server saw the same spacing."""
    rows = _rows(MOONCAKE)
    scale = 1.5
    config = _config(MOONCAKE, endpoint="completions", num_prompts=20, num_warmups=2, time_scale=scale,
                     scrape_metrics=False)  # fmt: skip
    source = open_dataset(config, tok)
    assert source.offsets is not None
    offsets = source.offsets
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(
            Endpoint(base_url=server.base_url, served_model=server.model), config, tokenizer=tok
        )
        arrivals = sorted(r.received for r in server.records if r.path.endswith("completions"))
    assert summary.completed == 20 and not summary.interrupted
    recs = sorted(summary.requests, key=lambda r: r.index)
    assert [r.index for r in recs] == list(range(20))
    assert [r.max_tokens for r in recs] == [row["output_length"] for row in rows]
    assert [r.prompt_len for r in recs] == [row["input_length"] for row in rows]
    assert summary.prompt_token_check.checked == 20 and summary.prompt_token_check.mismatched == 0
    # the plan is the trace (no concurrency limit: a request is due at its trace time)
    assert [r.planned_send_s for r in recs] == pytest.approx(offsets, abs=1e-9)
    lags = np.array([r.start_s - offsets[r.index] for r in recs])
    assert np.allclose(lags, [r.scheduling_lag_s for r in recs])
    # the server's arrivals (warmups first, then the trace) keep the trace's spacing
    measured = np.array(arrivals[2:]) - arrivals[2]
    spacing = measured - np.array(offsets)
    abs_lag = np.abs(lags)
    print(
        f"\ntrace replay send lag over {len(lags)} requests: p50 {np.percentile(abs_lag, 50) * 1e3:.3f} ms, "
        f"p99 {np.percentile(abs_lag, 99) * 1e3:.3f} ms, max {abs_lag.max() * 1e3:.3f} ms; server-side spacing "
        f"error p50 {np.percentile(np.abs(spacing), 50) * 1e3:.3f} ms, max {np.abs(spacing).max() * 1e3:.3f} ms; "
        f"summary scheduling_lag_ms p50 {summary.scheduling_lag_ms.p50:.3f} p99 {summary.scheduling_lag_ms.p99:.3f}"
    )
    assert (lags >= -1e-6).all()  # never early
    assert np.median(abs_lag) <= 0.005
    assert abs_lag.max() <= 0.050  # generous: a loaded shared machine
    assert np.median(np.abs(spacing)) <= 0.010 and np.abs(spacing).max() <= 0.060
    assert any("20 rows replayed" in n for n in summary.notes)
