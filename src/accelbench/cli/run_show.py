"""How ``accelbench runs show`` prints a run's ``RunView`` (``services/run_view.py``): the headline, the per-cell
table, the SLO note, failures and warnings, the run panel, spec, environment, what it served, a capacity search,
the devices, an imported run's definitions and every repeat. The end of ``run``/``demo`` prints its answer with
``print_answer`` too. Kept apart from ``cli/runs.py`` so ``runs list`` does not import the headline and
statistics code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from accelbench.cli.capacity import render as render_capacity
from accelbench.cli.common import console
from accelbench.cli.render import (
    Col,
    cell_priority,
    print_cells,
    print_device_telemetry,
    print_failures_and_warnings,
    print_table,
)
from accelbench.cli.run_status import status_text
from accelbench.domain.capacity import CapacityResult
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.report.attribution import model_label, tokenizer_of, where_label
from accelbench.report.cell_slo import given_slo
from accelbench.report.cell_table import cell_table, slo_note
from accelbench.report.formatting import MISSING
from accelbench.report.headline import Headline
from accelbench.report.imported import definition_lines
from accelbench.report.served_view import quality_text, served_rows
from accelbench.services.run_view import RunAnswer, RunView, run_answer

__all__ = ["given_slo", "print_answer", "run_answer", "show"]


def print_headline(headline: Headline) -> None:
    """The answer first: the headline's title in bold, then its sentences."""
    lines = [Text(headline.title, style="bold")]
    lines += [Text(f"- {line}") for line in headline.lines]
    console.print(Panel(Group(*lines), title="Headline", expand=False), overflow="fold")


def print_served(run: RunInfo) -> None:
    """What the run served (each field and where it was read) and its quality, when it recorded them."""
    served = served_rows(run)
    if served:
        table = Table("field", "value", "read from", box=None, header_style="bold")
        for row in served:
            table.add_row(*row)
        console.print(Panel(table, title="What it served", expand=False))
    quality = quality_text(run)
    if quality:
        console.print(quality, highlight=False, markup=False)


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
    if answer.headline is not None:
        print_headline(answer.headline)
    if not answer.cells:
        return
    ev = answer.judged
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
    head.add_row("Status", status_text(run.status))
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


def print_spec(run: RunInfo) -> None:
    """The run's spec as YAML, the fields it set only."""
    console.print(
        Panel(yaml.safe_dump(without_nulls(run.spec), sort_keys=False).rstrip(), title="Spec", expand=False),
        highlight=False,
    )


def print_environment(lines: list[tuple[str, str]]) -> None:
    if not lines:
        return
    env = Table.grid(padding=(0, 2))
    env.add_column(style="bold")
    env.add_column(overflow="fold")
    for k, v in lines:
        env.add_row(k, v)
    console.print(Panel(env, title="Environment", expand=False))


def print_capacity(run: RunInfo, results: list[ResultInfo]) -> None:
    """A capacity search's probes and answer (``capacity``, or a run spec's capacity: section)."""
    capacity = (run.extra or {}).get("capacity")
    if capacity and capacity.get("load"):
        render_capacity(CapacityResult.model_validate(capacity), None, results)


def print_imported(run: RunInfo, results: list[ResultInfo]) -> None:
    """Where an imported run's figures came from and how they were defined."""
    for i, line in enumerate(definition_lines(run, results)):
        console.print(Text(("Imported figures: " if i == 0 else "  ") + line, style="dim"), overflow="fold")


REPEAT_HEADERS = (
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


def print_repeats(results: list[ResultInfo]) -> None:
    """Every repeat of every cell, one row each."""
    rows = [
        [
            str(r.input_len),
            str(r.concurrency),
            str(r.repeat),
            r.status.value,
            *(
                "-" if v is None else f"{v:,.2f}"
                for v in (r.ttft_p50_ms, r.tpot_p50_ms, r.itl_p50_ms, r.e2el_p50_ms, r.output_throughput)
            ),
            str(r.completed),
            str(r.failed),
        ]
        for r in results
    ]
    print_table(
        [Col(h, cell_priority(h) if h != "Status" else 2, num=h != "Status") for h in REPEAT_HEADERS],
        rows,
        title="Repeats",
    )


def show(view: RunView, percentiles: tuple[int, ...], *, spec: bool, repeats: bool) -> None:
    """``runs show``: the answer first, then the run, its spec (``spec``), environment, what it served, a
    capacity search, the devices, an imported run's definitions and every repeat (``repeats``)."""
    run, results = view.run, view.results
    print_answer(view, results, percentiles)
    print_run_panel(run)
    if spec and run.spec:
        print_spec(run)
    print_environment(view.environment)
    print_served(run)
    print_capacity(run, results)
    if not view.cells:
        console.print("No results stored for this run.")
        return
    print_device_telemetry(results)
    print_imported(run, results)
    if repeats:
        print_repeats(results)
