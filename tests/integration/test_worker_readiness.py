"""The readiness wait does not hold the worker, and a cancel ends it at once, on SQLite and PostgreSQL: a run
whose endpoint never answers waits while the worker takes and completes the next run (real orchestrator,
real HTTP against the fixture stream server); cancelling the waiting run ends it within a couple of seconds,
not at the end of its 60 s wait."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelbench.deploy.orchestrator import create_run
from accelbench.domain.run import RunSpec, RunStatus
from accelbench.services.worker import RunWorker
from accelbench.store import Store
from tests.support.api_app import wait_for
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir


@pytest.fixture
def tokenizer(tmp_path: Path) -> Path:
    return make_tokenizer_dir(tmp_path / "tok")


@pytest.fixture
def server(tokenizer: Path) -> Iterator[StreamServer]:
    with StreamServer(Script(ttft_ms=5, itl_ms=5), tokenizer_dir=tokenizer, model="smol") as s:
        yield s


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spec(base_url: str, tokenizer: Path, label: str) -> RunSpec:
    target: dict[str, Any] = {
        "kind": "endpoint",
        "base_url": base_url,
        "served_model": "smol",
        "tokenizer": str(tokenizer),
    }
    sweep = {"input_lens": [64], "concurrency": [1], "prompts_per_concurrency": 2, "output_len": 8,
             "num_warmups": 0}  # fmt: skip
    return RunSpec.model_validate({"model": "smol", "label": label, "target": target, "sweep": sweep})


def test_a_waiting_run_does_not_hold_the_worker_and_stops_at_once(
    store: Store, server: StreamServer, tokenizer: Path
) -> None:
    waiting = create_run(store, spec(f"http://127.0.0.1:{closed_port()}", tokenizer, "unreachable")).id
    worker = RunWorker(store, poll_interval_s=0.05, heartbeat_s=0.2, overlap_after_s=0.5)
    worker.start()
    try:
        wait_for(lambda: store.get_run(waiting).status == RunStatus.deploying, timeout=30)
        queued = create_run(store, spec(server.base_url, tokenizer, "reachable")).id
        worker.notify()
        done = wait_for(lambda: (r := store.get_run(queued)).status.finished and r, timeout=90)
        assert done.status == RunStatus.completed, done.error
        assert len(store.get_results(queued)) == 1 and store.get_results(queued)[0].completed == 2
        assert store.get_run(waiting).status == RunStatus.deploying  # still waiting, meanwhile
        owner, _ = store.claim_of(queued)
        assert owner == worker.worker_id  # the worker executed both
        asked = time.monotonic()
        store.cancel_run(waiting)
        assert worker.request_cancel(waiting)
        stopped = wait_for(lambda: (r := store.get_run(waiting)).status.finished and r, timeout=30)
        took = time.monotonic() - asked
        assert stopped.status == RunStatus.cancelled, stopped.error
        assert took < 5, f"the cancel took {took:.1f} s"
        assert store.get_results(waiting) == []
    finally:
        worker.stop()


def test_the_service_worker_takes_at_most_the_configured_runs(store: Store) -> None:
    from pydantic import ValidationError

    from accelbench.server.app import create_app
    from accelbench.settings import Settings

    app = create_app(Settings(database_url=store.url, worker_max_runs=2), store, start_worker=True)
    assert app.state.worker.max_runs == 2
    assert create_app(Settings(database_url=store.url), store, start_worker=True).state.worker.max_runs == 4
    with pytest.raises(ValidationError, match="worker_max_runs"):
        Settings(worker_max_runs=0)
