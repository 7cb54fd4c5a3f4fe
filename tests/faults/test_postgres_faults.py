"""PostgreSQL faults under running ``accelbench serve`` processes: the database server stopped for 15 s and
started again (the service answers 503 meanwhile and recovers without a restart), and two services on one
database (both serve; every run is executed exactly once)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.faults.service import (
    AUTH,
    Service,
    StoppablePostgres,
    completions,
    service_env,
    services,
    sweep_spec,
)
from tests.support.postgres import PostgresServer
from tests.support.stream_server import StreamServer

OUTAGE_S = 15.0


def test_postgres_stopped_for_15s_gives_503_then_the_service_recovers_without_restart(
    tmp_path: Path, own_postgres: StoppablePostgres, slow_server: StreamServer, tokenizer: Path
) -> None:
    url = own_postgres.server.create_database("outage")
    service = Service(service_env(url, tmp_path / "data"), tmp_path / "serve.log")
    with services(service.start()):
        before = service.submit(sweep_spec(slow_server.base_url, tokenizer, label="before", concurrency=[1]))
        done = service.wait_final(before)
        assert done["run"]["status"] == "completed", done["run"]["error"]

        own_postgres.stop()
        stopped = time.monotonic()
        statuses = set()
        while time.monotonic() - stopped < OUTAGE_S:
            statuses.add(service.get("/api/v1/runs").status_code)
            statuses.add(httpx.post(service.url + "/api/v1/runs", headers=AUTH, timeout=30,
                                    json=sweep_spec(slow_server.base_url, tokenizer, label="x",
                                                    concurrency=[1])).status_code)  # fmt: skip
            health = service.get("/api/v1/health")
            assert health.status_code == 503 or health.json()["status"] == "degraded", health.text
            time.sleep(1)
        assert statuses == {503}, statuses  # refused in so many words: no 500, no hang
        own_postgres.start()

        service.assert_serving({before})  # no restart: the pool reconnects
        assert service.detail(before)["results"] == done["results"]
        after = service.submit(sweep_spec(slow_server.base_url, tokenizer, label="after", concurrency=[1]))
        assert service.wait_final(after)["run"]["status"] == "completed", service.tail()
        service.assert_serving({before, after})


def test_two_services_on_one_postgres_both_serve_and_execute_each_run_once(
    tmp_path: Path, postgres_server: PostgresServer, slow_server: StreamServer, tokenizer: Path
) -> None:
    url = postgres_server.create_database("two_services")
    a = Service(service_env(url, tmp_path / "data-a"), tmp_path / "a.log")
    b = Service(service_env(url, tmp_path / "data-b"), tmp_path / "b.log")
    with services(a, b):
        a.spawn()
        b.spawn()  # both start together on the fresh database
        a.wait_up()
        b.wait_up()
        ids = [
            (a if i % 2 else b).submit(
                sweep_spec(slow_server.base_url, tokenizer, label=f"r{i}", concurrency=[1, 2])
            )
            for i in range(6)
        ]
        finals = [a.wait_final(i) for i in ids]
        assert [f["run"]["status"] for f in finals] == ["completed"] * 6, [f["run"]["error"] for f in finals]
        # exactly once: per run its answer check and 2 cells of 1 + 2 requests; nothing measured twice
        assert [len(f["results"]) for f in finals] == [2] * 6
        assert completions(slow_server.records) == 6 * (1 + 1 + 2)
        workers = {f["run"]["worker_id"] for f in finals if f["run"].get("worker_id")}
        assert len(workers) <= 2
        a.assert_serving(set(ids))
        b.assert_serving(set(ids))
