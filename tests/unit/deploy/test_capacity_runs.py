"""A run spec's ``capacity:`` section through the run lifecycle: `accelbench run SPEC.yaml` against the fixture's
continuous-batching engine (endpoint target, the search from this machine), the Kubernetes target with the
search in the (fake) cluster's load-generator pod, the refusal of a sharded search, and the dry run."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from accelbench import services
from accelbench.bench.capacity_search import requests_for
from accelbench.bench.metrics import compute_metrics
from accelbench.catalog import get_catalog
from accelbench.cli.main import app
from accelbench.deploy.incluster import run_shard
from accelbench.deploy.kubernetes import KubernetesDeployTarget
from accelbench.deploy.manifests import LoadgenConfig
from accelbench.deploy.orchestrator import execute_run
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.capacity import CapacitySpec
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.run import EndpointTarget, KubernetesTarget, RunSpec, RunStatus
from accelbench.errors import UserInputError
from accelbench.store import get_store
from accelbench.store.repo import Store
from tests.support.batching_engine import BatchingEngine
from tests.support.fake_kube import FakeCluster, FakeKubeServer
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner(env={"COLUMNS": "200"})

# TPOT = 10 + 4 x C ms up to 8 slots: a 32 ms median holds to C = 5 (30 ms) and breaks at 6 (34 ms), 2 ms either
# side, so a busy machine's timer jitter cannot move the level found (the same engine as the capacity command's)
SLO = {"tpot": 32}
CAPACITY = dict(slo=SLO, percentile=50, attainment=0.5, input_len=64, output_len=10, start=2, max_load=32)


def test_a_capacity_spec_runs_end_to_end_through_the_endpoint_target(tmp_path: Path) -> None:
    tok = make_tokenizer_dir(tmp_path / "tok")
    engine = BatchingEngine(slots=8, step_ms=10, per_seq_ms=4)
    with StreamServer(Script(), engine=engine, tokenizer_dir=tok, record=False) as server:
        spec_file = tmp_path / "capacity.yaml"
        spec_file.write_text(
            f"""
label: capacity of the fixture
model: fixture-model
instance_type: g6.xlarge
target:
  kind: endpoint
  base_url: {server.base_url}
  served_model: fixture-model
  tokenizer: {tok}
capacity:
  load: concurrency
  input_len: 64
  output_len: 10
  slo: {{tpot: 32}}
  percentile: 50
  attainment: 0.5
  start: 2
  max_load: 32
"""
        )
        res = runner.invoke(app, ["run", str(spec_file), "--format", "json"])
    assert res.exit_code == 0, res.output
    run_id = json.loads(res.stdout)["run"]["id"]
    run = get_store().get_run(run_id)
    assert run.status == RunStatus.completed, run.error
    answer = run.extra["capacity"]
    assert answer["load"] == "concurrency" and abs(answer["max_load"] - 5) <= 1, answer["probes"]
    assert len(answer["probes"]) <= 12
    # priced with the run's instance type, from the plan kept at submission (the spec's start, no prediction)
    assert run.extra["capacity_plan"]["start"] == 2 and run.extra["capacity_plan"]["start_from"] == "the spec"
    assert answer["hourly_usd"] == pytest.approx(get_catalog().instance("g6.xlarge").on_demand_usd)
    assert answer["usd_per_million_output_tokens"] > 0
    # each probe a cell, as `accelbench capacity` stores them; the report files a sweep gets
    cells = get_store().get_results(run_id)
    assert len(cells) == len(answer["probes"])
    assert {(c.concurrency, c.repeat) for c in cells} == {
        (int(p["level"]), p["repeat"]) for p in answer["probes"]
    }
    assert run.extra["files"] and "report_error" not in run.extra
    assert "capacity" not in json.dumps(run.spec.get("sweep") or {})  # the stored spec has no sweep
    assert run.spec["capacity"]["slo"] == {"tpot": 32.0}


def test_a_capacity_spec_no_level_meets_exits_3_with_the_reason(tmp_path: Path) -> None:
    """As `accelbench capacity`: the search ran and stored its probes, and no level met the SLO."""
    tok = make_tokenizer_dir(tmp_path / "tok")
    engine = BatchingEngine(slots=8, step_ms=10, per_seq_ms=4)  # TPOT >= 14 ms: 5 ms is never met
    with StreamServer(Script(), engine=engine, tokenizer_dir=tok, record=False) as server:
        spec_file = tmp_path / "capacity.yaml"
        spec_file.write_text(
            f"""
model: fixture-model
target: {{kind: endpoint, base_url: "{server.base_url}", served_model: fixture-model, tokenizer: "{tok}"}}
capacity: {{input_len: 64, output_len: 6, slo: {{tpot: 5}}, percentile: 50, attainment: 0.5, start: 1}}
"""
        )
        res = runner.invoke(app, ["run", str(spec_file), "--format", "json"])
    assert res.exit_code == 3, res.output
    run = get_store().get_run(json.loads(res.stdout)["run"]["id"])
    assert run.status == RunStatus.completed and run.extra["capacity"]["max_load"] is None
    assert run.extra["capacity"]["reason"] and run.extra["capacity"]["probes"]


# ---------------------------------------------------------------------------------------------- Kubernetes
def modelled_bench(endpoint: Endpoint, cfg: BenchConfig) -> BenchmarkSummary:
    """A benchmark of the batching engine's cost model without its timing: every request at concurrency C
    (up to 8 slots) gets a token every 10 + 4 x C ms."""
    c = min(cfg.max_concurrency or 1, 8)
    gap = (10 + 4 * c) / 1000
    n = cfg.output_len

    def record(i: int) -> RequestRecord:
        return RequestRecord(
            index=i, prompt_len=cfg.input_len, server_prompt_tokens=cfg.input_len, max_tokens=n, output_tokens=n,
            output_tokens_source="usage", planned_send_s=0.001 * i, start_s=0.001 * i, ttft_s=gap,
            itl_s=[gap] * (n - 1), latency_s=gap * n, success=True,
        )  # fmt: skip

    records = [record(i) for i in range(cfg.num_prompts)]
    duration = max(r.start_s + r.latency_s for r in records)
    wall0 = time.time()
    return BenchmarkSummary(
        date="2026-01-01T00:00:00", base_url=endpoint.base_url, model_id=endpoint.served_model, config=cfg,
        started_at=wall0, finished_at=wall0 + duration, duration_s=duration, num_prompts=cfg.num_prompts,
        requests=records, **dict(compute_metrics(records, duration, None)),
    )  # fmt: skip


def in_cluster_search(configs: list[dict[str, Any]]) -> Any:
    def loadgen(config: dict[str, Any], shard: int, shards: int) -> tuple[str, bool]:
        configs.append(config)
        lines: list[str] = []
        payload = run_shard(
            LoadgenConfig.model_validate(config), shard, bench=modelled_bench, out=lines.append
        )
        return "\n".join(lines) + "\n", payload["error"] is None

    return loadgen


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_kubernetes_target_runs_the_search_in_the_cluster_and_stores_it_as_cells(store: Store) -> None:
    configs: list[dict[str, Any]] = []
    cluster = FakeCluster(ready_after=1, job_done_after=1, loadgen=in_cluster_search(configs))
    spec = RunSpec(
        model="Qwen/Qwen2.5-7B-Instruct",
        instance_type="r8g.4xlarge",
        target=KubernetesTarget(namespace="bench"),
        capacity=CapacitySpec(**CAPACITY, num_warmups=0),  # type: ignore[arg-type]
    )
    run_id = store.create_run(kind="run", spec=spec.public_dict(), model=spec.model, target="kubernetes").id
    phases: list[str] = []
    target = functools.partial(KubernetesDeployTarget, poll_s=0.01, loadgen_poll_s=0.01)
    with FakeKubeServer(cluster) as api:
        run = execute_run(
            store,
            run_id,
            target_factory=functools.partial(target, api_client=api),
            progress=lambda e: phases.append(str(e.get("phase", ""))),
        )
    assert run.status == RunStatus.completed, run.error
    assert any("Searching for the capacity at p50 tpot <= 32 ms" in p for p in phases), phases
    # one pod ran the search from the spec's start
    (config,) = configs
    assert config["shards"] == 1 and config["capacity_start"] == 2 and config["capacity"]["slo"] == SLO
    answer = run.extra["capacity"]
    assert answer["max_load"] == 5, answer["probes"]  # the modelled engine has no jitter: exactly 5
    assert answer["usd_per_million_output_tokens"] > 0  # priced from the catalog: no plan was stored
    cells = store.get_results(run_id)
    assert len(cells) == len(answer["probes"]) == run.extra["kubernetes"]["cells_stored"]
    by_key = {(c.concurrency, c.repeat): c for c in cells}
    assert by_key[(5, 1)].tpot_p50_ms == pytest.approx(30.0) and by_key[(6, 1)].tpot_p50_ms == pytest.approx(
        34.0
    )
    assert len(store.get_request_records(by_key[(5, 1)].id)) == by_key[(5, 1)].completed
    assert run.extra["files"] and "report_error" not in run.extra
    assert [f"{r}/{n}" for (r, s, n) in cluster.objects if s == "bench" and r != "events"] == []


def test_a_sharded_capacity_search_is_refused_before_anything_is_stored() -> None:
    spec = RunSpec(
        model="Qwen/Qwen2.5-7B-Instruct",
        instance_type="r8g.4xlarge",
        target=KubernetesTarget(namespace="bench", loadgen_shards=2),
        capacity=CapacitySpec(slo=SLO),
    )
    with pytest.raises(UserInputError) as err:
        services.preflight(spec)
    assert "loadgen_shards is 2" in err.value.message and "one pod" in err.value.message
    with pytest.raises(ValueError, match="one load-generator pod"):
        LoadgenConfig(run_id="r", base_url="http://x", served_model="m", sweep=spec.sweep, shards=2,
                      capacity=spec.capacity)  # fmt: skip


# ---------------------------------------------------------------------------------------------- dry run
def test_the_dry_run_says_what_the_search_will_do(tmp_path: Path) -> None:
    spec = RunSpec(
        model="Qwen/Qwen2.5-7B-Instruct",
        instance_type="g6.2xlarge",
        target=EndpointTarget(base_url="http://127.0.0.1:9"),
        capacity=CapacitySpec(slo={"tpot": 100, "ttft": 5000}, input_len=256, output_len=64, max_load=64),
    )
    plan = services.dry_run(spec)
    search = plan.capacity
    assert search is not None and plan.cells == []
    assert search.load == "concurrency" and search.slo == "p90 tpot <= 100 ms, ttft <= 5000 ms"
    assert search.max_load == 64 and search.max_probes == 12
    assert search.requests_per_level == requests_for(90.0) >= 100  # ten requests beyond the p90
    # no start in the spec: the planner's predicted capacity is where it begins
    assert search.predicted_max_load and search.start_from == "the planner's predicted capacity"
    assert search.start == min(search.predicted_max_load, 64)
    assert plan.requests == search.requests_at_most > 0 and plan.predicted_duration_s is None
    assert plan.hourly_usd == pytest.approx(get_catalog().instance("g6.2xlarge").on_demand_usd)
    # the same answer on the command line
    f = tmp_path / "spec.yaml"
    f.write_text(
        "model: Qwen/Qwen2.5-7B-Instruct\ninstance_type: g6.2xlarge\ntarget: {kind: endpoint, base_url: "
        "'http://127.0.0.1:9'}\ncapacity: {slo: {tpot: 100, ttft: 5000}, input_len: 256, output_len: 64, "
        "start: 3, max_load: 64}\n"
    )
    res = runner.invoke(app, ["run", str(f), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "Capacity search (concurrency) at p90 tpot <= 100 ms" in res.stdout
    assert "first level: 3 users (from the spec)" in res.stdout and "at most 12 levels" in res.stdout


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_cancelled_search_ends_cancelled_with_its_probes_kept(store: Store, tmp_path: Path) -> None:
    import threading

    tok = make_tokenizer_dir(tmp_path / "tok")
    engine = BatchingEngine(slots=8, step_ms=10, per_seq_ms=4)
    cancel = threading.Event()
    levels: list[str] = []

    def on_event(event: dict[str, Any]) -> None:  # stop once the second level starts
        phase = str(event.get("phase", ""))
        if phase.startswith("concurrency ") and phase.endswith("requests"):
            levels.append(phase)
            if len(levels) == 2:
                cancel.set()

    with StreamServer(Script(), engine=engine, tokenizer_dir=tok, record=False) as server:
        spec = RunSpec(
            model="fixture-model",
            target=EndpointTarget(base_url=server.base_url, served_model="fixture-model", tokenizer=str(tok)),
            capacity=CapacitySpec(**CAPACITY),  # type: ignore[arg-type]
        )
        run = services.store_run(store, services.preflight(spec))
        final = execute_run(store, run.id, cancel=cancel, progress=on_event)
    assert final.status == RunStatus.cancelled and "capacity search" in (final.error or "")
    assert len(final.extra["capacity"]["probes"]) == 1 == len(store.get_results(run.id))


def test_a_bad_capacity_section_is_refused_naming_the_spec_and_the_metric(tmp_path: Path) -> None:
    spec_file = tmp_path / "bad.yaml"
    spec_file.write_text("model: smollm2\ncapacity: {slo: {tbt: 50}}\n")
    res = runner.invoke(app, ["run", str(spec_file), "--dry-run"])
    assert res.exit_code == 2, res.output
    assert "Invalid run spec" in res.output and "Unknown SLO metric in 'tbt" in res.output
    assert "ttft, tpot, itl, e2el" in res.output
