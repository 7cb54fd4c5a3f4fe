"""The orchestrator with real processes: the project's streaming fixture server plays the engine (the real
engine's version of these tests is in tests/integration). Status transitions, what a run records, report
files, the engine killed in the middle of a sweep, cancel, deploy failures, and no process left behind."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from accelbench.deploy.orchestrator import create_run, execute_run
from accelbench.deploy.proctree import processes_in_group
from accelbench.domain.run import (
    CellStatus,
    EndpointTarget,
    EngineSettings,
    EngineSpec,
    LocalTarget,
    RunSpec,
    RunStatus,
    SweepSpec,
)
from accelbench.store import Store

pytestmark = pytest.mark.usefixtures("fixture_engine")


def fixture_spec(model: Path, script: dict[str, Any] | None = None, **sweep: Any) -> RunSpec:
    base: dict[str, Any] = dict(
        input_lens=[48, 64], concurrency=[1, 2], repeats=1, output_len=8, prompts_per_concurrency=2
    )
    base.update(sweep)
    return RunSpec(
        label="fixture run",
        model=str(model),
        engine=EngineSpec(
            name="fixture",
            version="1.0",
            settings=EngineSettings(
                env={"FIXTURE_SCRIPT": json.dumps(script or {"ttft_ms": 2, "itl_ms": 1})}
            ),
        ),
        target=LocalTarget(startup_timeout_s=60),
        sweep=SweepSpec(**base),
    )


def group_of(run: Any) -> int:
    pid = run.extra["deployment"]["pid"]
    assert isinstance(pid, int)
    return pid


def test_a_run_from_pending_to_completed_records_everything(store: Store, fixture_model_dir: Path) -> None:
    run = create_run(store, fixture_spec(fixture_model_dir))
    assert run.status == RunStatus.pending
    statuses: list[str] = []
    events: list[dict[str, Any]] = []

    def on_event(ev: dict[str, Any]) -> None:
        events.append(ev)
        statuses.append(store.get_run(run.id).status.value)

    final = execute_run(store, run.id, progress=on_event)
    assert final.status == RunStatus.completed, final.error
    assert "deploying" in statuses and "benchmarking" in statuses
    assert any(e.get("cells_total") == 4 for e in events)
    results = store.get_results(run.id)
    assert sorted((r.input_len, r.concurrency) for r in results) == [(48, 1), (48, 2), (64, 1), (64, 2)]
    assert all(r.status == CellStatus.completed and r.failed == 0 for r in results)
    # what the run records
    assert final.engine == "fixture" and final.engine_version == "1.0" and final.target == "local"
    assert final.served_model == "fixture-model"
    assert final.command and "--model fixture-model" in final.command
    dep = final.extra["deployment"]
    assert dep["env"] == {"TOY_SETTING": "on", "FIXTURE_SCRIPT": json.dumps({"ttft_ms": 2, "itl_ms": 1})}
    assert dep["ready_s"] is not None and Path(dep["log_path"]).exists()
    assert final.environment["cpu"] and final.environment["engine_env"] == dep["env"]
    assert final.spec["engine"]["name"] == "fixture" and final.spec["sweep"]["input_lens"] == [48, 64]
    # the fixture server answers with filler words: the check says so, the run is not failed for it
    assert final.extra["answer_check"]["passed"] is False
    files = [Path(f) for f in final.extra["files"]]
    assert {"results.md", "results.csv"} <= {f.name for f in files} and all(f.exists() for f in files)
    assert processes_in_group(group_of(final)) == []


def test_engine_killed_mid_sweep_fails_the_run_keeps_cells_leaves_nothing(
    store: Store, fixture_model_dir: Path
) -> None:
    spec = fixture_spec(
        fixture_model_dir,
        {"ttft_ms": 5, "itl_ms": 40},
        input_lens=[48],
        concurrency=[1],
        repeats=4,
        output_len=10,
    )
    run = create_run(store, spec)
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = store.get_run(run.id)
            if store.get_results(run.id) and "deployment" in r.extra:
                pid = group_of(r)
                children = psutil.Process(pid).children(recursive=True)
                os.kill(pid, signal.SIGKILL)  # the engine's main process only, as an OOM kill would
                killed.append(pid)
                killed.extend(c.pid for c in children)
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    final = execute_run(store, run.id)
    t.join()
    assert killed, "the engine was never killed"
    assert final.status == RunStatus.failed
    assert final.error and "exited with code -9" in final.error and "Last lines of its log" in final.error
    kept = store.get_results(run.id)
    assert kept and kept[0].status == CellStatus.completed
    assert processes_in_group(killed[0]) == []
    assert not [
        p for p in killed if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]


def test_cancel_during_the_sweep(store: Store, fixture_model_dir: Path) -> None:
    spec = fixture_spec(
        fixture_model_dir,
        {"ttft_ms": 5, "itl_ms": 30},
        input_lens=[48],
        concurrency=[1],
        repeats=5,
        output_len=10,
    )
    run = create_run(store, spec)
    cancel = threading.Event()

    def canceller() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not store.get_results(run.id):
            time.sleep(0.05)
        cancel.set()

    t = threading.Thread(target=canceller)
    t.start()
    final = execute_run(store, run.id, cancel=cancel)
    t.join()
    assert final.status == RunStatus.cancelled
    assert 1 <= len(store.get_results(run.id)) < 5
    assert processes_in_group(group_of(final)) == []


def test_cancel_before_start(store: Store, fixture_model_dir: Path) -> None:
    run = create_run(store, fixture_spec(fixture_model_dir))
    cancel = threading.Event()
    cancel.set()
    final = execute_run(store, run.id, cancel=cancel)
    assert final.status == RunStatus.cancelled and "deployment" not in final.extra


def test_a_deploy_that_cannot_start_fails_with_the_reason(store: Store, tmp_path: Path) -> None:
    run = create_run(store, fixture_spec(tmp_path / "no-such-model"))
    final = execute_run(store, run.id)
    assert final.status == RunStatus.failed
    assert final.error and "Unknown model" in final.error


def test_endpoint_target_uses_a_running_server_and_leaves_it(store: Store, fixture_model_dir: Path) -> None:
    from tests.support.stream_server import spawn_server

    with spawn_server("--model", "served-elsewhere", "--tokenizer-dir", str(fixture_model_dir)) as server:
        base_url = f"http://127.0.0.1:{server.port}"
        spec = fixture_spec(fixture_model_dir, input_lens=[48], concurrency=[1])
        spec = spec.model_copy(
            update={"target": EndpointTarget(base_url=base_url, tokenizer=str(fixture_model_dir))}
        )
        run = create_run(store, spec)
        final = execute_run(store, run.id)
        assert final.status == RunStatus.completed, final.error
        assert final.served_model == "served-elsewhere" and final.target == "endpoint"
        import httpx

        assert httpx.get(base_url + "/health").status_code == 200  # still running
