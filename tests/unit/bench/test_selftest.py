"""The client self-test (loopback server, certificate, verdict) and the client/engine core overlap."""

from __future__ import annotations

import asyncio
import math
import os

import pytest

from accelbench.bench import run_benchmark
from accelbench.bench.client import StreamClient
from accelbench.bench.cpu_affinity import (
    allowed_cpus,
    core_overlap,
    engine_cpus_from_bind,
    isolate_client,
    set_process_affinity,
)
from accelbench.bench.loopback_server import SELFTEST_MODEL, LoopbackServer
from accelbench.bench.runner import request_body
from accelbench.bench.selftest import certify, client_self_test
from accelbench.bench.stream_parse import parse_stream
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.domain.client_certificate import ClientCertificate
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from tests.support.stream_server import Script, StreamServer

SHORT = 0.3  # seconds per self-test: enough for a few hundred requests, keeps the file fast


@pytest.fixture(scope="module")
def cert_c4() -> ClientCertificate:
    return client_self_test(BenchConfig(output_len=64, max_concurrency=4), duration_s=SHORT)


def test_closed_loop_self_test_measures_positive_rates(cert_c4: ClientCertificate) -> None:
    c = cert_c4
    assert c.completed > 0 and c.failed == 0
    assert c.requests_per_s > 0 and c.chunks_per_s > 0
    # every response carried output_len one-token chunks, all parsed
    assert c.chunks_per_s == pytest.approx(64 * c.requests_per_s, rel=1e-9)
    assert c.cpu_us_per_chunk > 0 and c.process_cpu_us_per_chunk >= c.cpu_us_per_chunk * 0.5
    assert c.concurrency == 4 and math.isinf(c.request_rate) and c.output_len == 64
    assert c.lag_p50_ms is None and c.lag_p99_ms is None  # no schedule in a closed loop
    assert c.capacity_chunks_per_s == c.chunks_per_s  # flat out: what it reached is the ceiling
    assert c.cores == sorted(allowed_cpus())
    assert c.duration_s >= SHORT * 0.9


def test_rate_mode_measures_lag_and_keeps_the_schedule() -> None:
    c = client_self_test(
        BenchConfig(output_len=16, request_rate=100.0, endpoint="completions"), duration_s=SHORT
    )
    assert c.failed == 0
    assert c.completed == math.ceil(100.0 * SHORT)  # every planned request was sent and completed
    assert c.lag_p50_ms is not None and c.lag_p99_ms is not None
    assert c.lag_p99_ms >= c.lag_p50_ms >= -1.0  # a send is never (much) ahead of its plan
    assert c.request_rate == 100.0 and c.concurrency is None
    assert c.requests_per_s > 0 and c.chunks_per_s == pytest.approx(16 * c.requests_per_s, rel=1e-9)
    # the ceiling is estimated from CPU, never below what it actually did
    assert c.capacity_chunks_per_s >= c.chunks_per_s > 0
    assert c.capacity_requests_per_s >= c.requests_per_s * 0.99


def test_rate_mode_with_a_concurrency_cap() -> None:
    c = client_self_test(BenchConfig(output_len=8, request_rate=200.0, max_concurrency=2), duration_s=SHORT)
    assert c.completed == math.ceil(200.0 * SHORT) and c.failed == 0
    assert c.concurrency == 2 and c.lag_p99_ms is not None


def test_verdict_passes_with_a_small_rate_and_fails_above_what_the_client_sustained(
    cert_c4: ClientCertificate,
) -> None:
    c = cert_c4
    small_chunks = c.chunks_per_s / 100
    small_req = c.requests_per_s / 100
    ok, sentence = c.verdict(small_chunks, small_req)
    assert ok, sentence
    assert c.headroom(small_chunks) == pytest.approx(100)
    assert "headroom" in sentence and f"{c.capacity_chunks_per_s:,.0f} chunks/s" in sentence
    assert f"{small_chunks:,.0f} chunks/s" in sentence

    big = 2 * c.chunks_per_s
    ok, sentence = c.verdict(big, small_req)
    assert not ok
    assert c.headroom(big) == pytest.approx(0.5)
    assert f"{c.capacity_chunks_per_s:,.0f} chunks/s" in sentence and f"{big:,.0f} chunks/s" in sentence
    assert "0.5x the chunk rate" in sentence
    assert f"{3 * big - c.capacity_chunks_per_s:,.0f} chunks/s short of 3x" in sentence

    # a request rate above the ceiling fails on requests even with few chunks
    ok, sentence = c.verdict(small_chunks, 2 * c.requests_per_s)
    assert not ok and "request rate" in sentence and "requests/s short of 3x" in sentence

    # between 1x and the 3x margin: still too little headroom
    ok, sentence = c.verdict(c.chunks_per_s / 2, small_req)
    assert not ok and "2.0x the chunk rate" in sentence
    assert c.headroom(0) == math.inf


def test_verdict_fails_on_scheduling_lag() -> None:
    c = ClientCertificate(
        requests_per_s=10, chunks_per_s=640, capacity_chunks_per_s=50_000, capacity_requests_per_s=780,
        lag_p50_ms=4.0, lag_p99_ms=25.0, cpu_us_per_chunk=5, request_rate=10, cores=[0, 1],
    )  # fmt: skip
    ok, sentence = c.verdict(100, 1)
    assert not ok and "25.0 ms" in sentence and "p50 4.0 ms" in sentence
    ok, _ = c.verdict(100, 1, max_lag_ms=50)
    assert ok


def test_loopback_server_speaks_openai_sse_with_keep_alive() -> None:
    config = BenchConfig(output_len=5)

    async def go(base_url: str) -> list[object]:
        client = StreamClient(base_url)
        chat = client.render("/v1/chat/completions", request_body(config, SELFTEST_MODEL, "hi", 5))
        comp = client.render(
            "/v1/completions",
            request_body(config.model_copy(update={"endpoint": "completions"}), "m", "hi", 3),
        )
        missing = client.render("/v1/nowhere", b"{}")
        out: list[object] = []
        for data, is_chat in ((chat, True), (chat, True), (comp, False), (missing, True)):
            raw = await client.send(data)
            out.append(parse_stream(raw, chat=is_chat))
        await client.aclose()
        return out

    with LoopbackServer() as server:
        assert server.port > 0
        a, b, c, d = asyncio.run(go(server.base_url))
        assert server.requests == 3
    for p, n in ((a, 5), (b, 5), (c, 3)):
        assert p.success and p.text_chunks == n and p.completion_tokens == n  # type: ignore[attr-defined]
        assert len(p.itl) == n - 1  # type: ignore[attr-defined]
    assert a.text == " alpha bravo charlie delta echo"  # type: ignore[attr-defined]
    assert d.error is not None and d.error.startswith("HTTP 404")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("bind", "threads", "want"),
    [
        ("auto", None, {0, 1, 2, 3}),
        ("all", None, {0, 1, 2, 3}),
        ("AUTO", 2, {0, 1, 2, 3}),
        ("nobind", None, {0, 1, 2, 3}),
        ("0-3", None, {0, 1, 2, 3}),
        ("0", None, {0}),
        ("0-3|4-7", None, set(range(8))),
        ("0,2,4", None, {0, 2, 4}),
        ("0-1,6|8-9", None, {0, 1, 6, 8, 9}),
        (" 2 - 3 ", None, {2, 3}),
        (None, 3, {0, 1, 2}),
        (None, None, None),
        ("", None, None),
        ("3-1", None, None),
        ("zero", None, None),
        ("0-3|", None, None),
    ],
)
def test_engine_cpus_from_bind(bind: str | None, threads: int | None, want: set[int] | None) -> None:
    assert engine_cpus_from_bind(bind, threads, 4) == want


def test_bind_matches_what_the_vllm_cpu_runtime_sets() -> None:
    # threads=1 -> "0", threads=4 -> "0-3" (accelbench.runtimes.vllm_cpu.VllmCpu.env)
    assert engine_cpus_from_bind("0", 1, 8) == engine_cpus_from_bind(None, 1, 8) == {0}
    assert engine_cpus_from_bind("0-3", 4, 8) == engine_cpus_from_bind(None, 4, 8) == {0, 1, 2, 3}


def test_core_overlap() -> None:
    disjoint = core_overlap({2, 3}, client_cpus={0, 1})
    assert disjoint.shared == 0 and disjoint.engine_cpus == [2, 3] and disjoint.client_cpus == [0, 1]
    assert "share no core" in disjoint.sentence

    full = core_overlap({0, 1}, client_cpus={0, 1})
    assert full.shared == 2
    assert full.sentence == (
        "the client and the engine share 2 of 2 cores: measured latencies include contention with the load "
        "generator"
    )
    partial = core_overlap({1, 2, 3}, client_cpus={0, 1})
    assert partial.shared == 1 and "share 1 of 3 cores" in partial.sentence

    unknown = core_overlap(None, client_cpus={0})
    assert unknown.shared is None and unknown.engine_cpus is None and "unknown" in unknown.sentence

    mine = core_overlap(set())  # this process's own affinity by default
    assert mine.client_cpus == sorted(allowed_cpus()) and mine.shared == 0


def test_isolate_client_covering_every_cpu_changes_nothing() -> None:
    before = allowed_cpus()
    assert isolate_client(set(before)) is None
    assert isolate_client(set(before) | {max(before) + 1}) is None
    assert allowed_cpus() == before


def test_isolate_client_restricts_to_the_free_cpus() -> None:
    before = allowed_cpus()
    if not hasattr(os, "sched_setaffinity") or len(before) < 2:
        assert isolate_client(set()) in (None, before)  # one CPU: nothing to move to but itself
        if hasattr(os, "sched_setaffinity"):
            set_process_affinity(before)
        return
    free = max(before)
    try:
        got = isolate_client(before - {free})
        assert got == {free}
        assert allowed_cpus() == {free}
        assert core_overlap(before - {free}).shared == 0
    finally:
        set_process_affinity(before)
    assert allowed_cpus() == before


def test_a_run_carries_the_certificate_and_a_note_when_the_client_was_short(
    tok_dir,
    cert_c4: ClientCertificate,  # type: ignore[no-untyped-def]
) -> None:
    config = BenchConfig(input_len=40, output_len=8, num_prompts=8, max_concurrency=4, self_test=True)
    with StreamServer(Script(ttft_ms=2, itl_ms=2), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(
            Endpoint(base_url=server.base_url, served_model=server.model),
            config,
            tokenizer=LocalTokenizer(tok_dir),
        )
    ok = certify(summary, cert_c4)
    assert ok.client_certificate == cert_c4 and ok.client_verdict
    # a client that sustained a tenth of what the run needed gets the shortfall in the notes
    short = cert_c4.model_copy(
        update={
            "capacity_chunks_per_s": 1.0,
            "capacity_requests_per_s": 0.1,
            "chunks_per_s": 1.0,
            "requests_per_s": 0.1,
        }
    )
    bad = certify(summary, short)
    assert bad.client_verdict is not None and "too little headroom" in bad.client_verdict
    assert bad.client_verdict in bad.notes and bad.client_verdict not in summary.notes
