"""CLI commands: ``accelbench sweep`` (the matrix against a running server) and ``accelbench sweep-plot``.

``sweep`` measures input lengths x concurrency levels x repeats against one OpenAI-compatible server, stores
every (cell, repeat) as it finishes, and writes ``results.md``, ``results.csv``, per-repeat JSON files and
plots into ``--out``. Ctrl-C stops gracefully (the cell in flight is kept as partial; press again to abort
at once); ``--resume RUN_ID`` measures only what is missing. ``sweep-plot`` rewrites the files of one or
several stored runs (CPU vs GPU on the same axes).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from accelbench.bench.context import check_served_context
from accelbench.bench.quality_run import QUALITY_HELP, parse_quality, quality_line
from accelbench.bench.spec import load_sweep_file
from accelbench.bench.sweep import (
    CellKey,
    SweepEvent,
    SweepOutcome,
    create_sweep_run,
    run_sweep,
    stored_sweep_spec,
    sweep_keys,
)
from accelbench.cli.bench import parse_goodput
from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    err_console,
    graceful_interrupt,
    parse_kv_list,
    print_json,
    user_errors,
)
from accelbench.cli.input_errors import current_params, flag_error
from accelbench.cli.load_flags import (
    STAGES_HELP,
    dist_option,
    load_option,
    parse_stages,
    workload_values,
)
from accelbench.cli.measure_flags import base_url_option
from accelbench.cli.render import print_cells
from accelbench.domain.bench import DatasetKind, Endpoint, EndpointKind
from accelbench.domain.run import RunStatus, SweepSpec
from accelbench.errors import UserInputError
from accelbench.report.tables import aggregate_results, has_repeats, table_headers, table_rows
from accelbench.services.endpoints import endpoint_environment, first_served_model, served_model_root
from accelbench.settings import get_settings
from accelbench.store import get_store

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


def build_spec(base: SweepSpec, overrides: dict[str, Any]) -> SweepSpec:
    """``base`` with the flags the user gave; validation errors name the flag's setting."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return base
    data = base.model_dump(exclude_unset=True)  # a default left unset may follow other settings (stages)
    data.update(given)
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise flag_error(exc, params=current_params()) from None


def invocation(ctx: typer.Context) -> list[str]:
    """The command line as typed when this process is the ``accelbench`` program; otherwise (called in-process,
    e.g. by tests) rebuilt from the options given on the command line, in their declared order."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and (
        argv0.name == "accelbench" or argv0.as_posix().endswith("accelbench/cli/main.py")
    ):
        return ["accelbench", *sys.argv[1:]]
    from typer._click.core import ParameterSource

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


def print_cells_table(run_ids: list[str], title: str | None = None) -> None:
    store = get_store()
    runs = [store.get_run(r) for r in run_ids]
    results = [res for r in runs for res in store.get_results(r.id)]
    cells = aggregate_results(results)
    multi = len(runs) > 1
    names = {r.id: r.label or r.id for r in runs}
    print_cells(
        table_headers(with_run=multi),
        table_rows(cells, with_range=has_repeats(cells), with_run=multi, run_names=names),
        table_rows(cells, with_range=False, with_run=multi, run_names=names),
        title=title,
    )


def sweep(
    ctx: typer.Context,
    base_url: str | None = typer.Option(
        None,
        "--base-url",
        envvar="ACCELBENCH_BASE_URL",
        help="Server root, e.g. http://127.0.0.1:8000.",
        show_default="from --spec or the resumed run",
        callback=base_url_option,
    ),
    model: str | None = typer.Option(
        None, "--model", help="Served model name.", show_default="the first model the server lists"
    ),
    endpoint: EndpointKind | None = load_option("endpoint", model=SweepSpec, unset=True),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="Local tokenizer directory.", show_default="the server's /tokenize"
    ),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="OPENAI_API_KEY", help="Bearer token for the server."
    ),
    header: list[str] | None = typer.Option(
        None, "--header", "-H", help="Extra HTTP header NAME:VALUE (repeatable)."
    ),
    input_lens: str | None = typer.Option(None, "--input-lens", help="Input lengths, e.g. 128,512."),
    concurrency: str | None = typer.Option(None, "--concurrency", help="Concurrency levels, e.g. 1,4,8."),
    repeats: int | None = typer.Option(
        None, "--repeats", min=1, help="Repeats of every cell.", show_default="1"
    ),
    target_ci: float | None = typer.Option(
        None, "--target-ci", min=0.01, max=100, help=SweepSpec.model_fields["target_ci"].description
    ),
    output_len: int | None = load_option("output_len", model=SweepSpec, unset=True),
    prompts_per_concurrency: int | None = typer.Option(
        None, "--prompts-per-concurrency", min=1, help="num_prompts = concurrency x this.", show_default="10"
    ),
    dataset: DatasetKind | None = load_option("dataset", model=SweepSpec, unset=True),
    dataset_path: str | None = load_option("dataset_path", model=SweepSpec, unset=True),
    prefix_len: int | None = load_option("prefix_len", model=SweepSpec, unset=True),
    prefix_groups: int | None = load_option("prefix_groups", model=SweepSpec, unset=True),
    turns: int | None = load_option("turns", model=SweepSpec, unset=True),
    think_time: float | None = load_option("think_time_s", model=SweepSpec, unset=True),
    ramp_up: float | None = load_option("ramp_up_s", model=SweepSpec, unset=True),
    time_scale: float | None = load_option("time_scale", model=SweepSpec, unset=True),
    trace_format: str | None = load_option("trace_format", model=SweepSpec, unset=True),
    tools: str | None = load_option("tools", model=SweepSpec, unset=True),
    metrics_definition: str | None = load_option("metrics_definition", model=SweepSpec, unset=True),
    self_test: bool | None = load_option("self_test", model=SweepSpec, unset=True),
    max_error_rate: float | None = load_option("max_error_rate", model=SweepSpec, unset=True),
    input_dist: str | None = dist_option(
        "--input-dist", "input", "each cell's input length (random dataset)"
    ),
    output_dist: str | None = dist_option("--output-dist", "output", "--output-len"),
    stages: str | None = typer.Option(None, "--stages", help=SWEEP_STAGES_HELP),
    request_rate: float | None = load_option("request_rate", model=SweepSpec, unset=True),
    burstiness: float | None = load_option("burstiness", model=SweepSpec, unset=True),
    num_warmups: int | None = load_option("num_warmups", model=SweepSpec, unset=True),
    ignore_eos: bool | None = load_option("ignore_eos", model=SweepSpec, unset=True),
    goodput: list[str] | None = typer.Option(
        None, "--goodput", help="SLOs for goodput: ttft:MS tpot:MS e2el:MS."
    ),
    timeout: float | None = load_option("timeout_s", model=SweepSpec, unset=True),
    seed: int | None = load_option("seed", model=SweepSpec, unset=True),
    temperature: float | None = load_option("temperature", model=SweepSpec, unset=True),
    scrape: bool | None = load_option("scrape_metrics", model=SweepSpec, unset=True),
    scrape_interval: float | None = load_option("scrape_interval_s", model=SweepSpec, unset=True),
    no_metrics: bool = typer.Option(False, "--no-metrics", hidden=True, help="Old name of --no-scrape."),
    spec_file: Path | None = typer.Option(None, "--spec", help="YAML sweep spec; flags override its values."),
    out: Path | None = typer.Option(None, "--out", help="Directory for results.md/csv, JSON and plots."),
    label: str | None = typer.Option(None, "--label", help="A name for the run."),
    resume: str | None = typer.Option(
        None, "--resume", help="Run id of an interrupted sweep: measure what is missing."
    ),
    quality: str | None = typer.Option(None, "--quality", help=QUALITY_HELP),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Measure a running server over input lengths x concurrency levels x repeats."""
    with user_errors():
        store = get_store()
        overrides: dict[str, Any] = {
            "input_lens": parse_int_list(input_lens, "--input-lens") if input_lens else None,
            "concurrency": parse_int_list(concurrency, "--concurrency") if concurrency else None,
            "repeats": repeats,
            "target_ci": target_ci,
            "output_len": output_len,
            "prompts_per_concurrency": prompts_per_concurrency,
            "endpoint": endpoint,
            "dataset": dataset,
            "dataset_path": dataset_path,
            "prefix_len": prefix_len,
            "request_rate": request_rate,
            "burstiness": burstiness,
            "num_warmups": num_warmups,
            "ignore_eos": ignore_eos,
            "goodput": parse_goodput(goodput) if goodput else None,
            "timeout_s": timeout,
            "seed": seed,
            "temperature": temperature,
            "scrape_metrics": False if no_metrics else scrape,
            "scrape_interval_s": scrape_interval,
            "stages": parse_stages(stages),
            "quality": quality,
            **workload_values(
                {
                    "prefix_groups": prefix_groups,
                    "turns": turns,
                    "think_time_s": think_time,
                    "ramp_up_s": ramp_up,
                    "time_scale": time_scale,
                    "trace_format": trace_format,
                    "tools": tools,
                    "metrics_definition": metrics_definition,
                    "self_test": self_test,
                    "max_error_rate": max_error_rate,
                },
                input_dist,
                output_dist,
            ),
        }
        file_label: str | None = None
        server: dict[str, Any] = {}
        if spec_file is not None:
            sf = load_sweep_file(spec_file)
            base = sf.sweep_spec()
            file_label = sf.label
            if sf.server is not None:
                server = sf.server.model_dump(exclude_none=True)
        else:
            base = SweepSpec()
        run = None
        if resume is not None:
            run = store.get_run(resume)
            if run.kind != "sweep":
                raise UserInputError(
                    f"Run {run.id} is a {run.kind} run, not a sweep; only sweeps resume here."
                )
            if run.status in (RunStatus.benchmarking, RunStatus.deploying):
                err_console.print(
                    f"[yellow]Run {run.id} is marked {run.status.value}; resuming it (was its process killed?).[/]"
                )
            stored_endpoint = (run.spec or {}).get("endpoint") or {}
            server = {**{k: v for k, v in stored_endpoint.items() if v}, **server}
            if spec_file is None:
                base = stored_sweep_spec(run)
        spec = build_spec(base, overrides)
        parse_quality(spec.quality)  # an unknown setting, or lm-eval not installed: refused before any load
        headers = {**(server.get("headers") or {}), **parse_kv_list(header, ":", "--header")}
        if resume is not None:
            headers = {k: v for k, v in headers.items() if v != "***"}
        url = base_url or server.get("base_url")
        if not url:
            raise UserInputError("Which server? Pass --base-url (or a spec with server.base_url).")
        auth = dict(headers)
        if api_key:
            auth["Authorization"] = f"Bearer {api_key}"
        served = model or server.get("served_model") or first_served_model(url, headers, api_key)
        ep = Endpoint(
            base_url=url,
            served_model=served,
            tokenizer=tokenizer or server.get("tokenizer"),
            api_key=api_key,
            headers=headers,
        )
        if DatasetKind(spec.dataset) == DatasetKind.random:
            check_served_context(ep, spec.input_lens, spec.output_len)  # before a run is stored
        if run is None:
            env = endpoint_environment(ep, invocation(ctx), headers=auth)
            root = served_model_root(url, headers, api_key, served)
            run = create_sweep_run(store, ep, spec, label=label or file_label, environment=env, model=root)
        out_dir = out or (get_settings().runs_dir / run.id)
        total = len(sweep_keys(spec))
        err_console.print(
            f"Sweep [bold]{run.id}[/]: {len(spec.input_lens)} input length(s) x {len(spec.concurrency)} "
            f"concurrency level(s) x {spec.repeats} repeat(s) = {total} benchmarks against {url} ({served}).",
            highlight=False,
        )
        cancel = threading.Event()
        outcome: SweepOutcome | None = None
        show = fmt == OutputFormat.table or err_console.is_terminal
        try:
            with graceful_interrupt(cancel, SWEEP_STOP_MESSAGE), SweepDisplay(enabled=show) as display:
                outcome = run_sweep(
                    store, run.id, ep, spec, cancel=cancel, progress=display, resume=resume is not None
                )
        except KeyboardInterrupt:
            err_console.print(
                f"[yellow]Aborted. Finished cells are stored; resume with --resume {run.id}.[/]"
            )
            _write_outputs(run.id, out_dir, quiet=fmt == OutputFormat.json)
            raise typer.Exit(130) from None
        files = _write_outputs(run.id, out_dir, quiet=fmt == OutputFormat.json)
        _report(outcome, files, out_dir, fmt)
        if outcome.status == RunStatus.interrupted:
            raise typer.Exit(130)
        if outcome.status != RunStatus.completed:
            raise typer.Exit(1)


def _write_outputs(run_id: str, out_dir: Path, *, quiet: bool) -> list[Path]:
    from accelbench.report.sweep_outputs import write_sweep_outputs

    try:
        outputs = write_sweep_outputs(get_store(), run_id, out_dir)
    except OSError as exc:
        err_console.print(f"[red]Could not write the result files into {out_dir}: {exc}[/]")
        return []
    return outputs.all_paths()


def _report(outcome: SweepOutcome, files: list[Path], out_dir: Path, fmt: OutputFormat) -> None:
    store = get_store()
    if fmt == OutputFormat.json:
        cells = aggregate_results(store.get_results(outcome.run_id))
        print_json(
            {
                **outcome.as_dict(),
                "out_dir": str(out_dir),
                "files": [str(p) for p in files],
                "cells": [c.model_dump(mode="json") for c in cells],
            }
        )
        return
    print_cells_table([outcome.run_id], title=f"Sweep {outcome.run_id} (mean of repeat medians)")
    from accelbench.cli.render import print_failures_and_warnings

    print_failures_and_warnings(store.get_results(outcome.run_id))
    measured = store.get_run(outcome.run_id).extra.get("quality")
    if isinstance(measured, dict):
        err_console.print(quality_line(measured), highlight=False, markup=False)
    colour = {"completed": "green", "interrupted": "yellow"}.get(outcome.status.value, "red")
    line = f"[{colour}]{outcome.status.value}[/]: {outcome.cells_done}/{outcome.cells_total} cell repeats complete"
    if outcome.skipped:
        line += f" ({len(outcome.skipped)} from before)"
    if outcome.settled:
        line += f", {len(outcome.settled)} not needed (their cell reached --target-ci)"
    err_console.print(line, highlight=False)
    if outcome.target_ci is not None:
        from accelbench.bench.target_ci import summary_line

        err_console.print(summary_line(outcome.target_ci), highlight=False, markup=False)
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
    from accelbench.report.sweep_outputs import write_sweep_outputs

    with user_errors():
        store = get_store()
        ids = [store.resolve_run_id(r) for r in run_ids]
        empty = [r for r in ids if not store.get_results(r)]
        if empty:
            raise UserInputError(f"Run(s) without results: {', '.join(empty)}; nothing to plot for them.")
        outputs = write_sweep_outputs(store, ids, out, repeat_json=repeat_json)
        if fmt == OutputFormat.json:
            cells = aggregate_results([res for r in ids for res in store.get_results(r)])
            print_json(
                {
                    "runs": ids,
                    "files": [str(p) for p in outputs.all_paths()],
                    "cells": [c.model_dump(mode="json") for c in cells],
                }
            )
            return
        print_cells_table(ids)
        for p in outputs.all_paths():
            err_console.print(f"wrote {p}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("sweep")(sweep)
    app.command("sweep-plot")(sweep_plot)


__all__ = ["CellKey", "register"]
