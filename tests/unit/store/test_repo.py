"""The store on SQLite and on a real PostgreSQL: runs, results, records, telemetry, prices, versions."""

from __future__ import annotations

import math

import pytest

from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats, TelemetrySample
from accelbench.domain.instance_types import Price, PriceTier
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.run import CellStatus, RunStatus, SweepSpec
from accelbench.errors import ConflictError, NotFoundError, UserInputError
from accelbench.store import Store


def _summary(n: int = 3, tpot: float = 20.0) -> BenchmarkSummary:
    recs = [
        RequestRecord(index=i, prompt_len=128, server_prompt_tokens=128, output_tokens=32, output_tokens_source="usage",
                      ttft_s=0.2, latency_s=1.0, itl_s=[0.025] * 31, success=True, start_s=0.01 * i)
        for i in range(n)
    ]  # fmt: skip
    recs.append(RequestRecord(index=n, prompt_len=128, success=False, error="HTTP 500: boom"))
    return BenchmarkSummary(
        date="2026-11-30T00:00:00",
        config=BenchConfig(input_len=128, output_len=32, num_prompts=n + 1),
        num_prompts=n + 1,
        completed=n,
        failed=1,
        errors={"HTTP 500: boom": 1},
        tpot_ms=MetricStats(count=n, median=tpot, p50=tpot, p95=tpot + 1, p99=tpot + 2),
        output_throughput=100.0,
        requests=recs,
        telemetry_samples=[TelemetrySample(t_s=0.5, wall=1000.5, values={"vllm:num_requests_running": 2.0})],
    )


def test_run_lifecycle_and_results(store: Store) -> None:
    run = store.create_run(kind="sweep", label="cpu", model="smollm2", spec=SweepSpec(), engine="vllm-cpu")
    assert run.status == RunStatus.pending
    assert run.spec["request_rate"] == "Infinity"  # JSONB-safe, and reads back as inf
    assert math.isinf(SweepSpec.model_validate(run.spec).request_rate)

    store.save_result(run.id, input_len=128, concurrency=4, repeat=0, summary=_summary())
    # Saving the same cell again replaces it rather than duplicating it.
    store.save_result(run.id, input_len=128, concurrency=4, repeat=0, summary=_summary(tpot=21.0))
    results = store.get_results(run.id)
    assert len(results) == 1
    assert results[0].tpot_p50_ms == 21.0
    assert results[0].itl_p50_ms is None  # not collected -> NULL, never 0
    assert results[0].status == CellStatus.completed

    full = store.get_summary(results[0].id)
    assert len(full.requests) == 4
    assert full.requests[-1].error == "HTTP 500: boom"
    assert full.requests[0].itl_s == [0.025] * 31
    assert full.telemetry_samples[0].values["vllm:num_requests_running"] == 2.0

    info = store.get_run(run.id[:-1])
    assert (info.completed_requests, info.failed_requests, info.cells) == (3, 1, 1)

    store.set_status(run.id, RunStatus.benchmarking)
    done = store.set_status(run.id, RunStatus.completed)
    assert done.started_at is not None and done.finished_at is not None
    with pytest.raises(ConflictError):
        store.cancel_run(run.id)

    store.delete_run(run.id)
    with pytest.raises(NotFoundError):
        store.get_run(run.id)
    assert store.list_runs() == ([], 0)


def test_a_stored_result_knows_which_requests_started_within_its_staggered_start(store: Store) -> None:
    run = store.create_run(kind="bench", label="ramp", model="smollm2", spec=SweepSpec(), engine="vllm-cpu")
    summary = _summary(n=6)
    summary.config = BenchConfig(
        input_len=128, output_len=32, num_prompts=7, max_concurrency=2, ramp_up_s=0.025
    )
    for r in summary.requests:
        # requests 0, 1 and 2 (0.00, 0.01, 0.02 s) and the failed one (start 0: it was never sent)
        r.ramp = r.start_s < 0.025
    summary.ramp_requests = 4
    store.save_result(run.id, input_len=128, concurrency=2, repeat=0, summary=summary)
    rid = store.get_results(run.id)[0].id
    # no column keeps the flag: it is judged again from each start and the result's ramp_up_s
    assert [r.ramp for r in store.get_summary(rid).requests] == [r.ramp for r in summary.requests]
    assert [r.ramp for r in store.get_request_records(rid)] == [True, True, True, False, False, False, True]
    assert store.get_summary(rid).ramp_requests == 4


def test_list_filters_and_pagination(store: Store) -> None:
    ids = [
        store.create_run(kind="sweep", model=f"m{i % 2}", instance_type="m8i.2xlarge" if i % 2 else None).id
        for i in range(5)
    ]
    page, total = store.list_runs(limit=2)
    assert total == 5 and len(page) == 2
    assert {r.id for r in store.list_runs(model="m1")[0]} == {ids[1], ids[3]}
    assert store.list_runs(instance_type="m8i.2xlarge")[1] == 2
    assert store.list_runs(status="completed")[1] == 0


def test_ambiguous_and_unknown_ids(store: Store) -> None:
    store.create_run(kind="sweep", run_id="abc-1")
    store.create_run(kind="sweep", run_id="abc-2")
    with pytest.raises(UserInputError, match="ambiguous"):
        store.get_run("abc")
    with pytest.raises(NotFoundError, match="runs list"):
        store.get_run("zzz")


def test_claim_next_pending_takes_each_run_once(store: Store) -> None:
    a = store.create_run(kind="run")
    b = store.create_run(kind="run")
    first = store.claim_next_pending("w1")
    second = store.claim_next_pending("w2")
    assert first is not None and second is not None
    assert {first.id, second.id} == {a.id, b.id}
    assert first.status == RunStatus.deploying
    assert store.claim_next_pending("w3") is None


def test_prices_tool_versions_audit(store: Store) -> None:
    store.upsert_prices(
        [
            Price(
                instance_type="g6.xlarge",
                region="us-east-1",
                usd_per_hour=0.8,
                effective_date="2026-01-01",
                source="snapshot",
            )
        ]
    )
    store.upsert_prices([
        Price(instance_type="g6.xlarge", region="us-east-1", usd_per_hour=0.9, effective_date="2026-06-01", source="api"),
        Price(instance_type="g6.xlarge", region="us-east-1", tier=PriceTier.reserved_1yr, usd_per_hour=0.5, effective_date="2026-06-01", source="api"),
    ])  # fmt: skip
    latest = {p.tier: p.usd_per_hour for p in store.latest_prices(instance_type="g6.xlarge")}
    assert latest == {PriceTier.on_demand: 0.9, PriceTier.reserved_1yr: 0.5}

    assert store.set_tool_version("vllm", "v0.19.0", actor="t") is True
    assert store.set_tool_version("vllm", "v0.19.0", actor="t") is False
    assert store.set_tool_version("vllm", "v0.20.0", actor="t") is True
    log = store.audit_log()
    assert [(e["old_value"], e["new_value"]) for e in log] == [("v0.19.0", "v0.20.0"), (None, "v0.19.0")]
    assert store.get_tool_versions() == {"vllm": "v0.20.0"}


def test_calibrations_keep_one_active(store: Store) -> None:
    store.save_calibration(
        accelerator="cpu", engine="vllm-cpu", factors={"bw": 0.5}, n_points=4, error_before={}, error_after={}
    )
    store.save_calibration(
        accelerator="cpu", engine="vllm-cpu", factors={"bw": 0.6}, n_points=6, error_before={}, error_after={}
    )
    active = store.active_calibrations()
    assert len(active) == 1 and active[0]["factors"] == {"bw": 0.6}


def test_like_wildcards_in_ids_and_filters_match_only_themselves(store: Store) -> None:
    """`/runs/_` resolved to any run (and with one run stored, DELETE removed it); a label filter of "%"
    matched every run."""
    a = store.create_run(kind="bench", label="cpu run", model="m_1")
    b = store.create_run(kind="bench", label="50% load", model="m21")
    with pytest.raises(NotFoundError):
        store.resolve_run_id("_")
    with pytest.raises(NotFoundError):
        store.resolve_run_id("%")
    # the shortest prefix of a's id that b's does not share (both ids start with the same date)
    shared = next(i for i, (x, y) in enumerate(zip(a.id, b.id, strict=False)) if x != y)
    assert store.resolve_run_id(a.id[: shared + 1]) == a.id
    assert [r.label for r in store.list_runs(label="%")[0]] == ["50% load"]
    assert [r.label for r in store.list_runs(label="_")[0]] == []
    assert [r.model for r in store.list_runs(model="m_")[0]] == ["m_1"]
