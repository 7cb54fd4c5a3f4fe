"""CLI commands: ``accelbench sweep`` (the matrix against a running server) and ``accelbench sweep-plot``.

``sweep`` measures input lengths x concurrency levels x repeats against one OpenAI-compatible server, stores
every (cell, repeat) as it finishes, and writes ``results.md``, ``results.csv``, per-repeat JSON files and
plots into ``--out``. Ctrl-C stops gracefully (the cell in flight is kept as partial; press again to abort
at once); ``--resume RUN_ID`` measures only what is missing. ``sweep-plot`` rewrites the files of one or
several stored runs (CPU vs GPU on the same axes). Every option is a field of ``SweepSpec`` (the settings, over
a spec file's or the resumed run's), of ``ServerFlags`` or of ``SweepFlags``; the use cases are
``services.sweep_run``'s.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel, Field
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from typer._click.core import ParameterSource

from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    err_console,
    graceful_interrupt,
    parse_kv_list,
    print_json,
    user_errors,
)
from accelbench.cli.load_flags import (
    LOAD_FLAGS,
    STAGES_HELP,
    WORKLOAD_FLAGS,
    Flag,
    Given,
    Group,
    command,
    dist_flag,
    flag,
    load_flags,
    parse_goodput,
    parse_stages,
)
from accelbench.cli.measure_flags import FORMAT_GROUP, SERVER_FLAGS, FormatFlags, ServerFlags
from accelbench.cli.render import print_cells, print_failures_and_warnings
from accelbench.domain.run import QUALITY_HELP, RunStatus, SweepSpec
from accelbench.domain.sweep_events import SweepEvent
from accelbench.errors import UserInputError
from accelbench.report.tables import has_repeats, table_headers, table_rows
from accelbench.services.sweep_run import (
    CellTable,
    PlotRequest,
    SweepAborted,
    SweepRequest,
    SweepResult,
    SweepStart,
    plot_sweeps,
    run_sweep_request,
)

SWEEP_STOP_MESSAGE = "Stopping: the current cell's finished requests are kept. Ctrl-C again to abort now."


def parse_int_list(text: str, what: str) -> list[int]:
    """``"128,512"`` -> ``[128, 512]`` with a clear error for anything else."""
    values = []
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        try:
            values.append(int(part))
        except ValueError:
            raise UserInputError(
                f"Bad {what} {text!r}: expected comma-separated whole numbers, e.g. 1,4,8."
            ) from None
    if not values:
        raise UserInputError(f"Bad {what} {text!r}: no values.")
    return values


SWEEP_STAGES_HELP = (
    STAGES_HELP
    + " In a sweep every cell runs the plan: concurrency stages replace --concurrency (the plan's "
    "peak is the cell's level); with rate stages each --concurrency level caps the requests in flight. A cell ends at the plan's end or "
    "after concurrency x --prompts-per-concurrency requests."
)


def invocation(ctx: typer.Context) -> list[str]:
    """The command line as typed when this process is the ``accelbench`` program; otherwise (called in-process,
    e.g. by tests) rebuilt from the options given on the command line, in their declared order."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and (
        argv0.name == "accelbench" or argv0.as_posix().endswith("accelbench/cli/main.py")
    ):
        return ["accelbench", *sys.argv[1:]]
    out = ["accelbench", ctx.info_name or "sweep"]
    for param in ctx.command.params:
        name = param.name or ""
        if ctx.get_parameter_source(name) != ParameterSource.COMMANDLINE:
            continue
        value = ctx.params.get(name)
        flag = next((o for o in param.opts if o.startswith("--")), param.opts[0] if param.opts else name)
        if isinstance(value, bool):
            if getattr(param, "secondary_opts", None) and not value:
                out.append(param.secondary_opts[0])
            elif value:
                out.append(flag)
        elif isinstance(value, list | tuple):
            for v in value:
                out += [flag, str(getattr(v, "value", v))]
        elif value is not None:
            out += [flag, str(getattr(value, "value", value))]
    return out


class SweepDisplay:
    """Rich progress on stderr: one bar for the cells, one for the requests of the current cell."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=False,
            disable=not enabled,
        )
        self.cells: TaskID | None = None
        self.requests: TaskID | None = None

    def __enter__(self) -> SweepDisplay:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def __call__(self, ev: SweepEvent) -> None:
        if ev.kind == "start":
            self.cells = self.progress.add_task("cells", total=ev.cells_total, completed=ev.cells_done)
            self.requests = self.progress.add_task("requests", total=1, completed=0, visible=False)
        elif ev.kind == "cell_start" and self.requests is not None and ev.key is not None:
            self.progress.update(
                self.requests,
                description=f"  {ev.key}",
                total=ev.requests_total,
                completed=0,
                visible=True,
            )
        elif ev.kind == "request" and self.requests is not None:
            self.progress.update(self.requests, completed=ev.requests_done, total=ev.requests_total)
        elif ev.kind == "cell_done" and self.cells is not None:
            self.progress.update(self.cells, completed=ev.cells_done)
            if ev.summary is not None and ev.key is not None:
                s = ev.summary
                mark = {"completed": "[green]✓[/]", "partial": "[yellow]~[/]", "failed": "[red]✗[/]"}[
                    ev.status.value if ev.status else "completed"
                ]
                self.progress.console.print(
                    f"{mark} {ev.key}: TTFT p50 {s.ttft_ms.p50:.1f} ms, TPOT p50 {s.tpot_ms.p50:.2f} ms, "
                    f"{s.output_throughput:.1f} out tok/s, {s.completed} ok / {s.failed} failed",
                    highlight=False,
                )
        elif ev.kind == "end" and self.requests is not None:
            self.progress.update(self.requests, visible=False)


def print_cells_table(table: CellTable, title: str | None = None) -> None:
    multi = len(table.run_ids) > 1
    cells, names = table.cells, table.names
    print_cells(
        table_headers(with_run=multi),
        table_rows(cells, with_range=has_repeats(cells), with_run=multi, run_names=names),
        table_rows(cells, with_range=False, with_run=multi, run_names=names),
        title=title,
    )


class SweepFlags(BaseModel):
    """What ``sweep`` reads and writes besides the settings."""

    no_metrics: bool = Field(default=False, description="Old name of --no-scrape.")
    spec_file: Path | None = Field(default=None, description="YAML sweep spec; flags override its values.")
    out: Path | None = Field(default=None, description="Directory for results.md/csv, JSON and plots.")
    label: str | None = Field(default=None, description="A name for the run.")
    resume: str | None = Field(
        default=None, description="Run id of an interrupted sweep: measure what is missing."
    )


def int_list_flag(name: str, help: str) -> Any:
    return flag(name, typed=str, help=help, show_default=False, parse=lambda t: parse_int_list(t, name))


#: the settings, as sweep types them: every one left unset falls back to the spec file, the resumed run or
#: SweepSpec's default (shown)
SWEEP_SETTINGS = Group(
    "spec",
    SweepSpec,
    load_flags("endpoint")
    | {
        "input_lens": int_list_flag("--input-lens", "Input lengths, e.g. 128,512."),
        "concurrency": int_list_flag("--concurrency", "Concurrency levels, e.g. 1,4,8."),
        "repeats": flag("--repeats", maximum=None),
        "target_ci": flag("--target-ci", minimum=0.01),
        "output_len": Flag(LOAD_FLAGS["output_len"]),
        "prompts_per_concurrency": flag(
            "--prompts-per-concurrency", help="num_prompts = concurrency x this.", maximum=None
        ),
    }
    | load_flags(
        "dataset",
        "dataset_path",
        *WORKLOAD_FLAGS,
        "self_test",
        "max_error_rate",
    )
    | {
        "input_dist": dist_flag("--input-dist", "input", "each cell's input length (random dataset)"),
        "output_dist": dist_flag("--output-dist", "output", "--output-len"),
        "stages": flag("--stages", typed=str, help=SWEEP_STAGES_HELP, parse=parse_stages),
    }
    | load_flags("request_rate", "burstiness", "num_warmups", "ignore_eos")
    | {
        "goodput": flag(
            "--goodput",
            typed=list[str],
            help="SLOs for goodput: ttft:MS tpot:MS e2el:MS.",
            parse=parse_goodput,
        )
    }
    | load_flags("timeout_s", "seed", "temperature", "scrape_metrics", "scrape_interval_s")
    | {"quality": flag("--quality", help=QUALITY_HELP)},
    unset=True,
)
SWEEP_SERVER = Group(
    "server",
    ServerFlags,
    SERVER_FLAGS | {"base_url": SERVER_FLAGS["base_url"].but(show_default="from --spec or the resumed run")},
    unset=True,
)
SWEEP_FLAGS = Group(
    "sweep",
    SweepFlags,
    {
        "no_metrics": flag("--no-metrics", hidden=True),
        "spec_file": flag("--spec"),
        "out": flag("--out"),
        "label": flag("--label"),
        "resume": flag("--resume"),
    },
    show_defaults=True,
)


def sweep_request(given: Given) -> SweepRequest:
    """The command line as a ``SweepRequest``."""
    server, own = given.values("server"), given.model("sweep", SweepFlags)
    settings = given.fields("spec")
    if own.no_metrics:
        settings["scrape_metrics"] = False
    return SweepRequest(
        base_url=server["base_url"],
        served_model=server["model"],
        tokenizer=server["tokenizer"],
        api_key=server["api_key"],
        headers=parse_kv_list(server["header"], ":", "--header"),
        settings=settings,
        spec_file=own.spec_file,
        resume=own.resume,
        label=own.label,
        out=own.out,
        command=invocation(given.context) if given.context is not None else [],
    )


def announce(start: SweepStart) -> None:
    err_console.print(
        f"Sweep [bold]{start.run_id}[/]: {start.input_lens} input length(s) x {start.concurrency_levels} "
        f"concurrency level(s) x {start.repeats} repeat(s) = {start.total} benchmarks against {start.base_url} "
        f"({start.served_model}).",
        highlight=False,
    )


@command(
    SWEEP_SERVER,
    SWEEP_SETTINGS,
    SWEEP_FLAGS,
    FORMAT_GROUP,
    context=True,
)
def sweep(given: Given) -> None:
    """Measure a running server over input lengths x concurrency levels x repeats."""
    fmt = given.model("format", FormatFlags).fmt
    with user_errors():
        request = sweep_request(given)
        cancel = threading.Event()
        display = SweepDisplay(enabled=fmt == OutputFormat.table or err_console.is_terminal)

        @contextmanager
        def during_load() -> Iterator[None]:
            with graceful_interrupt(cancel, SWEEP_STOP_MESSAGE), display:
                yield

        try:
            result = run_sweep_request(
                request,
                started=announce,
                warn=lambda line: err_console.print(f"[yellow]{line}[/]"),
                progress=display,
                cancel=cancel,
                during_load=during_load,
            )
        except SweepAborted as exc:
            err_console.print(
                f"[yellow]Aborted. Finished cells are stored; resume with --resume {exc.run_id}.[/]"
            )
            if exc.write_error:
                err_console.print(f"[red]{exc.write_error}[/]")
            raise typer.Exit(130) from None
        _report(result, fmt)
        if result.outcome.status == RunStatus.interrupted:
            raise typer.Exit(130)
        if result.outcome.status != RunStatus.completed:
            raise typer.Exit(1)


def _report(result: SweepResult, fmt: OutputFormat) -> None:
    outcome, files, out_dir = result.outcome, result.files, result.out_dir
    if result.write_error:
        err_console.print(f"[red]{result.write_error}[/]")
    if fmt == OutputFormat.json:
        print_json(
            {
                **outcome.as_dict(),
                "out_dir": str(out_dir),
                "files": [str(p) for p in files],
                "cells": [c.model_dump(mode="json") for c in result.table.cells],
            }
        )
        return
    print_cells_table(result.table, title=f"Sweep {outcome.run_id} (mean of repeat medians)")
    print_failures_and_warnings(result.results)
    if result.quality_text:
        err_console.print(result.quality_text, highlight=False, markup=False)
    colour = {"completed": "green", "interrupted": "yellow"}.get(outcome.status.value, "red")
    line = f"[{colour}]{outcome.status.value}[/]: {outcome.cells_done}/{outcome.cells_total} cell repeats complete"
    if outcome.skipped:
        line += f" ({len(outcome.skipped)} from before)"
    if outcome.settled:
        line += f", {len(outcome.settled)} not needed (their cell reached --target-ci)"
    err_console.print(line, highlight=False)
    if result.target_ci_text:
        err_console.print(result.target_ci_text, highlight=False, markup=False)
    if outcome.error:
        err_console.print(f"Reason: {outcome.error}", highlight=False, markup=False)
    for reason in outcome.reasons[1:6]:
        err_console.print(f"Failed cell {reason}", highlight=False, markup=False)
    if outcome.missing:
        err_console.print(
            f"Missing: {', '.join(str(k) for k in outcome.missing[:6])}"
            + (" ..." if len(outcome.missing) > 6 else "")
            + f"\nResume with: accelbench sweep --resume {outcome.run_id}",
            highlight=False,
        )
    if files:
        err_console.print(
            f"Files in {out_dir}{os.sep}: results.md, results.csv, results.json, plots, repeats/"
        )


def sweep_plot(
    run_ids: list[str] = typer.Argument(..., help="One or more run ids (CPU vs GPU side by side)."),
    out: Path = typer.Option(..., "--out", help="Directory for the plots, results.md and results.csv."),
    repeat_json: bool = typer.Option(
        False, "--repeat-json/--no-repeat-json", help="Also write per-repeat JSON files (vLLM layout)."
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Plot and tabulate stored sweeps; several runs share the axes (one line per run and input length)."""
    with user_errors():
        plotted = plot_sweeps(PlotRequest(run_ids=run_ids, out=out, repeat_json=repeat_json))
        if fmt == OutputFormat.json:
            print_json(
                {
                    "runs": plotted.table.run_ids,
                    "files": [str(p) for p in plotted.files],
                    "cells": [c.model_dump(mode="json") for c in plotted.table.cells],
                }
            )
            return
        print_cells_table(plotted.table)
        for p in plotted.files:
            err_console.print(f"wrote {p}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("sweep")(sweep)
    app.command("sweep-plot")(sweep_plot)


__all__ = ["register"]
