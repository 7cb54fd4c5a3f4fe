"""run_benchmark against the in-repo streaming server: failures with their reasons while the run goes on, a server
that is gone, cancellation, duration, warmups, schedules, usage and tokenizer counting, telemetry, keep-alive."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import socket
import threading
import time
from pathlib import Path

import pytest

from accelbench.bench import arun_benchmark, build_dataset, run_benchmark
from accelbench.bench import summary as summary_mod
from accelbench.bench.schedule import send_times
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from tests.support.stream_server import Script, StreamServer


def ep(server: StreamServer, tok_dir: Path | None = None, **kw: object) -> Endpoint:
    return Endpoint(
        base_url=server.base_url,
        served_model=server.model,
        tokenizer=str(tok_dir) if tok_dir else None,
        **kw,  # type: ignore[arg-type]
    )


def directive(**script: object) -> str:
    return f"Tell me a story [[fixture:{json.dumps(script)}]]"


def write_jsonl(path: Path, prompts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    return path


def completions(server: StreamServer) -> list:
    return [r for r in server.records if r.path.endswith("completions")]


FAULTS: dict[str, tuple[dict[str, object], str | None]] = {
    # name -> (fixture directive, expected error prefix; None = success)
    "ok-plain": ({}, None),
    "ok-comments": ({"comments": True}, None),
    "ok-role-late": ({"role_ms": 1.0, "ttft_ms": 20}, None),
    "ok-usage-with-choices": ({"usage": "with_choices"}, None),
    "ok-crlf": ({"crlf": True}, None),
    "http-500": ({"status": 500, "error_message": "engine overloaded"}, "HTTP 500: engine overloaded"),
    "http-400": (
        {"status": 400, "error_style": "vllm", "error_message": "prompt too long"},
        "HTTP 400: prompt too long",
    ),
    "hang": ({"hang": True}, "timeout: no complete response within 1.5 s"),
    "hang-mid-stream": ({"hang_after": 2}, "timeout: no complete response within 1.5 s"),
    "cut": ({"cut_after": 3}, "connection closed mid-stream"),
    "malformed": ({"malformed_after": 2}, "malformed JSON in stream event"),
    "error-event": ({"error_event_after": 1}, "server error in stream: fixture in-stream error"),
}


def test_each_fault_is_a_failed_request_with_its_reason_and_the_run_goes_on(
    tmp_path: Path, tok_dir: Path
) -> None:
    names = list(FAULTS)
    data = write_jsonl(tmp_path / "faults.jsonl", [directive(**FAULTS[n][0]) + f" #{n}" for n in names])
    config = BenchConfig(
        dataset="jsonl", dataset_path=str(data), num_prompts=len(names), max_concurrency=4, output_len=6,
        timeout_s=1.5, seed=3,
    )  # fmt: skip
    with StreamServer(Script(ttft_ms=2, itl_ms=2), tokenizer_dir=tok_dir) as server:
        tokenizer = LocalTokenizer(tok_dir)
        summary = run_benchmark(ep(server, tok_dir), config, tokenizer=tokenizer)
    order = [p.text.rsplit("#", 1)[1] for p in build_dataset(config, tokenizer).prompts]
    assert sorted(order) == sorted(names)
    assert len(summary.requests) == len(names)
    for rec in summary.requests:
        name = order[rec.index]
        expected = FAULTS[name][1]
        if expected is None:
            assert rec.success, (name, rec.error)
            assert rec.output_tokens == 6 and rec.output_tokens_source == "usage"
            assert rec.ttft_s > 0 and len(rec.itl_s) == 5
        else:
            assert not rec.success, name
            assert rec.error.startswith(expected), (name, rec.error)
    ok = sum(1 for n in names if FAULTS[n][1] is None)
    assert summary.completed == ok and summary.failed == len(names) - ok
    assert sum(summary.errors.values()) == summary.failed
    assert summary.errors["HTTP 500: engine overloaded"] == 1
    assert summary.errors["timeout: no complete response within 1.5 s"] == 2
    assert summary.total_output_tokens == ok * 6
    # the role-only first chunk 1 ms after arrival did not end TTFT (first text at 20 ms)
    late = next(r for r in summary.requests if order[r.index] == "ok-role-late")
    assert late.ttft_s >= 0.019


def test_server_gone_every_request_fails_with_the_connection_error(tok_dir: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}", served_model="m", tokenizer=str(tok_dir))
    summary = run_benchmark(
        endpoint, BenchConfig(input_len=40, output_len=4, num_prompts=5, max_concurrency=2)
    )
    assert summary.completed == 0 and summary.failed == 5
    assert all(r.error.startswith(f"cannot connect to 127.0.0.1:{port}") for r in summary.requests)
    assert not summary.telemetry.available and "unreachable" in (summary.telemetry.error or "")
    assert any("5 requests failed" in n for n in summary.notes)


def test_cancel_returns_promptly_with_what_finished(tok_dir: Path) -> None:
    cancel = threading.Event()
    config = BenchConfig(input_len=48, output_len=40, num_prompts=40, max_concurrency=4)

    def on_progress(done: int, total: int) -> None:
        if done >= 4:  # the first wave has finished: cancel while the second is in flight
            cancel.set()

    with StreamServer(Script(ttft_ms=20, itl_ms=20), tokenizer_dir=tok_dir) as server:
        t = time.monotonic()
        summary = run_benchmark(ep(server, tok_dir), config, cancel=cancel, progress=on_progress)
        elapsed = time.monotonic() - t
    # each request takes ~0.8 s: all 40 at concurrency 4 would take ~8 s
    assert elapsed < 6
    assert summary.interrupted and summary.num_prompts == 40
    cancelled = [r for r in summary.requests if r.error == "cancelled"]
    assert 1 <= len(cancelled) <= 4
    assert summary.completed >= 4
    assert summary.completed + summary.failed == len(summary.requests) <= 12
    assert all(r.success or r.error == "cancelled" for r in summary.requests)
    assert any(n.startswith("Cancelled:") for n in summary.notes)


def test_cancel_wakes_a_dispatcher_waiting_for_the_next_send(
    fixture_server: StreamServer, tok_dir: Path
) -> None:
    cancel = threading.Event()
    # constant gaps of 4 s: the first request goes at 4 s, the second would at 8 s
    config = BenchConfig(input_len=48, output_len=2, num_prompts=10, request_rate=0.25, burstiness=math.inf)

    def on_progress(done: int, total: int) -> None:
        if done >= 1:  # the first request is back; the dispatcher sleeps until 8 s
            cancel.set()

    t = time.monotonic()
    summary = run_benchmark(ep(fixture_server, tok_dir), config, cancel=cancel, progress=on_progress)
    assert time.monotonic() - t < 7  # woken at once, not at 8 s (the whole schedule spans 40 s)
    assert summary.interrupted and summary.completed == 1 and len(summary.requests) == 1


def test_cancel_already_set_sends_nothing(fixture_server: StreamServer, tok_dir: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    summary = run_benchmark(
        ep(fixture_server, tok_dir), BenchConfig(input_len=48, num_prompts=5), cancel=cancel
    )
    assert summary.interrupted and summary.requests == [] and completions(fixture_server) == []


def test_duration_stops_sending_new_requests(tok_dir: Path) -> None:
    config = BenchConfig(input_len=48, output_len=5, num_prompts=500, max_concurrency=2, duration_s=0.5)
    with StreamServer(Script(ttft_ms=20, itl_ms=10), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
    assert 2 <= len(summary.requests) < 500
    assert summary.failed == 0 and not summary.interrupted
    assert all(r.planned_send_s < 0.5 for r in summary.requests)  # none is decided after the duration
    # the bytes leave when the event loop runs the request's task, a moment after the decision (the margin is
    # for a busy machine; a request decided after the end fails the line above)
    assert all(r.start_s < 0.5 + 0.1 for r in summary.requests)
    assert any("--duration 0.5 s reached" in n for n in summary.notes)


def test_warmups_are_sent_first_and_not_measured(fixture_server: StreamServer, tok_dir: Path) -> None:
    config = BenchConfig(input_len=48, output_len=3, num_prompts=6, num_warmups=3, max_concurrency=2)
    summary = run_benchmark(ep(fixture_server, tok_dir), config)
    assert len(completions(fixture_server)) == 9
    assert len(summary.requests) == 6 and summary.completed == 6
    # the baseline /metrics sample is taken after the warmup: the generation counter grew by the measured tokens
    assert summary.telemetry.deltas["generation_tokens"] == 6 * 3


def test_finite_rate_follows_the_seeded_schedule(fixture_server: StreamServer, tok_dir: Path) -> None:
    config = BenchConfig(input_len=48, output_len=2, num_prompts=12, request_rate=40, burstiness=0.5, seed=9)
    summary = run_benchmark(ep(fixture_server, tok_dir), config)
    plan = send_times(12, 40, 0.5, 9)
    assert [r.planned_send_s for r in summary.requests] == pytest.approx(plan, abs=1e-9)
    assert all(r.start_s >= r.planned_send_s for r in summary.requests)
    assert all(r.queue_s == 0 for r in summary.requests)
    assert summary.scheduling_lag_ms.count == 12


def test_max_concurrency_with_a_rate_queues_and_lag_excludes_the_queue(tok_dir: Path) -> None:
    config = BenchConfig(input_len=48, output_len=5, num_prompts=8, request_rate=200, max_concurrency=1)
    with StreamServer(Script(ttft_ms=10, itl_ms=10), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
    reqs = summary.requests
    assert summary.max_concurrent_requests >= 1
    # one at a time: each request starts after the previous one ended, so later ones waited for the slot
    for a, b in itertools.pairwise(reqs):
        assert b.start_s >= a.start_s + a.latency_s
    assert sum(r.queue_s for r in reqs) > 0.1
    assert summary.scheduling_lag_ms.p50 < summary.e2el_ms.p50


def test_scrape_cost_note(
    fixture_server: StreamServer, tok_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summary_mod, "SCRAPE_NOTE_MS", -1.0)
    summary = run_benchmark(
        ep(fixture_server, tok_dir), BenchConfig(input_len=48, output_len=2, num_prompts=2)
    )
    assert any(n.startswith("Each /metrics scrape took") for n in summary.notes)
    quiet = run_benchmark(
        ep(fixture_server, tok_dir), BenchConfig(input_len=48, output_len=2, num_prompts=2), scrape=False
    )
    assert not any("/metrics" in n for n in quiet.notes)


def test_lag_note_when_the_client_is_late(
    fixture_server: StreamServer, tok_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summary_mod, "LAG_NOTE_P50_MS", -1.0)
    summary = run_benchmark(
        ep(fixture_server, tok_dir), BenchConfig(input_len=48, output_len=2, num_prompts=3)
    )
    assert any(n.startswith("The client sent requests late") for n in summary.notes)


def test_multi_token_chunks_one_gap_per_chunk(tok_dir: Path) -> None:
    config = BenchConfig(input_len=48, output_len=16, num_prompts=3, max_concurrency=3)
    with StreamServer(Script(ttft_ms=5, itl_ms=5, tokens_per_chunk=4), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
    for r in summary.requests:
        assert r.output_tokens == 16 and len(r.itl_s) == 3
        assert r.tpot_s == pytest.approx((r.latency_s - r.ttft_s) / 15)
    assert summary.itl_ms.count == 9


def test_output_tokens_from_the_tokenizer_when_there_is_no_usage(tok_dir: Path, tmp_path: Path) -> None:
    with StreamServer(Script(usage="none"), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), BenchConfig(input_len=48, output_len=8, num_prompts=4))
        assert summary.output_tokens_source == "tokenizer"
        assert all(r.output_tokens == 8 and r.output_tokens_source == "tokenizer" for r in summary.requests)
        assert any("counted with the tokenizer" in n for n in summary.notes)
        # no tokenizer at all (jsonl prompts, a server without /tokenize): the number of text chunks
    data = write_jsonl(tmp_path / "p.jsonl", ["hello there", "general kenobi"])
    with StreamServer(Script(usage="none", tokens_per_chunk=2)) as bare:
        config = BenchConfig(dataset="jsonl", dataset_path=str(data), output_len=8, num_prompts=2)
        summary = run_benchmark(ep(bare), config)
    assert summary.completed == 2 and summary.output_tokens_source == "chunks"
    assert all(r.output_tokens == 4 for r in summary.requests)
    assert any("No tokenizer" in n for n in summary.notes)
    assert summary.tokenizer_id == ""


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_server_counted_prompt_tokens_equal_input_len(tok_dir: Path, endpoint: str) -> None:
    config = BenchConfig(endpoint=endpoint, input_len=77, output_len=2, num_prompts=10, max_concurrency=5)
    with StreamServer(Script(), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
    assert [r.server_prompt_tokens for r in summary.requests] == [77] * 10
    assert summary.prompt_token_check.checked == 10 and summary.prompt_token_check.mismatched == 0
    assert summary.total_input_tokens == 770


def test_prompt_token_deviation_is_reported(tok_dir: Path, bos_tok_dir: Path) -> None:
    # the server's tokenizer adds a BOS that the client's does not know about
    config = BenchConfig(endpoint="completions", input_len=48, output_len=2, num_prompts=4)
    with StreamServer(Script(), tokenizer_dir=bos_tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
    check = summary.prompt_token_check
    assert check.checked == 4 and check.mismatched == 4 and check.max_abs_deviation == 1
    assert check.mean_deviation == pytest.approx(1.0)
    assert summary.total_input_tokens == 4 * 49  # throughput uses the server's count
    assert any("counted a different number of prompt tokens" in n for n in summary.notes)


def test_server_tokenizer_when_none_is_given(fixture_server: StreamServer) -> None:
    config = BenchConfig(input_len=50, output_len=2, num_prompts=5)
    summary = run_benchmark(ep(fixture_server), config)
    assert summary.tokenizer_id.endswith("/tokenize")
    assert [r.server_prompt_tokens for r in summary.requests] == [50] * 5


def test_telemetry_series_and_deltas(tok_dir: Path) -> None:
    config = BenchConfig(
        input_len=48, output_len=10, num_prompts=6, max_concurrency=3, scrape_interval_s=0.05
    )
    with StreamServer(Script(ttft_ms=20, itl_ms=20), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
    tel = summary.telemetry
    assert tel.available and tel.samples == len(summary.telemetry_samples) >= 5
    assert tel.deltas["generation_tokens"] == 60 and tel.deltas["prompt_tokens"] == 6 * 48
    assert tel.peaks["running"] == 3
    assert 0 < tel.means["running"] <= 3
    assert tel.derived["prefix_cache_hit_rate"] == pytest.approx(0.25)
    ts = [s.t_s for s in summary.telemetry_samples]
    assert ts == sorted(ts)


def test_no_metrics_endpoint_the_run_goes_on(tok_dir: Path) -> None:
    with StreamServer(Script(), tokenizer_dir=tok_dir, metrics=False) as server:
        summary = run_benchmark(ep(server, tok_dir), BenchConfig(input_len=48, output_len=2, num_prompts=3))
    assert summary.completed == 3
    assert not summary.telemetry.available and "HTTP 404" in (summary.telemetry.error or "")
    off = None
    with StreamServer(Script(), tokenizer_dir=tok_dir) as server:
        off = run_benchmark(
            ep(server, tok_dir), BenchConfig(input_len=48, output_len=2, num_prompts=2), scrape=False
        )
    assert not off.telemetry.available and off.telemetry_samples == []


def test_keep_alive_one_connection_per_concurrent_request(
    fixture_server: StreamServer, tok_dir: Path
) -> None:
    config = BenchConfig(input_len=48, output_len=3, num_prompts=30, max_concurrency=3, scrape_metrics=False)
    summary = run_benchmark(ep(fixture_server, tok_dir), config, tokenizer=LocalTokenizer(tok_dir))
    assert summary.completed == 30
    assert fixture_server.connections == 3


def test_connection_closed_by_the_server_while_idle_is_replaced(tok_dir: Path) -> None:
    # the server drops keep-alive connections idle for 0.15 s; requests come every 0.4 s on one connection, and
    # the connection opened ahead of the run is dropped before its first use
    config = BenchConfig(input_len=48, output_len=2, num_prompts=3, request_rate=2.5, burstiness=math.inf,
                         max_concurrency=1, scrape_metrics=False)  # fmt: skip
    with StreamServer(Script(), tokenizer_dir=tok_dir, idle_timeout_s=0.15) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
        assert summary.completed == 3 and summary.failed == 0
        assert server.connections == 4  # the one opened ahead, then a fresh one per request


def test_request_dropped_on_a_reused_connection_is_sent_again(tok_dir: Path) -> None:
    # the server drops, unanswered, any request that arrives on a connection idle for over 0.1 s
    config = BenchConfig(input_len=48, output_len=2, num_prompts=3, request_rate=2.5, burstiness=math.inf,
                         max_concurrency=1, scrape_metrics=False)  # fmt: skip
    with StreamServer(Script(), tokenizer_dir=tok_dir, drop_after_idle_s=0.1) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
        assert summary.completed == 3 and summary.failed == 0
        assert (
            server.connections == 4
        )  # the one opened ahead (dropped), then one fresh connection per request


def test_headers_api_key_and_body_are_sent(tok_dir: Path) -> None:
    with StreamServer(Script(), tokenizer_dir=tok_dir) as server:
        endpoint = ep(server, tok_dir, api_key="sekret", headers={"X-Team": "perf"})
        config = BenchConfig(input_len=48, output_len=3, num_prompts=1, temperature=0.0)
        run_benchmark(endpoint, config, scrape=False)
    (log,) = completions(server)
    assert log.head.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    assert "\r\nAuthorization: Bearer sekret\r\n" in log.head and "\r\nX-Team: perf\r\n" in log.head
    assert log.body == {
        "model": "fixture-model",
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "temperature": 0.0,
    }


def test_progress_callback_reaches_the_total(fixture_server: StreamServer, tok_dir: Path) -> None:
    calls: list[tuple[int, int]] = []
    run_benchmark(
        ep(fixture_server, tok_dir),
        BenchConfig(input_len=48, output_len=2, num_prompts=7),
        progress=lambda d, t: calls.append((d, t)),
    )
    assert calls[-1] == (7, 7) and all(t == 7 for _, t in calls)


def test_async_api_and_sync_api_inside_a_running_loop(fixture_server: StreamServer, tok_dir: Path) -> None:
    config = BenchConfig(input_len=48, output_len=2, num_prompts=2)

    async def main() -> tuple[int, int]:
        a = await arun_benchmark(ep(fixture_server, tok_dir), config)
        b = run_benchmark(ep(fixture_server, tok_dir), config)  # blocking call from async code: own thread
        return a.completed, b.completed

    assert asyncio.run(main()) == (2, 2)


def test_base_url_with_v1_suffix_is_accepted(fixture_server: StreamServer, tok_dir: Path) -> None:
    endpoint = Endpoint(base_url=fixture_server.base_url + "/v1/", served_model="fixture-model",
                        tokenizer=str(tok_dir))  # fmt: skip
    summary = run_benchmark(endpoint, BenchConfig(input_len=48, output_len=2, num_prompts=2))
    assert summary.completed == 2 and summary.base_url == fixture_server.base_url


def test_unknown_model_is_a_failed_request_with_the_server_message(
    fixture_server: StreamServer, tok_dir: Path
) -> None:
    endpoint = Endpoint(base_url=fixture_server.base_url, served_model="nope", tokenizer=str(tok_dir))
    summary = run_benchmark(endpoint, BenchConfig(input_len=48, output_len=2, num_prompts=2))
    assert summary.failed == 2
    assert summary.requests[0].error == "HTTP 404: The model `nope` does not exist."
