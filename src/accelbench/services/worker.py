"""The background run worker: takes pending runs from the store and executes them, each in a thread of its own.

- A POSTed run is stored as ``pending``; the worker claims it with ``Store.claim_next_pending`` (row locking with
  SKIP LOCKED on PostgreSQL, so several workers never take the same run; a run a CLI process claimed when it made
  it is never taken) and calls the orchestrator's ``execute_run``, which drives pending -> deploying ->
  benchmarking -> completed | failed | cancelled and saves each finished cell as it goes, under the run's claim
  (``store.claims``: a write after the claim was lost is refused).
- One run at a time measures (``deploy.machine``). While every run the worker executes is waiting for a remote
  engine to become ready (holding nothing here) for ``overlap_after_s``, the worker takes the next pending run
  as well, up to ``max_runs`` at once: an unreachable target no longer holds the worker for its whole
  readiness wait.
- SQLite has no row locks: only one worker may use a SQLite store, enforced with an exclusive file lock next
  to the database file; a second worker is refused with a clear error.
- While a run executes, a heartbeat is written every few seconds and the run's stored status is polled, so a
  cancel made by any process (another API replica, the CLI) reaches the run.
- Restart: at start-up, runs that a worker had claimed and that are still deploying or benchmarking are
  marked ``interrupted`` (their finished cells stay in the store); pending runs simply continue. On
  PostgreSQL only runs whose heartbeat is stale are touched, because other workers may be alive; the same
  check runs periodically, so runs of a crashed replica do not stay "benchmarking" forever. Runs that a CLI
  process executes (no heartbeat) are taken only when that process is known to be dead (``store.owner``).
- A graceful shutdown cancels the run in progress (the orchestrator tears the engine down) and marks it
  interrupted, not cancelled: nobody asked for it to stop.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, Protocol

from accelbench.deploy.machine_share import MACHINE
from accelbench.domain.run import RunStatus
from accelbench.errors import AccelbenchError, ClaimLost, ConflictError, StoreError
from accelbench.store import Store
from accelbench.store.claims import release
from accelbench.store.owner import (
    in_flight_runs,
    is_process_owner,
    mark_interrupted,
    owner_is_dead,
    process_owner,
)

log = logging.getLogger("accelbench.worker")


class Executor(Protocol):
    """What executes one stored run: the orchestrator's ``execute_run``, or a test's stand-in. Every executor
    takes the same keywords; the worker never inspects which it accepts."""

    def __call__(
        self,
        store: Store,
        run_id: str,
        *,
        cancel: threading.Event,
        progress: Callable[..., None] | None,
        secrets: dict[str, str] | None,
    ) -> Any: ...


def default_executor() -> Executor:
    """The orchestrator's ``execute_run`` (imported late: the API works without the deploy layer loaded)."""
    from accelbench.deploy.orchestrator import execute_run

    return execute_run


def sqlite_path(store: Store) -> Path | None:
    if store.engine.dialect.name != "sqlite":
        return None
    db = store.engine.url.database
    if not db or db == ":memory:":
        return None
    return Path(db).resolve()


class WorkerLock:
    """Exclusive lock that makes a SQLite store single-worker (flock: released when the process dies)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(self.path, "a+")  # noqa: SIM115 - held open for the lock's lifetime
        except OSError as exc:  # a read-only or full filesystem: one line, not a traceback
            raise StoreError(
                f"The SQLite store's directory cannot be written ({exc.strerror or exc}): a run worker cannot "
                "run on it.",
                hint="Make the store writable again, or start with `accelbench serve --no-worker` to serve reads.",
            ) from None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip()
            fh.close()
            raise ConflictError(
                "Another run worker already uses this SQLite store"
                + (f" ({holder})" if holder else "")
                + "; SQLite supports one worker.",
                hint="Start this service with `accelbench serve --no-worker`, stop the other one, or use "
                "PostgreSQL (ACCELBENCH_DATABASE_URL) to run several workers.",
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def recover_interrupted(store: Store, *, stale_after_s: float | None = None) -> list[str]:
    """Mark runs that a worker claimed and that are still in flight as interrupted; returns their ids.

    ``stale_after_s=None`` takes every such run (a single-worker SQLite store whose lock we hold: whoever owned
    them is gone). Otherwise only runs whose heartbeat is older than that, or whose worker was a process of this
    host that is gone, are taken. A run a CLI process is executing itself writes no heartbeat: it is taken only
    when its process is known to be dead.
    """
    now = datetime.now(UTC)
    taken: list[str] = []
    for run_id, status, heartbeat, owner in in_flight_runs(store):
        if not owner_is_dead(owner):
            if is_process_owner(owner):
                continue
            if stale_after_s is not None and heartbeat and now - heartbeat < timedelta(seconds=stale_after_s):
                continue
        mark_interrupted(store, run_id, status, owner)
        log.warning("run %s was %s when its process (%s) stopped; marked interrupted", run_id, status, owner)
        taken.append(run_id)
    return taken


class RunWorker:
    """One worker thread. ``start()`` recovers, then polls for pending runs until ``stop()``."""

    def __init__(
        self,
        store: Store,
        *,
        executor: Executor | None = None,
        poll_interval_s: float = 2.0,
        heartbeat_s: float = 5.0,
        stale_after_s: float = 90.0,
        worker_id: str | None = None,
        max_runs: int = 4,
        overlap_after_s: float = 5.0,
    ) -> None:
        self.store = store
        self._executor = executor
        self.poll_interval_s = poll_interval_s
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.max_runs = max(1, max_runs)
        self.overlap_after_s = overlap_after_s
        self.worker_id = worker_id or process_owner(uuid.uuid4().hex[:6])
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock: WorkerLock | None = None
        self._state_lock = threading.Lock()
        self._active: dict[str, threading.Event] = {}  # run id -> its cancel event, for every run executing
        self._run_threads: dict[str, threading.Thread] = {}
        self._user_cancelled: set[str] = set()
        self._secrets: dict[str, dict[str, str]] = {}
        self.runs_done = 0
        self.last_error: str | None = None
        # runs whose final status could not be written (the store failed while they settled): retried on every
        # turn of the loop, with the reason they failed, until the store takes it
        self._unsettled: dict[str, tuple[threading.Event, str | None]] = {}
        self.store_error: str | None = None  # the last failed store write, None once one succeeds again

    # ----------------------------------------------------------- lifecycle
    @property
    def executor(self) -> Executor:
        if self._executor is None:
            self._executor = default_executor()
        return self._executor

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def current_run_id(self) -> str | None:
        """The run executing (the oldest one, when several are)."""
        with self._state_lock:
            return next(iter(self._active), None)

    @property
    def current_run_ids(self) -> list[str]:
        with self._state_lock:
            return list(self._active)

    def start(self) -> None:
        if self.running:
            return
        path = sqlite_path(self.store)
        if path is not None:
            self._lock = WorkerLock(path.with_name(path.name + ".worker.lock"))
            self._lock.acquire()
        try:
            recover_interrupted(self.store, stale_after_s=None if path is not None else self.stale_after_s)
        except Exception:
            if self._lock:
                self._lock.release()
            raise
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"run-worker-{self.worker_id}", daemon=True)
        self._thread.start()
        log.info("run worker %s started", self.worker_id)

    def stop(self, timeout: float | None = 60.0) -> None:
        """Stop taking runs; cancel the one in progress (marked interrupted) and wait for its teardown."""
        self._stop.set()
        self._wake.set()
        with self._state_lock:
            for cancel in self._active.values():
                cancel.set()
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        if self._thread is not None:
            self._thread.join(timeout)
        with self._state_lock:
            run_threads = list(self._run_threads.values())
        for thread in run_threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if (self._thread is not None and self._thread.is_alive()) or any(t.is_alive() for t in run_threads):
            log.error("run worker %s did not stop within %ss", self.worker_id, timeout)
        self._thread = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def notify(self) -> None:
        """A run was queued: look now instead of at the next poll."""
        self._wake.set()

    def keep_secrets(self, run_id: str, secrets: Mapping[str, str]) -> None:
        """Secrets given with a run (``RunSpec.secrets``: ``hf_token``, ``arg:N``, ``env:NAME``) live only in
        this process's memory until the run has executed; the executor puts them back in the stored spec,
        whose copies are masked. A run whose secrets this worker does not hold (the service restarted) fails
        before anything is deployed."""
        if secrets:
            with self._state_lock:
                self._secrets[run_id] = dict(secrets)

    def request_cancel(self, run_id: str) -> bool:
        """Signal the run in progress to stop; False when this worker is not executing it."""
        with self._state_lock:
            cancel = self._active.get(run_id)
            if cancel is not None:
                self._user_cancelled.add(run_id)
                cancel.set()
                return True
            self._secrets.pop(run_id, None)
            return False

    def status(self) -> dict[str, Any]:
        return {
            "worker_id": self.worker_id,
            "running": self.running,
            "current_run": self.current_run_id,
            "current_runs": self.current_run_ids,
            "runs_done": self.runs_done,
            "last_error": self.last_error,
            "store_error": self.store_error,
            "unsettled_runs": sorted(self._unsettled),
        }

    @property
    def healthy(self) -> bool:
        """Running, writing to its store, and every finished run's status written."""
        return self.running and self.store_error is None and not self._unsettled

    # --------------------------------------------------------------- loop
    def _loop(self) -> None:
        last_reap = time.monotonic()
        while not self._stop.is_set():
            try:
                if time.monotonic() - last_reap > self.stale_after_s / 2:
                    recover_interrupted(self.store, stale_after_s=self.stale_after_s)
                    last_reap = time.monotonic()
                run = self._claim_next()
            except Exception as exc:  # the database went away: keep trying, say why
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("run worker could not reach the store")
                self._stop.wait(self.poll_interval_s)
                continue
            self._retry_unsettled()
            if run is None:
                self._wake.wait(self.poll_interval_s)
                self._wake.clear()
                continue
            self._start_run(run.id)

    def _may_take_another(self) -> bool:
        """No run executing, or room for one more while every run executing waits for a remote engine."""
        active = self.current_run_ids
        if not active:
            return True
        if len(active) >= self.max_runs:
            return False
        return MACHINE.all_waiting(active, self.overlap_after_s)

    def _claim_next(self) -> Any:
        if not self._may_take_another():
            return None
        return self.store.claim_next_pending(self.worker_id)

    def _start_run(self, run_id: str) -> None:
        cancel = threading.Event()
        with self._state_lock:
            self._active[run_id] = cancel
        if self._stop.is_set():  # claimed while the worker was told to stop: it is interrupted, not run
            cancel.set()
        thread = threading.Thread(
            target=self._run_thread, args=(run_id, cancel), name=f"run-{run_id}", daemon=True
        )
        with self._state_lock:
            self._run_threads[run_id] = thread
        thread.start()

    def _run_thread(self, run_id: str, cancel: threading.Event) -> None:
        try:
            self._execute(run_id, cancel)
        except Exception as exc:  # nothing a run does may stop the worker: say why and take the next
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("run %s: the worker could not finish it", run_id)
        finally:
            with self._state_lock:
                self._active.pop(run_id, None)
                self._run_threads.pop(run_id, None)
            self._wake.set()  # a slot is free: look for the next run now

    def _retry_unsettled(self) -> None:
        for run_id, (cancel, reason) in list(self._unsettled.items()):
            if self._settle(run_id, cancel, reason=reason):
                self._unsettled.pop(run_id, None)
                release(run_id)
                log.info("run %s: final status written after the store recovered", run_id)

    def _execute(self, run_id: str, cancel: threading.Event) -> None:
        with self._state_lock:
            secrets = self._secrets.pop(run_id, {})
        beat_stop = threading.Event()
        beat = threading.Thread(
            target=self._heartbeat, args=(run_id, cancel, beat_stop), name=f"heartbeat-{run_id}", daemon=True
        )
        beat.start()
        log.info("run %s: executing", run_id)
        reason: str | None = None
        try:
            self._call_executor(run_id, cancel, secrets)
        except AccelbenchError as exc:
            reason = str(exc)
            self._fail(run_id, reason)
        except Exception as exc:
            log.exception("run %s: the executor raised", run_id)
            reason = f"{type(exc).__name__}: {exc}"
            self._fail(run_id, reason)
        finally:
            beat_stop.set()
            beat.join(self.heartbeat_s + 5)
            if self._settle(run_id, cancel, reason=reason):
                release(run_id)  # done: this process writes nothing more into it as its executor
            else:
                self._unsettled[run_id] = (cancel, reason)
            with self._state_lock:
                self._user_cancelled.discard(run_id)
            self.runs_done += 1
            secrets.clear()
            with self._state_lock:  # secrets handed over while the run already executed: never used, dropped
                self._secrets.pop(run_id, None)

    def _call_executor(self, run_id: str, cancel: threading.Event, secrets: dict[str, str]) -> None:
        self.executor(
            self.store,
            run_id,
            cancel=cancel,
            progress=self._progress_callback(run_id),
            secrets=secrets or None,
        )

    def _progress_callback(self, run_id: str) -> Callable[..., None]:
        """Progress events from the orchestrator, merged into the run's ``progress``. Phase and cell events are
        stored at once; chatty detail lines (the engine's start-up log) at most twice a second."""
        last = [0.0]

        def progress(*args: Any, **kwargs: Any) -> None:
            data: dict[str, Any] = {}
            for a in args:
                if hasattr(a, "model_dump"):
                    data.update(a.model_dump(mode="json"))
                elif isinstance(a, Mapping):
                    data.update(a)
                elif isinstance(a, str):
                    data["detail"] = a
            data.update(kwargs)
            if not data:
                return
            now = time.monotonic()
            important = bool(set(data) - {"detail"})
            if not important and now - last[0] < 0.5:
                return
            last[0] = now
            try:
                current = self.store.get_run(run_id).progress
                self.store.update_run(run_id, progress={**current, **data})
            except Exception:  # progress is best effort, never a reason to fail the run
                log.debug("run %s: progress not stored", run_id, exc_info=True)

        return progress

    def _heartbeat(self, run_id: str, cancel: threading.Event, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_s):
            try:
                run = self.store.update_run(run_id, heartbeat_at=datetime.now(UTC))
            except Exception:
                log.debug("run %s: heartbeat failed", run_id, exc_info=True)
                continue
            if run.status == RunStatus.cancelled and not cancel.is_set():
                log.info("run %s: cancelled in the store; stopping it", run_id)
                with self._state_lock:
                    self._user_cancelled.add(run_id)
                cancel.set()

    def _fail(self, run_id: str, message: str) -> None:
        self.last_error = message
        try:
            run = self.store.get_run(run_id)
            if not run.status.finished:
                self.store.set_status(run_id, RunStatus.failed, error=message)
        except Exception:
            log.exception("run %s: could not mark failed", run_id)

    def _settle(self, run_id: str, cancel: threading.Event, *, reason: str | None = None) -> bool:
        """Make the stored status final and true, whatever the executor left behind. False when the store
        could not be read or written (the run is retried later, and health says degraded meanwhile)."""
        try:
            self._settle_once(run_id, cancel, reason)
        except ClaimLost as exc:  # another executor holds the run now: its status is that one's to write
            log.warning("run %s: %s", run_id, exc.message)
        except Exception as exc:
            self.store_error = self.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("run %s: the final status could not be written; retrying", run_id)
            return False
        self.store_error = None
        return True

    def _settle_once(self, run_id: str, cancel: threading.Event, reason: str | None) -> None:
        run = self.store.get_run(run_id)
        user_cancel = run_id in self._user_cancelled
        if cancel.is_set() and not user_cancel and self._stop.is_set():
            if run.status != RunStatus.completed:
                cells = self.store.kept_cells(run_id)
                self.store.set_status(
                    run_id,
                    RunStatus.interrupted,
                    error=f"Interrupted: the service shut down during the run. {cells} finished "
                    f"cell{'s' if cells != 1 else ''} kept.",
                )
            return
        if user_cancel and run.status != RunStatus.cancelled and run.status != RunStatus.completed:
            self.store.set_status(run_id, RunStatus.cancelled, error=run.error or "cancelled by request")
            return
        if not run.status.finished:
            self.store.set_status(
                run_id, RunStatus.failed, error=reason or run.error or "The run ended without a final status."
            )
