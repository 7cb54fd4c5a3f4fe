"""The staggered start of a closed loop (``ramp_up_s``, bench/ramp.py): the schedule, the gate another client
uses, and, against the in-repo streaming server, that the streams start spread over the ramp, that exactly the
requests started within it are left out and recorded, and that against an engine whose prefills add up a wave's
TTFT median no longer lands on a wave mode."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from accelbench.bench import ramp, run_benchmark
from accelbench.bench.results_io import from_dict, to_vllm_dict
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.load import in_ramp as domain_in_ramp
from tests.support.batching_engine import BatchingEngine
from tests.support.stream_server import Script, StreamServer


def ep(server: StreamServer, tok_dir: Path) -> Endpoint:
    return Endpoint(base_url=server.base_url, served_model=server.model, tokenizer=str(tok_dir))


def test_streams_start_evenly_over_the_ramp_and_the_allowed_level_rises_one_at_a_time() -> None:
    assert ramp.stream_starts(4, 2.0) == [0.0, 0.5, 1.0, 1.5]
    assert ramp.stream_starts(3, 0.0) == [0.0, 0.0, 0.0]
    assert [ramp.allowed(4, 2.0, t) for t in (0.0, 0.49, 0.5, 1.2, 1.5, 1.99, 2.0, 9.0)] == [
        1,
        1,
        2,
        3,
        4,
        4,
        4,
        4,
    ]
    assert ramp.allowed(4, 0.0, 0.0) == 4
    assert ramp.in_ramp(1.99, 2.0) and not ramp.in_ramp(2.0, 2.0) and not ramp.in_ramp(0.0, 0.0)


def test_the_runner_and_the_store_judge_a_request_by_the_same_rule() -> None:
    for start, ramp_s in itertools.product((0.0, 0.5, 0.999, 1.0, 2.0), (0.0, 1.0, 2.5)):
        assert ramp.in_ramp(start, ramp_s) == domain_in_ramp(start, ramp_s)


def test_the_gate_lets_one_more_request_in_at_each_stream_start() -> None:
    async def main() -> list[float]:
        gate = ramp.RampGate(3, 0.6)
        sent: list[float] = []

        async def request() -> None:
            async with gate:
                assert gate.t0 is not None
                sent.append(time.perf_counter() - gate.t0)
                await asyncio.sleep(1.5)  # longer than the ramp: no slot frees within it

        await asyncio.gather(*(request() for _ in range(3)))
        return sent

    sent = asyncio.run(main())
    for s, due in zip(sorted(sent), [0.0, 0.2, 0.4], strict=True):
        # never early; late only by a busy machine's scheduling (a slot freed at the wrong stream start would
        # be a whole 0.2 s off)
        assert due <= s < due + 0.15, sent


def test_a_ramp_is_refused_with_a_rate_stages_turns_or_a_trace() -> None:
    for bad in (
        {"request_rate": 5.0},
        {"stages": [{"concurrency": 2, "duration_s": 5}]},
        {"turns": 2, "num_prompts": 4},
    ):
        with pytest.raises(ValidationError, match="ramp_up_s"):
            BenchConfig(ramp_up_s=1.0, **bad)  # type: ignore[arg-type]
    assert BenchConfig(ramp_up_s=1.0, max_concurrency=4).ramp_up_s == 1.0
    assert BenchConfig().ramp_up_s == 0.0  # off by default: comparable with vllm bench serve


def test_streams_start_spread_over_the_ramp_and_its_requests_are_left_out_and_recorded(tok_dir: Path) -> None:
    # every request takes ~0.25 s (50 ms to the first token, 10 chunks 20 ms apart): a 0.6 s ramp over 4 streams
    # starts them 0.15 s apart, and the first stream's second request starts at ~0.25 s, inside the ramp
    config = BenchConfig(
        input_len=48, output_len=10, num_prompts=24, max_concurrency=4, ramp_up_s=0.6, scrape_metrics=False
    )
    with StreamServer(Script(ttft_ms=50, itl_ms=20), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
    recs = sorted(summary.requests, key=lambda r: r.start_s)
    assert len(recs) == 24 and all(r.success for r in recs)
    starts = [r.start_s for r in recs]
    for k in range(4):  # a stream starts every 0.15 s
        assert any(0.15 * k <= t < 0.15 * k + 0.06 for t in starts), [round(t, 3) for t in starts[:8]]
    for r in recs:  # and no more requests are in flight than streams have started
        busy = sum(1 for q in recs if q.start_s <= r.start_s < q.start_s + q.latency_s)
        assert busy <= ramp.allowed(4, 0.6, r.start_s + 0.01), r.start_s
    in_ramp = [r for r in recs if r.start_s < 0.6]
    assert [r.ramp for r in recs] == [r.start_s < 0.6 for r in recs]
    assert len(in_ramp) >= 5  # the four first sends and at least one stream's second
    assert summary.ramp_requests == len(in_ramp)
    # the figures count exactly the others
    assert summary.completed == 24 - len(in_ramp)
    assert summary.ttft_ms.count == summary.e2el_ms.count == 24 - len(in_ramp)
    measured = [r for r in recs if not r.ramp]
    assert summary.duration_s == pytest.approx(
        max(r.start_s + r.latency_s for r in measured) - min(r.start_s for r in measured), abs=0.01
    )
    assert any(n.startswith("Staggered start: the 4 streams") for n in summary.notes)
    # the ramp travels with the result file: the config says how long, each record whether it was in it
    again = from_dict(to_vllm_dict(summary))
    assert again.config.ramp_up_s == 0.6 and again.ramp_requests == len(in_ramp)
    assert [r.ramp for r in again.requests] == [r.ramp for r in summary.requests]


def test_without_a_ramp_every_stream_starts_at_once_and_nothing_is_left_out(tok_dir: Path) -> None:
    config = BenchConfig(input_len=48, output_len=4, num_prompts=8, max_concurrency=4, scrape_metrics=False)
    # a request takes 130 ms: streams that waited for one another would start at least that far apart; the
    # 0.1 s allows for a busy machine running the four sends late
    with StreamServer(Script(ttft_ms=100, itl_ms=10), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
    first = sorted(r.start_s for r in summary.requests)[:4]
    assert first[-1] - first[0] < 0.1
    assert summary.ramp_requests == 0 and summary.completed == 8
    assert not any(r.ramp for r in summary.requests)
    assert not any(n.startswith("Staggered start") for n in summary.notes)


def test_with_a_ramp_the_ttft_median_no_longer_lands_on_a_wave_mode(tok_dir: Path) -> None:
    # A continuous-batching engine whose prefills add up within a step (96 ms per 64-token prompt) and a decode
    # step of 25 + 10 x running ms. Four streams started at once come in waves: requests that arrive together are
    # prefilled in one long step, and since they end together they arrive together again, so the TTFT median is
    # a shared prefill's (with two modes when the first wave split, one when all four arrived as one). Staggered 225 ms apart, the streams reach the engine one at a time: each
    # request is prefilled alone, so the median is well below the waves'. (Steps this long keep a busy shared
    # machine's timer jitter small beside them; the assertions are on medians, not on exact values.)
    def run(ramp_s: float):
        engine = BatchingEngine(slots=8, step_ms=25.0, per_seq_ms=10.0, prefill_ms_per_token=1.5)
        config = BenchConfig(
            input_len=64,
            output_len=12,
            num_prompts=4 * 12,
            max_concurrency=4,
            ramp_up_s=ramp_s,
            scrape_metrics=False,
        )
        with StreamServer(Script(), engine=engine, tokenizer_dir=tok_dir, record=False) as server:
            return run_benchmark(ep(server, tok_dir), config)

    waves = run(0.0)
    staggered = run(0.9)
    assert staggered.ramp_requests >= 4
    assert staggered.ttft_ms.median < 0.8 * waves.ttft_ms.median, (staggered.ttft_ms, waves.ttft_ms)
    if "ttft" in waves.modes:
        assert staggered.ttft_ms.median < waves.modes["ttft"]["high_median_ms"]


def test_a_capacity_search_judges_what_follows_the_ramp_and_refuses_a_ramp_at_a_rate() -> None:
    from accelbench.bench.capacity_search import steady
    from accelbench.domain.capacity import CapacitySpec
    from accelbench.domain.request_record import RequestRecord

    recs = [RequestRecord(index=i, prompt_len=8, start_s=0.3 * i, success=True) for i in range(12)]
    ramp.mark(recs, 1.0)  # requests 0-3 started within the ramp: more than the first wave of 2
    assert [r.index for r in steady(recs, "concurrency", 2)] == list(range(4, 12))
    plain = [RequestRecord(index=i, prompt_len=8, start_s=0.3 * i, success=True) for i in range(12)]
    assert [r.index for r in steady(plain, "concurrency", 2)] == list(range(2, 12))  # without: the first wave
    assert CapacitySpec(load="concurrency", ramp_up_s=1.0).bench_config().ramp_up_s == 1.0
    with pytest.raises(ValidationError, match="ramp_up_s staggers a closed loop"):
        CapacitySpec(load="request_rate", ramp_up_s=1.0)
