"""What the fault tests share: ``accelbench serve`` as a real process, the slowed-down fixture stream server,
sweep specs against it, a PostgreSQL server of the test's own that can be stopped and started again, and a
small filesystem (a tmpfs) that can be filled up or made read-only."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.postgres import PostgresServer, _find_bin, start_postgres

TOKEN = "fault-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FINAL = ("completed", "failed", "cancelled", "interrupted")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.3) -> Any:
    """Poll ``pred`` until it answers something true; transport errors count as "not yet"."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = pred()
        except httpx.HTTPError as exc:
            value, last = None, exc
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last error: {last!r})")


class Service:
    """``accelbench serve`` in its own process, on a free port, logging into ``log``."""

    def __init__(self, env: dict[str, str], log: Path, *, worker: bool = True) -> None:
        self.env, self.log, self.worker = env, log, worker
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def spawn(self) -> None:
        fh = open(self.log, "ab")  # noqa: SIM115 - the child writes to it for its whole life
        args = ["serve", "--port", str(self.port), "--log-level", "warning"]
        if not self.worker:
            args.append("--no-worker")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "accelbench.cli.main", *args],
            env=self.env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )

    def wait_up(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            assert self.proc.poll() is None, "accelbench serve exited:\n" + self.tail()
            try:
                if httpx.get(self.url + "/api/v1/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("accelbench serve did not start:\n" + self.tail())

    def start(self) -> Service:
        self.spawn()
        self.wait_up()
        return self

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)

    # ------------------------------------------------------------------ the API
    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30, **kw)

    def submit(self, spec: dict[str, Any]) -> str:
        r = httpx.post(self.url + "/api/v1/runs", json=spec, headers=AUTH, timeout=30)
        assert r.status_code == 202, r.text
        return str(r.json()["id"])

    def detail(self, run_id: str) -> dict[str, Any]:
        r = self.get(f"/api/v1/runs/{run_id}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait_final(self, run_id: str, timeout: float = 120) -> dict[str, Any]:
        return dict(
            wait(
                lambda: (d := self.detail(run_id))["run"]["status"] in FINAL and d,
                timeout,
                f"run {run_id} to finish\n{self.tail()}",
            )
        )

    def run_ids(self) -> set[str]:
        r = self.get("/api/v1/runs", params={"limit": 200})
        assert r.status_code == 200, r.text
        return {item["id"] for item in r.json()["items"]}

    def assert_serving(self, expected: set[str]) -> None:
        """What every fault test ends with: /health ok and every run stored before the fault listed."""
        health = wait(
            lambda: (h := self.get("/api/v1/health")).status_code == 200 and h.json()["status"] == "ok" and h,
            120,
            "/health to say ok again",
        )
        assert health.json()["database"]["ok"] is True
        listed = self.run_ids()
        assert expected <= listed, f"runs lost: {sorted(expected - listed)}"


@contextlib.contextmanager
def services(*items: Service) -> Iterator[tuple[Service, ...]]:
    try:
        yield items
    finally:
        for s in items:
            s.stop()


def service_env(db_url: str, data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "ACCELBENCH_DATABASE_URL": db_url,
        "ACCELBENCH_DATA_DIR": str(data_dir),
        "ACCELBENCH_API_TOKEN": TOKEN,
        "ACCELBENCH_API_READ_AUTH": "false",  # these tests read runs without a key: public reads, opted in
    }


def sweep_spec(
    base_url: str, tokenizer: Path, *, label: str, concurrency: list[int], prompts: int = 1, repeats: int = 1
) -> dict[str, Any]:
    """A run against the fixture stream server: one cell per concurrency level (and repeat)."""
    target = {"kind": "endpoint", "base_url": base_url, "served_model": "smol", "tokenizer": str(tokenizer)}
    sweep = {"input_lens": [64], "concurrency": concurrency, "prompts_per_concurrency": prompts, "output_len": 16,
             "repeats": repeats, "num_warmups": 0}  # fmt: skip
    return {"model": "smol", "label": label, "target": target, "sweep": sweep}


def completions(records: list[Any]) -> int:
    return sum(1 for r in records if r.path.startswith("/v1/"))


# ---------------------------------------------------------------------------------------- PostgreSQL
class StoppablePostgres:
    """A PostgreSQL server of one test: ``stop`` keeps its data, ``start`` brings it back on the same port."""

    def __init__(self) -> None:
        self.server: PostgresServer = start_postgres()

    @property
    def data(self) -> Path:
        return self.server.root / "data"

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.server._as_user, _find_bin("pg_ctl"), "-D", str(self.data), *args],
                              capture_output=True, text=True, check=False)  # fmt: skip

    def stop(self) -> None:
        proc = self._pg_ctl("-m", "fast", "-w", "stop")
        assert proc.returncode == 0, proc.stderr

    def start(self) -> None:
        root = self.server.root
        opts = (f"-p {self.server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c max_connections=200")  # fmt: skip
        proc = self._pg_ctl("-o", opts, "-l", str(root / "log"), "-w", "start")
        assert proc.returncode == 0, proc.stderr + (root / "log").read_text()[-2000:]

    def close(self) -> None:
        self.server.stop()


# ---------------------------------------------------------------------------------------- small filesystem
class SmallFilesystem:
    """A tmpfs of ``size_mb`` mounted on ``path`` (the tests run as root, as PostgreSQL's fixture expects of a
    machine where it is installed). ``fill`` writes a file until the filesystem is full; ``free`` removes it;
    ``read_only`` / ``writable`` remount it (only possible while no file on it is open for writing)."""

    def __init__(self, path: Path, size_mb: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._mount("-t", "tmpfs", "-o", f"size={size_mb}m,mode=0777", "tmpfs", str(path))
        self.filler = path / "filler"

    @staticmethod
    def _mount(*args: str) -> None:
        proc = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, (
            f"mount {' '.join(args)}: {proc.stderr.strip()} (the fault suite runs as root)"
        )

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 20, 64 << 10, 4 << 10, 512, 1):  # down to the last byte
                while True:
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError:
                        break
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def read_only(self) -> None:
        self._mount("-o", "remount,ro", str(self.path))

    def writable(self) -> None:
        self._mount("-o", "remount,rw", str(self.path))

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True, check=False)
