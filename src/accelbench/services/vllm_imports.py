"""Importing ``vllm bench serve --save-result`` JSON files (one per cell and repeat) as one run: ``accelbench
import vllm-bench``, the API's ``POST /imports/vllm-bench`` and the Import page.

Every file is read and checked before anything is stored, so a bad file leaves nothing half-imported. vLLM's
prompts vary around the asked length (it aligns them only when the server has ``/tokenize``), so files whose
measured input lengths are within a tolerance form one cell (``group_input_lengths``); the concurrency is the
file's ``max_concurrency``, or the prompt count of a load sent all at once. A file with no completed request is
a failed cell; no completed request in any file is a failed run, stored with the reason the files give.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from accelbench.bench.results_io import read_result
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.errors import AccelbenchError, UserInputError
from accelbench.services.import_request import ImportOutcome, ImportRequest, instance_hardware, named_as_given
from accelbench.store import Store

SOURCE = "vllm bench serve --save-result"


def concurrency_of(path: Path, s: BenchmarkSummary) -> int:
    conc = s.config.max_concurrency
    if conc is not None:
        return conc
    # vLLM without --max-concurrency sends every prompt at once (at an infinite request rate), so the
    # concurrency is the number of prompts; with a finite rate there is no fixed concurrency at all.
    if s.config.request_rate == float("inf"):
        return s.num_prompts or s.config.num_prompts
    raise UserInputError(
        f"{path}: no max_concurrency and a request rate of {s.config.request_rate}/s, so the cell's concurrency "
        "is unknown.",
        hint="Import results made with --max-concurrency (one file per cell and repeat).",
    )


def group_input_lengths(lengths: list[int], tolerance: float) -> dict[int, int]:
    """Map each measured input length to its cell's input length.

    vLLM's prompts vary around the asked length (it aligns them only when the server has ``/tokenize``), so
    files of one cell can report 40, 42 and 44 tokens. Sorted lengths join a group while they stay within
    ``tolerance`` (a fraction) of the group's smallest; a group's cell length is the median of its files'
    lengths, rounded. ``tolerance=0`` keeps every distinct length its own cell.
    """
    groups: list[list[int]] = []
    for n in sorted(lengths):
        if groups and n <= groups[-1][0] * (1.0 + tolerance):
            groups[-1].append(n)
        else:
            groups.append([n])
    mapping: dict[int, int] = {}
    for g in groups:
        cell = int(statistics.median(g) + 0.5)
        for n in g:
            mapping[n] = cell
    return mapping


def import_failure(failed: list[tuple[Path, BenchmarkSummary]]) -> str:
    """Why files have no completed request: the most frequent error reason the files record."""
    reasons: dict[str, int] = defaultdict(int)
    for _f, s in failed:
        for reason, n in s.errors.items():
            reasons[reason] += n
    requests = sum(s.failed for _f, s in failed)
    top = max(reasons.items(), key=lambda kv: kv[1])[0] if reasons else "no error reason recorded"
    return f"{requests} requests failed, most often: {top}"


def _hardware(instance: str | None) -> dict[str, Any]:
    return instance_hardware(instance) if instance else {}


def _read_all(req: ImportRequest) -> list[tuple[Path, BenchmarkSummary, int]]:
    """Every file read and its concurrency found, before anything is stored; the first bad file refused."""

    resolved = [f.resolve() for f in req.files]
    dupes = sorted({str(f) for f in resolved if resolved.count(f) > 1})
    if dupes:
        raise UserInputError(f"Files named more than once: {', '.join(dupes)}.")
    out = []
    try:
        for f in req.files:
            s = read_result(f)
            out.append((f, s, concurrency_of(f, s)))
    except AccelbenchError as exc:
        raise named_as_given(exc, req) from None
    return out


def _dates(loaded: list[tuple[Path, BenchmarkSummary, int]]) -> list[datetime]:
    dates: list[datetime] = []
    for _, s, _c in loaded:
        try:
            dates.append(datetime.fromisoformat(s.date))
        except ValueError:
            continue
    return dates


def import_vllm_results(store: Store, req: ImportRequest) -> ImportOutcome:
    """Read every file, then store them as one run of kind ``import``."""
    if req.engine_version and not req.engine:
        raise UserInputError("--engine-version needs --engine (which engine is that the version of?).")
    if not req.label.strip():
        raise UserInputError("--label is empty; give the run a name.")
    if not req.files:
        raise UserInputError("No files given; name at least one result file.")
    loaded = _read_all(req)
    models = sorted({s.model_id for _, s, _c in loaded if s.model_id})
    if len(models) > 1:
        raise UserInputError(
            f"The files are from different models ({', '.join(models)}); a run measures one model.",
            hint="Import each model's files as a separate run.",
        )
    hardware = _hardware(req.instance)
    cell_len = group_input_lengths([s.config.input_len for _, s, _c in loaded], req.input_len_tolerance)
    name_of = dict(zip(req.files, req.names(), strict=True))
    cells: dict[tuple[int, int], list[tuple[Path, BenchmarkSummary]]] = defaultdict(list)
    for f, s, conc in loaded:
        cells[(cell_len[s.config.input_len], conc)].append((f, s))
    measured_by_cell: dict[int, list[int]] = defaultdict(list)
    for measured, cell in cell_len.items():
        measured_by_cell[cell].append(measured)
    groups = [
        f"input {cell}: files with measured input lengths {', '.join(str(n) for n in sorted(ms))}"
        for cell, ms in sorted(measured_by_cell.items())
        if sorted(ms) != [cell]
    ]
    dates = _dates(loaded)
    failed_files = [(f, s) for f, s, _c in loaded if s.completed == 0]
    error = None
    if len(failed_files) == len(loaded):
        error = f"no request completed in any file: {import_failure(failed_files)}"
    run = store.create_run(
        kind="import",
        status=RunStatus.failed if error else RunStatus.completed,
        error=error,
        label=req.label.strip(),
        model=models[0] if models else None,
        served_model=models[0] if models else None,
        base_url=next((s.base_url for _, s, _c in loaded if s.base_url), None),
        engine=req.engine,
        engine_version=req.engine_version,
        target="import",
        started_at=min(dates) if dates else None,
        finished_at=max(dates) if dates else None,
        owner_key_id=req.owner_key_id,
        extra={"source": SOURCE, "files": [name_of[f] for f, _s, _c in loaded], "input_len_groups": groups},
        **hardware,
    )
    for (input_len, conc), group in sorted(cells.items()):
        group.sort(key=lambda fs: (fs[1].date, name_of[fs[0]]))  # repeats in the order they were measured
        for repeat, (_f, s) in enumerate(group):
            status = CellStatus.completed if s.completed else CellStatus.failed
            store.save_result(
                run.id, input_len=input_len, concurrency=conc, repeat=repeat, summary=s, status=status
            )
    return ImportOutcome(
        run_id=run.id,
        cells=[f"input {i} x concurrency {c} ({len(g)})" for (i, c), g in sorted(cells.items())],
        notes=[f"grouped {g}" for g in groups],
        error=error,
        failed_files=[name_of[f] for f, _ in failed_files] if not error else [],
        failure=import_failure(failed_files) if failed_files and not error else None,
    )
