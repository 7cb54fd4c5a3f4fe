"""``accelbench capacity``: the highest load an OpenAI-compatible server sustains within latency targets.

Each measured level is stored as a cell of a run of kind ``capacity`` (with the probes so far in the run's
extra data), so ``--resume RUN`` continues an interrupted search without measuring a level twice. Without
``--slo`` the search reports the knee: where adding load stops adding throughput.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import typer
from rich.table import Table

from accelbench.cli.bench import first_served_model, parse_headers
from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    console,
    err_console,
    graceful_interrupt,
    print_json,
    user_errors,
)
from accelbench.cli.load_flags import load_option
from accelbench.domain.bench import BenchConfig, DatasetKind, Endpoint, EndpointKind
from accelbench.domain.run import RunStatus
from accelbench.errors import UserInputError
from accelbench.redact import redact_url

STOP_MESSAGE = (
    "Stopping after this level: the probes so far are stored (resume with --resume). Ctrl-C again to abort."
)


def _f(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def render(result: Any, run_id: str | None) -> None:
    t = Table(title=f"Capacity probes ({result.load})", header_style="bold")
    for c in ("level", "#", "requests", "TTFT", "TPOT", "ITL", "E2EL", "attain", "out tok/s", "met", "why"):
        t.add_column(c, justify="left" if c in ("met", "why") else "right")
    for p in sorted(result.probes, key=lambda p: (p.level, p.repeat)):
        pc = p.percentiles
        t.add_row(
            f"{p.level:g}",
            str(p.repeat),
            str(p.requests),
            _f(pc.get("ttft")),
            _f(pc.get("tpot"), 2),
            _f(pc.get("itl"), 2),
            _f(pc.get("e2el")),
            "-" if p.attainment is None else f"{p.attainment:.0%}",
            _f(p.output_tokens_per_s),
            "-" if p.met is None else ("yes" if p.met else "no"),
            p.why,
        )
    console.print(t)
    unit = "users" if result.load == "concurrency" else "requests/s"
    if result.slo is not None:
        if result.max_load is not None:
            line = (
                f"[bold green]Capacity at {result.slo.label()}:[/] {result.max_load:g} {unit}, "
                f"{_f(result.output_tokens_per_s_at_max)} output tokens/s"
            )
            if result.usd_per_million_output_tokens is not None:
                line += f", ${result.usd_per_million_output_tokens:.2f} per 1M output tokens"
            console.print(line, highlight=False)
        else:
            console.print(
                f"[bold red]No level meets {result.slo.label()}:[/] {result.reason}", highlight=False
            )
    if result.knee is not None:
        console.print(f"Knee (throughput stops growing): {result.knee:g} {unit}", highlight=False)
    for n in result.notes:
        console.print(f"  - {n}", highlight=False)
    if run_id:
        err_console.print(f"[dim]stored as run {run_id}[/]")


def capacity(
    base_url: str = typer.Option(
        ..., "--base-url", envvar="ACCELBENCH_BASE_URL", help="Server root, e.g. http://127.0.0.1:8000."
    ),
    model: str | None = typer.Option(None, "--model", help="Served model name; default: the first listed."),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="Local tokenizer directory; default: the server's /tokenize."
    ),
    api_key: str | None = typer.Option(None, "--api-key", envvar="OPENAI_API_KEY", help="Bearer token."),
    header: list[str] = typer.Option([], "--header", "-H", help="Extra HTTP header NAME:VALUE (repeatable)."),
    endpoint_kind: EndpointKind = load_option("endpoint"),
    dataset: DatasetKind = load_option("dataset"),
    dataset_path: str | None = load_option("dataset_path"),
    input_len: int = typer.Option(
        128, "--input-len", min=1, help="Prompt tokens per request (random dataset)."
    ),
    output_len: int = load_option("output_len"),
    slo: str | None = typer.Option(
        None,
        "--slo",
        help="Targets in ms, e.g. tpot:50,ttft:1000 (also e2el, itl); none: find the knee instead.",
    ),
    percentile: float = typer.Option(
        90.0, "--percentile", help="Percentile the targets are judged at (0-100)."
    ),
    attainment: float = typer.Option(
        0.95, "--attainment", help="Share of requests that must meet every target (goodput), 0-1."
    ),
    load: str = typer.Option("concurrency", "--load", help="concurrency (closed loop) or rate (Poisson)."),
    burstiness: float = load_option("burstiness"),
    start: float | None = typer.Option(
        None,
        "--start",
        help="First level to measure (default: the planner's prediction with --instance, else 1).",
    ),
    max_load: float = typer.Option(256.0, "--max-load", help="Highest level to try."),
    max_probes: int = typer.Option(12, "--max-probes", min=2, max=64, help="Most levels measured."),
    instance: str | None = typer.Option(
        None,
        "--instance",
        "-i",
        help="Instance type the server runs on ('local': this machine): prices the answer and starts from the "
        "planner's predicted capacity.",
    ),
    ignore_eos: bool = load_option("ignore_eos"),
    timeout: float = load_option("timeout_s"),
    seed: int = load_option("seed"),
    label: str | None = typer.Option(None, "--label", help="Label stored with the run."),
    resume: str | None = typer.Option(None, "--resume", help="Continue an interrupted capacity run."),
    store: bool = typer.Option(
        True, "--store/--no-store", help="Store the probes as a run of kind capacity."
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Capacity at an SLO, measured: the highest concurrency (or request rate) meeting the targets."""
    with user_errors():
        from accelbench.bench.capacity import price, run_capacity
        from accelbench.bench.tokenizer import load_tokenizer
        from accelbench.domain.capacity import parse_slo

        kind = {"concurrency": "concurrency", "rate": "request_rate", "request_rate": "request_rate"}.get(
            load
        )
        if kind is None:
            raise UserInputError(f"Unknown --load {load!r}.", hint="Use concurrency or rate.")
        if max_load < 1:
            raise UserInputError(f"--max-load {max_load:g} is below 1.", hint="Give --max-load 1 or more.")
        target = parse_slo(slo, percentile=percentile, attainment=attainment) if slo else None
        if slo is None and not 0 < percentile < 100:
            raise UserInputError(f"Percentile {percentile:g} is outside (0, 100).")
        if dataset != DatasetKind.random and not dataset_path:
            raise UserInputError(f"--dataset {dataset.value} needs --dataset-path FILE.")
        headers = parse_headers(header)
        served = model or first_served_model(base_url, headers, api_key)
        endpoint = Endpoint(
            base_url=base_url, served_model=served, tokenizer=tokenizer, api_key=api_key, headers=headers
        )
        base = BenchConfig(
            endpoint=endpoint_kind,
            dataset=dataset,
            dataset_path=dataset_path,
            input_len=input_len,
            output_len=output_len,
            burstiness=burstiness,
            ignore_eos=ignore_eos,
            timeout_s=timeout,
            seed=seed,
            label=label,
            scrape_metrics=False,
        )
        from accelbench.services.plan import capacity_plan

        hourly, predicted = capacity_plan(instance, tokenizer or served, input_len, output_len, target, kind)
        first = start if start is not None else (predicted or 1.0)
        repo = None
        run_id = None
        if store or resume:
            from accelbench.store import get_store

            repo = get_store()
            if resume:
                run_id = repo.get_run(resume).id
            else:
                run_id = repo.create_run(
                    kind="capacity",
                    status=RunStatus.benchmarking,
                    label=label,
                    served_model=served,
                    model=tokenizer or served,
                    base_url=redact_url(base_url),
                    instance_type=instance,
                    spec={
                        "capacity": {
                            "load": kind,
                            "slo": target.model_dump(mode="json") if target else None,
                            "start": first,
                            "max_load": max_load,
                            "max_probes": max_probes,
                            "bench": json.loads(base.model_dump_json()),
                        },
                        "endpoint": endpoint.record(),
                    },
                ).id
        tok = load_tokenizer(endpoint)
        cancel = threading.Event()
        try:
            with graceful_interrupt(cancel, STOP_MESSAGE):
                result = run_capacity(
                    endpoint,
                    base,
                    load=kind,  # type: ignore[arg-type]
                    slo=target,
                    start=first,
                    max_load=max_load,
                    max_probes=max_probes,
                    tokenizer=tok,
                    store=repo,
                    run_id=run_id,
                    progress=lambda m: err_console.print(f"[dim]{m}[/]", highlight=False),
                    cancel=cancel,
                )
        except KeyboardInterrupt:
            if repo is not None and run_id is not None:
                repo.set_status(run_id, RunStatus.cancelled, error="interrupted; resume with --resume")
                err_console.print(f"Interrupted: resume with accelbench capacity ... --resume {run_id}")
            raise typer.Exit(130) from None
        except Exception as exc:  # the run must not stay "benchmarking": say why it stopped, keep the probes
            if repo is not None and run_id is not None:
                repo.set_status(run_id, RunStatus.failed, error=f"{type(exc).__name__}: {exc}"[:500])
            raise
        result = price(result, hourly)
        if predicted is not None:
            result = result.model_copy(update={"predicted_max_load": predicted})
            if result.max_load:
                err = (predicted - result.max_load) / result.max_load * 100
                result.notes.append(
                    f"The planner predicted {predicted:g} ({err:+.0f}% against the measured)."
                )
        if repo is not None and run_id is not None:
            repo.merge_run_extra(run_id, capacity=result.model_dump(mode="json"))
            repo.set_status(run_id, RunStatus.completed)
    if fmt == OutputFormat.json:
        data = result.model_dump(mode="json")
        data["run_id"] = run_id
        print_json(data)
    else:
        render(result, run_id)
    if target is not None and result.max_load is None:
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    app.command("capacity")(capacity)
