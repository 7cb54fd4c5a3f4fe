"""The Kubernetes target's orchestration, against an in-process fake of the Kubernetes API server
(tests/support/fake_kube.py) reached through the official kubernetes client. The load-generator pods run
accelbench's real in-cluster shard code (split, barrier, framing) with a synthetic benchmark function; the
merge, the store, the cost and the teardown are the product's own."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import pytest

from accelbench.bench.metrics import compute_metrics
from accelbench.catalog import get_catalog
from accelbench.deploy.incluster import run_shard
from accelbench.deploy.kubernetes import KubernetesDeployTarget
from accelbench.deploy.manifests import LoadgenConfig
from accelbench.deploy.orchestrator import execute_run
from accelbench.deploy.shards import Barrier
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.run import KubernetesTarget, RunSpec, RunStatus, SweepSpec
from accelbench.store.repo import Store
from tests.support.fake_kube import FakeCluster, FakeKubeServer

MODEL = "Qwen/Qwen2.5-7B-Instruct"


def fake_bench(endpoint: Endpoint, cfg: BenchConfig) -> BenchmarkSummary:
    """A benchmark that 'ran': one record per prompt, 20 ms TTFT, 10 ms per output token."""

    wall0 = time.time()
    records = []
    for i in range(cfg.num_prompts):
        start = 0.001 * i
        n = cfg.output_len
        records.append(
            RequestRecord(
                index=i,
                prompt_len=cfg.input_len,
                server_prompt_tokens=cfg.input_len,
                max_tokens=n,
                output_tokens=n,
                output_tokens_source="usage",
                planned_send_s=start,
                start_s=start,
                ttft_s=0.02,
                itl_s=[0.01] * (n - 1),
                latency_s=0.02 + 0.01 * (n - 1),
                success=True,
            )
        )
    duration = max(r.start_s + r.latency_s for r in records) - records[0].start_s
    m = compute_metrics(records, duration, None)
    return BenchmarkSummary(
        date="2026-01-01T00:00:00",
        base_url=endpoint.base_url,
        model_id=endpoint.served_model,
        config=cfg,
        started_at=wall0,
        finished_at=wall0 + duration,
        duration_s=duration,
        num_prompts=cfg.num_prompts,
        requests=records,
        **dict(m),
    )


def make_loadgen(fail_shard: int | None = None) -> Any:
    barriers: dict[int, Barrier] = {}
    lock = threading.Lock()

    def loadgen(config: dict[str, Any], shard: int, shards: int) -> tuple[str, bool]:
        cfg = LoadgenConfig.model_validate(config)
        with lock:
            barrier = barriers.setdefault(shards, Barrier(shards, port=0, timeout_s=20))
        lines: list[str] = []

        def bench(ep: Endpoint, c: BenchConfig) -> BenchmarkSummary:
            if shard == fail_shard:
                raise OSError("connection refused")
            return fake_bench(ep, c)

        payload = run_shard(cfg, shard, barrier=barrier.arrive, bench=bench, out=lines.append)
        return "\n".join(lines) + "\n", payload["error"] is None

    return loadgen


def new_run(store: Store, **target: Any) -> str:
    spec = RunSpec(
        model=MODEL,
        instance_type="r8g.4xlarge",
        target=KubernetesTarget(namespace="bench", loadgen_shards=2, **target),
        sweep=SweepSpec(
            input_lens=[128],
            concurrency=[1, 4],
            prompts_per_concurrency=2,
            output_len=8,
            num_warmups=0,
            scrape_metrics=False,
        ),
    )
    return store.create_run(kind="run", spec=spec.public_dict(), model=MODEL, target="kubernetes").id


FAST = functools.partial(KubernetesDeployTarget, poll_s=0.01, loadgen_poll_s=0.01)


def left_in_cluster(cluster: FakeCluster) -> list[str]:
    return [f"{r}/{n}" for (r, s, n) in cluster.objects if s == "bench" and r != "events"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_success_path(store: Store) -> None:
    cluster = FakeCluster(ready_after=3, job_done_after=2, loadgen=make_loadgen())
    run_id = new_run(store)
    clock = iter([1000.0, 1000.0 + 1800.0]).__next__  # deploy at t=1000 s, teardown done 30 min later
    with FakeKubeServer(cluster) as api:
        run = execute_run(store, run_id, target_factory=functools.partial(FAST, api_client=api), clock=clock)
    assert run.status == RunStatus.completed, run.error
    # deployed: namespace created, engine Deployment with the planner's exact CPU KV budget
    assert "bench" in cluster.names("namespaces")
    posted = [p for m, p in cluster.requests if m == "POST"]
    assert any(p.endswith("/deployments") for p in posted) and any(p.endswith("/jobs") for p in posted)
    assert run.engine == "vllm-cpu" and run.instance_type == "r8g.4xlarge"
    assert "VLLM_CPU_KVCACHE_SPACE" in run.extra["deployment"]["env"]
    assert run.extra["deployment"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == "41"
    # results: both cells, both shards merged (concurrency 1 -> shard 0 only; 4 -> 2 + 2)
    results = {(r.input_len, r.concurrency): r for r in store.get_results(run_id)}
    assert set(results) == {(128, 1), (128, 4)}
    assert results[(128, 1)].completed == 2 and results[(128, 4)].completed == 8
    records = store.get_request_records(results[(128, 4)].id)
    assert len(records) == 8 and sorted(r.index for r in records) == list(range(8))
    assert results[(128, 4)].ttft_p50_ms == pytest.approx(20.0)
    assert results[(128, 4)].tpot_p50_ms == pytest.approx(10.0)
    assert "2 in-cluster shards" in " ".join(results[(128, 4)].summary["notes"])
    # cost: the snapshot's hourly price x the time the deployment was held
    price = get_catalog().instance("r8g.4xlarge").on_demand_usd
    assert run.hourly_usd == pytest.approx(price)
    cost = run.extra["cost"]
    assert cost["held_s"] == 1800.0
    assert cost["usd"] == pytest.approx(price / 2, rel=1e-6)
    # teardown: everything deleted, nothing left
    assert left_in_cluster(cluster) == []
    assert set(cluster.deleted("deployments")) and set(cluster.deleted("jobs"))
    assert run.extra["kubernetes"]["torn_down"] is True
    assert run.extra["files"][0].endswith("report.html")  # the report files a local run gets
    # the Service is cluster-internal: no answer check from here; the environment is the node's instance type
    assert "answer_check" not in run.extra
    assert run.environment["instance"]["name"] == "r8g.4xlarge" and "cpu" not in run.environment
    assert run.environment["image"] and run.tp_degree == 1


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_never_ready_is_torn_down_and_failed(store: Store) -> None:
    cluster = FakeCluster(ready_after=None, loadgen=make_loadgen())
    run_id = new_run(store, ready_timeout_s=0.3)
    with FakeKubeServer(cluster) as api:
        run = execute_run(store, run_id, target_factory=functools.partial(FAST, api_client=api))
    assert run.status == RunStatus.failed
    assert "did not become ready within 0 s" in (run.error or "") or "did not become ready" in (
        run.error or ""
    )
    assert "not scheduled" in (run.error or "") and "Unschedulable" in (run.error or "")
    assert not cluster.created("jobs")  # the load generator never started
    assert left_in_cluster(cluster) == []
    assert cluster.deleted("deployments") and cluster.deleted("services")
    assert store.get_results(run_id) == []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_cancel_while_waiting_tears_down(store: Store) -> None:
    cluster = FakeCluster(ready_after=None)
    run_id = new_run(store, ready_timeout_s=30)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    with FakeKubeServer(cluster) as api:
        started = time.monotonic()
        run = execute_run(
            store, run_id, cancel=cancel, target_factory=functools.partial(FAST, api_client=api)
        )
    assert time.monotonic() - started < 10
    assert run.status == RunStatus.cancelled
    assert left_in_cluster(cluster) == []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_loadgen_shard_failure_fails_the_run_and_cleans_up(store: Store) -> None:
    cluster = FakeCluster(ready_after=1, loadgen=make_loadgen(fail_shard=1))
    run_id = new_run(store)
    with FakeKubeServer(cluster) as api:
        run = execute_run(store, run_id, target_factory=functools.partial(FAST, api_client=api))
    assert run.status == RunStatus.failed
    assert "load-generator Job" in (run.error or "") and "failed" in (run.error or "")
    assert left_in_cluster(cluster) == []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_hf_token_secret_created_and_deleted(store: Store) -> None:
    cluster = FakeCluster(ready_after=1, loadgen=make_loadgen())
    run_id = new_run(store)
    with FakeKubeServer(cluster) as api:
        run = execute_run(
            store,
            run_id,
            secrets={"hf_token": "hf_secret"},
            target_factory=functools.partial(FAST, api_client=api),
        )
    assert run.status == RunStatus.completed, run.error
    assert cluster.created("secrets") and cluster.deleted("secrets")
    assert "hf_secret" not in str(run.model_dump())  # never stored with the run


def test_target_interface_deploy_wait_logs_teardown() -> None:
    cluster = FakeCluster(ready_after=2)
    spec = RunSpec(model=MODEL, instance_type="g6.2xlarge", target=KubernetesTarget(namespace="default"))
    with FakeKubeServer(cluster) as api:
        with KubernetesDeployTarget(
            spec.target, api_client=api, run_id="abcdef123", poll_s=0.01, tool_versions={}
        ) as t:
            endpoint = t.deploy(spec)
            assert endpoint.base_url.endswith(".default.svc.cluster.local:8000")
            t.wait_ready(5)
            assert "Uvicorn running" in t.logs()
            assert t.deployed is not None and t.deployed.ready_s is not None
        assert t.torn_down
    assert [k for k in cluster.objects if k[0] in ("deployments", "services")] == []
