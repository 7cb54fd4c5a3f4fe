"""CLI commands ``accelbench import vllm-bench|guidellm|aiperf|inference-perf|genai-bench|llm-d-report FILE...``:
``vllm-bench`` (``services.vllm_imports``) and one command per importer registered in ``bench.importers``
(``services.result_imports``), each storing its files as one run (every file read before anything is stored).
Every one takes the same flags and asks for the same ``ImportRequest``, so they are all built by one function
here from an ``ImportCommand``: its tool, how its files are stored and shown, and what its help says."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

from accelbench.cli.common import FormatOption, OutputFormat, err_console, print_json, user_errors
from accelbench.services.import_request import ImportOutcome, ImportRequest
from accelbench.services.result_imports import import_results, importers
from accelbench.services.session import Store, get_store
from accelbench.services.vllm_imports import import_vllm_results

import_app = typer.Typer(
    help="Bring results measured elsewhere into the store (they then compare like any run).",
    no_args_is_help=True,
)


def show_imported(outcome: ImportOutcome, req: ImportRequest, fmt: OutputFormat) -> None:
    """What an importer's command says of the run it stored: the cells, the notes, and the run id on stdout."""
    if fmt == OutputFormat.json:
        print_json({"run_id": outcome.run_id, "cells": outcome.cells, "notes": outcome.notes})
        return
    files = req.files
    err_console.print(
        f"Imported {len(files)} file{'s' if len(files) != 1 else ''} into run {outcome.run_id} ({req.label}): "
        f"{', '.join(outcome.cells)}.",
        highlight=False,
    )
    for note in outcome.notes:
        err_console.print(f"  {note}", highlight=False)
    typer.echo(outcome.run_id)


def show_vllm_imported(outcome: ImportOutcome, req: ImportRequest, fmt: OutputFormat) -> None:
    """What ``import vllm-bench`` says of the run it stored, and of the files in which no request completed."""
    if fmt == OutputFormat.json:
        print_json({"run_id": outcome.run_id})
        return
    err_console.print(
        f"Imported {len(req.files)} results into run {outcome.run_id} ({req.label}): {', '.join(outcome.cells)}.",
        highlight=False,
    )
    if outcome.error:
        err_console.print(f"[red]Stored as failed[/]: {outcome.error}", highlight=False)
    elif outcome.failed_files:
        err_console.print(
            f"[yellow]No request completed in {', '.join(outcome.failed_files)}[/] ({outcome.failure}); "
            "those cells are marked failed and left out of comparisons.",
            highlight=False,
        )
    for n in outcome.notes:
        err_console.print(f"  {n}", highlight=False)
    typer.echo(outcome.run_id)


@dataclass(frozen=True)
class ImportCommand:
    """One ``import`` subcommand: the tool it reads, its help (the command's, the files' and the flags' whose
    words differ per tool), how it stores the files and what it says of the stored run."""

    tool: str
    doc: str
    files_help: str
    instance_help: str = "Instance type the results were measured on (else what the files say)."
    engine_help: str = "Serving engine, e.g. vllm, sglang (else what the files say)."
    tolerance_help: str = (
        "Measured input lengths within this fraction of each other form one cell; 0 keeps each its own."
    )
    store: Callable[[Store, ImportRequest], ImportOutcome] = import_results
    show: Callable[[ImportOutcome, ImportRequest, OutputFormat], None] = show_imported


def import_command(spec: ImportCommand) -> Callable[..., None]:
    """The typer command of ``spec``: its flags, the ``ImportRequest`` they make, stored and shown."""

    def command(
        files: list[Path] = typer.Argument(..., help=spec.files_help),
        label: str = typer.Option(..., "--label", help="A name for the new run."),
        instance: str | None = typer.Option(None, "--instance", help=spec.instance_help),
        engine: str | None = typer.Option(None, "--engine", help=spec.engine_help),
        engine_version: str | None = typer.Option(
            None, "--engine-version", help="Engine version (needs --engine)."
        ),
        tolerance: float = typer.Option(
            0.15, "--input-len-tolerance", min=0.0, max=1.0, help=spec.tolerance_help
        ),
        fmt: OutputFormat = FormatOption,
    ) -> None:
        req = ImportRequest(
            tool=spec.tool,
            files=files,
            label=label,
            instance=instance,
            engine=engine,
            engine_version=engine_version,
            input_len_tolerance=tolerance,
        )
        with user_errors():
            outcome = spec.store(get_store(), req)
        spec.show(outcome, req, fmt)

    command.__doc__ = spec.doc
    return command


VLLM_BENCH = ImportCommand(
    tool="vllm-bench",
    doc="Import vLLM benchmark result files as one run; cells are recognised by input length and concurrency.",
    files_help="`vllm bench serve --save-result` JSON files (one per cell and repeat).",
    instance_help="Instance type the results were measured on.",
    engine_help="Serving engine, e.g. vllm, vllm-cpu, sglang.",
    tolerance_help="Input lengths within this fraction of each other form one cell (vLLM's prompt lengths vary "
    "when the server has no /tokenize); 0 keeps each length its own cell.",
    store=import_vllm_results,
    show=show_vllm_imported,
)


def importer_command(tool: str, description: str) -> ImportCommand:
    """The command of one importer registered in ``bench.importers``, described as it describes its files."""
    return ImportCommand(
        tool=tool,
        doc=f"Import {description} as one run.\n\nCells are found by input length and concurrency (or rate); the "
        "tool's definitions are noted where they differ from accelbench's.",
        files_help=f"{description}.",
    )


def register_imports(app: typer.Typer) -> None:
    """Add ``import`` to the root app: ``vllm-bench``, then one subcommand per registered importer."""
    import_app.command("vllm-bench")(import_command(VLLM_BENCH))
    for name, description in importers():  # guidellm, aiperf, ... (bench.importers)
        import_app.command(name)(import_command(importer_command(name, description)))
    app.add_typer(import_app, name="import")
