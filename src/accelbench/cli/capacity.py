"""``accelbench capacity``: the highest load an OpenAI-compatible server sustains within latency targets.

A thin shell: every option is a field of ``CapacitySpec`` (the search, the same rules as a run spec's
``capacity:`` section), of ``ServerFlags`` or of ``CapacityFlags``; ``services.capacity_run.run_capacity``
runs the use case and this module renders the answer. Each measured level is stored as a cell of a run of
kind ``capacity`` (with the probes so far in the run's extra data), so ``--resume RUN`` continues an
interrupted search without measuring a level twice. Without ``--slo`` the search reports the knee: where
adding load stops adding throughput. A search of a deployment this command does not start (local engine,
Kubernetes, EC2) is a run spec's ``capacity:`` section (``accelbench run SPEC.yaml``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import typer
from pydantic import BaseModel, Field

from accelbench.cli.common import (
    OutputFormat,
    console,
    err_console,
    graceful_interrupt,
    print_json,
    user_errors,
)
from accelbench.cli.load_flags import (
    LOAD_FLAGS,
    WORKLOAD_FLAGS,
    Flag,
    Given,
    Group,
    command,
    dist_flag,
    flag,
    load_flags,
)
from accelbench.cli.measure_flags import FORMAT_GROUP, SERVER_GROUP, FormatFlags, ServerFlags
from accelbench.cli.render import Col, print_bullets, print_table
from accelbench.domain.capacity import CapacitySpec
from accelbench.domain.results import ResultInfo
from accelbench.report.capacity_results import (
    answer_level,
    confidence_sentence,
    devices_at_capacity,
    devices_sentence,
    load_phrase,
    probe_figures,
    range_text,
)
from accelbench.services.capacity_run import CapacityRequest, run_capacity

STOP_MESSAGE = (
    "Stopping after this level: the probes so far are stored (resume with --resume). Ctrl-C again to abort."
)


def _f(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def render(result: Any, run_id: str | None, results: Sequence[ResultInfo] = ()) -> None:
    """A search's probes, its answer and (from ``results``' device telemetry) what the serving devices did
    there."""
    pri = {"level": 0, "#": 2, "requests": 3, "TTFT": 1, "TPOT": 0, "max ITL": 3, "E2EL": 3, "attain": 1}
    pri |= {"out tok/s": 1, "sure": 1, "met": 0, "why": 2}
    cols = [Col(c, pri[c], num=c not in ("met", "why")) for c in pri]
    rows = []
    for p in sorted(result.probes, key=lambda p: (p.level, p.repeat)):
        rows.append(
            [
                f"{p.level:g}",
                *probe_figures(p, _f),
                "-" if p.confidence is None else f"{p.confidence:.0%}",
                "-" if p.met is None else ("yes" if p.met else "no"),
                p.why,
            ]
        )
    print_table(cols, rows, title=f"Capacity probes ({result.load})", formats="json")
    if result.slo is not None:
        if result.max_load is not None:
            sure = range_text(result)
            line = (
                f"[bold green]Capacity at {result.slo.label()}:[/] {load_phrase(result.load, result.max_load)}"
                f"{f' ({sure})' if sure else ''}, {_f(result.output_tokens_per_s_at_max)} output tokens/s"
            )
            if result.usd_per_million_output_tokens is not None:
                line += f", ${result.usd_per_million_output_tokens:.2f} per 1M output tokens"
            console.print(line, highlight=False)
        if levels := confidence_sentence(result):
            console.print(levels, highlight=False, overflow="fold")
        else:
            console.print(
                f"[bold red]No level meets {result.slo.label()}:[/] {result.reason}", highlight=False
            )
    if result.knee is not None:
        console.print(
            f"Knee (throughput stops growing): {load_phrase(result.load, result.knee)}", highlight=False
        )
    devices = devices_sentence(devices_at_capacity(result, results), result.load, answer_level(result))
    if devices:
        console.print(devices, highlight=False, overflow="fold")
    print_bullets(result.notes)
    if run_id:
        err_console.print(f"[dim]stored as run {run_id}[/]")


class CapacityFlags(BaseModel):
    """What ``capacity`` is told besides the search: where the server runs, and what to keep."""

    instance: str | None = Field(
        default=None,
        description="Instance type the server runs on ('local': this machine): prices the answer and starts "
        "from the planner's predicted capacity.",
    )
    label: str | None = Field(default=None, description="Label stored with the run.")
    resume: str | None = Field(default=None, description="Continue an interrupted capacity run.")
    store: bool = Field(default=True, description="Store the probes as a run of kind capacity.")


#: the search's load, as every load command types it (no defaults shown, as bench's)
CAPACITY_LOAD = Group(
    "search",
    CapacitySpec,
    load_flags("endpoint", "dataset", "dataset_path")
    | {
        "input_len": flag(
            "--input-len", help="Prompt tokens per request (random dataset).", show_default=True, maximum=None
        )
    }
    | load_flags(
        "output_len",
        *WORKLOAD_FLAGS,
    )
    | {
        "input_dist": dist_flag("--input-dist", "input", "--input-len (random dataset)"),
        "output_dist": dist_flag("--output-dist", "output", "--output-len"),
    },
)
#: the search itself, in the command's words (services.capacity_at_slo.capacity_spec reads them)
CAPACITY_SEARCH = Group(
    "search",
    CapacitySpec,
    {
        "slo": flag(
            "--slo",
            typed=str,
            help="Targets in ms, e.g. tpot:50,ttft:1000 (also e2el, and itl: a request's longest gap between "
            "tokens); none: find the knee instead.",
        ),
        "percentile": flag("--percentile", help="Percentile the targets are judged at (0-100)."),
        "attainment": flag(
            "--attainment", help="Share of requests that must meet every target (goodput), 0-1.", maximum=None
        ),
        "load": flag("--load", help="concurrency (closed loop) or rate (Poisson)."),
    }
    | {
        "burstiness": Flag(LOAD_FLAGS["burstiness"], show_default=False),
        "start": flag(
            "--start",
            help="First level to measure.",
            show_default="the planner's prediction with --instance, else 1",
            minimum=None,
        ),
        "max_load": flag("--max-load", minimum=None, maximum=None),
        "max_probes": flag("--max-probes"),
    },
    show_defaults=True,
)
CAPACITY_FLAGS = Group(
    "capacity",
    CapacityFlags,
    {"instance": flag("--instance", "-i")},
    show_defaults=True,
)
CAPACITY_KEEP = Group(
    "capacity",
    CapacityFlags,
    {"label": flag("--label"), "resume": flag("--resume"), "store": flag("--store/--no-store")},
    show_defaults=True,
)


def capacity_request(given: Given) -> CapacityRequest:
    """The command line as a ``CapacityRequest``."""
    return CapacityRequest(
        server=given.model("server", ServerFlags).target(),
        settings=given.fields("search"),
        **given.model("capacity", CapacityFlags).model_dump(),  # instance, label, resume, store
    )


@command(
    SERVER_GROUP,
    CAPACITY_LOAD,
    CAPACITY_SEARCH,
    CAPACITY_FLAGS,
    Group("search", CapacitySpec, load_flags("ignore_eos", "timeout_s", "seed")),
    CAPACITY_KEEP,
    FORMAT_GROUP,
)
def capacity(given: Given) -> None:
    """Capacity at an SLO, measured: the highest concurrency (or request rate) meeting the targets."""
    fmt = given.model("format", FormatFlags).fmt
    with user_errors():
        request = capacity_request(given)
        cancel = threading.Event()
        try:
            answer = run_capacity(
                request,
                progress=lambda m: err_console.print(f"[dim]{m}[/]", highlight=False),
                cancel=cancel,
                during_search=lambda: graceful_interrupt(cancel, STOP_MESSAGE),
            )
        except KeyboardInterrupt as exc:
            run_id = getattr(exc, "run_id", None)
            if run_id is not None:
                err_console.print(f"Interrupted: resume with accelbench capacity ... --resume {run_id}")
            raise typer.Exit(130) from None
    result, run_id = answer.result, answer.run_id
    if fmt == OutputFormat.json:
        data = result.model_dump(mode="json")
        data["run_id"] = run_id
        print_json(data)
    else:
        render(result, run_id, answer.results)
    if result.slo is not None and result.max_load is None:
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    app.command("capacity")(capacity)
