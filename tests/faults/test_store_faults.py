"""Storage faults under a running ``accelbench serve``: the SQLite store on a small filesystem (a tmpfs) that
fills up in the middle of a run, and a store that is read-only. Each ends with the runs stored before the
fault all there and the service serving again, without a restart."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.faults.service import AUTH, Service, SmallFilesystem, service_env, services, sweep_spec, wait
from tests.support.stream_server import StreamServer


def test_disk_full_mid_run_keeps_what_was_stored_and_the_service_recovers(
    tmp_path: Path, small_fs: SmallFilesystem, slow_server: StreamServer, tokenizer: Path
) -> None:
    db = small_fs.path / "store.db"
    service = Service(service_env(f"sqlite:///{db}", tmp_path / "data"), tmp_path / "serve.log")
    with services(service.start()):
        before = service.submit(sweep_spec(slow_server.base_url, tokenizer, label="before", concurrency=[1]))
        done = service.wait_final(before)
        assert done["run"]["status"] == "completed", done["run"]["error"]
        kept_before = done["results"]

        # a run of 4 cells; the filesystem fills up once its first cell is stored
        long = service.submit(
            sweep_spec(slow_server.base_url, tokenizer, label="long", concurrency=[1, 2, 3, 4])
        )
        wait(lambda: len(service.detail(long)["results"]) >= 1, 120, "the first cell of the long run")
        first_cells = service.detail(long)["results"]
        small_fs.fill()
        # the run cannot store its next cell nor its final status: /health says degraded, the service stays up
        wait(
            lambda: service.get("/api/v1/health").json()["status"] == "degraded",
            120,
            "/health to say degraded",
        )
        assert service.detail(long)["run"]["status"] == "benchmarking"  # its final status is not written yet

        # while the disk is full: reads are served, a new run is refused with 503 (not a 500, not a hang)
        assert before in service.run_ids()
        refused = httpx.post(service.url + "/api/v1/runs", headers=AUTH, timeout=30,
                             json=sweep_spec(slow_server.base_url, tokenizer, label="refused", concurrency=[1]))  # fmt: skip
        assert refused.status_code == 503, refused.text
        small_fs.free()

        # the worker is alive: the run in flight gets a final status, and a new run is executed
        settled = service.wait_final(long)
        assert settled["run"]["status"] in ("completed", "failed"), settled["run"]
        after = service.submit(sweep_spec(slow_server.base_url, tokenizer, label="after", concurrency=[1]))
        assert service.wait_final(after)["run"]["status"] == "completed", service.tail()
        service.assert_serving({before, long, after})
        assert service.detail(before)["results"] == kept_before
        ids = {r["id"] for r in settled["results"]}
        assert {r["id"] for r in first_cells} <= ids  # the cells stored before the fault are all kept
        # nothing is left half-written: the store is still a sound SQLite database
        import sqlite3

        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_read_only_store_is_served_for_reading_and_recovers_when_writable_again(
    tmp_path: Path, small_fs: SmallFilesystem, slow_server: StreamServer, tokenizer: Path
) -> None:
    """The store's filesystem goes read-only while the service is down (a remount cannot happen under an open
    SQLite file); a service starts on it, serves reads, refuses writes with 503 in one line, and takes writes
    again once the filesystem is writable, without a restart. (The second service runs without a worker: a
    worker's SQLite lock file beside the store cannot be created on a read-only filesystem.)"""
    db = small_fs.path / "store.db"
    env = service_env(f"sqlite:///{db}", tmp_path / "data")
    first = Service(env, tmp_path / "serve1.log")
    with services(first.start()):
        before = first.submit(sweep_spec(slow_server.base_url, tokenizer, label="before", concurrency=[1]))
        done = first.wait_final(before)
        assert done["run"]["status"] == "completed", done["run"]["error"]
    small_fs.read_only()

    second = Service(env, tmp_path / "serve2.log", worker=False)
    with services(second.start()):  # it comes up, with no traceback at start
        assert second.detail(before)["results"] == done["results"]  # reads are served
        assert before in second.run_ids()
        for _ in range(3):  # each refusal leaves a failed connection behind, as a service's clients would
            refused = httpx.post(second.url + "/api/v1/runs", headers=AUTH, timeout=30,
                                 json=sweep_spec(slow_server.base_url, tokenizer, label="refused", concurrency=[1]))  # fmt: skip
            assert refused.status_code == 503, refused.text
            assert "\n" not in refused.json()["error"]["message"], refused.text
        health = second.get("/api/v1/health").json()
        assert health["status"] == "degraded", health

        small_fs.writable()
        after = wait(
            lambda: (
                (r := httpx.post(second.url + "/api/v1/runs", headers=AUTH, timeout=30,
                                 json=sweep_spec(slow_server.base_url, tokenizer, label="after", concurrency=[1])))
                .status_code == 202 and r.json()["id"]
            ),
            20,  # a failed connection used to keep the file's index read-only until a garbage collection
            "the store to take writes again",
        )  # fmt: skip
        second.assert_serving({before, after})
    third = Service(env, tmp_path / "serve3.log")  # and a worker executes what was stored meanwhile
    with services(third.start()):
        assert third.wait_final(after)["run"]["status"] == "completed", third.tail()
        third.assert_serving({before, after})
