"""The side-by-side table of a comparison (the CLI's ``compare``, the pages, report.md) and its JSON form."""

from __future__ import annotations

from typing import Any

from accelbench.report.comparison import Comparison, fmt_num, fmt_usd

# ------------------------------------------------------------------------------ side-by-side table
SIDE_BY_SIDE_COLUMNS: tuple[str, ...] = (
    "input",
    "conc",
    "run",
    "TTFT p50 ms",
    "TPOT p50 ms",
    "ITL p50 ms",
    "E2E p50 ms",
    "out tok/s",
    "total tok/s",
    "req/s",
    "ok",
    "$/1M out tok",
    "TPOT vs base",
    "tok/s vs base",
)


def side_by_side_rows(comparison: Comparison) -> list[list[str]]:
    """Rows of the side-by-side table: per cell, one row per run, ratios against the baseline run."""
    rows: list[list[str]] = []
    keys = sorted({(c.input_len, c.concurrency) for c in comparison.cells})
    for input_len, conc in keys:
        base = comparison.cell(comparison.baseline, input_len, conc)
        for run in comparison.runs:
            c = comparison.cell(run.id, input_len, conc)
            if c is None:
                continue
            tpot_vs = tput_vs = ""
            if run.id != comparison.baseline and base is not None and base.repeats and c.repeats:
                if c.tpot_p50_ms and base.tpot_p50_ms:
                    tpot_vs = f"{c.tpot_p50_ms / base.tpot_p50_ms:.2f}x"
                if c.total_throughput and base.total_throughput:
                    tput_vs = f"{c.total_throughput / base.total_throughput:.2f}x"
            ok = f"{c.successful}/{c.successful + c.failed}"
            rows.append(
                [
                    str(input_len),
                    str(conc),
                    run.name,
                    fmt_num(c.ttft_p50_ms),
                    fmt_num(c.tpot_p50_ms),
                    fmt_num(c.itl_p50_ms),
                    fmt_num(c.e2e_p50_ms),
                    fmt_num(c.output_throughput),
                    fmt_num(c.total_throughput),
                    fmt_num(c.request_throughput, 2),
                    ok,
                    fmt_usd(c.cost_per_1m_tokens_usd),
                    tpot_vs,
                    tput_vs,
                ]
            )
    return rows


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """The JSON form of a comparison (what ``compare --format json`` prints)."""
    return comparison.model_dump(mode="json")
