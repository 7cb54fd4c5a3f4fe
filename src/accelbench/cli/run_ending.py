"""How a run ends in the terminal (``run``, ``rerun``, ``demo``): what it checked and recorded beside its
figures (the answer check, the quality probe, the ISA trace, the target interval, the engine's start-up), the
headline and tails, the status, the report files and the next three commands; with ``--format json`` one
object on stdout instead."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text

from accelbench.cli.capacity import render as render_capacity
from accelbench.cli.common import OutputFormat, console, err_console, print_json
from accelbench.cli.run_show import print_answer, run_answer
from accelbench.domain.capacity import CapacityResult
from accelbench.domain.results import RunInfo
from accelbench.services.run_local import RunSummaryRequest, recorded_lines, run_results, run_summary
from accelbench.services.session import Store


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
    data = run_summary(store, RunSummaryRequest(run=run, title=title, out=out))
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
    lines = recorded_lines(run)
    if lines.quality is not None:  # asked before the sweep (a spec's quality:, the demo's probe)
        err_console.print(lines.quality, highlight=False, markup=False)
    if lines.isa_trace is not None:
        err_console.print(lines.isa_trace, highlight=False)
    if lines.target_ci is not None:
        err_console.print(lines.target_ci, highlight=False, markup=False)
    startup = (run.extra.get("deployment") or {}).get("ready_s")
    if startup:
        err_console.print(f"Engine start-up: {startup:.0f} s", highlight=False)


def open_command(path: Path, platform: str | None = None) -> str:
    """The command that opens ``path`` in the desktop's default application."""
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
    results = run_results(store, run.id)
    capacity = (run.extra or {}).get("capacity") or {}
    if capacity.get("load"):  # a capacity search: its probes and answer, not a sweep's cells
        render_capacity(CapacityResult.model_validate(capacity), None, results)
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
