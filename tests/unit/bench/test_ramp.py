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
from accelbench.domain.bench import BenchConfig, Endpoint
from accelbench.domain.bench import in_ramp as domain_in_ramp
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
        gate = ramp.RampGate(3, 0.3)
        sent: list[float] = []

        async def request() -> None:
            async with gate:
                assert gate.t0 is not None
                sent.append(time.perf_counter() - gate.t0)
                await asyncio.sleep(1.0)  # longer than the ramp: no slot frees within it

        await asyncio.gather(*(request() for _ in range(3)))
        return sent

    sent = asyncio.run(main())
    assert [round(s, 1) for s in sorted(sent)] == [0.0, 0.1, 0.2]


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
        assert any(abs(t - 0.15 * k) < 0.03 for t in starts), [round(t, 3) for t in starts[:8]]
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
    with StreamServer(Script(ttft_ms=20, itl_ms=10), tokenizer_dir=tok_dir) as server:
        summary = run_benchmark(ep(server, tok_dir), config)
    first = sorted(r.start_s for r in summary.requests)[:4]
    assert first[-1] - first[0] < 0.02
    assert summary.ramp_requests == 0 and summary.completed == 8
    assert not any(r.ramp for r in summary.requests)
    assert not any(n.startswith("Staggered start") for n in summary.notes)


def test_with_a_ramp_the_ttft_median_no_longer_lands_on_a_wave_mode(tok_dir: Path) -> None:
    # A continuous-batching engine whose prefills add up within a step (32 ms per 64-token prompt), a decode step of
    # 10 + 4 x running ms. Four streams started at once come in waves: the first request reaches an idle engine
    # and is prefilled alone, the other three wait for that step and are prefilled together in the next; they
    # end a step apart, so the waves repeat: two TTFT modes, and the median sits on the larger one.
    def run(ramp_s: float):
        engine = BatchingEngine(slots=8, step_ms=10.0, per_seq_ms=4.0, prefill_ms_per_token=0.5)
        config = BenchConfig(
            input_len=64,
            output_len=16,
            num_prompts=4 * 16,
            max_concurrency=4,
            ramp_up_s=ramp_s,
            scrape_metrics=False,
        )
        with StreamServer(Script(), engine=engine, tokenizer_dir=tok_dir, record=False) as server:
            return run_benchmark(ep(server, tok_dir), config)

    waves = run(0.0)
    assert "ttft" in waves.modes, waves.ttft_ms
    mode = waves.modes["ttft"]
    assert mode["high_median_ms"] > 1.15 * mode["low_median_ms"], mode  # two waves, well apart
    # most requests come in the three-request wave, so the median is one of them: the high mode's
    assert (
        mode["high_share"] > 0.5
        and waves.ttft_ms.median > (mode["low_median_ms"] + mode["high_median_ms"]) / 2
    )
    # streams started 100 ms apart (more than a step with one prefill, ~58 ms) reach the engine one at a time and
    # keep that spacing: every TTFT is a prefill alone (one step) after at most the step under way
    staggered = run(0.4)
    assert staggered.ramp_requests >= 4
    # one mode: the engine is exact, so a split the mode test finds (bench/modes.py) is within a few percent
    if "ttft" in staggered.modes:
        split = staggered.modes["ttft"]
        assert split["high_median_ms"] < 1.1 * split["low_median_ms"], split
    assert staggered.ttft_ms.median < mode["high_median_ms"] - 0.5 * (
        mode["high_median_ms"] - mode["low_median_ms"]
    )


def test_a_capacity_search_judges_what_follows_the_ramp_and_refuses_a_ramp_at_a_rate() -> None:
    from accelbench.bench.capacity import steady
    from accelbench.domain.bench import RequestRecord
    from accelbench.domain.capacity import CapacitySpec

    recs = [RequestRecord(index=i, prompt_len=8, start_s=0.3 * i, success=True) for i in range(12)]
    ramp.mark(recs, 1.0)  # requests 0-3 started within the ramp: more than the first wave of 2
    assert [r.index for r in steady(recs, "concurrency", 2)] == list(range(4, 12))
    plain = [RequestRecord(index=i, prompt_len=8, start_s=0.3 * i, success=True) for i in range(12)]
    assert [r.index for r in steady(plain, "concurrency", 2)] == list(range(2, 12))  # without: the first wave
    assert CapacitySpec(load="concurrency", ramp_up_s=1.0).bench_config().ramp_up_s == 1.0
    with pytest.raises(ValidationError, match="ramp_up_s staggers a closed loop"):
        CapacitySpec(load="request_rate", ramp_up_s=1.0)
