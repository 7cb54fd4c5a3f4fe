"""A run's one executor: the claim a process takes on a run, and the fence every write of its executor passes.

- A claim is ``(owner, epoch)``: the owner ``HOST-PID-TAG`` (``store.owner``) in ``runs.worker_id`` and a number
  in ``runs.claim_epoch`` that every claim raises. A run started by the CLI is claimed by that process when it
  is created (``create_run(claimed_by=...)``); a run queued through the API is claimed by the worker that takes
  it (``claim_next_pending`` only takes runs nobody claimed); a resume takes a stopped run over (``claim_run``).
- This process remembers the claims it holds. Every cell, telemetry, status or progress write for a run it
  holds is made in one transaction with a conditional update of the run's row that matches owner and epoch
  (the row is locked until the write commits), so a write of an executor whose claim was taken over is
  refused (``ClaimLost``) and nothing of it is stored. A process that holds no claim on a run may not write
  cells into a run someone claimed; it may still cancel it or mark a dead executor's run interrupted, which
  raises the epoch and so fences that executor out.
- The unit is the process: every executor in one process (the worker's threads, a CLI's sweep) writes under
  the claims that process holds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from accelbench.errors import ClaimLost, ConflictError, NotFoundError
from accelbench.store.database import StoreBase
from accelbench.store.models import RunRow


@dataclass(frozen=True)
class Claim:
    """One executor's hold on one run."""

    run_id: str
    owner: str
    epoch: int


_held: dict[str, Claim] = {}
_held_lock = threading.Lock()


def hold(claim: Claim) -> Claim:
    with _held_lock:
        _held[claim.run_id] = claim
    return claim


def held(run_id: str) -> Claim | None:
    """The claim this process holds on ``run_id`` (None: it holds none)."""
    with _held_lock:
        return _held.get(run_id)


def release(run_id: str) -> None:
    """Forget this process's claim on a run it finished: later writes are no executor's."""
    with _held_lock:
        _held.pop(run_id, None)


def _refusal(s: Session, run_id: str, claim: Claim | None) -> ConflictError | NotFoundError:
    row = s.execute(select(RunRow.worker_id, RunRow.claim_epoch).where(RunRow.id == run_id)).first()
    if row is None:
        return NotFoundError(f"No run {run_id!r}.")
    who = f"{row[0]} (claim {row[1]})" if row[0] else f"claim {row[1]}"
    if claim is None:
        return ClaimLost(
            f"Run {run_id} is executed by {who}; this process holds no claim on it, so it writes no cells "
            "into it.",
            hint="A run has one executor. Resume it (it must be stopped first) to measure it from here.",
        )
    return ClaimLost(
        f"Run {run_id} is no longer this process's to write: it is now held by {who}, not by "
        f"{claim.owner} (claim {claim.epoch}). Nothing more from this process is stored in it.",
        hint="A run has one executor; another took it over (a resume, or the run was marked interrupted).",
    )


def check_fence(s: Session, run_id: str, *, cells: bool) -> None:
    """In the caller's transaction, before it writes: the fence. A holder's write needs its claim to be the
    run's current one; a cell write of a process that holds no claim needs a run nobody claimed. The
    conditional update locks the run's row (SQLite: the database) until the caller's write commits, so no
    claim can change between this check and that write."""
    claim = held(run_id)
    if claim is not None:
        query = update(RunRow).where(
            RunRow.id == run_id, RunRow.worker_id == claim.owner, RunRow.claim_epoch == claim.epoch
        )
    elif cells:
        query = update(RunRow).where(RunRow.id == run_id, RunRow.claim_epoch.is_(None))
    else:
        return
    result: CursorResult[Any] = s.execute(query.values(claim_epoch=RunRow.claim_epoch))  # type: ignore[assignment]
    if result.rowcount != 1:
        raise _refusal(s, run_id, claim)


class ClaimStore(StoreBase):
    """Taking, checking and fencing out a run's claim."""

    def take_claim(self, run_id: str, owner: str) -> Claim:
        """Claim ``run_id`` for ``owner`` when nobody holds it, or confirm this process's own claim: what an
        executor does before it deploys anything. A run another executor holds is refused."""
        mine = held(run_id)
        with self.session() as s:
            if mine is not None:
                check_fence(s, run_id, cells=False)
                return mine
            result: CursorResult[Any] = s.execute(  # type: ignore[assignment]
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.claim_epoch.is_(None))
                .values(worker_id=owner, claim_epoch=1)
            )
            if result.rowcount != 1:
                raise _refusal(s, run_id, None)
        return hold(Claim(run_id, owner, 1))

    def fence_out(self, run_id: str) -> None:
        """Raise the run's epoch so that whoever held it can write nothing more (its process is dead or lost
        its heartbeat); a claim this process held on it is dropped as well."""
        release(run_id)
        with self.session() as s:
            s.execute(
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.claim_epoch.is_not(None))
                .values(claim_epoch=RunRow.claim_epoch + 1)
            )

    def claim_of(self, run_id: str) -> tuple[str | None, int | None]:
        """(owner, epoch) of the run's current claim, as stored."""
        with self.session() as s:
            row = s.execute(select(RunRow.worker_id, RunRow.claim_epoch).where(RunRow.id == run_id)).first()
        if row is None:
            raise NotFoundError(f"No run {run_id!r}.")
        return row[0], row[1]
