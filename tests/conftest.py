"""Fixtures shared by every test level: an isolated environment, the store on SQLite and on PostgreSQL."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accelbench.settings import reset_settings_cache
from accelbench.store.repo import Store, reset_stores
from tests.support.postgres import PostgresServer, start_postgres

_db_counter = itertools.count()
_CPU_PATHS: list[str] = []


@pytest.fixture
def cpu_path(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Say which CPU-dependent path a test took (machines differ: AMD without AMX, Intel with AMX); every
    line is printed in the run's closing summary, so a green run still tells what it exercised."""

    def note(text: str) -> None:
        _CPU_PATHS.append(f"{request.node.nodeid}: {text}")

    return note


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _CPU_PATHS:
        terminalreporter.section("CPU-dependent paths taken")
        for line in _CPU_PATHS:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test gets its own data dir and SQLite store. The cache dir (engines, models) is shared, because
    installing an engine takes minutes: tests use ACCELBENCH_CACHE_DIR from the environment when set."""
    data = tmp_path / "data"
    monkeypatch.setenv("ACCELBENCH_DATA_DIR", str(data))
    monkeypatch.delenv("ACCELBENCH_DATABASE_URL", raising=False)
    monkeypatch.delenv("ACCELBENCH_API_TOKEN", raising=False)
    # tests hand the API fixture models and tokenizers made under pytest's temporary directory
    monkeypatch.setenv("ACCELBENCH_API_PATH_ROOTS", json.dumps([str(tmp_path.parent.parent)]))
    reset_settings_cache()
    reset_stores()
    yield data
    reset_stores()
    reset_settings_cache()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty PostgreSQL database for one test."""
    return postgres_server.create_database(f"t{next(_db_counter)}")


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Run the test once against SQLite and once against a real PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """The store, on both databases; also the default store for code that calls get_store()."""
    monkeypatch.setenv("ACCELBENCH_DATABASE_URL", db_url)
    reset_settings_cache()
    reset_stores()
    from accelbench.store import get_store

    s = get_store()
    yield s
    reset_stores()
