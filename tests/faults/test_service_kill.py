"""The service survives a hard restart, on SQLite and PostgreSQL: ``accelbench serve`` (a real process, with its
worker and the real orchestrator) runs a queued run against an OpenAI-compatible server (the in-repo streaming
fixture, slowed down so the sweep takes seconds), is killed with SIGKILL in the middle of the sweep, and is
started again: the run that was mid-flight is marked interrupted with its finished cells kept, and the run that
was still pending is executed to completion."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

TOKEN = "restart-token"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Service:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.port = _port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        fh = open(self.log, "ab")  # noqa: SIM115 - the child writes to it for its whole life
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "accelbench.cli.main", "serve", "--port", str(self.port), "--log-level", "warning"],
            env=self.env, stdout=fh, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                if httpx.get(self.url + "/api/v1/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("accelbench serve did not start:\n" + self.log.read_text()[-3000:])

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


@pytest.fixture
def slow_server(tmp_path: Path) -> Iterator[StreamServer]:
    # 16 tokens, one every 60 ms: about a second per request, so a cell of a few requests takes seconds
    with StreamServer(Script(ttft_ms=20, itl_ms=60), tokenizer_dir=make_tokenizer_dir(tmp_path / "tok"),
                      model="smol") as s:  # fmt: skip
        yield s


def wait(pred, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_restart_interrupts_the_run_in_flight_and_continues_the_pending_one(
    db_url: str, tmp_path: Path, slow_server: StreamServer
) -> None:
    # the test reads runs without a key: public reads, opted in
    env = {**os.environ, "ACCELBENCH_DATABASE_URL": db_url, "ACCELBENCH_DATA_DIR": str(tmp_path / "data"),
           "ACCELBENCH_API_TOKEN": TOKEN, "ACCELBENCH_API_READ_AUTH": "false"}  # fmt: skip
    auth = {"Authorization": f"Bearer {TOKEN}"}
    target = {"kind": "endpoint", "base_url": slow_server.base_url, "served_model": "smol",
              "tokenizer": str(tmp_path / "tok")}  # fmt: skip
    long_spec = {"model": "smol", "label": "long", "target": target,
                 "sweep": {"input_lens": [64], "concurrency": [1, 2, 3, 4], "prompts_per_concurrency": 2,
                           "output_len": 16}}  # fmt: skip
    short_spec = {"model": "smol", "label": "short", "target": target,
                  "sweep": {"input_lens": [64], "concurrency": [1], "prompts_per_concurrency": 1,
                            "output_len": 16}}  # fmt: skip
    service = Service(env, tmp_path / "serve.log")
    service.start()
    try:
        a = httpx.post(service.url + "/api/v1/runs", json=long_spec, headers=auth)
        assert a.status_code == 202, a.text
        b = httpx.post(service.url + "/api/v1/runs", json=short_spec, headers=auth)
        assert b.status_code == 202, b.text
        a_id, b_id = a.json()["id"], b.json()["id"]

        def first_cell_done() -> bool:
            d = httpx.get(f"{service.url}/api/v1/runs/{a_id}").json()
            assert d["run"]["status"] in ("pending", "deploying", "benchmarking"), d["run"]
            return d["run"]["status"] == "benchmarking" and len(d["results"]) >= 1

        try:
            wait(first_cell_done, 120, "the first cell of the long run")
        except AssertionError:
            d = httpx.get(f"{service.url}/api/v1/runs/{a_id}").json()["run"]
            raise AssertionError(
                f"{d['status']} {d['error']} {d['progress']}\n{service.log.read_text()[-3000:]}"
            ) from None
        progress = httpx.get(f"{service.url}/api/v1/runs/{a_id}").json()["run"]["progress"]
        assert progress.get("cells_total") == 4  # progress readable from the API while it runs
        assert httpx.get(f"{service.url}/api/v1/runs/{b_id}").json()["run"]["status"] == "pending"
        service.kill()  # no shutdown handler runs: the process is simply gone
        store = Store(db_url)
        kept = len(store.get_results(a_id))
        assert kept >= 1 and store.get_run(a_id).status == RunStatus.benchmarking

        service.start()
        done = wait(
            lambda: (
                (r := httpx.get(f"{service.url}/api/v1/runs/{b_id}").json())["run"]["status"]
                in ("completed", "failed")
                and r
            ),
            120,
            "the pending run to finish after the restart",
        )
        assert done["run"]["status"] == "completed", done["run"]["error"]
        assert len(done["results"]) == 1 and done["results"][0]["failed"] == 0
        a_after = httpx.get(f"{service.url}/api/v1/runs/{a_id}").json()
        assert a_after["run"]["status"] == "interrupted"
        assert f"{kept} finished cell" in a_after["run"]["error"]
        assert len(a_after["results"]) == kept  # the finished cells are kept, nothing else was added
        store.dispose()
    finally:
        service.stop()
