"""CLI command ``accelbench runs export ID --format llm-d-report|vllm|csv``: a stored run's results written for
other tools by ``services.run_export`` (to a directory, or to stdout)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from accelbench.cli.common import err_console, user_errors
from accelbench.services.session import get_store


def export_results(
    run_id: str = typer.Argument(..., help="Run id (or an unambiguous prefix)."),
    fmt: str = typer.Option(
        "llm-d-report",
        "--format",
        help="llm-d-report (llm-d-benchmark's benchmark report v0.2.1, one per cell and repeat), vllm (vllm bench "
        "serve's result JSON, one per cell and repeat) or csv (the per-cell table).",
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        help="Directory to write the files into (created); without it they go to stdout (JSON formats as one "
        "JSON list).",
    ),
) -> None:
    """Export a run's results in another tool's format."""
    # start-up: the exporters load numpy, the report and the result readers; `runs list` shares this group
    from accelbench.services.run_export import export_run

    with user_errors():
        files = export_run(get_store(), run_id, fmt)
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        for f in files:
            (output / f.name).write_text(f.content, encoding="utf-8")
        err_console.print(
            f"Wrote {len(files)} file{'s' if len(files) != 1 else ''} to {output}.", highlight=False
        )
        return
    if fmt == "csv":
        sys.stdout.write(files[0].content)
        return
    sys.stdout.write(json.dumps([json.loads(f.content) for f in files], indent=1) + "\n")
