"""Result files of other benchmark tools read into accelbench's ``BenchmarkSummary``: one module per tool
(guidellm, aiperf, inference-perf, genai-bench, llm-d-report), each registered under the name
``accelbench import NAME`` takes.

An importer reads one file and returns an ``ImportedFile``: its cells (one ``BenchmarkSummary`` each, with the
load the tool applied), what the file says about the model, engine and hardware, and the tool's own figures that
accelbench's definitions do not cover (``ToolMetric``, marked comparable or not, the difference said in words).
Where a tool writes per-request records the summary is recomputed from them by ``bench.metrics``; otherwise it
holds the tool's statistics, and the figures whose definition differs stay under the tool's own name.

A file an importer cannot read raises ``UserInputError`` naming the file, what was expected and what was found,
before anything is stored: ``services.result_imports`` reads every file first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import Field

from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.strict import StrictModel
from accelbench.registry import Registry


class ToolMetric(StrictModel):
    """One figure as a tool defines it, kept under the tool's own name."""

    name: str = Field(description="The tool's own name for the figure, e.g. 'time_per_output_token_ms'.")
    unit: str = Field(description="Unit of the values, e.g. 'ms', 'tokens/s'.")
    values: dict[str, float] = Field(description="Statistic -> value (mean, p50, p90, p99 ...).")
    comparable: bool = Field(
        description="Whether it means what accelbench's figure of the same kind means (then it is also stored "
        "as that figure)."
    )
    difference: str = Field(default="", description="How the tool's definition differs from accelbench's.")


@dataclass
class ImportedCell:
    """One measured load point of a file: a summary and the load the tool applied."""

    where: str  # e.g. "benchmarks[2]" or "stage 1": the place in the file, for messages
    summary: BenchmarkSummary
    concurrency: int | None  # requests in flight the tool held (None: a rate-driven load)
    input_len: int | None = None  # the cell's input length as the file states it (else the summary's)
    tool_metrics: list[ToolMetric] = field(default_factory=list)
    from_records: bool = False  # figures recomputed from per-request records


@dataclass
class ImportedFile:
    """What one result file holds."""

    path: Path
    tool: str
    tool_version: str  # empty when the file does not say
    cells: list[ImportedCell]
    model: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    accelerator: str | None = None
    accelerator_count: int | None = None
    base_url: str | None = None
    notes: list[str] = field(default_factory=list)


class Importer(Protocol):
    """Reads one file of a tool's results."""

    tool: str
    description: str  # one line: which files, written how
    companions: tuple[str, ...]  # file names read from beside another file, not imported on their own

    def read(self, path: Path) -> ImportedFile: ...


IMPORTERS: Registry[Importer] = Registry(
    "result format",
    modules=[
        "accelbench.bench.importers.guidellm",
        "accelbench.bench.importers.aiperf",
        "accelbench.bench.importers.inference_perf",
        "accelbench.bench.importers.genai_bench",
        "accelbench.bench.importers.llm_d_report",
    ],
)


def read_file(tool: str, path: Path) -> ImportedFile:
    """Read ``path`` with the importer registered as ``tool`` (an unknown name suggests the closest)."""
    return IMPORTERS.get(tool).read(path)
