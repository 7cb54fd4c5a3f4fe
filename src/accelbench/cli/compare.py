"""CLI commands: ``accelbench compare`` and ``accelbench report``; this module also adds the ``import`` group
(``cli/imports.py``).

- ``compare RUN RUN...`` sets two or more stored runs side by side against a baseline (the first named, or
  ``--baseline RUN``): the table at the chosen latency percentiles (``--percentiles``, p50/p90/p99 by default),
  each run against the baseline per input length, the findings and cost (``--format table|json|csv``,
  ``--tier``, ``--out FILE``); when some are capacity searches, their capacity at the SLO and its cost per 1M
  tokens first.
- ``report RUN... --out DIR`` writes ``report.html`` (self-contained, works offline), ``report.md`` and its
  PNG charts; one run is enough.
"""

from __future__ import annotations

import enum
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from accelbench.cli.common import FormatOption, OutputFormat, console, err_console, print_json, user_errors
from accelbench.cli.imports import register_imports
from accelbench.cli.render import Col, print_bullets, print_table
from accelbench.domain.instance_types import PriceTier
from accelbench.errors import UserInputError
from accelbench.report.capacity_results import CAPACITY_COLUMNS, capacity_rows
from accelbench.report.compare_csv import write_compare_csv
from accelbench.report.compare_runs import TIER_LABELS, comparison_json, fmt_usd, side_by_side_rows
from accelbench.report.comparison import LATENCY_METRICS
from accelbench.report.like_for_like import like_for_like_lines
from accelbench.report.percentiles import DEFAULT, label, parse_percentiles
from accelbench.report.side_by_side import (
    PAIR_COLUMNS,
    RATIO_COLUMNS,
    latency_header,
    pair_rows,
    side_by_side_columns,
)
from accelbench.report.verdict_phrases import VERDICT_TABLE_COLUMNS, verdict_rows
from accelbench.services.comparisons import CompareRequest, ReportRequest, compare, write_report
from accelbench.services.session import get_store


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
        f'Baseline: {name}, {how}. Every ratio sets a run against it: "25% faster (22-28%)" means faster than '
        'the baseline, with the 95% interval of the difference; "no detectable difference" where the interval '
        "does not tell them apart."
    )


def render_comparison(
    cmp: Any, out: Console, percentiles: Sequence[int] = DEFAULT, *, baseline_chosen: bool = False
) -> None:
    """The human form of a comparison: the baseline, runs, capacity at the SLO (capacity searches), side-by-side
    cells at the chosen latency percentiles, each run against the baseline, findings, notes."""
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
    print_bullets((f.text for f in cmp.findings), mark="•", out=out)
    print_bullets(cmp.notes, "[bold]Notes[/]", out=out)


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
    with user_errors():
        chosen = parse_percentiles(percentiles)
        request = CompareRequest(runs=runs, tier=tier, baseline=baseline, allow_mismatch=allow_mismatch)
        cmp = compare(get_store(), request)
        if fmt == CompareFormat.csv:
            text = write_compare_csv(cmp)
        elif fmt == CompareFormat.json:
            if out is None:
                print_json(comparison_json(cmp))
                return
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
    with user_errors():
        if out.exists() and not out.is_dir():
            raise UserInputError(f"--out {out} is a file; give a directory for the report files.")
        try:
            written = write_report(get_store(), ReportRequest(runs=runs, out_dir=out, tier=tier))
        except OSError as exc:
            raise UserInputError(f"Cannot write the report into {out}: {exc.strerror or exc}.") from None
        if fmt == OutputFormat.json:
            print_json(
                {
                    "html": str(written.html),
                    "markdown": str(written.markdown),
                    "images": [str(p) for p in written.images],
                }
            )
            return
        for p in (written.html, written.markdown, *written.images):
            typer.echo(str(p))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("compare")(compare_command)
    app.command("report")(report_command)
    register_imports(app)  # import vllm-bench, guidellm, aiperf, ... (cli/imports.py)
