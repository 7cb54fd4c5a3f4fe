"""What the load generator needs of the place runs are kept, and nothing more.

A sweep, a capacity search and the records made before a load (what a run serves, its quality) write what they
measure into a stored run. They are handed that place as a ``RunRecorder``: the store (``store.Store``) has
these methods, so it is one without naming this protocol, and the load generator never imports the store.
"""

from __future__ import annotations

from typing import Any, Protocol

from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import CellStatus, RunStatus


class RunNotes(Protocol):
    """A stored run to read and to add notes to (its ``extra``): what is recorded before a load."""

    def get_run(self, ref: str) -> RunInfo: ...

    def list_runs(self, *, model: str | None = None, limit: int = 50) -> tuple[list[RunInfo], int]: ...

    def merge_run_extra(self, run_id: str, **items: Any) -> RunInfo: ...


class RunRecorder(RunNotes, Protocol):
    """A stored run a benchmark writes into: made, claimed, its cells saved as they finish, its progress and
    status kept up to date."""

    def create_run(self, *, kind: str, claimed_by: str | None = None, **fields: Any) -> RunInfo: ...

    def claim_run(self, run_id: str, owner: str | None = None) -> RunInfo: ...

    def update_run(self, run_id: str, **fields: Any) -> RunInfo: ...

    def set_status(self, run_id: str, status: RunStatus, *, error: str | None = None) -> RunInfo: ...

    def get_results(self, ref: str) -> list[ResultInfo]: ...

    def save_result(
        self,
        run_id: str,
        *,
        input_len: int,
        concurrency: int,
        repeat: int,
        summary: BenchmarkSummary,
        status: CellStatus = CellStatus.completed,
    ) -> int: ...
