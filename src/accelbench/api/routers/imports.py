"""Other tools' results in and a run's results out, over HTTP: ``POST /imports/{tool}`` (multipart files, as
``accelbench import TOOL FILE...``) and ``GET /runs/{run_id}/results-export`` (as ``accelbench runs export``).

Uploads are written under a temporary directory by their base names (a companion such as AIPerf's
``profile_export_aiperf.json`` or genai-bench's ``experiment_metadata.json`` is read from beside its partner, so
the names matter) and handed to ``services.result_imports``; nothing of a request whose files do not all read
is stored. The request body limit of every API request applies to the files together.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path as FilePath
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Path, Query, UploadFile
from pydantic import BaseModel, Field

from accelbench.api.auth import Principal, require_read, require_write
from accelbench.api.deps import StoreDep
from accelbench.api.errors import ERROR_RESPONSES, ErrorBody
from accelbench.errors import UserInputError
from accelbench.services.result_imports import ImportRequest, import_results
from accelbench.services.run_export import export_run
from accelbench.services.stored_runs import get_run

router = APIRouter(tags=["imports"], responses=ERROR_RESPONSES)

Tool = Annotated[
    str,
    Path(
        min_length=1,
        max_length=40,
        description="vllm-bench, guidellm, aiperf, inference-perf, genai-bench or llm-d-report.",
    ),
]
RunId = Annotated[str, Path(min_length=1, max_length=64, description="A run id or an unambiguous prefix.")]
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class ImportedRun(BaseModel):
    """The run the files were stored as."""

    run_id: str = Field(description="The new run's id.")
    cells: list[str] = Field(description="Each cell and how many repeats it holds.")
    notes: list[str] = Field(
        description="How the tool's definitions differ from accelbench's, and other caveats."
    )


class ExportedFile(BaseModel):
    """One file of an export."""

    name: str = Field(description="File name.")
    media_type: str = Field(description="application/json or text/csv.")
    content: str = Field(description="The file's text.")


class ExportedRun(BaseModel):
    """A run's results in another tool's format."""

    run_id: str
    format: str
    files: list[ExportedFile]


def _safe_name(name: str | None, i: int) -> str:
    base = _SAFE.sub("_", FilePath(name or "").name).lstrip(".")
    return base[:120] or f"file{i}.json"


@router.post(
    "/imports/{tool}",
    status_code=201,
    response_model=ImportedRun,
    summary="Import result files of another tool as one run",
    responses={413: {"model": ErrorBody, "description": "The files together exceed the request body limit."}},
)
def import_files(
    tool: Tool,
    store: StoreDep,
    files: Annotated[list[UploadFile], File(description="The tool's result files (one run's worth).")],
    label: Annotated[str, Form(min_length=1, max_length=200, description="A name for the new run.")],
    engine: Annotated[
        str | None, Form(max_length=64, description="Serving engine (else the files').")
    ] = None,
    engine_version: Annotated[
        str | None, Form(max_length=64, description="Engine version (needs engine).")
    ] = None,
    instance: Annotated[str | None, Form(max_length=64, description="Instance type measured on.")] = None,
    principal: Principal = Depends(require_write),
) -> ImportedRun:
    names = [_safe_name(f.filename, i) for i, f in enumerate(files)]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UserInputError(
            f"Files named more than once: {', '.join(dupes)}.", hint="Upload each file once."
        )
    with tempfile.TemporaryDirectory(prefix="accelbench-import-") as tmp:
        paths = []
        for name, upload in zip(names, files, strict=True):
            path = FilePath(tmp) / name
            path.write_bytes(upload.file.read())
            paths.append(path)
        req = ImportRequest(
            tool=tool,
            files=paths,
            label=label,
            instance=instance,
            engine=engine,
            engine_version=engine_version,
            file_names=names,
            owner_key_id=principal.key_id,
        )
        outcome = import_results(store, req)
    return ImportedRun(run_id=outcome.run_id, cells=outcome.cells, notes=outcome.notes)


@router.get(
    "/runs/{run_id}/results-export",
    response_model=ExportedRun,
    summary="A run's results as llm-d-benchmark reports, vLLM result files or CSV",
)
def export_results(
    run_id: RunId,
    store: StoreDep,
    format: str = Query(
        "llm-d-report",
        pattern="^(llm-d-report|vllm|csv)$",
        description="llm-d-report (one benchmark report per cell and repeat), vllm or csv.",
    ),
    _: Principal = Depends(require_read),
) -> ExportedRun:
    run = get_run(store, run_id)
    files = export_run(store, run.id, format)
    return ExportedRun(
        run_id=run.id,
        format=format,
        files=[ExportedFile(name=f.name, media_type=f.media_type, content=f.content) for f in files],
    )
