"""``accelbench capacity``: the highest load an OpenAI-compatible server sustains within latency targets.

A thin shell: the flags become the ``CapacitySpec`` a run spec's ``capacity:`` section is (the same rules,
``services.capacity_spec``), ``services.measure_capacity`` runs the use case, this module renders the answer.
Each measured level is stored as a cell of a run of kind ``capacity`` (with the probes so far in the run's
extra data), so ``--resume RUN`` continues an interrupted search without measuring a level twice. Without
``--slo`` the search reports the knee: where adding load stops adding throughput. A search of a deployment
this command does not start (local engine, Kubernetes, EC2) is a run spec's ``capacity:`` section
(``accelbench run SPEC.yaml``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import typer

from accelbench.cli.bench import parse_headers
from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    console,
    err_console,
    graceful_interrupt,
    print_json,
    user_errors,
)
from accelbench.cli.load_flags import dist_option, load_option, workload_values
from accelbench.cli.measure_flags import base_url_option
from accelbench.cli.render import Col, print_table
from accelbench.domain.bench import DatasetKind, Endpoint, EndpointKind
from accelbench.domain.results import ResultInfo
from accelbench.errors import UserInputError
from accelbench.services.endpoints import first_served_model, served_model_root

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
        pc = p.percentiles
        rows.append(
            [
                f"{p.level:g}",
                str(p.repeat),
                str(p.requests),
                _f(pc.get("ttft")),
                _f(pc.get("tpot"), 2),
                _f(pc.get("itl"), 2),
                _f(pc.get("e2el")),
                "-" if p.attainment is None else f"{p.attainment:.0%}",
                _f(p.output_tokens_per_s),
                "-" if p.confidence is None else f"{p.confidence:.0%}",
                "-" if p.met is None else ("yes" if p.met else "no"),
                p.why,
            ]
        )
    print_table(cols, rows, title=f"Capacity probes ({result.load})", formats="json")
    from accelbench.report.capacity_results import confidence_sentence, load_phrase, range_text

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
    from accelbench.report.capacity_results import answer_level, devices_at_capacity, devices_sentence

    devices = devices_sentence(devices_at_capacity(result, results), result.load, answer_level(result))
    if devices:
        console.print(devices, highlight=False, overflow="fold")
    for n in result.notes:
        console.print(f"  - {n}", highlight=False)
    if run_id:
        err_console.print(f"[dim]stored as run {run_id}[/]")


def capacity(
    base_url: str = typer.Option(
        ...,
        "--base-url",
        envvar="ACCELBENCH_BASE_URL",
        help="Server root, e.g. http://127.0.0.1:8000.",
        callback=base_url_option,
    ),
    model: str | None = typer.Option(
        None, "--model", help="Served model name.", show_default="the first listed"
    ),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="Local tokenizer directory.", show_default="the server's /tokenize"
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
    prefix_len: int = load_option("prefix_len"),
    prefix_groups: int = load_option("prefix_groups"),
    turns: int = load_option("turns"),
    think_time: float = load_option("think_time_s"),
    ramp_up: float = load_option("ramp_up_s"),
    time_scale: float = load_option("time_scale"),
    trace_format: str = load_option("trace_format"),
    tools: str | None = load_option("tools"),
    metrics_definition: str = load_option("metrics_definition"),
    input_dist: str | None = dist_option("--input-dist", "input", "--input-len (random dataset)"),
    output_dist: str | None = dist_option("--output-dist", "output", "--output-len"),
    slo: str | None = typer.Option(
        None,
        "--slo",
        help="Targets in ms, e.g. tpot:50,ttft:1000 (also e2el, and itl: a request's longest gap between "
        "tokens); none: find the knee instead.",
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
        help="First level to measure.",
        show_default="the planner's prediction with --instance, else 1",
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
        from accelbench import services

        capacity_spec = services.capacity_spec(
            load=load,
            slo=slo,
            percentile=percentile,
            attainment=attainment,
            endpoint=endpoint_kind,
            dataset=dataset,
            dataset_path=dataset_path,
            input_len=input_len,
            output_len=output_len,
            burstiness=burstiness,
            start=start,
            max_load=max_load,
            max_probes=max_probes,
            ignore_eos=ignore_eos,
            timeout_s=timeout,
            seed=seed,
            prefix_len=prefix_len,
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
                },
                input_dist,
                output_dist,
            ),
        )
        if dataset != DatasetKind.random and not dataset_path:
            raise UserInputError(f"--dataset {dataset.value} needs --dataset-path FILE.")
        headers = parse_headers(header)
        served = model or first_served_model(base_url, headers, api_key)
        endpoint = Endpoint(
            base_url=base_url, served_model=served, tokenizer=tokenizer, api_key=api_key, headers=headers
        )
        repo = None
        if store or resume:
            from accelbench.store import get_store

            repo = get_store()
        cancel = threading.Event()
        try:
            with graceful_interrupt(cancel, STOP_MESSAGE):
                outcome = services.measure_capacity(
                    repo,
                    endpoint,
                    capacity_spec,
                    instance=instance,
                    model_ref=tokenizer or served_model_root(base_url, headers, api_key, served) or served,
                    label=label,
                    resume=resume,
                    progress=lambda m: err_console.print(f"[dim]{m}[/]", highlight=False),
                    cancel=cancel,
                )
        except KeyboardInterrupt as exc:
            run_id = getattr(exc, "run_id", None)
            if run_id is not None:
                err_console.print(f"Interrupted: resume with accelbench capacity ... --resume {run_id}")
            raise typer.Exit(130) from None
        result, run_id = outcome.result, outcome.run_id
    if fmt == OutputFormat.json:
        data = result.model_dump(mode="json")
        data["run_id"] = run_id
        print_json(data)
    else:
        render(result, run_id, repo.get_results(run_id) if repo is not None and run_id else ())
    if result.slo is not None and result.max_load is None:
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    app.command("capacity")(capacity)
