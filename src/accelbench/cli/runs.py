"""CLI commands: ``accelbench runs list|show|delete`` over the results store.

``list`` shows each run with its id, status and request counts; ``show`` leads with one run's headline (the best
configuration, the SLO verdict, cost and failures: report/headline.py) and per-cell table (latency percentiles
chosen by report/percentiles.py, SLO attainment and goodput, the top failure reason: the same aggregation as every
report), then its failures and warnings (each distinct note once: report/failures.py ``run_warnings``), the run,
environment and devices; its spec only with ``--spec``, unset fields left out; ``delete`` removes a run with its results,
per-request records and telemetry, after confirmation.

Each command calls one use case of ``services``: ``list`` and ``delete`` ``services/stored_runs.py`` (``list`` on the
run list's handle, which opens without the ORM and the rest of the store); ``show`` the
run's ``RunView`` (``services/run_view.py``, the one the run page and the API render too), printed by
``cli/run_show.py``, which only ``show`` loads (the headline and statistics code would slow every other command).
"""

from __future__ import annotations

from typing import Any

import typer

from accelbench.cli.common import FormatOption, OutputFormat, YesOption, err_console, print_json, user_errors
from accelbench.cli.exports import export_results
from accelbench.cli.render import Col, print_table
from accelbench.cli.run_status import status_text
from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunStatus
from accelbench.errors import ConflictError, Declined
from accelbench.report.attribution import model_label, where_label
from accelbench.report.percentiles import parse_percentiles
from accelbench.services import stored_runs
from accelbench.services.session import get_run_listing, get_store

runs_app = typer.Typer(help="List, show and delete stored runs.", no_args_is_help=True)


def run_brief(run: RunInfo) -> dict[str, Any]:
    """The fields ``runs list --format json`` prints for each run."""
    return {
        "id": run.id,
        "label": run.label,
        "kind": run.kind,
        "status": run.status.value,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "model": run.model,
        "served_model": run.served_model,
        "base_url": run.base_url,
        "engine": run.engine,
        "engine_version": run.engine_version,
        "instance_type": run.instance_type,
        "accelerator_type": run.accelerator_type,
        "cells": run.cells,
        "completed_requests": run.completed_requests,
        "failed_requests": run.failed_requests,
        "progress": run.progress,
        "error": run.error,
    }


def _progress_text(run: RunInfo) -> str:
    p = run.progress or {}
    done, total = p.get("cells_done"), p.get("cells_total")
    if isinstance(done, int) and isinstance(total, int) and total:
        return f"{done}/{total}"
    return str(run.cells) if run.cells else "-"


@runs_app.command("list")
def list_runs(
    status: list[RunStatus] | None = typer.Option(
        None, "--status", "-s", help="Only runs with this status (repeatable)."
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Only runs whose model or served name contains this."
    ),
    label: str | None = typer.Option(None, "--label", help="Only runs whose label contains this."),
    kind: str | None = typer.Option(
        None, "--kind", help="Only runs of this kind: bench, sweep, run, import."
    ),
    limit: int = typer.Option(
        50, "--limit", "-n", min=1, max=10_000, help="At most this many runs, newest first."
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """List stored runs, newest first, with their status and request counts."""
    with user_errors():
        page = stored_runs.list_runs(
            get_run_listing(),
            stored_runs.RunListRequest(
                status=status, model=model, label=label, kind=kind, limit=limit, recover=True
            ),
        )
        runs, total = page.items, page.total
        if fmt == OutputFormat.json:
            print_json({"total": total, "runs": [run_brief(r) for r in runs]})
            return
        if not runs:
            err_console.print("No runs stored yet." if total == 0 else "No run matches.")
            return
        cols = [
            Col("ID", 0, whole=True),
            Col("Kind", 3),
            Col("Status", 0),
            Col("Label", 1),
            Col("Model", 2),
            Col("Where", 2),
            Col("Created (UTC)", 2),
            Col("Cells", 1, num=True),
            Col("Completed", 3, num=True),
            Col("Failed", 2, num=True),
        ]
        print_table(
            cols,
            [
                [
                    r.id,
                    r.kind,
                    status_text(r.status),
                    r.label or "",
                    model_label(r),
                    where_label(r),
                    r.created_at.strftime("%Y-%m-%d %H:%M"),
                    _progress_text(r),
                    str(r.completed_requests),
                    f"[red]{r.failed_requests}[/]" if r.failed_requests else "0",
                ]
                for r in runs
            ],
            formats="json",
        )
        if total > len(runs):
            err_console.print(f"{len(runs)} of {total} runs shown; --limit shows more.")


PercentilesOption = typer.Option(
    None,
    "--percentiles",
    help="Latency percentiles to show, comma-separated, of 50, 90, 95, 99.",
    show_default="50,90,99, or ACCELBENCH_PERCENTILES",
)
SloOption = typer.Option(
    None,
    "--slo",
    help="Judge every cell against these targets in ms, e.g. ttft:2000,tpot:100 (ttft, tpot, itl, e2el).",
    show_default="the run's own SLO (a capacity search's, or its spec's), if any",
)
SloPercentileOption = typer.Option(
    90.0, "--slo-percentile", help="Percentile the --slo targets are judged at (0-100)."
)
SloAttainmentOption = typer.Option(
    0.95, "--slo-attainment", help="Share of requests that must meet every --slo target, 0-1."
)


@runs_app.command("show")
def show_run(
    run_id: str = typer.Argument(..., help="Run id (or an unambiguous prefix)."),
    repeats: bool = typer.Option(False, "--repeats", help="Also list every repeat of every cell."),
    spec: bool = typer.Option(False, "--spec", help="Also show the run's spec (the fields it set)."),
    percentiles: str | None = PercentilesOption,
    slo: str | None = SloOption,
    slo_percentile: float = SloPercentileOption,
    slo_attainment: float = SloAttainmentOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Show one run: the headline (best configuration, SLO, cost, failures) and per-cell results with latency
    tails, SLO attainment and goodput, then its failures and warnings, environment and devices (--spec: its
    spec)."""
    # start-up time: the headline, comparison and statistics code is what would make `runs list` and `runs
    # delete` slow to start; only `show` needs it
    from accelbench.cli import run_show
    from accelbench.services.run_view import RunViewRequest, run_view, run_view_json

    with user_errors():
        chosen = parse_percentiles(percentiles)
        given = run_show.given_slo(slo, percentile=slo_percentile, attainment=slo_attainment)
        view = run_view(get_store(), RunViewRequest(run_ref=run_id, slo=given, recover=True))
        if fmt == OutputFormat.json:
            print_json(run_view_json(view))
            return
        run_show.show(view, chosen, spec=spec, repeats=repeats)


@runs_app.command("delete")
def delete_runs(
    run_ids: list[str] = typer.Argument(..., help="Run ids (or unambiguous prefixes)."),
    yes: bool = YesOption,
    force: bool = typer.Option(False, "--force", help="Also delete runs that are still marked as running."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Delete runs with their results, per-request records and telemetry."""
    with user_errors():
        store = get_store()
        runs = stored_runs.get_runs(store, run_ids)
        active = [r for r in runs if not r.status.finished and r.status != RunStatus.pending]
        if active and not force:
            raise ConflictError(
                "Run(s) still marked as running: "
                + ", ".join(f"{r.id} ({r.status.value})" for r in active)
                + ".",
                hint="Wait for them to finish, or pass --force if the process that ran them is gone.",
            )
        if not yes:
            listing = ", ".join(
                f"{r.id} ({r.status.value}, {r.cells} results, {r.completed_requests + r.failed_requests} requests)"
                for r in runs
            )
            try:
                confirmed = typer.confirm(f"Delete {listing}?", default=False, err=True)
            except typer.Abort:  # no answer (end of input, Ctrl-C)
                confirmed = False
            if not confirmed:
                raise Declined("Nothing deleted.", hint="Answer y, or pass --yes to delete without asking.")
        deleted = stored_runs.delete_runs(store, [r.id for r in runs])
        if fmt == OutputFormat.json:
            print_json({"deleted": deleted})
        else:
            for rid in deleted:
                err_console.print(f"Deleted run {rid}.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    runs_app.command("export")(export_results)
    app.add_typer(runs_app, name="runs")
