"""A run's one executor, on SQLite and PostgreSQL: a run made claimed is never a worker's; the fence refuses a
stale executor's cells, status and progress, and a cell write of a process that holds no claim; a dead
executor's run is fenced out when it is marked interrupted."""

from __future__ import annotations

import pytest

from accelbench.domain.run import RunStatus
from accelbench.errors import ClaimLost, ConflictError
from accelbench.store import Store
from accelbench.store.claims import Claim, held, hold, release
from accelbench.store.owner import process_owner, recover_dead_owners
from tests.support.api_app import summary

DEAD = "nohost-1-proc"  # an owner on another host: never known dead, never this process


def test_a_run_made_claimed_is_never_taken_by_a_worker(store: Store) -> None:
    mine = store.create_run(kind="run", status=RunStatus.pending, claimed_by=process_owner())
    queued = store.create_run(kind="run", status=RunStatus.pending)
    taken = store.claim_next_pending("worker-a")
    assert taken is not None and taken.id == queued.id
    assert store.claim_next_pending("worker-b") is None  # the claimed pending run stays its maker's
    assert store.claim_of(mine.id) == (process_owner(), 1)
    assert store.claim_of(queued.id) == ("worker-a", 1)
    assert held(queued.id) == Claim(queued.id, "worker-a", 1)


def test_a_stale_executor_writes_nothing_once_another_claimed_the_run(store: Store) -> None:
    run = store.create_run(kind="sweep", status=RunStatus.benchmarking, claimed_by=process_owner())
    first = held(run.id)
    assert first is not None
    store.save_result(run.id, input_len=128, concurrency=1, repeat=0, summary=summary())
    store.update_run(run.id, status=RunStatus.interrupted)  # it stopped; a resume takes it over
    store.claim_run(run.id, owner="otherhost-7-proc")
    assert store.claim_of(run.id) == ("otherhost-7-proc", 2)
    hold(first)  # the first executor still believes it holds the run
    with pytest.raises(ClaimLost, match="no longer this process's"):
        store.save_result(run.id, input_len=128, concurrency=2, repeat=0, summary=summary(concurrency=2))
    with pytest.raises(ClaimLost):
        store.set_status(run.id, RunStatus.completed)
    with pytest.raises(ClaimLost):
        store.update_run(run.id, progress={"phase": "stale"})
    after = store.get_run(run.id)
    assert after.status == RunStatus.benchmarking and after.progress.get("phase") != "stale"
    assert [(r.concurrency, r.repeat) for r in store.get_results(run.id)] == [(1, 0)]


def test_a_process_without_the_claim_writes_no_cells(store: Store) -> None:
    run = store.create_run(kind="sweep", status=RunStatus.benchmarking, claimed_by=DEAD)
    release(run.id)  # this process made it for another executor: it holds nothing
    with pytest.raises(ClaimLost, match=f"executed by {DEAD}"):
        store.save_result(run.id, input_len=128, concurrency=1, repeat=0, summary=summary())
    assert store.get_results(run.id) == []
    # a run nobody claimed (made before claims, or imported) still takes cells
    free = store.create_run(kind="import")
    store.save_result(free.id, input_len=128, concurrency=1, repeat=0, summary=summary())
    # cancelling is not executing: any process may ask
    assert store.cancel_run(run.id).status == RunStatus.cancelled


def test_take_claim_refuses_a_run_another_executor_holds(store: Store) -> None:
    run = store.create_run(kind="run", status=RunStatus.pending, claimed_by=DEAD)
    release(run.id)
    with pytest.raises(ConflictError, match="executed by"):
        store.take_claim(run.id, process_owner())
    free = store.create_run(kind="run", status=RunStatus.pending)
    claim = store.take_claim(free.id, process_owner())
    assert claim.epoch == 1 and store.take_claim(free.id, process_owner()) == claim


def test_marking_a_dead_executors_run_interrupted_fences_it_out(store: Store) -> None:
    gone = "{}-{}-proc".format(process_owner().rsplit("-", 2)[0], 2**22 + 12345)  # a pid that cannot exist
    run = store.create_run(kind="run", status=RunStatus.pending, claimed_by=gone)
    stale = held(run.id)
    assert stale is not None
    assert recover_dead_owners(store) == [
        run.id
    ]  # a claimed pending run whose maker died is not left pending
    after = store.get_run(run.id)
    assert after.status == RunStatus.interrupted and "stopped while this run was pending" in (
        after.error or ""
    )
    assert store.claim_of(run.id) == (gone, 2)
    hold(stale)
    with pytest.raises(ClaimLost):
        store.save_result(run.id, input_len=128, concurrency=1, repeat=0, summary=summary())
