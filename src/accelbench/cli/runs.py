"""CLI commands: ``accelbench runs list|show|delete`` over the results store.

``list`` shows each run with its id, status and request counts; ``show`` leads with one run's headline (the best
configuration, the SLO verdict, cost and failures: report/headline.py) and per-cell table (latency percentiles
chosen by report/percentiles.py, SLO attainment and goodput, the top failure reason: the same aggregation as every
report), then its failures and warnings (each distinct note once: report/failures.py ``run_warnings``), the run,
environment and devices; its spec only with ``--spec``, unset fields left out; ``delete`` removes a run with its results,
per-request records and telemetry, after confirmation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from accelbench.cli.common import FormatOption, OutputFormat, console, err_console, print_json, user_errors
from accelbench.cli.render import (
    Col,
    cell_priority,
    print_cells,
    print_device_telemetry,
    print_failures_and_warnings,
    print_table,
)
from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunStatus
from accelbench.errors import ConflictError, Declined
from accelbench.report.attribution import model_label, tokenizer_of, where_label
from accelbench.report.formatting import MISSING
from accelbench.report.percentiles import parse_percentiles
from accelbench.store import get_store
from accelbench.store.owner import recover_dead_owners

if TYPE_CHECKING:
    from accelbench.domain.results import ResultInfo
    from accelbench.report.headline import CellSLO, Headline, Key, SLOChoice
    from accelbench.report.tables import CellAggregate
    from accelbench.store.repo import Store

runs_app = typer.Typer(help="List, show and delete stored runs.", no_args_is_help=True)

_STATUS_STYLE = {
    RunStatus.completed: "green",
    RunStatus.failed: "red",
    RunStatus.interrupted: "yellow",
    RunStatus.cancelled: "yellow",
    RunStatus.benchmarking: "cyan",
    RunStatus.deploying: "cyan",
    RunStatus.pending: "dim",
}


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


def _status_text(status: RunStatus) -> str:
    return f"[{_STATUS_STYLE.get(status, 'white')}]{status.value}[/]"


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
        store = get_store()
        recover_dead_owners(store)  # a run whose process was killed outright is not "benchmarking" any more
        runs, total = store.list_runs(
            status=[s.value for s in status] if status else None,
            model=model,
            label=label,
            kind=kind,
            limit=limit,
        )
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
                    _status_text(r.status),
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


def print_headline(headline: Headline) -> None:
    """The answer first: the headline's title in bold, then its sentences."""
    lines = [Text(headline.title, style="bold")]
    lines += [Text(f"- {line}") for line in headline.lines]
    console.print(Panel(Group(*lines), title="Headline", expand=False), overflow="fold")


def print_served(run: RunInfo) -> None:
    """What the run served (each field and where it was read) and its quality, when it recorded them."""
    from accelbench.report.served_view import quality_text, served_rows

    served = served_rows(run)
    if served:
        table = Table("field", "value", "read from", box=None, header_style="bold")
        for row in served:
            table.add_row(*row)
        console.print(Panel(table, title="What it served", expand=False))
    quality = quality_text(run)
    if quality:
        console.print(quality, highlight=False, markup=False)


@dataclass
class RunAnswer:
    """What a finished run answers, as ``runs show`` and the end of ``run``/``demo`` print it: its cells, the
    headline (report/headline.py), the SLO it is judged by and each cell against it."""

    cells: list[CellAggregate]
    headline: Headline | None = None
    choice: SLOChoice | None = None
    evaluation: dict[Key, CellSLO] = field(default_factory=dict)


def run_answer(store: Store, run: RunInfo, results: list[ResultInfo], given: Any = None) -> RunAnswer:
    """The run's cells and headline, judged by ``given`` (an SLO) when there is one, else by its own."""
    # here, not at the top: the comparison, headline and statistics code is what makes `runs list` and every
    # other runs command slow to start, and only `show` needs it
    from accelbench.report.compare import compare_runs
    from accelbench.report.headline import headline_for
    from accelbench.report.tables import aggregate_results

    answer = RunAnswer(cells=aggregate_results(results))
    if results:
        cmp = compare_runs(store, [run.id], min_runs=1)
        answer.headline, slos, answer.evaluation = headline_for(
            store, cmp, answer.cells, results, [run], given=given
        )
        answer.choice = slos.get(run.id)
    return answer


def print_answer(
    answer: RunAnswer,
    results: list[ResultInfo],
    percentiles: tuple[int, ...],
    *,
    drop: Callable[[str], bool] | None = None,
) -> None:
    """The answer first: the headline, the per-cell table at ``percentiles`` (min-max over repeats where it
    fits; ``drop`` leaves out the columns whose header it names), the SLO it was judged by, then the failures and
    warnings, each distinct note once."""
    from accelbench.report.headline import cell_table, slo_note

    if answer.headline is not None:
        print_headline(answer.headline)
    if not answer.cells:
        return
    ev = answer.evaluation if answer.choice is not None else None
    headers, ranged = cell_table(answer.cells, results, percentiles, slo=ev)
    _, bare = cell_table(answer.cells, results, percentiles, slo=ev, with_range=False)
    if drop is not None:
        keep = [i for i, h in enumerate(headers) if not drop(h)]
        headers = [headers[i] for i in keep]
        ranged = [[row[i] for i in keep] for row in ranged]
        bare = [[row[i] for i in keep] for row in bare]
    print_cells(
        headers,
        ranged,
        bare,
        title="Cells (mean over repeats of each repeat's percentiles; min-max over repeats)",
        plain_title="Cells (mean over repeats of each repeat's percentiles)",
    )
    note = slo_note(answer.choice, ev)
    if note:
        console.print(Text(note, style="dim"), overflow="fold")
    print_failures_and_warnings(results)


def without_nulls(value: Any) -> Any:
    """A spec as a person reads it: fields left unset (None) left out, and mappings left empty by that."""
    if isinstance(value, dict):
        kept = {k: without_nulls(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in kept.items() if v != {}}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def print_run_panel(run: RunInfo) -> None:
    """Who, where, when and how far: the run's id, label, status, times, model, engine and requests."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("Run", f"{run.id} ({run.kind})")
    if run.label:
        head.add_row("Label", run.label)
    head.add_row("Status", _status_text(run.status))
    if run.error:
        head.add_row("Reason", f"[red]{run.error}[/]")
    if run.progress:
        p = run.progress
        text = f"{p.get('cells_done', '?')}/{p.get('cells_total', '?')} cell repeats"
        if p.get("current"):
            text += f", current: {p['current']}"
        head.add_row("Progress", text)
    head.add_row("Created", run.created_at.isoformat(timespec="seconds"))
    if run.started_at:
        head.add_row("Started", run.started_at.isoformat(timespec="seconds"))
    if run.finished_at:
        head.add_row("Finished", run.finished_at.isoformat(timespec="seconds"))
    model = model_label(run)
    for label, value in (
        ("Model", model),
        ("Served model", run.served_model if run.served_model != model else None),
        ("Tokenizer", tokenizer_of(run)),
        ("Base URL", run.base_url),
        ("Engine", " ".join(x for x in (run.engine, run.engine_version) if x) or None),
        ("Where", where_label(run)),
    ):
        if value and value != MISSING:
            head.add_row(label, value)
    head.add_row("Requests", f"{run.completed_requests} completed, {run.failed_requests} failed")
    console.print(Panel(head, title="Run", expand=False))


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
    from accelbench.report.headline import given_slo
    from accelbench.telemetry.host import describe_environment

    with user_errors():
        chosen = parse_percentiles(percentiles)
        given = given_slo(slo, percentile=slo_percentile, attainment=slo_attainment)
        store = get_store()
        recover_dead_owners(store)
        run = store.get_run(run_id)
        results = store.get_results(run.id)
        answer = run_answer(store, run, results, given)
        if fmt == OutputFormat.json:
            print_json(
                {
                    "run": run.model_dump(mode="json"),
                    "headline": answer.headline.as_dict() if answer.headline is not None else None,
                    "slo": (
                        {"source": answer.choice.source, **answer.choice.slo.model_dump(mode="json")}
                        if answer.choice is not None
                        else None
                    ),
                    "cells": [c.model_dump(mode="json") for c in answer.cells],
                    "cells_slo": [asdict(e) for e in answer.evaluation.values()],
                    "results": [r.model_dump(mode="json", exclude={"summary"}) for r in results],
                }
            )
            return
        print_answer(answer, results, chosen)
        print_run_panel(run)
        if spec and run.spec:
            import yaml  # start-up time: only `show --spec` writes YAML, and `runs list` should not load it

            console.print(
                Panel(
                    yaml.safe_dump(without_nulls(run.spec), sort_keys=False).rstrip(),
                    title="Spec",
                    expand=False,
                ),
                highlight=False,
            )
        env_lines = describe_environment(run.environment)
        if env_lines:
            env = Table.grid(padding=(0, 2))
            env.add_column(style="bold")
            env.add_column(overflow="fold")
            for k, v in env_lines:
                env.add_row(k, v)
            console.print(Panel(env, title="Environment", expand=False))
        print_served(run)
        capacity = (run.extra or {}).get("capacity")
        if capacity and capacity.get("load"):  # `capacity`, or a run spec's capacity: section
            from accelbench.cli.capacity import render as render_capacity
            from accelbench.domain.capacity import CapacityResult

            render_capacity(CapacityResult.model_validate(capacity), None, results)
        if not answer.cells:
            console.print("No results stored for this run.")
            return
        print_device_telemetry(results)
        from accelbench.report.imported import definition_lines

        for i, line in enumerate(definition_lines(run, results)):
            console.print(
                Text(("Imported figures: " if i == 0 else "  ") + line, style="dim"), overflow="fold"
            )
        if repeats:
            rep_headers = (
                "Input",
                "Conc.",
                "Repeat",
                "Status",
                "TTFT p50",
                "TPOT p50",
                "ITL p50",
                "E2E p50",
                "Out tok/s",
                "Completed",
                "Failed",
            )
            rep_rows = []
            for r in results:
                rep_rows.append(
                    [
                        str(r.input_len),
                        str(r.concurrency),
                        str(r.repeat),
                        r.status.value,
                        *(
                            "-" if v is None else f"{v:,.2f}"
                            for v in (
                                r.ttft_p50_ms,
                                r.tpot_p50_ms,
                                r.itl_p50_ms,
                                r.e2el_p50_ms,
                                r.output_throughput,
                            )
                        ),
                        str(r.completed),
                        str(r.failed),
                    ]
                )
            print_table(
                [Col(h, cell_priority(h) if h != "Status" else 2, num=h != "Status") for h in rep_headers],
                rep_rows,
                title="Repeats",
            )


@runs_app.command("delete")
def delete_runs(
    run_ids: list[str] = typer.Argument(..., help="Run ids (or unambiguous prefixes)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    force: bool = typer.Option(False, "--force", help="Also delete runs that are still marked as running."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Delete runs with their results, per-request records and telemetry."""
    with user_errors():
        store = get_store()
        runs = [store.get_run(ref) for ref in dict.fromkeys(run_ids)]
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
        deleted = [store.delete_run(r.id) for r in runs]
        if fmt == OutputFormat.json:
            print_json({"deleted": deleted})
        else:
            for rid in deleted:
                err_console.print(f"Deleted run {rid}.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    from accelbench.cli.exports import export_results

    runs_app.command("export")(export_results)
    app.add_typer(runs_app, name="runs")
