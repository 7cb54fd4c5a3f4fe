"""``accelbench bench``: one benchmark against an OpenAI-compatible streaming server.

The flags follow ``vllm bench serve`` where they overlap; each is a field of ``BenchConfig`` (the load), of
``ServerFlags`` (the server) or of ``BenchFlags`` (what to keep and print), declared once in
``cli/load_flags.py``. The use case is ``services.bench_run.run_bench``: the result is stored as a run of kind
``bench`` with one result (``--no-store`` skips that), optionally written in vLLM's result layout
(``--save-result``), and printed here as a one-screen summary or, with ``--format json``, as JSON on stdout
(the progress bar is on stderr).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel, Field
from rich.console import Group as RichGroup
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from accelbench.cli.common import (
    OutputFormat,
    console,
    err_console,
    graceful_interrupt,
    print_json,
    user_errors,
)
from accelbench.cli.load_flags import (
    STAGES_HELP,
    WORKLOAD_FLAGS,
    Given,
    Group,
    command,
    dist_flag,
    flag,
    is_goodput_pair,
    load_flags,
    parse_goodput,
    parse_stages,
)
from accelbench.cli.measure_flags import FORMAT_GROUP, SERVER_GROUP, FormatFlags, ServerFlags
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.load import BenchConfig
from accelbench.domain.run import QUALITY_HELP, RunStatus
from accelbench.errors import UserInputError
from accelbench.report.failures import modes_sentence
from accelbench.report.tables import value_with_ci
from accelbench.services.bench_run import BenchRequest, BenchResult, run_bench

BENCH_STOP_MESSAGE = "Stopping: requests in flight are cancelled, finished ones kept. Ctrl-C again to abort."


def _fmt(v: float, digits: int = 2) -> str:
    return f"{v:,.{digits}f}"


def _with_ci(st: Any, key: str) -> str:
    """One statistic with its 95% interval as it follows it ("20.10 +-3%"), when it has one."""
    return value_with_ci(getattr(st, key), getattr(st, f"{key}_ci95", None))


def render_summary(summary: BenchmarkSummary, *, run_id: str | None, saved: Path | None) -> None:
    """The one-screen summary."""
    cfg = summary.config
    rate = "inf" if math.isinf(cfg.request_rate) else f"{cfg.request_rate:g}/s"
    where = f"{summary.model_id} @ {summary.base_url}"
    shape = (
        f"{cfg.endpoint}, {cfg.dataset}"
        + (f" {cfg.input_len} in" if cfg.dataset == "random" else "")
        + f" / {cfg.output_len} out, {summary.num_prompts} prompts, concurrency {cfg.max_concurrency or 'unlimited'}, "
        f"rate {rate}"
    )
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    status = "[yellow]interrupted[/]" if summary.interrupted else "done"
    head.add_row("Requests", f"{summary.completed} ok, {summary.failed} failed ({status})")
    head.add_row("Duration", f"{_fmt(summary.duration_s)} s")
    head.add_row("Request throughput", f"{_fmt(summary.request_throughput)} req/s")
    if summary.request_goodput is not None:
        head.add_row("Request goodput", f"{_fmt(summary.request_goodput)} req/s")
    head.add_row("Output tokens", f"{summary.total_output_tokens:,} ({summary.output_tokens_source})")
    head.add_row(
        "Output throughput",
        f"{_fmt(summary.output_throughput)} tok/s (peak {_fmt(summary.max_output_tokens_per_s, 0)})",
    )
    head.add_row("Total token throughput", f"{_fmt(summary.total_token_throughput)} tok/s")
    pc = summary.prompt_token_check
    if pc.checked:
        ok = (
            "[green]exact[/]"
            if not pc.mismatched
            else f"[yellow]{pc.mismatched} differ (max {pc.max_abs_deviation})[/]"
        )
        head.add_row("Prompt tokens vs server", f"{summary.total_input_tokens:,} in total, {ok}")
    else:
        head.add_row("Input tokens", f"{summary.total_input_tokens:,}")
    stats = Table(header_style="bold", box=None, pad_edge=False)
    for col in ("ms", "mean", "median", "p90", "p99", "max"):
        stats.add_column(col, justify="right" if col != "ms" else "left")
    for name, st in (("TTFT", summary.ttft_ms), ("TPOT", summary.tpot_ms), ("ITL", summary.itl_ms),
                     ("E2EL", summary.e2el_ms), ("Send lag", summary.scheduling_lag_ms)):  # fmt: skip
        if st.count == 0:
            stats.add_row(name, *(["-"] * 5))
        else:
            stats.add_row(name, *(_with_ci(st, k) for k in ("mean", "median", "p90", "p99", "max")))
    parts: list[Any] = [head, "", stats]
    tel = summary.telemetry
    if tel.available:
        bits = [f"{k} +{v:,.0f}" for k, v in tel.deltas.items()]
        bits += [f"peak {k} {v:,.2f}" for k, v in tel.peaks.items()]
        bits += [f"{k} {v:.1%}" for k, v in tel.derived.items()]
        parts += ["", f"[bold]Server /metrics[/] ({tel.samples} samples): " + ", ".join(bits)]
    else:
        parts += ["", f"[dim]Server /metrics: not available ({tel.error})[/]"]
    for reason, count in list(summary.errors.items())[:5]:
        parts.append(f"[red]{count} x[/] {reason}")
    for note in summary.notes:
        parts.append(f"[yellow]note:[/] {note}")
    if summary.modes:
        for metric, found in summary.modes.items():
            parts.append(f"[yellow]note:[/] {modes_sentence(metric.upper(), found)}")
    if saved is not None:
        parts.append(f"Saved to {saved}")
    if run_id is not None:
        parts.append(f"Stored as run [bold]{run_id}[/] (accelbench runs show {run_id})")
    title = f"accelbench bench: {where}" + (f" [{summary.label}]" if summary.label else "")
    console.print(Panel(RichGroup(*parts), title=title, subtitle=shape, expand=False))


class BenchFlags(BaseModel):
    """What ``bench`` keeps and prints besides the measurement."""

    save_result: Path | None = Field(
        default=None, description="Write the result in vllm bench serve's JSON layout to this file."
    )
    store: bool = Field(default=True, description="Store the run (kind bench) in the results store.")
    include_requests: bool = Field(
        default=False, description="With --format json: include per-request records."
    )
    quality: str | None = Field(default=None, description=QUALITY_HELP)
    extra: list[str] | None = Field(default=None, description="The later NAME:MS pairs of --goodput.")


#: the load, as bench types it: every field of BenchConfig, the shared ones by LOAD_FLAGS
BENCH_LOAD = Group(
    "load",
    BenchConfig,
    load_flags("endpoint", "dataset", "dataset_path")
    | {
        "input_len": flag(
            "--input-len",
            help="Random dataset: prompt tokens as the server counts them (chat template included), exact.",
            show_default=True,
            maximum=None,
        )
    }
    | load_flags(
        "output_len",
        *WORKLOAD_FLAGS,
        "self_test",
        "max_error_rate",
    )
    | {
        "input_dist": dist_flag("--input-dist", "input", "--input-len (random dataset)"),
        "output_dist": dist_flag("--output-dist", "output", "--output-len"),
        "stages": flag("--stages", typed=str, help=STAGES_HELP, parse=parse_stages),
        "num_prompts": flag("--num-prompts", help="Requests to send.", show_default=True, maximum=None),
        "max_concurrency": flag(
            "--max-concurrency", help="Most requests in flight.", show_default="unlimited", maximum=None
        ),
    }
    | load_flags("request_rate", "burstiness")
    | {"duration_s": flag("--duration")}
    | load_flags("num_warmups", "ignore_eos")
    | {
        "goodput": flag(
            "--goodput",
            typed=list[str],
            help="SLOs as NAME:MS (ttft, tpot, e2el), e.g. --goodput ttft:500 tpot:50.",
        )
    }
    | load_flags("timeout_s", "seed", "temperature")
    | {"label": flag("--label", help="Label stored with the result.")}
    | load_flags("scrape_metrics", "scrape_interval_s"),
)
BENCH_KEEP = Group(
    "keep",
    BenchFlags,
    {
        "save_result": flag("--save-result"),
        "store": flag("--store/--no-store"),
        "include_requests": flag("--include-requests"),
        "quality": flag("--quality"),
    },
    show_defaults=True,
)


def bench_request(given: Given) -> BenchRequest:
    """The command line as a ``BenchRequest``; what cannot be a benchmark is refused here."""
    keep = given.model("keep", BenchFlags)
    settings = given.values("load")
    # `--goodput ttft:500 tpot:50` (vLLM's syntax) leaves the later pairs as stray arguments.
    extra = list(keep.extra or [])
    stray = [x for x in extra if not is_goodput_pair(x)]
    if stray:
        raise UserInputError(
            f"Unexpected argument(s): {' '.join(stray)}.", hint="See accelbench bench --help."
        )
    if extra and not settings["goodput"]:
        raise UserInputError(f"Unexpected argument(s): {' '.join(extra)}.", hint="Did you mean --goodput?")
    settings["goodput"] = parse_goodput(list(settings["goodput"]) + extra)
    settings = {k: v for k, v in settings.items() if v is not None}
    target = given.model("server", ServerFlags).target()
    return BenchRequest(
        server=target, settings=settings, quality=keep.quality, save_result=keep.save_result, store=keep.store
    )


@command(
    SERVER_GROUP,
    BENCH_LOAD,
    BENCH_KEEP,
    FORMAT_GROUP,
    Group("keep", BenchFlags, {"extra": flag(argument=True, hidden=True, metavar="GOODPUT_PAIRS")}),
)
def bench(given: Given) -> None:
    """Benchmark one OpenAI-compatible streaming server: TTFT, TPOT, ITL, E2EL, throughput, goodput."""
    fmt = given.model("format", FormatFlags).fmt
    include_requests = bool(given.values("keep")["include_requests"])
    with user_errors():
        request = bench_request(given)
        cancel = threading.Event()
        progress = Progress(
            TextColumn("[bold]bench[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=not err_console.is_terminal,
        )
        task = progress.add_task("requests", total=request.settings["num_prompts"])

        @contextmanager
        def during_load() -> Iterator[None]:
            with graceful_interrupt(cancel, BENCH_STOP_MESSAGE), progress:
                yield

        result = run_bench(
            request,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
            cancel=cancel,
            during_load=during_load,
        )
    show(result, fmt, include_requests=include_requests)
    exit_code = bench_exit(result)
    if exit_code:
        raise typer.Exit(exit_code)


def show(result: BenchResult, fmt: OutputFormat, *, include_requests: bool) -> None:
    """Printed (and with --save-result saved) whatever the store did: a store failure never loses it."""
    summary, saved = result.summary, result.saved
    if fmt == OutputFormat.json:
        exclude = {"telemetry_samples"} if include_requests else {"requests", "telemetry_samples"}
        body = json.loads(summary.model_dump_json(exclude=exclude))  # inf as "Infinity", like the store
        out = {"run_id": result.run_id, "result_file": str(saved) if saved else None, "summary": body}
        print_json(out | ({"quality": result.quality} if result.quality else {}))
    else:
        render_summary(summary, run_id=result.run_id, saved=saved)
        if result.quality_text:
            console.print(result.quality_text, highlight=False, markup=False)


def bench_exit(result: BenchResult) -> int:
    """The exit code, after saying why it is not 0: 1 when not stored or failed, 130 when interrupted."""
    if result.store_error is not None:
        saved = result.saved
        err_console.print(
            f"[red]Not stored:[/] {result.store_error}"
            + (f" (the result file {saved} has it)" if saved else " Use --save-result FILE to keep it."),
            highlight=False,
        )
        return 1
    if result.error:
        err_console.print(f"[red]Failed:[/] {result.error}", highlight=False)
    if result.run_status == RunStatus.failed:
        return 1
    if result.summary.interrupted and result.cancelled:
        return 130
    return 0


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("bench")(bench)
