"""Importing other tools' result files as one run (``accelbench import guidellm|aiperf|inference-perf|
genai-bench|llm-d-report``, the API's ``POST /imports/{tool}``).

Every file is read and checked before anything is stored, so a bad file leaves nothing half-imported. Cells are
keyed by input length and concurrency: a file's stated input length, else its measured one, grouped within a
tolerance as ``import vllm-bench`` does; a rate-driven load (no fixed concurrency) is keyed by the most requests
it had in flight, and its rate is kept in the cell's config. Loads measured more than once become repeats. What
the files say about model, engine and hardware is stored with the run; flags given override it. Each cell's
figures that accelbench's definitions do not cover stay under the tool's name in the run's
``extra['tool_metrics']``, marked comparable or not with the difference in words.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from accelbench.bench.importers import IMPORTERS, ImportedCell, ImportedFile
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.errors import AccelbenchError, UserInputError
from accelbench.services.import_request import ImportOutcome, ImportRequest, instance_hardware, named_as_given
from accelbench.services.vllm_imports import import_vllm_results
from accelbench.store import Store

__all__ = [
    "VLLM_BENCH",
    "ImportOutcome",
    "ImportRequest",
    "import_results",
    "read_all",
    "tool_choices",
    "tools",
]

#: vLLM's own result files, imported by ``services.vllm_imports`` rather than a ``bench.importers`` module
VLLM_BENCH = "vllm-bench"


def tools() -> list[str]:
    """The names ``import`` takes, besides vllm-bench."""
    return IMPORTERS.names()


def importers() -> list[tuple[str, str]]:
    """The registered importers (every tool but vllm-bench), each with the one line saying which files it
    reads."""
    return [(name, importer.description) for name, importer in IMPORTERS.items()]


def tool_choices() -> list[tuple[str, str]]:
    """Every tool ``import`` takes, vllm-bench first, with the one line saying which files it reads."""
    vllm = (VLLM_BENCH, "`vllm bench serve --save-result` JSON files (one per cell and repeat)")
    return [vllm, *importers()]


def read_all(tool: str, files: list[Path]) -> list[ImportedFile]:
    """Read every file (refusing the first bad one, naming it); nothing is stored."""
    importer = IMPORTERS.get(tool)
    if not files:
        raise UserInputError("No files given; name at least one result file.")
    resolved = [f.resolve() for f in files]
    dupes = sorted({str(f) for f in resolved if resolved.count(f) > 1})
    if dupes:
        raise UserInputError(f"Files named more than once: {', '.join(dupes)}.")
    given = {(f.parent, f.name) for f in files}
    # a companion named with its partner (AIPerf's statistics beside its records) is read through the partner
    partnered = {
        f
        for f in files
        if f.name in importer.companions
        and any(parent == f.parent and name not in importer.companions for parent, name in given)
    }
    out = []
    for f in files:
        if f in partnered:
            continue
        try:
            out.append(importer.read(f))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UserInputError(
                f"{f}: expected {importer.description}, found values accelbench cannot hold ({where}: "
                f"{first['msg']}).",
                hint="Nothing was imported from any of the files.",
            ) from None
    return out


def _group_lengths(lengths: list[int], tolerance: float) -> dict[int, int]:
    """Measured input length -> the cell's: sorted lengths within ``tolerance`` of a group's smallest join it;
    the group's cell length is its median, rounded."""
    groups: list[list[int]] = []
    for n in sorted(set(lengths)):
        if groups and n <= groups[-1][0] * (1 + tolerance):
            groups[-1].append(n)
        else:
            groups.append([n])
    return {n: int(statistics.median(g) + 0.5) for g in groups for n in g}


def _in_flight(c: ImportedCell) -> int:
    """Mean requests in flight of a rate-driven cell by Little's law: completions per second x mean E2E latency
    (the planned rate when no throughput is known), at least 1."""
    s = c.summary
    rate = s.request_throughput or (s.config.request_rate if s.config.request_rate < float("inf") else 0.0)
    return max(1, round(rate * s.e2el_ms.mean / 1000.0))


def _cell_keys(
    loaded: list[ImportedFile], tolerance: float
) -> list[tuple[int, int, ImportedFile, ImportedCell]]:
    """(input length, concurrency) of every cell. A rate-driven cell is keyed by its mean requests in flight,
    moved up to the next free concurrency when another rate at that input length has it (so two rates are never
    taken for repeats of one cell)."""
    cells = [(f, c) for f in loaded for c in f.cells]
    lens = _group_lengths([c.input_len or c.summary.config.input_len for _, c in cells], tolerance)
    taken: dict[
        tuple[int, int], float | None
    ] = {}  # key -> the rate that holds it (None: a fixed concurrency)
    out = []
    for _f, c in cells:
        in_len = lens[c.input_len or c.summary.config.input_len]
        if c.concurrency is not None:
            taken[(in_len, c.concurrency)] = None
    for f, c in cells:
        in_len = lens[c.input_len or c.summary.config.input_len]
        conc = c.concurrency
        if conc is None:
            rate = c.summary.config.request_rate
            conc = _in_flight(c)
            while (in_len, conc) in taken and taken[(in_len, conc)] != rate:
                conc += 1
            taken[(in_len, conc)] = rate
            c.summary.notes.append(
                f"A rate-driven load ({rate:g} requests/s) is stored as concurrency {conc}: its mean requests in "
                "flight (completions per second x mean E2E latency), raised to the next free value when another "
                "rate had it."
            )
        out.append((in_len, conc, f, c))
    return out


def _hardware(req: ImportRequest, loaded: list[ImportedFile]) -> dict[str, Any]:
    if req.instance:
        return instance_hardware(req.instance)
    acc = next((f for f in loaded if f.accelerator), None)
    if acc is None:
        return {}
    return {"accelerator_name": acc.accelerator, "accelerator_count": acc.accelerator_count}


def import_results(store: Store, req: ImportRequest) -> ImportOutcome:
    """Read every file, then store them as one run of kind ``import``."""
    if req.tool == VLLM_BENCH:
        return import_vllm_results(store, req)
    if req.engine_version and not req.engine:
        raise UserInputError("--engine-version needs --engine (which engine is that the version of?).")
    if not req.label.strip():
        raise UserInputError("--label is empty; give the run a name.")
    try:
        loaded = read_all(req.tool, req.files)
    except AccelbenchError as exc:
        raise named_as_given(exc, req) from None
    models = sorted({f.model for f in loaded if f.model})
    if len(models) > 1:
        raise UserInputError(
            f"The files are from different models ({', '.join(models)}); a run measures one model.",
            hint="Import each model's files as a separate run.",
        )
    keyed = _cell_keys(loaded, req.input_len_tolerance)
    hardware = _hardware(req, loaded)
    by_cell: dict[tuple[int, int], list[tuple[ImportedFile, ImportedCell]]] = defaultdict(list)
    for in_len, conc, f, c in keyed:
        by_cell[(in_len, conc)].append((f, c))
    names = req.names()
    name_by_path = dict(zip(req.files, names, strict=True))
    name_of = {id(f): name_by_path.get(f.path, f.path.name) for f in loaded}
    ok = any(c.summary.completed for _, _, _, c in keyed)
    engine = req.engine or next((f.engine for f in loaded if f.engine), None)
    ordered: list[tuple[int, int, int, ImportedCell]] = []
    tool_metrics: list[dict[str, Any]] = []
    for (in_len, conc), group in sorted(by_cell.items()):
        group.sort(key=lambda fc: (fc[1].summary.date, name_of[id(fc[0])], fc[1].where))  # measured order
        for repeat, (f, c) in enumerate(group):
            ordered.append((in_len, conc, repeat, c))
            if c.tool_metrics:
                tool_metrics.append(
                    {
                        "input_len": in_len,
                        "concurrency": conc,
                        "repeat": repeat,
                        "file": name_of[id(f)],
                        "where": c.where,
                        "metrics": [m.model_dump() for m in c.tool_metrics],
                    }
                )
    run = store.create_run(
        kind="import",
        status=RunStatus.completed if ok else RunStatus.failed,
        error=None if ok else "no request completed in any file",
        label=req.label.strip(),
        model=models[0] if models else None,
        served_model=models[0] if models else None,
        base_url=next((f.base_url for f in loaded if f.base_url), None),
        engine=engine,
        engine_version=req.engine_version
        or (next((f.engine_version for f in loaded if f.engine_version), None) if engine else None),
        target="import",
        owner_key_id=req.owner_key_id,
        extra={
            "source": f"{loaded[0].tool} {loaded[0].tool_version}".strip(),
            "files": names,
            "tool_metrics": tool_metrics,
        },
        **hardware,
    )
    for in_len, conc, repeat, c in ordered:
        status = CellStatus.completed if c.summary.completed else CellStatus.failed
        store.save_result(
            run.id, input_len=in_len, concurrency=conc, repeat=repeat, summary=c.summary, status=status
        )
    shape = [f"input {i} x concurrency {c} ({len(g)})" for (i, c), g in sorted(by_cell.items())]
    notes = sorted({n for _, _, _, c in keyed for n in c.summary.notes if not n.startswith("Imported from")})
    return ImportOutcome(run_id=run.id, cells=shape, notes=notes)
