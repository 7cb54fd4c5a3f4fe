"""The run list's handle (``get_run_listing``: the database and the tables, no ORM) lists what the whole store
lists, on SQLite and PostgreSQL; it migrates an older store and refuses a newer one as the whole store does, still
marks a run whose process died interrupted, and gives way to the whole store once one is opened."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import text

from accelbench.domain.run import RunStatus
from accelbench.errors import StoreError
from accelbench.services import stored_runs
from accelbench.store.db import alembic_config, make_engine
from accelbench.store.repo import Store, get_store, reset_stores
from accelbench.store.run_list import RunListing, get_run_listing
from tests.support.api_app import summary
from tests.support.killed_run import KILLED_CLI


@pytest.fixture(autouse=True)
def _no_open_handles() -> Iterator[None]:
    reset_stores()
    yield
    reset_stores()


def _seed(store: Store) -> None:
    done = store.create_run(
        kind="sweep",
        status=RunStatus.completed,
        label="cpu 100%",
        model="org/smol",
        progress={"cells_done": 2},
    )
    for c in (1, 4):
        store.save_result(done.id, input_len=128, concurrency=c, repeat=0, summary=summary(128, c))
    store.create_run(kind="bench", status=RunStatus.failed, served_model="other", instance_type="g6.xlarge")
    store.create_run(kind="run", status=RunStatus.pending, model="m", engine="vllm", accelerator_type="gpu")


def test_the_handle_lists_what_the_whole_store_lists(db_url: str) -> None:
    store = Store(db_url)
    _seed(store)
    listing = RunListing(db_url)
    for filters in (
        {},
        {"status": ["completed", "failed"]},
        {"status": "pending"},
        {"model": "smol"},
        {"model": "other"},
        {"label": "100%"},
        {"label": "1_0"},
        {"kind": "run", "engine": "vllm", "accelerator_type": "gpu"},
        {"instance_type": "g6.xlarge"},
        {"limit": 1, "offset": 1},
    ):
        assert listing.list_runs(**filters) == store.list_runs(**filters), filters  # type: ignore[arg-type]
    runs, total = listing.list_runs()
    assert total == 3 and [r.cells for r in runs] == [0, 0, 2]
    assert runs[2].completed_requests == store.get_run(runs[2].id).completed_requests > 0
    store.dispose()
    listing.dispose()


def test_the_whole_store_takes_over_the_handle_of_its_database(db_url: str) -> None:
    listing = get_run_listing(db_url)
    assert type(listing) is RunListing and get_run_listing(db_url) is listing
    store = get_store(db_url)
    assert get_run_listing(db_url) is store
    assert listing.list_runs() == ([], 0)  # a handle someone still holds keeps working


def test_listing_from_the_handle_marks_a_run_whose_process_died_interrupted(db_url: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", KILLED_CLI, db_url], capture_output=True, text=True, check=True
    )
    orphan = out.stdout.strip()
    listing = get_run_listing(db_url)
    page = stored_runs.list_runs(listing, stored_runs.RunListRequest(recover=True))
    assert [(r.id, r.status) for r in page.items] == [(orphan, RunStatus.interrupted)]
    assert "Interrupted" in (page.items[0].error or "")


def test_the_handle_migrates_an_older_store_and_refuses_a_newer_one(db_url: str) -> None:
    engine = make_engine(db_url)
    with engine.begin() as conn:
        cfg = alembic_config(db_url)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    listing = RunListing(db_url)  # upgrades to the newest schema, as Store does
    assert listing.list_runs() == ([], 0)
    with engine.begin() as conn:
        assert conn.scalar(text("SELECT version_num FROM alembic_version")) != "0001"
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffffffff0042'"))
    engine.dispose()
    listing.dispose()
    with pytest.raises(StoreError, match="newer accelbench"):
        RunListing(db_url)
