"""Several ``accelbench serve`` processes started at once on a fresh store all come up (migrations are
serialised: a file lock beside a SQLite database, an advisory lock on PostgreSQL) and serve one store. The
store-level race (six bare ``Store`` processes) is tests/unit/store/test_first_start.py; this is the service.
On SQLite one of them runs the worker (SQLite takes one), the others ``--no-worker``."""

from __future__ import annotations

from pathlib import Path

from tests.faults.service import Service, service_env, services, sweep_spec
from tests.support.stream_server import StreamServer

STARTERS = 4


def test_services_starting_together_on_a_fresh_store_all_come_up(
    db_url: str, tmp_path: Path, slow_server: StreamServer, tokenizer: Path
) -> None:
    env = service_env(db_url, tmp_path / "data")
    sqlite = db_url.startswith("sqlite")
    all_ = [Service(env, tmp_path / f"s{i}.log", worker=i == 0 or not sqlite) for i in range(STARTERS)]
    with services(*all_):
        for s in all_:
            s.spawn()
        for s in all_:
            s.wait_up()
        ids = {s.submit(sweep_spec(slow_server.base_url, tokenizer, label=f"s{i}", concurrency=[1]))
               for i, s in enumerate(all_)}  # fmt: skip
        for run_id in ids:
            assert all_[0].wait_final(run_id)["run"]["status"] == "completed", all_[0].tail()
        for s in all_:
            s.assert_serving(ids)
