"""The named registry: lookups suggest the closest names, and the first lookups of a freshly started process,
made at once from many threads, all see every entry (they used to see a half-loaded registry: after a restart
19 of 20 concurrent POST /runs were refused with "Unknown runtime 'vllm-cpu'")."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from accelbench.errors import NotFoundError
from accelbench.registry import Registry


def test_unknown_names_suggest_the_closest() -> None:
    reg: Registry[int] = Registry("thing")
    reg.add("vllm-cpu", 1)
    with pytest.raises(NotFoundError, match="Did you mean 'vllm-cpu'"):
        reg.get("vllm-cpuu")


def test_concurrent_first_lookups_all_see_every_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg: Registry[int] = Registry("runtime", ["slow_entries"])
    (tmp_path / "slow_entries.py").write_text(
        "import time\n"
        "from tests.unit.test_registry import CURRENT\n"
        "time.sleep(0.3)  # a module that takes a while to import (torch, transformers...)\n"
        "CURRENT[0].add('vllm-cpu', 1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_entries", raising=False)
    CURRENT[:] = [reg]
    answers: list[object] = []
    start = threading.Barrier(20)

    def lookup() -> None:
        start.wait()
        try:
            answers.append(reg.get("vllm-cpu"))
        except NotFoundError as exc:
            answers.append(exc)

    threads = [threading.Thread(target=lookup) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [1] * 20


CURRENT: list[Registry[int]] = []
