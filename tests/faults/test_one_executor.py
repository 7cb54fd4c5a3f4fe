"""One executor per run, with ``accelbench serve`` (its worker on) and CLI processes on one store (SQLite and
PostgreSQL): ``accelbench run`` executes the run it makes, all of it, while the service's worker executes the
run queued through the API; a pending run a CLI process claimed is never taken by the worker; and a process
that holds no claim on a run cannot write a cell into it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.domain.run import RunStatus
from accelbench.errors import ClaimLost
from accelbench.store import Store
from accelbench.store.claims import release
from accelbench.store.owner import process_owner
from tests.faults.service import Service, service_env, services, sweep_spec
from tests.support.api_app import summary
from tests.support.stream_server import StreamServer


def test_the_cli_runs_its_run_and_the_service_the_queued_one(
    db_url: str, tmp_path: Path, slow_server: StreamServer, tokenizer: Path
) -> None:
    env = service_env(db_url, tmp_path / "data")
    service = Service(env, tmp_path / "serve.log")  # with its worker
    store = Store(db_url)
    host = socket.gethostname()
    with services(service.start()):
        assert service.proc is not None
        # what a CLI process that has not started its run yet leaves in the store: pending, claimed by it
        held_back = store.create_run(kind="run", status=RunStatus.pending, claimed_by=process_owner()).id
        spec_file = tmp_path / "run.yaml"
        spec_file.write_text(
            json.dumps(sweep_spec(slow_server.base_url, tokenizer, label="cli", concurrency=[1, 2]))
        )
        cli = subprocess.Popen(
            [sys.executable, "-m", "accelbench.cli.main", "run", str(spec_file), "--format", "json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        queued = service.submit(sweep_spec(slow_server.base_url, tokenizer, label="api", concurrency=[1]))
        out, err = cli.communicate(timeout=300)
        assert cli.returncode == 0, err[-3000:]
        cli_run = json.loads(out)["run"]["id"]
        api_final = service.wait_final(queued)
        assert api_final["run"]["status"] == "completed", api_final["run"]["error"]

        run = store.get_run(cli_run)
        assert run.status == RunStatus.completed and not run.error, run.error
        assert sorted(r.concurrency for r in store.get_results(cli_run)) == [1, 2]
        assert store.claim_of(cli_run) == (f"{host}-{cli.pid}-proc", 1)  # the CLI process, its only claim
        worker_owner, epoch = store.claim_of(queued)
        assert worker_owner is not None and worker_owner.startswith(f"{host}-{service.proc.pid}-")
        assert not worker_owner.endswith("-proc") and epoch == 1  # the service's worker
        # the worker polled all along and never took the run a CLI process claimed
        assert store.get_run(held_back).status == RunStatus.pending
        assert store.claim_of(held_back) == (process_owner(), 1)

    release(held_back)
    with pytest.raises(ClaimLost, match=f"executed by {host}-{cli.pid}-proc"):
        store.save_result(cli_run, input_len=64, concurrency=4, repeat=0, summary=summary(64, 4))
    assert len(store.get_results(cli_run)) == 2
