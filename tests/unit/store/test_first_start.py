"""Processes starting together on a fresh store each migrate it: they used to crash (`table api_keys already
exists` on SQLite, a unique violation on PostgreSQL). Migrations are now serialised (a file lock beside a
SQLite database, an advisory lock on PostgreSQL) and re-checked under the lock."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.store import Store

STARTERS = 6
SCRIPT = """
import sys, time
from accelbench.store import Store
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # start together
s = Store(sys.argv[1])
s.create_run(kind="bench", model="m", label="started")
print("ok")
"""


def test_processes_starting_together_on_a_fresh_store_all_come_up(db_url: str, tmp_path: Path) -> None:
    import time

    at = str(time.time() + 2.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, db_url, at],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        for _ in range(STARTERS)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    failed = [err.strip().splitlines()[-1] for (out, err), p in zip(outs, procs, strict=True) if p.returncode]
    assert not failed, failed
    runs, total = Store(db_url).list_runs()
    assert total == STARTERS and all(r.label == "started" for r in runs)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_migrating_twice_is_a_no_op(db_url: str) -> None:
    Store(db_url)
    Store(db_url)  # the second start finds the schema at head under the lock


def test_a_damaged_empty_or_newer_store_is_refused_in_one_line(tmp_path: Path) -> None:
    """A corrupted, truncated or newer-schema database gave a raw traceback; a 0-byte file was silently
    re-created as a new, empty store."""
    from sqlalchemy import text

    from accelbench.errors import StoreError

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="cannot be opened: file is not a database"):
        Store(f"sqlite:///{garbage}")
    assert garbage.read_bytes().startswith(b"this is not")  # nothing changed
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(StoreError, match="empty"):
        Store(f"sqlite:///{empty}")
    assert empty.stat().st_size == 0
    newer = tmp_path / "newer.db"
    Store(f"sqlite:///{newer}").engine.dispose()
    from sqlalchemy import create_engine

    eng = create_engine(f"sqlite:///{newer}")
    with eng.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffffffff0042'"))
    eng.dispose()
    with pytest.raises(StoreError, match="newer accelbench"):
        Store(f"sqlite:///{newer}")
