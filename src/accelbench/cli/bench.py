"""``accelbench bench``: one benchmark against an OpenAI-compatible streaming server.

The flags follow ``vllm bench serve`` where they overlap. The result is stored as a run of kind ``bench`` with one
result (``--no-store`` skips that), optionally written in vLLM's result layout (``--save-result``), and printed as
a one-screen summary or, with ``--format json``, as JSON on stdout (the progress bar is on stderr).
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import typer
from rich.console import Group
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from accelbench.bench.quality_run import QUALITY_HELP, before_load, parse_quality, quality_line
from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    console,
    err_console,
    graceful_interrupt,
    print_json,
    user_errors,
)
from accelbench.cli.load_flags import STAGES_HELP, dist_option, load_option, parse_stages, workload_values
from accelbench.domain.answers import ModelsAnswer, parse_answer
from accelbench.domain.bench import (
    BenchConfig,
    BenchmarkSummary,
    DatasetKind,
    Endpoint,
    EndpointKind,
    GoodputSLO,
)
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.errors import AccelbenchError, ServerUnreachable, UserInputError
from accelbench.redact import redact_url

BENCH_STOP_MESSAGE = "Stopping: requests in flight are cancelled, finished ones kept. Ctrl-C again to abort."
_GOODPUT = re.compile(r"^(ttft|tpot|e2el):([0-9]*\.?[0-9]+)$")


def parse_goodput(items: list[str]) -> GoodputSLO | None:
    """``["ttft:500", "tpot:50"]`` (also comma- or space-separated in one item) -> GoodputSLO, in ms."""
    values: dict[str, float] = {}
    for item in items:
        for part in re.split(r"[,\s]+", item.strip()):
            if not part:
                continue
            m = _GOODPUT.match(part)
            if not m:
                raise UserInputError(
                    f"Bad --goodput item {part!r}.",
                    hint="Give NAME:MS pairs with NAME one of ttft, tpot, e2el, e.g. --goodput ttft:500 tpot:50.",
                )
            values[f"{m.group(1)}_ms"] = float(m.group(2))
    return GoodputSLO(**values) if values else None


def parse_headers(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if ":" not in item:
            raise UserInputError(f"Bad --header {item!r}.", hint="Use --header NAME:VALUE.")
        k, v = item.split(":", 1)
        if not k.strip():
            raise UserInputError(f"Bad --header {item!r}: the name is empty.")
        out[k.strip()] = v.strip()
    return out


def base_url_option(value: str | None) -> str | None:
    """``--base-url`` checked before anything connects (a bad one is a usage error, exit 2)."""
    from accelbench.deploy.target_policy import check_url_form

    if value is not None:
        try:
            check_url_form(value)
        except UserInputError as exc:
            raise typer.BadParameter(exc.message) from None
    return value


def served_models(base_url: str, headers: dict[str, str], api_key: str | None) -> list[dict[str, Any]]:
    """What the server lists at /v1/models (id, and for vLLM the model's ``root``: where it was loaded from)."""
    hdrs = dict(headers)
    if api_key:
        hdrs["Authorization"] = f"Bearer {api_key}"
    url = base_url.rstrip("/").removesuffix("/v1") + "/v1/models"
    try:
        r = httpx.get(url, headers=hdrs, timeout=30)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ServerUnreachable(
            f"Cannot reach the server at {redact_url(base_url)} ({exc or type(exc).__name__}).",
            hint="Is it running, and are --base-url and the port right?",
        ) from None
    except httpx.HTTPError as exc:
        raise UserInputError(
            f"Cannot ask {redact_url(url)} for the served model ({type(exc).__name__}).",
            hint="Give --model NAME.",
        ) from None
    if r.status_code != 200:
        raise UserInputError(f"{redact_url(url)} answered HTTP {r.status_code}.", hint="Give --model NAME.")
    answer = parse_answer(ModelsAnswer, r.content, url)
    return [m.model_dump() for m in answer.data]


def first_served_model(base_url: str, headers: dict[str, str], api_key: str | None) -> str:
    """The first model the server lists at /v1/models (what vLLM's client does without --model)."""
    return str(served_models(base_url, headers, api_key)[0]["id"])


def served_model_root(base_url: str, headers: dict[str, str], api_key: str | None, served: str) -> str | None:
    """The directory the server loaded ``served`` from, when it says (vLLM's ``root``) and it exists here: what
    the planner reads the architecture from when the served name is an alias."""
    try:
        listed = served_models(base_url, headers, api_key)
    except UserInputError:
        return None
    for d in listed:
        root = d.get("root")
        if d["id"] == served and isinstance(root, str) and Path(root).is_dir():
            return root
    return None


def endpoint_environment(
    endpoint: Endpoint, command: list[str] | None, *, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """Where a bench or sweep against ``endpoint`` happened: this machine's hardware when the engine runs here
    (a loopback URL), else the remote environment (the engine probed over HTTP, this machine only as the load
    generator), so a remote server's run never carries this machine's CPU as the engine's."""
    from accelbench.bench.runner import engine_is_local
    from accelbench.telemetry.host import capture_environment, remote_environment

    if engine_is_local(endpoint):
        return capture_environment(endpoint.base_url, command=command, headers=headers)
    if command is None:
        command = [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv and sys.argv[0] else []
    return remote_environment(endpoint.base_url, command, headers=headers)


def _fmt(v: float, digits: int = 2) -> str:
    return f"{v:,.{digits}f}"


def _with_ci(st: Any, key: str) -> str:
    """One statistic with its 95% interval as it follows it ("20.10 +-3%"), when it has one."""
    from accelbench.bench.intervals import half_width_pct

    value = getattr(st, key)
    pct = half_width_pct(value, getattr(st, f"{key}_ci95", None))
    if pct is None:
        return _fmt(value)
    return f"{_fmt(value)} +-{pct:.1f}%" if pct < 1 else f"{_fmt(value)} +-{pct:.0f}%"


def render_summary(summary: BenchmarkSummary, *, run_id: str | None, saved: Path | None) -> None:
    """The one-screen summary."""
    cfg = summary.config
    rate = "inf" if math.isinf(cfg.request_rate) else f"{cfg.request_rate:g}/s"
    where = f"{summary.model_id} @ {summary.base_url}"
    shape = (
        f"{cfg.endpoint}, {cfg.dataset}"
        + (f" {cfg.input_len} in" if DatasetKind(cfg.dataset) == DatasetKind.random else "")
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
        from accelbench.bench.modes import modes_sentence

        for metric, found in summary.modes.items():
            parts.append(f"[yellow]note:[/] {modes_sentence(metric.upper(), found)}")
    if saved is not None:
        parts.append(f"Saved to {saved}")
    if run_id is not None:
        parts.append(f"Stored as run [bold]{run_id}[/] (accelbench runs show {run_id})")
    title = f"accelbench bench: {where}" + (f" [{summary.label}]" if summary.label else "")
    console.print(Panel(Group(*parts), title=title, subtitle=shape, expand=False))


def bench_outcome(
    summary: BenchmarkSummary, endpoint: Endpoint, *, cancelled: bool
) -> tuple[CellStatus, RunStatus, str | None]:
    """(cell status, run status, error) of one benchmark, by the sweep's rule (``judge_cell``): requests that
    failed against a server that no longer answers make the cell partial (or failed, if none completed) and
    the run failed, however many finished first."""
    from accelbench.bench.sweep import failure_line, judge_cell, server_alive

    gone = server_alive(endpoint) if summary.failed else None
    cell = judge_cell(summary, cancelled=cancelled, server_gone=gone is not None)
    if cell is None or summary.completed == 0:
        return CellStatus.failed, RunStatus.failed, failure_line(None, summary)
    if gone is not None:
        return (
            cell,
            RunStatus.failed,
            f"the server at {redact_url(endpoint.base_url)} stopped answering: {gone}",
        )
    if cell == CellStatus.failed:  # more failed than --max-error-rate allows
        return cell, RunStatus.failed, failure_line(None, summary)
    if cell == CellStatus.partial or summary.interrupted:
        return CellStatus.partial, RunStatus.interrupted, None
    return cell, RunStatus.completed, None


def _open_run(config: BenchConfig, endpoint: Endpoint) -> str:
    """The stored run, created before any load is sent: a store that cannot be written refuses the benchmark
    now, not after the whole load."""
    from accelbench.store import get_store
    from accelbench.store.owner import process_owner

    run = get_store().create_run(
        kind="bench",
        status=RunStatus.benchmarking,
        claimed_by=process_owner(),  # this process measures it: the run's one executor
        label=config.label,
        served_model=endpoint.served_model,
        # what the server says it serves: the directory it loaded when it lists one here (an aliased served
        # name is not one the planner can read), else its served name; never the --tokenizer directory, which
        # the endpoint record in the spec keeps on its own
        model=served_model_root(endpoint.base_url, endpoint.headers, endpoint.api_key, endpoint.served_model)
        or endpoint.served_model,
        base_url=redact_url(endpoint.base_url),
        spec={"bench": json.loads(config.model_dump_json()), "endpoint": endpoint.record()},
    )
    return run.id


def _store_result(
    run_id: str,
    summary: BenchmarkSummary,
    *,
    env: dict[str, Any],
    outcome: tuple[CellStatus, RunStatus, str | None],
) -> None:
    from accelbench.store import get_store

    store = get_store()
    engine = env.get("engine") or {}
    store.update_run(
        run_id,
        engine=engine.get("name"),
        engine_version=engine.get("version"),
        environment=env,
        command=env.get("command"),
    )
    cell, status, error = outcome
    store.save_result(
        run_id,
        input_len=summary.config.input_len,
        # unlimited: every prompt may be in flight at once (the cell is keyed by the most in flight)
        concurrency=summary.config.max_concurrency or summary.config.num_prompts,
        repeat=0,
        summary=summary,
        status=cell,
    )
    store.set_status(run_id, status, error=error)


def bench(
    base_url: str = typer.Option(
        ...,
        "--base-url",
        envvar="ACCELBENCH_BASE_URL",
        help="Server root, e.g. http://127.0.0.1:8000.",
        callback=base_url_option,
    ),
    endpoint_kind: EndpointKind = load_option("endpoint"),
    model: str | None = typer.Option(
        None, "--model", help="Served model name.", show_default="the first one /v1/models lists"
    ),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="Local tokenizer directory.", show_default="the server's /tokenize"
    ),
    api_key: str | None = typer.Option(
        None, "--api-key", envvar="OPENAI_API_KEY", help="Bearer token for the server."
    ),
    header: list[str] = typer.Option([], "--header", "-H", help="Extra HTTP header NAME:VALUE (repeatable)."),
    dataset: DatasetKind = load_option("dataset"),
    dataset_path: str | None = load_option("dataset_path"),
    input_len: int = typer.Option(
        128,
        "--input-len",
        min=1,
        help="Random dataset: prompt tokens as the server counts them (chat template included), exact.",
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
    self_test: bool = load_option("self_test"),
    max_error_rate: float = load_option("max_error_rate"),
    input_dist: str | None = dist_option("--input-dist", "input", "--input-len (random dataset)"),
    output_dist: str | None = dist_option("--output-dist", "output", "--output-len"),
    stages: str | None = typer.Option(None, "--stages", help=STAGES_HELP),
    num_prompts: int = typer.Option(100, "--num-prompts", min=1, help="Requests to send."),
    max_concurrency: int | None = typer.Option(
        None, "--max-concurrency", min=1, help="Most requests in flight.", show_default="unlimited"
    ),
    request_rate: float = load_option("request_rate"),
    burstiness: float = load_option("burstiness"),
    duration: float | None = typer.Option(
        None, "--duration", help="Stop sending new requests after this many seconds."
    ),
    num_warmups: int = load_option("num_warmups"),
    ignore_eos: bool = load_option("ignore_eos"),
    goodput: list[str] = typer.Option(
        [], "--goodput", help="SLOs as NAME:MS (ttft, tpot, e2el), e.g. --goodput ttft:500 tpot:50."
    ),
    timeout: float = load_option("timeout_s"),
    seed: int = load_option("seed"),
    temperature: float | None = load_option("temperature"),
    save_result: Path | None = typer.Option(
        None, "--save-result", help="Write the result in vllm bench serve's JSON layout to this file."
    ),
    label: str | None = typer.Option(None, "--label", help="Label stored with the result."),
    scrape: bool = load_option("scrape_metrics"),
    scrape_interval: float = load_option("scrape_interval_s"),
    store: bool = typer.Option(
        True, "--store/--no-store", help="Store the run (kind bench) in the results store."
    ),
    include_requests: bool = typer.Option(
        False, "--include-requests", help="With --format json: include per-request records."
    ),
    quality: str | None = typer.Option(None, "--quality", help=QUALITY_HELP),
    fmt: OutputFormat = FormatOption,
    extra: list[str] = typer.Argument(None, hidden=True, metavar="GOODPUT_PAIRS"),
) -> None:
    """Benchmark one OpenAI-compatible streaming server: TTFT, TPOT, ITL, E2EL, throughput, goodput."""
    with user_errors():
        # `--goodput ttft:500 tpot:50` (vLLM's syntax) leaves the later pairs as stray arguments.
        extra = list(extra or [])
        stray = [x for x in extra if not _GOODPUT.match(x)]
        if stray:
            raise UserInputError(
                f"Unexpected argument(s): {' '.join(stray)}.", hint="See accelbench bench --help."
            )
        if extra and not goodput:
            raise UserInputError(
                f"Unexpected argument(s): {' '.join(extra)}.", hint="Did you mean --goodput?"
            )
        slo = parse_goodput(list(goodput) + extra)
        workload = workload_values(
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
        )
        headers = parse_headers(header)
        if request_rate <= 0 or burstiness <= 0:
            raise UserInputError("--request-rate and --burstiness must be positive (inf is allowed).")
        if dataset != DatasetKind.random and not dataset_path:
            raise UserInputError(f"--dataset {dataset.value} needs --dataset-path FILE.")
        served = model or first_served_model(base_url, headers, api_key)
        endpoint = Endpoint(
            base_url=base_url, served_model=served, tokenizer=tokenizer, api_key=api_key, headers=headers
        )
        try:
            config = BenchConfig(
                endpoint=endpoint_kind,
                dataset=dataset,
                dataset_path=dataset_path,
                input_len=input_len,
                output_len=output_len,
                prefix_len=prefix_len,
                num_prompts=num_prompts,
                max_concurrency=max_concurrency,
                request_rate=request_rate,
                burstiness=burstiness,
                duration_s=duration,
                num_warmups=num_warmups,
                ignore_eos=ignore_eos,
                goodput=slo,
                timeout_s=timeout,
                seed=seed,
                temperature=temperature,
                label=label,
                scrape_metrics=scrape,
                scrape_interval_s=scrape_interval,
                stages=parse_stages(stages),
                **workload,
            )
        except ValueError as exc:
            raise UserInputError(f"Invalid settings: {exc}") from None

        from accelbench.bench import run_benchmark
        from accelbench.bench.context import check_served_context

        if DatasetKind(config.dataset) == DatasetKind.random:
            check_served_context(endpoint, [config.input_len], config.output_len)  # before any load
        parse_quality(quality)  # an unknown setting or lm-eval missing: refused before anything is stored
        run_id = _open_run(config, endpoint) if store else None
        from accelbench.store import get_store

        # what the run serves and, when asked, its quality: both before the load
        measured = before_load(get_store() if run_id else None, run_id, endpoint, config, quality=quality)
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
        task = progress.add_task("requests", total=num_prompts)

        def on_progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        cert = None
        if config.self_test:
            from accelbench.bench.selftest import client_self_test

            cert = client_self_test(config)
        with graceful_interrupt(cancel, BENCH_STOP_MESSAGE), progress:
            summary = run_benchmark(endpoint, config, progress=on_progress, cancel=cancel)
        if cert is not None:
            from accelbench.bench.selftest import certify

            summary = certify(summary, cert)
        saved = None
        if save_result is not None:
            from accelbench.bench.results_io import write_result

            saved = write_result(summary, save_result)
        outcome = bench_outcome(summary, endpoint, cancelled=cancel.is_set())
        store_error: AccelbenchError | None = None
        if run_id is not None:
            env = endpoint_environment(endpoint, None, headers=headers)
            try:
                _store_result(run_id, summary, env=env, outcome=outcome)
            except AccelbenchError as exc:  # the measurement is printed (and saved) below all the same
                store_error = exc
        # printed (and with --save-result saved) whatever the store did: a store failure never loses it
        if fmt == OutputFormat.json:
            exclude = {"telemetry_samples"} if include_requests else {"requests", "telemetry_samples"}
            body = json.loads(summary.model_dump_json(exclude=exclude))  # inf as "Infinity", like the store
            out = {"run_id": run_id, "result_file": str(saved) if saved else None, "summary": body}
            print_json(out | ({"quality": measured} if measured else {}))
        else:
            render_summary(summary, run_id=run_id, saved=saved)
            if measured:
                console.print(quality_line(measured), highlight=False, markup=False)
        if store_error is not None:
            err_console.print(
                f"[red]Not stored:[/] {store_error.message}"
                + (f" (the result file {saved} has it)" if saved else " Use --save-result FILE to keep it."),
                highlight=False,
            )
            raise typer.Exit(1)
        if outcome[2]:
            err_console.print(f"[red]Failed:[/] {outcome[2]}", highlight=False)
        if outcome[1] == RunStatus.failed:
            raise typer.Exit(1)
        if summary.interrupted and cancel.is_set():
            raise typer.Exit(130)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("bench")(bench)
