"""Fixtures of the measurement-engine tests: a small trained tokenizer and the in-repo streaming server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.bench.tokenizer import LocalTokenizer
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir


@pytest.fixture(scope="session")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer directory (tokenizer.json + tokenizer_config.json with a ChatML template)."""
    return make_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="session")
def bos_tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same kind of tokenizer, but its encoder adds a BOS token (as Llama's does)."""
    return make_tokenizer_dir(tmp_path_factory.mktemp("tok-bos"), add_bos=True)


@pytest.fixture(scope="session")
def tok(tok_dir: Path) -> LocalTokenizer:
    return LocalTokenizer(tok_dir)


@pytest.fixture
def fixture_server(tok_dir: Path) -> Iterator[StreamServer]:
    """The streaming server in a thread: 5 ms to the first token, then a chunk every 2 ms."""
    with StreamServer(Script(ttft_ms=5, itl_ms=2), tokenizer_dir=tok_dir) as s:
        yield s
