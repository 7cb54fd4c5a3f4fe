"""``accelbench fleet``: the cheapest way to serve a day of traffic within an SLO, per candidate instance type.

A thin shell over ``services.fleet`` (the plan), ``services.fleet_export`` (``--export DIR``: the Kubernetes
objects of the cheapest or ``--choose``-n candidate) and ``services.fleet_validate`` (``--validate``: a replay
against a local engine); the table and the report come from ``report/fleet_view.py``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    console,
    err_console,
    graceful_interrupt,
    options_command,
    print_json,
    user_errors,
)
from accelbench.cli.render import Col, print_bullets, print_table
from accelbench.errors import UserInputError
from accelbench.fleet.result import FleetPlan
from accelbench.report.fleet_view import (
    FLEET_COLUMNS,
    fleet_lines,
    fleet_rows,
    servers_table,
    write_fleet_report,
)
from accelbench.services.endpoints import ServerTarget
from accelbench.services.fleet_export import fleet_files, write_fleet_files
from accelbench.services.fleet_plan import FleetRequest, fleet_request, load_traffic, plan_fleet
from accelbench.services.fleet_validate import replay_options, validate_fleet
from accelbench.services.session import get_store

_PRIORITY = {
    "#": 0,
    "instance": 0,
    "capacity req/s": 1,
    "source": 2,
    "servers": 0,
    "$/day on demand": 0,
    "$/day reserved+peak": 2,
    "$/1M out tok": 1,
    "utilisation": 3,
    "idle": 1,
    "SLO risk": 2,
    "cold start": 3,
}


def render(plan: object, top: int) -> None:
    assert isinstance(plan, FleetPlan)
    cols = [
        Col(h, _PRIORITY[h], num=h not in ("instance", "source", "SLO risk", "cold start"))
        for h in FLEET_COLUMNS
    ]
    rows = fleet_rows(plan)
    shown = rows[:top] if top > 0 else rows
    print_table(cols, shown, title="Fleet per candidate, cheapest first", formats="json")
    if len(rows) > len(shown):
        console.print(f"[dim]{len(rows) - len(shown)} more candidates: --top 0 or --format json[/]")
    header, per_interval = servers_table(plan, top=min(6, top) if top > 0 else 6)
    cols = [Col(h, 2 if n in (1, 2) else 0, num=True) for n, h in enumerate(header)]
    print_table(cols, per_interval, title="Servers per interval (cheapest first)", formats="json")
    for line in fleet_lines(plan):
        console.print(f"  - {line}", highlight=False, overflow="fold")


@dataclass(kw_only=True)
class FleetFlags:
    """The flags of ``fleet``: the traffic, model and SLO, how the fleet is sized and priced, what is written
    (--report, --export) and the replay of --validate."""

    traffic: Annotated[
        Path,
        typer.Option(
            "--traffic",
            help="Trace (Mooncake .jsonl, BurstGPT .csv) or profile (.yaml, or .csv with requests_per_s).",
        ),
    ]
    model: Annotated[str, typer.Option("--model", help="Model preset name, prepared model or path.")]
    slo: Annotated[
        str, typer.Option("--slo", help="Targets in ms, e.g. ttft:2000,tpot:100 (also e2el, itl).")
    ]
    percentile: Annotated[
        float, typer.Option("--percentile", help="Percentile the targets are judged at (0-100).")
    ] = 90.0
    attainment: Annotated[
        float, typer.Option("--attainment", help="Share of requests that must meet every target, 0-1.")
    ] = 0.95
    instances: Annotated[
        str | None,
        typer.Option(
            "--instances",
            help="Candidate instance types, comma-separated.",
            show_default="every feasible one",
        ),
    ] = None
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds per interval a trace is counted in.")
    ] = 3600.0
    peak_window: Annotated[
        float, typer.Option("--peak-window", help="Seconds the within-interval peak is read over.")
    ] = 60.0
    peak_quantile: Annotated[
        float,
        typer.Option("--peak-quantile", help="Quantile of arrivals per window the servers are sized for."),
    ] = 0.99
    min_servers: Annotated[
        int, typer.Option("--min-servers", help="Fewest servers at any time (0: scale to zero).")
    ] = 1
    provision_s: Annotated[
        float | None,
        typer.Option(
            "--provision-s",
            help="Instance provisioning seconds.",
            show_default="a stated assumption per tier",
        ),
    ] = None
    reserved_discount: Annotated[
        float | None,
        typer.Option(
            "--reserved-discount",
            help="Where no reserved price is stored, assume reserved = on demand x (1 - this), e.g. 0.4.",
        ),
    ] = None
    top: Annotated[
        int, typer.Option("--top", help="Candidates shown in the table (0: all); JSON has all.")
    ] = 10
    report: Annotated[
        Path | None, typer.Option("--report", help="Write fleet.md and fleet.html to this directory.")
    ] = None
    export: Annotated[
        Path | None,
        typer.Option(
            "--export",
            help="Write the Kubernetes objects (Deployment, HPA, NodePool) of the chosen candidate here.",
        ),
    ] = None
    choose: Annotated[
        str | None, typer.Option("--choose", help="Candidate --export writes.", show_default="the cheapest")
    ] = None
    namespace: Annotated[str, typer.Option("--namespace", help="Namespace of the exported objects.")] = (
        "accelbench"
    )
    validate: Annotated[
        bool,
        typer.Option(
            "--validate", help="Replay one server's share of the busiest interval against --base-url."
        ),
    ] = False
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", envvar="ACCELBENCH_BASE_URL", help="--validate: the local engine's root URL."
        ),
    ] = None
    served_model: Annotated[
        str | None,
        typer.Option(
            "--served-model", help="--validate: the served model name.", show_default="the first listed"
        ),
    ] = None
    tokenizer: Annotated[
        str | None,
        typer.Option(
            "--tokenizer",
            help="--validate: local tokenizer directory.",
            show_default="the server's /tokenize",
        ),
    ] = None
    validate_requests: Annotated[
        int, typer.Option("--validate-requests", help="--validate: most requests replayed.")
    ] = 200
    fmt: OutputFormat = FormatOption

    def request(self) -> FleetRequest:
        """The flags named as ``FleetRequest`` fields, as they are, and the four the command line says its own
        way (a path, a comma-separated list, seconds without the ``_s``)."""
        given = {k: v for k, v in vars(self).items() if k in FleetRequest.model_fields}
        given |= {
            "traffic": str(self.traffic),
            "instances": [x.strip() for x in (self.instances or "").split(",") if x.strip()],
            "interval_s": self.interval,
            "peak_window_s": self.peak_window,
        }
        return fleet_request(**given)


def fleet(flags: FleetFlags) -> None:
    """Size, price and rank a fleet per instance type for a day of traffic within an SLO."""
    with user_errors():
        request = flags.request()
        plan = plan_fleet(get_store(), request)
        files = _write_outputs(plan, flags.report, flags.export, flags.choose, flags.namespace)
        checked = None
        if flags.validate:
            checked = _validate(plan, request, flags)
    _show(plan, checked, flags.fmt, flags.top, files)


def _show(plan: Any, checked: Any, fmt: OutputFormat, top: int, files: list[Path]) -> None:
    if fmt == OutputFormat.json:
        data = plan.public_json()
        if checked is not None:
            data["validation"] = checked.model_dump(mode="json")
        print_json(data)
    else:
        render(plan, top)
        if checked is not None:
            render_validation(checked)
    for f in files:
        err_console.print(f"[dim]wrote {f}[/]", highlight=False)


def _write_outputs(
    plan: Any, report: Path | None, export: Path | None, choose: str | None, namespace: str
) -> list[Path]:
    """``--report`` (fleet.md, fleet.html) and ``--export`` (the manifests), written only when asked."""
    files: list[Path] = []
    if report is not None:
        files = write_fleet_report(plan, report)
    if export is not None:
        manifests, warnings = fleet_files(plan, instance=choose, namespace=namespace)
        files += write_fleet_files(manifests, export)
        for w in warnings:
            err_console.print(f"[yellow]warning:[/] {w}", highlight=False)
    return files


def _validate(plan: Any, request: FleetRequest, flags: FleetFlags) -> Any:
    """The replay of ``--validate``: this machine's plan (candidate ``local``) against the engine at
    ``--base-url``."""
    base_url, served, tokenizer, most = (
        flags.base_url,
        flags.served_model,
        flags.tokenizer,
        flags.validate_requests,
    )
    if not base_url:
        raise UserInputError("--validate needs --base-url: the local engine to replay against.")
    traffic = load_traffic(request)
    local = next((c for c in plan.candidates if c.instance == "local"), None)
    if local is None:
        local = plan_fleet(
            get_store(), request.model_copy(update={"instances": ["local"]}), traffic
        ).candidates[0]
    endpoint = ServerTarget(base_url=base_url, served_model=served, tokenizer=tokenizer).endpoint()
    cancel = threading.Event()
    with graceful_interrupt(cancel, "Stopping the replay; Ctrl-C again to abort."):
        return validate_fleet(
            get_store(),
            endpoint,
            traffic,
            local,
            request.target(),
            replay=replay_options(most),
            plan=plan,
            cancel=cancel,
            progress=lambda m: err_console.print(f"[dim]{m}[/]", highlight=False),
        )


def render_validation(v: Any) -> None:
    measured = "-" if v.measured_attainment is None else f"{v.measured_attainment:.1%}"
    colour = "green" if v.met else "red"
    console.print(
        f"[bold]Replay on this machine[/] ({v.requests} requests at {v.requests_per_s:.3g} req/s per server, "
        f"{v.servers} server(s) at {v.interval_start_s / 3600:.1f} h, capacity {v.capacity_requests_per_s:.3g} "
        f"req/s {v.capacity_source}): within {v.slo}: measured [{colour}]{measured}[/], promised at least "
        f"{v.promised_attainment:.0%} ({v.why})",
        highlight=False,
    )
    print_bullets(v.notes)
    if v.run_id:
        err_console.print(f"[dim]stored as run {v.run_id}[/]")


def register(app: typer.Typer) -> None:
    app.command("fleet")(options_command(FleetFlags, fleet))
