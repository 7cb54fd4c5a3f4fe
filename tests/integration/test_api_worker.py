"""The run worker on SQLite and PostgreSQL: executes queued runs, progress readable from the API, cancel of
pending and running runs (also when cancelled by another process), failures recorded, restart recovery
(in-flight runs interrupted with their finished cells kept, pending runs continue), graceful shutdown,
one worker per SQLite store, and several workers on PostgreSQL never taking the same run.

The orchestrator is replaced here by ``ScriptedExecutor``, which drives the same store transitions, so the
worker's own mechanics are what is tested; real runs are in the end-to-end tests.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from datetime import UTC, datetime, timedelta

import pytest

from accelbench.domain.run import RunStatus
from accelbench.errors import ConflictError, EngineError
from accelbench.services.worker import RunWorker, recover_interrupted
from accelbench.store import Store
from tests.support.api_app import ScriptedExecutor, api_for, summary, wait_for

RUN = {"model": "smollm2-135m-instruct", "engine": {"settings": {"kv_cache_space_gib": 1}}}


def status_of(api, run_id: str) -> str:
    return api.client.get(f"/api/v1/runs/{run_id}").json()["run"]["status"]


def test_queued_run_is_executed_with_progress(store: Store) -> None:
    ex = ScriptedExecutor()
    ex.hold.set()
    with api_for(store, executor=ex, start_worker=True) as api:
        run_id = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        wait_for(lambda: status_of(api, run_id) == "completed")
        d = api.client.get(f"/api/v1/runs/{run_id}").json()
        assert [(r["input_len"], r["concurrency"]) for r in d["results"]] == [(128, 1), (128, 2)]
        assert d["run"]["progress"]["cells_done"] in (1, 2)  # throttled: at least one update stored
        assert d["run"]["started_at"] and d["run"]["finished_at"]
        assert ex.calls == [run_id] and ex.kwargs[0]["progress"] is True
        health = api.client.get("/api/v1/health").json()
        assert health["worker"]["running"] and health["worker"]["runs_done"] == 1


def test_progress_is_readable_while_running_and_cancel_stops_it(store: Store) -> None:
    ex = ScriptedExecutor()
    with api_for(store, executor=ex, start_worker=True) as api:
        run_id = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        assert ex.started.wait(20)
        d = api.client.get(f"/api/v1/runs/{run_id}").json()
        assert d["run"]["status"] == "benchmarking" and len(d["results"]) == 1  # first cell already stored
        r = api.client.post(f"/api/v1/runs/{run_id}/cancel", headers=api.auth)
        assert r.status_code == 202 and r.json()["signalled"] is True
        wait_for(lambda: api.client.get("/api/v1/health").json()["worker"]["current_run"] is None)
        d = api.client.get(f"/api/v1/runs/{run_id}").json()
        assert d["run"]["status"] == "cancelled" and len(d["results"]) == 1  # the finished cell is kept


def test_cancel_from_another_process_reaches_the_run(store: Store) -> None:
    ex = ScriptedExecutor()
    with api_for(store, executor=ex, start_worker=True) as api:
        run_id = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        assert ex.started.wait(20)
        store.cancel_run(run_id)  # as another API replica or the CLI would: only the store changes
        wait_for(lambda: api.client.get("/api/v1/health").json()["worker"]["current_run"] is None)
        assert store.get_run(run_id).status == RunStatus.cancelled


def test_pending_run_cancelled_before_the_worker_takes_it(store: Store) -> None:
    ex = ScriptedExecutor()
    with api_for(store, executor=ex, start_worker=True) as api:
        first = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        assert ex.started.wait(20)  # the worker is busy with the first run
        second = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        assert (
            api.client.post(f"/api/v1/runs/{second}/cancel", headers=api.auth).json()["status"] == "cancelled"
        )
        ex.hold.set()
        wait_for(lambda: status_of(api, first) == "completed")
        assert ex.calls == [first]  # the cancelled run never started
        assert status_of(api, second) == "cancelled"


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (EngineError("vLLM died", hint="see its log"), "vLLM died"),
        (RuntimeError("boom"), "RuntimeError: boom"),
    ],
)
def test_executor_failure_marks_the_run_failed(store: Store, error, says) -> None:
    ex = ScriptedExecutor(fail_with=error)
    with api_for(store, executor=ex, start_worker=True) as api:
        run_id = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        wait_for(lambda: status_of(api, run_id) == "failed")
        run = api.client.get(f"/api/v1/runs/{run_id}").json()["run"]
        assert says in run["error"]
        assert api.client.get("/api/v1/health").json()["worker"]["running"]  # the worker goes on


def test_run_left_without_final_status_is_failed(store: Store) -> None:
    def lazy(store: Store, run_id: str, *, cancel, progress=None, secrets=None) -> None:
        store.set_status(run_id, RunStatus.benchmarking)

    with api_for(store, executor=lazy, start_worker=True) as api:
        run_id = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        wait_for(lambda: status_of(api, run_id) == "failed")
        assert "without a final status" in store.get_run(run_id).error


def _in_flight(store: Store, worker_id: str | None, beat: datetime | None) -> str:
    run = store.create_run(kind="run", model="m", status=RunStatus.pending)
    store.update_run(run.id, status=RunStatus.benchmarking, worker_id=worker_id, heartbeat_at=beat)
    store.save_result(run.id, input_len=128, concurrency=1, repeat=0, summary=summary())
    return run.id


def test_restart_interrupts_in_flight_runs_keeps_cells_and_continues_pending(store: Store) -> None:
    old = _in_flight(store, "dead-worker", datetime.now(UTC) - timedelta(hours=1))
    cli_run = _in_flight(store, None, None)  # executed by a CLI process, not a worker: not ours to touch
    # a CLI process of this host that is alive (it writes no heartbeat), and one that was killed outright
    live_cli = _in_flight(store, f"{socket.gethostname()}-{os.getppid()}-proc", None)
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead_cli = _in_flight(store, f"{socket.gethostname()}-{gone.pid}-proc", None)
    pending = store.create_run(kind="run", model="m", status=RunStatus.pending).id
    ex = ScriptedExecutor()
    ex.hold.set()
    with api_for(store, executor=ex, start_worker=True) as api:
        wait_for(lambda: status_of(api, pending) == "completed")
        d = api.client.get(f"/api/v1/runs/{old}").json()
        assert d["run"]["status"] == "interrupted"
        assert "1 finished cell kept" in d["run"]["error"] and len(d["results"]) == 1
        assert status_of(api, cli_run) == "benchmarking"
        assert status_of(api, live_cli) == "benchmarking"
        dead = api.client.get(f"/api/v1/runs/{dead_cli}").json()["run"]
        assert (
            dead["status"] == "interrupted"
            and f"process ({socket.gethostname()}-{gone.pid}-proc)" in dead["error"]
        )
        assert ex.calls == [pending]


def test_postgres_leaves_runs_of_live_workers_alone(pg_url: str) -> None:
    store = Store(pg_url)
    live = _in_flight(store, "other-host-4242-abcdef", datetime.now(UTC))
    stale = _in_flight(store, "crashed-host-77-abcdef", datetime.now(UTC) - timedelta(minutes=10))
    # a worker of this host whose process is gone: no need to wait for its heartbeat to go stale
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead_here = _in_flight(store, f"{socket.gethostname()}-{gone.pid}-abcdef", datetime.now(UTC))
    alive_here = _in_flight(store, f"{socket.gethostname()}-{os.getppid()}-abcdef", datetime.now(UTC))
    cli_elsewhere = _in_flight(store, "other-host-4242-proc", None)  # no heartbeat, and cannot be checked
    assert sorted(recover_interrupted(store, stale_after_s=90)) == sorted([stale, dead_here])
    assert store.get_run(cli_elsewhere).status == RunStatus.benchmarking
    assert store.get_run(live).status == RunStatus.benchmarking
    assert store.get_run(alive_here).status == RunStatus.benchmarking
    assert store.get_run(stale).status == RunStatus.interrupted


def test_shutdown_during_a_run_marks_it_interrupted(store: Store) -> None:
    ex = ScriptedExecutor()
    with api_for(store, executor=ex, start_worker=True) as api:
        run_id = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        assert ex.started.wait(20)
    # leaving the client ran the app's shutdown: the worker cancelled the run and waited for its teardown
    run = store.get_run(run_id)
    assert run.status == RunStatus.interrupted and "shut down" in run.error
    assert len(store.get_results(run_id)) == 1


def test_one_worker_per_sqlite_store(tmp_path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'one.db'}")
    first = RunWorker(store, executor=ScriptedExecutor())
    first.start()
    try:
        with pytest.raises(ConflictError, match="one worker"):
            RunWorker(store, executor=ScriptedExecutor()).start()
    finally:
        first.stop()
    second = RunWorker(store, executor=ScriptedExecutor())
    second.start()  # the lock is released with the first worker
    second.stop()


def test_several_postgres_workers_never_take_the_same_run(pg_url: str) -> None:
    store = Store(pg_url)
    ids = [store.create_run(kind="run", model="m", status=RunStatus.pending).id for _ in range(12)]
    taken: list[str] = []
    lock = threading.Lock()

    def executor(st: Store, run_id: str, *, cancel, progress=None, secrets=None) -> None:
        with lock:
            taken.append(run_id)
        st.set_status(run_id, RunStatus.benchmarking)
        threading.Event().wait(0.05)
        st.set_status(run_id, RunStatus.completed)

    workers = [RunWorker(Store(store.url), executor=executor, poll_interval_s=0.01) for _ in range(3)]
    for w in workers:
        w.start()
    try:
        wait_for(lambda: all(store.get_run(i).status == RunStatus.completed for i in ids), timeout=60)
    finally:
        for w in workers:
            w.stop()
    assert sorted(taken) == sorted(ids)  # each exactly once
    assert sum(w.runs_done for w in workers) == 12


def test_a_store_that_fails_while_a_run_settles_does_not_kill_the_worker(store: Store, monkeypatch) -> None:
    """One failed database write while a run settled (disk full) killed the worker thread for good: the run
    stayed `benchmarking`, new runs stayed `pending`, and /health still said ok. Now the worker keeps going,
    says degraded while the store refuses, and writes the final status once the store takes it again."""
    from sqlalchemy.exc import OperationalError

    disk_full = threading.Event()
    real_set_status = Store.set_status

    def set_status(self, run_id, status, **kw):  # type: ignore[no-untyped-def]
        if disk_full.is_set() and status.finished:
            raise OperationalError("UPDATE runs", {}, Exception("database or disk is full"))
        return real_set_status(self, run_id, status, **kw)

    monkeypatch.setattr(Store, "set_status", set_status)
    ex = ScriptedExecutor()
    with api_for(store, executor=ex, start_worker=True) as api:
        first = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        assert ex.started.wait(20)
        disk_full.set()
        ex.hold.set()  # the executor's "completed" write fails, then the worker's own
        wait_for(lambda: api.client.get("/api/v1/health").json()["status"] == "degraded")
        health = api.client.get("/api/v1/health").json()
        assert health["worker"]["running"] and "disk is full" in (health["worker"]["store_error"] or "")
        assert health["worker"]["unsettled_runs"] == [first]
        disk_full.clear()
        second = api.client.post("/api/v1/runs", json=RUN, headers=api.auth).json()["id"]
        wait_for(lambda: status_of(api, second) == "completed")  # the worker still takes runs
        wait_for(lambda: status_of(api, first) == "failed")
        assert "disk is full" in api.client.get(f"/api/v1/runs/{first}").json()["run"]["error"]
        assert len(api.store.get_results(first)) == 2  # what it measured is kept
        wait_for(lambda: api.client.get("/api/v1/health").json()["status"] == "ok")
