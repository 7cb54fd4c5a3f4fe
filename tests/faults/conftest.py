"""Fixtures of the fault suite: the fixture stream server, slowed down so a run takes seconds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.service import SmallFilesystem, StoppablePostgres
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir


@pytest.fixture
def tokenizer(tmp_path: Path) -> Path:
    return make_tokenizer_dir(tmp_path / "tok")


@pytest.fixture
def slow_server(tokenizer: Path) -> Iterator[StreamServer]:
    """16 tokens, one every 60 ms: about a second per request, so a run of a few cells takes seconds."""
    with StreamServer(Script(ttft_ms=20, itl_ms=60), tokenizer_dir=tokenizer, model="smol") as s:
        yield s


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFilesystem]:
    fs = SmallFilesystem(tmp_path / "small", size_mb=8)
    try:
        yield fs
    finally:
        fs.close()


@pytest.fixture
def own_postgres() -> Iterator[StoppablePostgres]:
    pg = StoppablePostgres()
    try:
        yield pg
    finally:
        pg.close()
