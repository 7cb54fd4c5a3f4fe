"""What an import is asked and what it answers, shared by every tool's import (``services.result_imports`` and
``services.vllm_imports``): the files, the run's name and what the files do not say; the stored run and what was
made of the files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.catalog import (
    get_catalog,
    price_for,
)
from accelbench.errors import AccelbenchError


@dataclass
class ImportRequest:
    """What to import and how to name the run."""

    tool: str
    files: list[Path]
    label: str
    instance: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    input_len_tolerance: float = 0.15
    file_names: list[str] | None = None  # names to record (uploads: the client's names, not temporary paths)
    owner_key_id: int | None = None  # the API key that imported them (its own run)

    def names(self) -> list[str]:
        """The files' names as the user knows them."""
        return self.file_names or [f.name for f in self.files]


@dataclass
class ImportOutcome:
    """The stored run and what was made of the files."""

    run_id: str
    cells: list[str]  # "input 128 x concurrency 4 (2)": each cell and how many repeats it holds
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # why the run is stored as failed (no request completed in any file)
    failed_files: list[str] = field(default_factory=list)  # files with no completed request
    failure: str | None = None  # what those files say went wrong most often


def named_as_given(exc: AccelbenchError, req: ImportRequest) -> AccelbenchError:
    """A refusal that names an uploaded file by the name it was uploaded as, never its temporary path."""
    if not req.file_names:
        return exc
    message = exc.message
    for path, name in zip(req.files, req.file_names, strict=True):
        message = message.replace(str(path.resolve()), name).replace(str(path), name)
    exc.message = message
    return exc


def instance_hardware(instance: str) -> dict[str, Any]:
    """What an imported run records of the instance type the user named: the catalog's accelerator and price."""

    inst = get_catalog().instance(instance)
    price = price_for(inst.name)
    return {
        "instance_type": inst.name,
        "accelerator_type": inst.accelerator_type.value,
        "accelerator_name": inst.accelerator_name,
        "accelerator_count": inst.accelerator_count,
        "hourly_usd": price.usd_per_hour if price else None,
    }
