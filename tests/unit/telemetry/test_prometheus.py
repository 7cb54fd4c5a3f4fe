"""Scraping an inference server's /metrics: parsing vLLM's (and SGLang's) names, counter deltas across resets,
gauge peaks and means, and a server without /metrics."""

from __future__ import annotations

import asyncio
import time

import pytest

from accelbench.domain.bench_summary import TelemetrySample
from accelbench.telemetry.prometheus import (
    PrometheusScraper,
    filter_metrics_text,
    parse_metrics,
    summarize,
)
from tests.support.stream_server import StreamServer

VLLM_PAGE = """# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12345.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="smol"} 3.0
vllm:num_requests_running{engine="1",model_name="smol"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="smol"} 4.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="smol"} 0.42
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="smol"} 1.0
vllm:num_preemptions_created{engine="0",model_name="smol"} 1.7645184e+09
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="smol"} 1024.0
vllm:prompt_tokens_created{engine="0",model_name="smol"} 1.7645184e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="smol"} 256.0
# HELP vllm:prefix_cache_queries_total Prefix cache queries.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="smol"} 1024.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="smol"} 128.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="smol"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="smol"} 4.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="smol"} 4.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="smol"} 0.8
"""


def test_parse_vllm_page_sums_engines_and_skips_created() -> None:
    values = parse_metrics(VLLM_PAGE)
    assert values == {
        "running": 5.0,
        "waiting": 4.0,
        "kv_cache_usage": 0.42,
        "preemptions": 1.0,
        "prompt_tokens": 1024.0,
        "generation_tokens": 256.0,
        "prefix_cache_queries": 1024.0,
        "prefix_cache_hits": 128.0,
    }


def test_filter_keeps_only_wanted_families() -> None:
    kept = filter_metrics_text(VLLM_PAGE)
    assert "python_gc" not in kept and "time_to_first_token" not in kept
    assert "# TYPE vllm:prompt_tokens_total counter" in kept


def test_older_vllm_and_sglang_names() -> None:
    old = """# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.5
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="m"} 7
"""
    assert parse_metrics(old) == {"kv_cache_usage": 0.5, "prefix_cache_hits": 7.0}
    sglang = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 9
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 1
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 100
"""
    assert parse_metrics(sglang) == {"running": 9.0, "waiting": 1.0, "generation_tokens": 100.0}


def sample(t: float, **values: float) -> TelemetrySample:
    return TelemetrySample(t_s=t, wall=1000 + t, values=values)


def test_summarize_deltas_peaks_means_and_a_counter_reset() -> None:
    samples = [
        sample(0, running=0, generation_tokens=100, prefix_cache_queries=0, prefix_cache_hits=0),
        sample(1, running=4, generation_tokens=150, prefix_cache_queries=400, prefix_cache_hits=100),
        sample(
            2, running=2, generation_tokens=20, prefix_cache_queries=600, prefix_cache_hits=150
        ),  # restart
        sample(3, running=0, generation_tokens=50, prefix_cache_queries=800, prefix_cache_hits=200),
    ]
    s = summarize(samples)
    assert s.available and s.samples == 4
    assert s.deltas["generation_tokens"] == 50 + 20 + 30
    assert s.peaks["running"] == 4 and s.means["running"] == pytest.approx(1.5)
    assert s.derived["prefix_cache_hit_rate"] == pytest.approx(0.25)
    assert not summarize([]).available


def test_scraper_against_the_fixture_server() -> None:
    with StreamServer() as server:
        server.running = 2

        async def run() -> PrometheusScraper:
            scraper = PrometheusScraper(server.base_url, interval_s=0.05)
            assert await scraper.start(time.perf_counter())
            await asyncio.sleep(0.3)
            await scraper.stop()
            return scraper

        scraper = asyncio.run(run())
    summary = scraper.summary()
    assert summary.available and summary.samples >= 4
    assert summary.peaks["running"] == 2.0
    assert summary.deltas["generation_tokens"] == 0.0
    assert 0 < summary.derived["scrape_ms_mean"] <= summary.derived["scrape_ms_max"]


@pytest.mark.parametrize("metrics", [False, None])
def test_server_without_metrics(metrics: bool | None) -> None:
    async def run(url: str) -> PrometheusScraper:
        scraper = PrometheusScraper(url, interval_s=0.05, timeout_s=1)
        assert not await scraper.start(time.perf_counter())
        await scraper.stop()
        return scraper

    if metrics is False:
        with StreamServer(metrics=False) as server:
            scraper = asyncio.run(run(server.base_url))
        assert "HTTP 404" in (scraper.summary().error or "")
    else:
        scraper = asyncio.run(run("http://127.0.0.1:9"))
        assert "unreachable" in (scraper.summary().error or "")
    assert not scraper.summary().available
