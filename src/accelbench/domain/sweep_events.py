"""What a sweep tells whoever watches it: which (cell, repeat) it is on, and the events its progress callback
receives. Shells draw them; ``bench/sweep.py`` sends them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, TypedDict

from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.run import CellStatus


class CellKey(NamedTuple):
    """One (cell, repeat) of a sweep."""

    input_len: int
    concurrency: int
    repeat: int

    def __str__(self) -> str:
        return f"input {self.input_len}, concurrency {self.concurrency}, repeat {self.repeat + 1}"

    def as_dict(self) -> dict[str, int]:
        return {"input_len": self.input_len, "concurrency": self.concurrency, "repeat": self.repeat}


@dataclass
class SweepEvent:
    """What the ``progress`` callback of ``run_sweep`` receives.

    ``kind``: "start" (the sweep begins), "cell_start", "request" (one more request of the current cell
    finished), "cell_done", "end". ``key`` is the current (cell, repeat); ``requests_done``/``requests_total``
    count the current cell's requests.
    """

    kind: str
    cells_total: int
    cells_done: int
    key: CellKey | None = None
    requests_done: int = 0
    requests_total: int = 0
    status: CellStatus | None = None
    summary: BenchmarkSummary | None = None


class SweepCounts(TypedDict):
    """The counts a sweep's progress and each of its events carry (``SweepEvent``'s fields of these names)."""

    cells_total: int
    cells_done: int
    requests_done: int
    requests_total: int
