"""CLI commands ``accelbench import guidellm|aiperf|inference-perf|genai-bench|llm-d-report FILE...``: one command
per importer registered in ``bench.importers``, each storing its files as one run through
``services.result_imports`` (every file read before anything is stored)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from accelbench.cli.common import FormatOption, OutputFormat, err_console, print_json, user_errors
from accelbench.services.result_imports import ImportRequest, import_results, importers
from accelbench.services.session import get_store


def _command(tool: str, description: str) -> Callable[..., None]:
    def command(
        files: list[Path] = typer.Argument(..., help=f"{description}."),
        label: str = typer.Option(..., "--label", help="A name for the new run."),
        instance: str | None = typer.Option(
            None, "--instance", help="Instance type the results were measured on (else what the files say)."
        ),
        engine: str | None = typer.Option(
            None, "--engine", help="Serving engine, e.g. vllm, sglang (else what the files say)."
        ),
        engine_version: str | None = typer.Option(
            None, "--engine-version", help="Engine version (needs --engine)."
        ),
        tolerance: float = typer.Option(
            0.15,
            "--input-len-tolerance",
            min=0.0,
            max=1.0,
            help="Measured input lengths within this fraction of each other form one cell; 0 keeps each its own.",
        ),
        fmt: OutputFormat = FormatOption,
    ) -> None:
        with user_errors():
            req = ImportRequest(
                tool=tool,
                files=files,
                label=label,
                instance=instance,
                engine=engine,
                engine_version=engine_version,
                input_len_tolerance=tolerance,
            )
            outcome = import_results(get_store(), req)
        if fmt == OutputFormat.json:
            print_json({"run_id": outcome.run_id, "cells": outcome.cells, "notes": outcome.notes})
            return
        err_console.print(
            f"Imported {len(files)} file{'s' if len(files) != 1 else ''} into run {outcome.run_id} ({label}): "
            f"{', '.join(outcome.cells)}.",
            highlight=False,
        )
        for note in outcome.notes:
            err_console.print(f"  {note}", highlight=False)
        typer.echo(outcome.run_id)

    command.__doc__ = (
        f"Import {description} as one run.\n\nCells are found by input length and concurrency (or rate); the "
        "tool's definitions are noted where they differ from accelbench's."
    )
    return command


def register_importers(import_app: typer.Typer) -> None:
    """Add one ``import`` subcommand per registered importer."""
    for name, description in importers():
        import_app.command(name)(_command(name, description))
