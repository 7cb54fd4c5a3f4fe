"""Who runs a run: every in-flight run names the process executing it, so a run whose process died is found.

An owner id is ``HOST-PID-TAG``. A service worker's tag is random (``RunWorker``); a run executed directly by a
CLI process (``run``, ``rerun``, ``demo``, ``bench``, ``sweep``, ``capacity``) gets the tag ``proc``, claimed when
the run is made (``store.claims``). Only a
process of this host can be checked for life; an owner on another host is "unknown".
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import and_, or_, select

from accelbench.domain.owner import PROCESS_TAG, process_owner  # noqa: F401  (process_owner: kept importable from here for the store's callers)
from accelbench.domain.run import RunStatus
from accelbench.store.tables import runs

if TYPE_CHECKING:
    from accelbench.store.database import StoreBase
    from accelbench.store.repo import Store

#: statuses of a run that some process is executing right now
IN_FLIGHT = (RunStatus.deploying.value, RunStatus.benchmarking.value)


def is_process_owner(owner: str | None) -> bool:
    """A CLI process (not a service worker) executes the run: it writes no heartbeat."""
    return owner is not None and owner.endswith(f"-{PROCESS_TAG}")


def owner_is_dead(owner: str | None) -> bool:
    """True when ``owner`` names a process of this host that no longer exists. Other hosts, or this very
    process: not known to be dead, so False."""
    if not owner:
        return False
    parts = owner.rsplit("-", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by someone else
        return False
    return False


def mark_interrupted(store: Store, run_id: str, status: str, owner: str | None) -> None:
    """The run's executor is gone: fence it out (should it be alive after all, it writes nothing more) and
    say so on the run."""
    store.fence_out(run_id)
    cells = store.kept_cells(run_id)
    who = "the service" if not is_process_owner(owner) else f"the accelbench process ({owner})"
    store.set_status(
        run_id,
        RunStatus.interrupted,
        error=(
            f"Interrupted: {who} stopped while this run was {status}. "
            f"{cells} finished cell{'s' if cells != 1 else ''} kept. "
            "Start the run again to measure the rest."
        ),
    )


def in_flight_runs(store: StoreBase) -> list[tuple[str, str, datetime | None, str | None]]:
    """(id, status, heartbeat, owner) of every in-flight run that names its owner, and of every pending run a
    process claimed when it made it (it has not started yet)."""
    claimed_pending = and_(runs.c.status == RunStatus.pending.value, runs.c.claim_epoch.is_not(None))
    with store.connection() as conn:
        rows = conn.execute(
            select(runs.c.id, runs.c.status, runs.c.heartbeat_at, runs.c.worker_id).where(
                or_(runs.c.status.in_(IN_FLIGHT), claimed_pending), runs.c.worker_id.is_not(None)
            )
        ).all()
    return [
        (r[0], r[1], r[2] if r[2] is None or r[2].tzinfo else r[2].replace(tzinfo=UTC), r[3]) for r in rows
    ]


def recover_dead_owners(store: Store) -> list[str]:
    """Mark in-flight runs whose process on this host is gone (killed outright, so it could not say so) as
    interrupted; their finished cells stay. Returns their ids."""
    taken = []
    for run_id, status, _beat, owner in in_flight_runs(store):
        if owner_is_dead(owner):
            mark_interrupted(store, run_id, status, owner)
            taken.append(run_id)
    return taken
