"""The in-cluster load generator's parts: the share each shard sends, the barrier, result framing, merging."""

from __future__ import annotations

import math
import threading
import time
import tomllib
from pathlib import Path

import pytest

from accelbench.bench.sweep import cell_config, sweep_keys
from accelbench.deploy.incluster import merge_shards, run_shard
from accelbench.deploy.manifests import LoadgenConfig
from accelbench.deploy.shards import (
    Barrier,
    decode_results,
    encode_results,
    remote_barrier,
    shard_config,
    share,
)
from accelbench.domain.load import BenchConfig
from accelbench.domain.run import SweepSpec
from accelbench.errors import EngineError
from tests.unit.deploy.test_kubernetes import fake_bench

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("total", "shards"), [(1, 4), (4, 4), (7, 3), (64, 5), (3, 1)])
def test_shares_add_up(total: int, shards: int) -> None:
    parts = [share(total, shards, i) for i in range(shards)]
    assert sum(parts) == total and max(parts) - min(parts) <= 1


def test_shard_config_splits_concurrency_prompts_rate_and_seeds() -> None:
    cfg = BenchConfig(input_len=128, num_prompts=70, max_concurrency=7, request_rate=14.0, seed=5)
    parts = [shard_config(cfg, 7, 3, i) for i in range(3)]
    assert [p.max_concurrency for p in parts if p] == [3, 2, 2]
    assert sum(p.num_prompts for p in parts if p) == 70
    assert sum(p.request_rate for p in parts if p) == pytest.approx(14.0)
    assert len({p.seed for p in parts if p}) == 3  # distinct prompts per shard (no shared prefix cache)
    assert [p.scrape_metrics for p in parts if p] == [True, False, False]  # one scraper
    assert shard_config(cfg, 1, 3, 2) is None  # concurrency 1: nothing for shard 2
    single = shard_config(cfg, 7, 1, 0)
    assert single is not None and single.seed == 5 and single.num_prompts == 70  # one shard = local sweep
    inf = shard_config(BenchConfig(num_prompts=8, max_concurrency=4), 4, 2, 1)
    assert inf is not None and math.isinf(inf.request_rate)


def test_barrier_releases_all_at_one_instant() -> None:
    barrier = Barrier(3, port=0, timeout_s=10, lead_s=0.2)
    starts: dict[int, float] = {}

    def go(i: int) -> None:
        if i == 2:
            time.sleep(0.3)  # the last one arrives late; the others wait for it
        starts[i] = barrier.arrive(0, i)

    try:
        threads = [threading.Thread(target=go, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)
        assert len(set(starts.values())) == 1
        # and over HTTP, as shards 1..N-1 reach shard 0
        wait = remote_barrier("127.0.0.1", barrier.port, timeout_s=5)
        got: dict[int, float] = {}
        ts = [
            threading.Thread(target=lambda: got.__setitem__(1, wait(1, 1))),
            threading.Thread(target=lambda: got.__setitem__(0, barrier.arrive(1, 0))),
            threading.Thread(target=lambda: got.__setitem__(2, barrier.arrive(1, 2))),
        ]
        for t in ts:
            t.start()
        for t in ts:
            t.join(5)
        assert len(got) == 3 and len(set(got.values())) == 1
    finally:
        barrier.close()


def test_barrier_times_out_naming_missing_shards() -> None:
    barrier = Barrier(2, port=0, timeout_s=0.2)
    try:
        with pytest.raises(TimeoutError, match=r"shards \[1\]"):
            barrier.arrive(0, 0)
    finally:
        barrier.close()


def test_framing_round_trip_and_damage() -> None:
    payload = {"shard": 1, "cells": [{"x": "y" * 20000}], "error": None}
    lines = encode_results(1, payload)
    log = "engine chatter\n" + "\n".join(lines) + "\nmore chatter\n"
    assert decode_results(log) == payload
    with pytest.raises(EngineError, match="truncated"):
        decode_results("\n".join(lines[:-2]))  # rotation cut the end
    tampered = [ln[:-1] + ("B" if ln[-1] != "B" else "C") if "PART" in ln else ln for ln in lines]
    with pytest.raises(EngineError, match="checksum"):
        decode_results("\n".join(tampered))
    with pytest.raises(EngineError, match="no results"):
        decode_results("Traceback: the pod died")


def test_two_shards_merge_into_the_local_sweeps_cells() -> None:
    sweep = SweepSpec(
        input_lens=[64], concurrency=[1, 3], prompts_per_concurrency=2, output_len=6, num_warmups=0
    )
    cfg = LoadgenConfig(run_id="r1", base_url="http://engine:8000", served_model="m", sweep=sweep, shards=2)
    barrier = Barrier(2, port=0, timeout_s=10, lead_s=0.05)
    try:
        logs: list[list[str]] = [[], []]

        def shard(i: int) -> None:
            run_shard(cfg, i, barrier=barrier.arrive, bench=fake_bench, out=logs[i].append)

        ts = [threading.Thread(target=shard, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
    finally:
        barrier.close()
    payloads = [decode_results("\n".join(lg)) for lg in logs]
    assert [c["status"] for c in payloads[1]["cells"]] == ["empty", "completed"]  # c=1 is shard 0's alone
    merged = merge_shards(sweep, payloads)
    assert [(k["concurrency"], s.value) for k, s, _ in merged] == [(1, "completed"), (3, "completed")]
    _, _, c3 = merged[1]
    assert c3.completed == 6 and len(c3.requests) == 6 and c3.num_prompts == 6
    assert sorted(r.index for r in c3.requests) == list(range(6))
    assert c3.config == cell_config(
        sweep, sweep_keys(sweep)[1], label="r1"
    )  # the cell as the local sweep defines it
    assert c3.ttft_ms.p50 == pytest.approx(20.0) and c3.tpot_ms.p50 == pytest.approx(10.0)
    assert c3.duration_s > 0 and c3.request_throughput == pytest.approx(6 / c3.duration_s)


def test_merged_shards_leave_out_each_shards_staggered_start() -> None:
    from accelbench.domain.bench_summary import BenchmarkSummary
    from accelbench.domain.request_record import RequestRecord

    sweep = SweepSpec(
        input_lens=[64],
        concurrency=[2],
        prompts_per_concurrency=2,
        output_len=6,
        num_warmups=0,
        ramp_up_s=0.5,
    )
    key = sweep_keys(sweep)[0]

    def shard(i: int) -> dict[str, object]:
        # two requests within the ramp (slow: 1 s to the first token), one after it (0.1 s)
        recs = [
            RequestRecord(index=k, prompt_len=64, start_s=t, ttft_s=ttft, latency_s=ttft + 0.5, output_tokens=6,
                          output_tokens_source="usage", success=True, ramp=t < 0.5)
            for k, (t, ttft) in enumerate([(0.0, 1.0), (0.25, 1.0), (0.6, 0.1)])
        ]  # fmt: skip
        summary = BenchmarkSummary(
            date="2026-12-04T00:00:00", config=cell_config(sweep, key, label="r1"), num_prompts=3,
            started_at=1000.6, finished_at=1001.2, requests=recs, ramp_requests=2,
        )  # fmt: skip
        return {"shard": i, "cells": [{"key": key.as_dict(), "status": "completed",
                                       "summary": summary.model_dump(mode="json")}]}  # fmt: skip

    (_, _, merged), *_ = merge_shards(sweep, [shard(0), shard(1)])
    assert merged.ramp_requests == 4 and len(merged.requests) == 6
    assert merged.completed == 2 and merged.ttft_ms.p50 == pytest.approx(
        100.0
    )  # the ramp's 1 s TTFTs left out


def test_dockerfile_matches_the_job() -> None:
    """The Job runs `accelbench loadgen` as uid 10001: the image must provide both."""
    from tests.unit.deploy.test_manifests import bundle

    dockerfile = (ROOT / "Dockerfile").read_text()
    job = bundle("g6.2xlarge").one("Job")["spec"]["template"]["spec"]["containers"][0]
    assert f"USER {job['securityContext']['runAsUser']}" in dockerfile
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert job["command"][0] in scripts
    assert 'ENTRYPOINT ["accelbench"]' in dockerfile
