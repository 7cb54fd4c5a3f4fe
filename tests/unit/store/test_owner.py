"""A run names the process executing it; a run whose CLI process was killed outright is found and marked
interrupted (its finished cells kept), while runs of live processes are left alone."""

from __future__ import annotations

import subprocess
import sys

from accelbench.domain.run import RunStatus
from accelbench.store import Store
from accelbench.store.owner import in_flight_runs, owner_is_dead, process_owner, recover_dead_owners
from tests.support.api_app import summary
from tests.support.killed_run import KILLED_CLI


def test_a_run_whose_process_died_is_interrupted_and_keeps_its_cells(store: Store) -> None:
    out = subprocess.run(
        [sys.executable, "-c", KILLED_CLI, str(store.engine.url.render_as_string(hide_password=False))],
        capture_output=True,
        text=True,
        check=True,
    )
    orphan = out.stdout.strip()
    store.save_result(orphan, input_len=128, concurrency=1, repeat=0, summary=summary())
    owners = {run_id: owner for run_id, _status, _beat, owner in in_flight_runs(store)}
    owner = owners[orphan]
    assert owner is not None and owner.endswith("-proc") and owner_is_dead(owner)

    mine = store.create_run(kind="sweep", model="m")
    store.set_status(mine.id, RunStatus.benchmarking)
    assert {run_id: owner for run_id, _s, _b, owner in in_flight_runs(store)}[mine.id] == process_owner()

    assert recover_dead_owners(store) == [orphan]
    run = store.get_run(orphan)
    assert run.status == RunStatus.interrupted and run.finished_at is not None
    assert "1 finished cell kept" in (run.error or "")
    assert len(store.get_results(orphan)) == 1
    assert store.get_run(mine.id).status == RunStatus.benchmarking  # this process is alive
    assert recover_dead_owners(store) == []


def test_owners_elsewhere_are_never_called_dead() -> None:
    assert not owner_is_dead(None)
    assert not owner_is_dead("some-other-host-123-proc")
    assert not owner_is_dead(process_owner())


def test_a_cell_cut_off_before_any_request_completed_is_not_counted_as_kept(store: Store) -> None:
    """An interrupted cell with 0 completed requests was counted among the "finished cells kept"."""
    from accelbench.domain.run import CellStatus
    from accelbench.store.owner import mark_interrupted

    run = store.create_run(kind="sweep", model="m")
    store.set_status(run.id, RunStatus.benchmarking)
    store.save_result(run.id, input_len=128, concurrency=1, repeat=0, summary=summary(128, 1))
    cut = summary(128, 2).model_copy(update={"completed": 0, "failed": 4, "interrupted": True})
    store.save_result(run.id, input_len=128, concurrency=2, repeat=0, summary=cut, status=CellStatus.failed)
    assert store.kept_cells(run.id) == 1
    mark_interrupted(store, run.id, "benchmarking", None)
    assert "1 finished cell kept" in (store.get_run(run.id).error or "")
