"""Process trees: stop an engine and everything it started, and make sure that happens even when accelbench
itself is killed without a chance to clean up.

- ``kill_process_tree``: SIGTERM to the process group and every descendant (listed first, so a child that left
  the group is not missed), a grace period, then SIGKILL to whatever is left.
- ``ParentWatch``: a small watcher process, started next to the engine, holding the read end of a pipe whose
  write end only accelbench holds. When accelbench exits in any way (SIGKILL and out-of-memory kills
  included) the kernel closes the write end, the watcher reads end-of-file and stops the engine's tree.
  A normal teardown disarms it first. Run as ``python -m accelbench.deploy.proctree FD PID GRACE_S``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Any

import psutil

TERM_GRACE_S = 15.0
_DISARM = b"d"


def kill_process_tree(
    proc: subprocess.Popen[Any] | psutil.Process, grace_s: float | None = None, *, pgid: int | None = None
) -> list[int]:
    """SIGTERM the process's group and every descendant, wait ``grace_s``, then SIGKILL what is left.

    ``pgid`` is the group to kill (default: the process's current group; pass it when the leader may already
    be gone, its group can outlive it). Returns the pids that were alive when it started. The descendants
    are listed before anything is signalled, so a child that moved to another process group is not missed."""
    grace_s = TERM_GRACE_S if grace_s is None else grace_s
    pid = proc.pid
    try:
        root = proc if isinstance(proc, psutil.Process) else psutil.Process(pid)
        if not root.is_running():  # gone, or its pid now belongs to another process
            raise psutil.NoSuchProcess(pid)
        procs = [root, *root.children(recursive=True)]
        procs = [p for p in procs if p.status() != psutil.STATUS_ZOMBIE or p.pid == pid]
    except psutil.NoSuchProcess:
        procs = []
    if pgid is None:
        try:
            pgid = os.getpgid(pid)
        except ProcessLookupError:
            pgid = None
    if pgid is not None:
        # members of the group that are not descendants any more (re-parented after their parent died)
        known = {p.pid for p in procs}
        for other in processes_in_group(pgid):
            if other not in known:
                with contextlib.suppress(psutil.NoSuchProcess):
                    procs.append(psutil.Process(other))
    own_pgid = os.getpgrp()

    def signal_all(sig: int) -> None:
        if pgid is not None and pgid != own_pgid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                p.send_signal(sig)

    pids = [p.pid for p in procs]
    signal_all(signal.SIGTERM)
    gone, alive = psutil.wait_procs(procs, timeout=grace_s)
    if alive or (pgid is not None and _group_alive(pgid)):
        signal_all(signal.SIGKILL)
        more, _ = psutil.wait_procs(alive, timeout=10)
        gone += more
    if isinstance(proc, subprocess.Popen):
        # psutil reaped the leader (a child of ours): hand its exit status to Popen, whose own wait() would
        # otherwise find no child and report 0
        for p in gone:
            rc = getattr(p, "returncode", None)  # set by psutil.wait_procs on the processes it reaped
            if p.pid == pid and rc is not None and proc.returncode is None:
                proc.returncode = rc
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)  # reap, so no zombie is left either
    return pids


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def processes_in_group(pgid: int) -> list[int]:
    """Pids whose process group is ``pgid`` (reads /proc; used to prove nothing was left behind)."""
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return found


class ParentWatch:
    """Stops the process tree led by ``pid`` if this process dies before calling ``disarm``."""

    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int) -> None:
        self.proc = proc
        self._fd: int | None = write_fd

    @classmethod
    def start(cls, pid: int, grace_s: float = TERM_GRACE_S) -> ParentWatch:
        read_fd, write_fd = os.pipe()  # both ends close-on-exec: no other child inherits the write end
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(read_fd), str(pid), str(grace_s)],
                pass_fds=(read_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C at the terminal must not reach it
            )
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        return cls(proc, write_fd)

    def disarm(self) -> None:
        """The engine was stopped by its owner: let the watcher exit without touching anything."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._fd, _DISARM)
        os.close(self._fd)
        self._fd = None
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _watch(read_fd: int, pid: int, grace_s: float) -> int:
    try:
        leader = psutil.Process(pid)  # bound to this process's start time: a reused pid is never signalled
    except psutil.NoSuchProcess:
        leader = None
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    received = b""
    while chunk := os.read(read_fd, 64):
        received += chunk
    if _DISARM in received or leader is None:
        return 0
    kill_process_tree(leader, grace_s, pgid=pid)  # the engine leads its own group; it may outlive the leader
    return 0


if __name__ == "__main__":
    sys.exit(_watch(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
