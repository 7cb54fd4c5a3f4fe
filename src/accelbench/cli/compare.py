"""CLI commands: ``accelbench compare``, ``accelbench report`` and ``accelbench import vllm-bench``.

- ``compare RUN RUN...`` sets two or more stored runs side by side against a baseline (the first named, or
  ``--baseline RUN``): the table at the chosen latency percentiles (``--percentiles``, p50/p90/p99 by default),
  each run against the baseline per input length, the findings and cost (``--format table|json|csv``,
  ``--tier``, ``--out FILE``); when some are capacity searches, their capacity at the SLO and its cost per 1M
  tokens first.
- ``report RUN... --out DIR`` writes ``report.html`` (self-contained, works offline), ``report.md`` and its
  PNG charts; one run is enough.
- ``import vllm-bench FILE... --label NAME`` reads ``vllm bench serve --save-result`` JSON files (one per cell
  and repeat) into a new run, so results measured elsewhere compare like any other run.
"""

from __future__ import annotations

import enum
import io
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from accelbench.cli.common import FormatOption, OutputFormat, console, err_console, print_json, user_errors
from accelbench.cli.render import Col, print_table
from accelbench.domain.bench import BenchmarkSummary
from accelbench.domain.catalog import PriceTier
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.errors import UserInputError
from accelbench.report.comparison import LATENCY_METRICS
from accelbench.report.percentiles import DEFAULT, label
from accelbench.report.side_by_side import RATIO_COLUMNS

import_app = typer.Typer(
    help="Bring results measured elsewhere into the store (they then compare like any run).",
    no_args_is_help=True,
)


class CompareFormat(enum.StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


TierOption = typer.Option(
    PriceTier.on_demand, "--tier", help="Pricing tier for cost: on_demand, reserved_1yr or reserved_3yr."
)


# ----------------------------------------------------------------------------------------- compare
# which columns matter most when the terminal is narrow (cli/render.py): 0 is always shown, higher drops first;
# a column not named here (added later) gets 3. Latency tails (every percentile after the first chosen) drop
# first: TTFT's and TPOT's after ITL's and E2E's.
_CELL_PRIORITY = {
    "input": 0, "conc": 0, "run": 0, "TPOT": 0, "out tok/s": 0,
    "TTFT": 1, "throughput vs baseline": 1, "decode speed vs baseline": 1, "$/1M out tok": 1,
    "total tok/s": 2, "ok": 2, "E2E": 3, "req/s": 3, "ITL": 4,
}  # fmt: skip
_TAIL_PRIORITY = {"TTFT": 5, "TPOT": 5, "ITL": 6, "E2E": 6}
_PAIR_PRIORITY = {
    "input": 0, "run": 0, "decode speed vs baseline (lowest conc)": 0, "baseline": 1, "conc": 1,
    "throughput lead from low to high load": 1, "total tok/s vs baseline, per conc": 2,
    "TPOT growth run | baseline": 3, "TTFT growth run | baseline": 3,
    "out tok/s of 1 request run | baseline": 4, "aggregate out tok/s run | baseline": 4,
}  # fmt: skip
_PAIR_WHOLE = {
    "input", "conc", "decode speed vs baseline (lowest conc)", "TPOT growth run | baseline",
    "TTFT growth run | baseline", "out tok/s of 1 request run | baseline", "aggregate out tok/s run | baseline",
}  # fmt: skip
_CAPACITY_PRIORITY = {
    "run": 0, "max load": 0, "instance": 1, "out tok/s at max": 1, "$/1M output": 1,
    "engine": 2, "SLO": 2, "$/1M total": 2, "load": 3, "predicted": 3, "knee": 3,
}  # fmt: skip
_CAPACITY_NUMBERS = {"out tok/s at max", "$/1M output", "$/1M total"}


def cell_columns(percentiles: Sequence[int]) -> list[Col]:
    """The side-by-side table's columns with their priorities: a latency column at the first percentile chosen
    takes its metric's priority, the tails after it drop first."""
    from accelbench.report.side_by_side import latency_header, side_by_side_columns

    first = {latency_header(name, percentiles[0]): name for _m, name in LATENCY_METRICS}
    tails = {latency_header(name, p): name for _m, name in LATENCY_METRICS for p in percentiles[1:]}
    cols = []
    for c in side_by_side_columns(percentiles):
        if c in first:
            priority = _CELL_PRIORITY[first[c]]
        elif c in tails:
            priority = _TAIL_PRIORITY[tails[c]]
        else:
            priority = _CELL_PRIORITY.get(c, 3)
        cols.append(Col(c, priority, num=c not in ("run", *RATIO_COLUMNS), whole=c in RATIO_COLUMNS))
    return cols


def baseline_line(cmp: Any, *, chosen: bool = False) -> str:
    """Which run is the baseline and how it was chosen, said once above the tables."""
    base = cmp.run(cmp.baseline)
    name = base.name if base.name == base.id else f"{base.name} ({base.id})"
    how = "chosen with --baseline" if chosen else "the first run named (--baseline RUN picks another)"
    return (
        f'Baseline: {name}, {how}. Every ratio sets a run against it: "2.50x faster" means faster than the '
        "baseline."
    )


def render_comparison(
    cmp: Any, out: Console, percentiles: Sequence[int] = DEFAULT, *, baseline_chosen: bool = False
) -> None:
    """The human form of a comparison: the baseline, runs, capacity at the SLO (capacity searches), side-by-side
    cells at the chosen latency percentiles, each run against the baseline, findings, notes."""
    from accelbench.report.capacity import CAPACITY_COLUMNS, capacity_rows
    from accelbench.report.compare import TIER_LABELS, fmt_usd, side_by_side_rows
    from accelbench.report.like_for_like import like_for_like_lines
    from accelbench.report.side_by_side import PAIR_COLUMNS, pair_rows
    from accelbench.report.verdict_phrases import VERDICT_TABLE_COLUMNS, verdict_rows

    out.print(baseline_line(cmp, chosen=baseline_chosen), highlight=False)
    for line in like_for_like_lines(cmp):  # said first: whether the runs served the same thing
        out.print(line if line.startswith("Like for like") else f"  - {line}", highlight=False, markup=False)
    run_cols = [Col("", 0), Col("run id", 0), Col("model", 1), Col("engine", 2), Col("instance / machine", 1)]
    run_rows = []
    for r in cmp.runs:
        run_rows.append(
            [
                "baseline" if r.id == cmp.baseline else "",
                f"{r.name}\n{r.id}" if r.name != r.id else r.id,
                r.model or "",
                " ".join(x for x in (r.engine, r.engine_version) if x),
                r.instance_type or (f"local: {r.machine}" if r.machine else "local"),
                f"{fmt_usd(r.price.usd_per_hour)}/h {TIER_LABELS[r.price.tier]}" if r.price else "none",
            ]
        )
    print_table([*run_cols, Col("price", 1)], run_rows, out=out, title="Runs compared", title_justify="left")

    if cmp.capacity:
        print_table(
            [
                Col(
                    c,
                    _CAPACITY_PRIORITY.get(c, 3),
                    num=c in _CAPACITY_NUMBERS,
                    justify="right" if i >= 5 else None,
                )
                for i, c in enumerate(CAPACITY_COLUMNS)
            ],
            capacity_rows(cmp.capacity),
            out=out,
            title=f"Capacity at the SLO (highest load meeting it; cost at {TIER_LABELS[cmp.tier]} prices)",
            title_justify="left",
        )

    cell_rows = side_by_side_rows(cmp, percentiles)
    shown = "/".join(label(p) for p in percentiles)
    print_table(
        cell_columns(percentiles),
        cell_rows,
        out=out,
        sections=[n for n in range(1, len(cell_rows)) if cell_rows[n][:2] != cell_rows[n - 1][:2]],
        title=f"Cells (mean of the repeats' figures; latency {shown} ms, --percentiles to choose; "
        "'vs baseline': each run against the baseline at the same cell)",
        title_justify="left",
    )

    if cmp.pairs:
        print_table(
            [
                Col(c, _PAIR_PRIORITY.get(c, 3), num=c == "input", whole=c in _PAIR_WHOLE, justify="left")
                for c in PAIR_COLUMNS
            ],
            pair_rows(cmp),
            out=out,
            title="Each run against the baseline, per input length (over the concurrencies both measured)",
            title_justify="left",
        )

    verdicts = verdict_rows(cmp)
    if verdicts:
        print_table(
            [
                Col(c, 0 if i in (0, 3, 6, 8) else 2, num=2 <= i <= 7)
                for i, c in enumerate(VERDICT_TABLE_COLUMNS)
            ],
            verdicts,
            out=out,
            title="Is each difference real? (ratio to the baseline with its 95% interval; a verdict only where "
            "the interval leaves 1 out)",
            title_justify="left",
        )

    out.print("[bold]Findings[/]")
    for f in cmp.findings:
        out.print(f"  • {f.text}", highlight=False)
    if cmp.notes:
        out.print("[bold]Notes[/]")
        for n in cmp.notes:
            out.print(f"  - {n}", highlight=False)


def compare_command(
    runs: list[str] = typer.Argument(
        ...,
        help="Two or more run ids (or unambiguous prefixes); the first is the baseline unless --baseline names "
        "another.",
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        help="The run every other is set against (one of RUNS, id or prefix).",
        show_default="the first named",
    ),
    percentiles: str | None = typer.Option(
        None,
        "--percentiles",
        help="Latency percentiles the table shows, comma-separated, from 50, 90, 95, 99; json and csv keep every "
        "stored one.",
        show_default="50,90,99, or ACCELBENCH_PERCENTILES",
    ),
    fmt: CompareFormat = typer.Option(
        CompareFormat.table,
        "--format",
        "-f",
        help="table (human), json (the comparison) or csv (the compare CSV).",
    ),
    tier: PriceTier = TierOption,
    out: Path | None = typer.Option(None, "--out", "-o", help="Write to this file instead of stdout."),
    allow_mismatch: bool = typer.Option(
        False,
        "--allow-mismatch",
        help="Keep runs that are not like for like with the baseline (another precision, max length, model, "
        "sampling or quality) in the ratios and findings; each difference is still named.",
    ),
) -> None:
    """Compare two or more runs against a baseline (the first named, or --baseline): cells matched on (input
    length, concurrency), ratios, findings and cost; capacity searches among them by their capacity at the SLO
    and its cost per 1M tokens."""
    from accelbench.report.compare import compare_runs, comparison_json
    from accelbench.report.compare_csv import write_compare_csv
    from accelbench.report.percentiles import parse_percentiles
    from accelbench.store import get_store

    with user_errors():
        chosen = parse_percentiles(percentiles)
        cmp = compare_runs(
            get_store(), runs, tier=tier, min_runs=2, baseline=baseline, allow_mismatch=allow_mismatch
        )
        if fmt == CompareFormat.csv:
            text = write_compare_csv(cmp)
        elif fmt == CompareFormat.json:
            if out is None:
                print_json(comparison_json(cmp))
                return
            import json

            text = json.dumps(comparison_json(cmp), indent=2, allow_nan=False) + "\n"
        else:
            if out is None:
                render_comparison(cmp, console, chosen, baseline_chosen=baseline is not None)
                return
            buf = io.StringIO()
            render_comparison(
                cmp,
                Console(file=buf, width=160, force_terminal=False, color_system=None),
                chosen,
                baseline_chosen=baseline is not None,
            )
            text = buf.getvalue()
        if out is None:
            typer.echo(text, nl=False)
        else:
            _write_text(out, text)
            err_console.print(f"Wrote {out}")


def _write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserInputError(
            f"Cannot write {path}: {exc.strerror or exc}.", hint="Choose a writable path."
        ) from None


# ------------------------------------------------------------------------------------------ report
def report_command(
    runs: list[str] = typer.Argument(
        ..., help="One or more run ids (or unambiguous prefixes); the first is the baseline."
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Directory for report.html, report.md and the PNG charts."
    ),
    tier: PriceTier = TierOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Write an offline HTML report (report.html), the same as Markdown (report.md) and its PNG charts."""
    from accelbench.report.files import write_report_files
    from accelbench.store import get_store

    with user_errors():
        if out.exists() and not out.is_dir():
            raise UserInputError(f"--out {out} is a file; give a directory for the report files.")
        try:
            html, md, *images = write_report_files(get_store(), runs, out, tier=tier)
        except OSError as exc:
            raise UserInputError(f"Cannot write the report into {out}: {exc.strerror or exc}.") from None
        if fmt == OutputFormat.json:
            print_json({"html": str(html), "markdown": str(md), "images": [str(p) for p in images]})
            return
        for p in (html, md, *images):
            typer.echo(str(p))


# ------------------------------------------------------------------------------------------ import
def _concurrency_of(path: Path, s: BenchmarkSummary) -> int:
    conc = s.config.max_concurrency
    if conc is not None:
        return conc
    # vLLM without --max-concurrency sends every prompt at once (at an infinite request rate), so the
    # concurrency is the number of prompts; with a finite rate there is no fixed concurrency at all.
    if s.config.request_rate == float("inf"):
        return s.num_prompts or s.config.num_prompts
    raise UserInputError(
        f"{path}: no max_concurrency and a request rate of {s.config.request_rate}/s, so the cell's concurrency "
        "is unknown.",
        hint="Import results made with --max-concurrency (one file per cell and repeat).",
    )


def group_input_lengths(lengths: list[int], tolerance: float) -> dict[int, int]:
    """Map each measured input length to its cell's input length.

    vLLM's prompts vary around the asked length (it aligns them only when the server has ``/tokenize``), so
    files of one cell can report 40, 42 and 44 tokens. Sorted lengths join a group while they stay within
    ``tolerance`` (a fraction) of the group's smallest; a group's cell length is the median of its files'
    lengths, rounded. ``tolerance=0`` keeps every distinct length its own cell.
    """
    import statistics

    groups: list[list[int]] = []
    for n in sorted(lengths):
        if groups and n <= groups[-1][0] * (1.0 + tolerance):
            groups[-1].append(n)
        else:
            groups.append([n])
    mapping: dict[int, int] = {}
    for g in groups:
        cell = int(statistics.median(g) + 0.5)
        for n in g:
            mapping[n] = cell
    return mapping


def _import_failure(failed: list[tuple[Path, BenchmarkSummary]]) -> str:
    """Why files have no completed request: the most frequent error reason the files record."""
    reasons: dict[str, int] = defaultdict(int)
    for _f, s in failed:
        for reason, n in s.errors.items():
            reasons[reason] += n
    requests = sum(s.failed for _f, s in failed)
    top = max(reasons.items(), key=lambda kv: kv[1])[0] if reasons else "no error reason recorded"
    return f"{requests} requests failed, most often: {top}"


def import_vllm_bench(
    files: list[Path] = typer.Argument(
        ..., help="`vllm bench serve --save-result` JSON files (one per cell and repeat)."
    ),
    label: str = typer.Option(..., "--label", help="A name for the new run."),
    instance: str | None = typer.Option(
        None, "--instance", help="Instance type the results were measured on."
    ),
    engine: str | None = typer.Option(None, "--engine", help="Serving engine, e.g. vllm, vllm-cpu, sglang."),
    engine_version: str | None = typer.Option(
        None, "--engine-version", help="Engine version (needs --engine)."
    ),
    tolerance: float = typer.Option(
        0.15,
        "--input-len-tolerance",
        min=0.0,
        max=1.0,
        help="Input lengths within this fraction of each other form one cell (vLLM's prompt lengths vary "
        "when the server has no /tokenize); 0 keeps each length its own cell.",
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Import vLLM benchmark result files as one run; cells are recognised by input length and concurrency."""
    from datetime import datetime

    from accelbench.bench.results_io import read_result
    from accelbench.store import get_store

    with user_errors():
        if engine_version and not engine:
            raise UserInputError("--engine-version needs --engine (which engine is that the version of?).")
        if not label.strip():
            raise UserInputError("--label is empty; give the run a name.")
        resolved = [f.resolve() for f in files]
        dupes = sorted({str(f) for f in resolved if resolved.count(f) > 1})
        if dupes:
            raise UserInputError(f"Files named more than once: {', '.join(dupes)}.")
        # Read and check everything first: a bad file leaves nothing half-imported.
        loaded = [(f, read_result(f)) for f in files]
        models = sorted({s.model_id for _, s in loaded if s.model_id})
        if len(models) > 1:
            raise UserInputError(
                f"The files are from different models ({', '.join(models)}); a run measures one model.",
                hint="Import each model's files as a separate run.",
            )
        fields: dict[str, Any] = {}
        if instance:
            from accelbench.catalog import get_catalog, price_for

            inst = get_catalog().instance(instance)
            price = price_for(inst.name)
            fields.update(
                instance_type=inst.name,
                accelerator_type=inst.accelerator_type.value,
                accelerator_name=inst.accelerator_name,
                accelerator_count=inst.accelerator_count,
                hourly_usd=price.usd_per_hour if price else None,
            )
        cell_len = group_input_lengths([s.config.input_len for _, s in loaded], tolerance)
        cells: dict[tuple[int, int], list[tuple[Path, BenchmarkSummary]]] = defaultdict(list)
        for f, s in loaded:
            cells[(cell_len[s.config.input_len], _concurrency_of(f, s))].append((f, s))
        measured_by_cell: dict[int, list[int]] = defaultdict(list)
        for measured, cell in cell_len.items():
            measured_by_cell[cell].append(measured)
        notes = [
            f"input {cell}: files with measured input lengths {', '.join(str(n) for n in sorted(ms))}"
            for cell, ms in sorted(measured_by_cell.items())
            if sorted(ms) != [cell]
        ]
        dates: list[datetime] = []
        for _, s in loaded:
            try:
                dates.append(datetime.fromisoformat(s.date))
            except ValueError:
                continue
        # A file with no completed request is a failed cell (compared by nothing); no completed request in
        # any file is a failed run, stored with the reason the files give.
        failed_files = [(f, s) for f, s in loaded if s.completed == 0]
        error = None
        if len(failed_files) == len(loaded):
            error = f"no request completed in any file: {_import_failure(failed_files)}"
        store = get_store()
        run = store.create_run(
            kind="import",
            status=RunStatus.failed if error else RunStatus.completed,
            error=error,
            label=label.strip(),
            model=models[0] if models else None,
            served_model=models[0] if models else None,
            base_url=next((s.base_url for _, s in loaded if s.base_url), None),
            engine=engine,
            engine_version=engine_version,
            target="import",
            started_at=min(dates) if dates else None,
            finished_at=max(dates) if dates else None,
            extra={
                "source": "vllm bench serve --save-result",
                "files": [f.name for f, _ in loaded],
                "input_len_groups": notes,
            },
            **fields,
        )
        for (input_len, conc), group in sorted(cells.items()):
            # repeats in the order they were measured
            group.sort(key=lambda fs: (fs[1].date, fs[0].name))
            for repeat, (_f, s) in enumerate(group):
                status = CellStatus.completed if s.completed else CellStatus.failed
                store.save_result(
                    run.id, input_len=input_len, concurrency=conc, repeat=repeat, summary=s, status=status
                )
        if fmt == OutputFormat.json:
            print_json({"run_id": run.id})
            return
        shape = ", ".join(f"input {i} x concurrency {c} ({len(g)})" for (i, c), g in sorted(cells.items()))
        err_console.print(
            f"Imported {len(loaded)} results into run {run.id} ({label}): {shape}.", highlight=False
        )
        if error:
            err_console.print(f"[red]Stored as failed[/]: {error}", highlight=False)
        elif failed_files:
            names = ", ".join(f.name for f, _ in failed_files)
            err_console.print(
                f"[yellow]No request completed in {names}[/] ({_import_failure(failed_files)}); "
                "those cells are marked failed and left out of comparisons.",
                highlight=False,
            )
        for n in notes:
            err_console.print(f"  grouped {n}", highlight=False)
        typer.echo(run.id)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("compare")(compare_command)
    app.command("report")(report_command)
    import_app.command("vllm-bench")(import_vllm_bench)
    from accelbench.cli.imports import register_importers  # guidellm, aiperf, ... (bench.importers)

    register_importers(import_app)
    app.add_typer(import_app, name="import")
