"""The tables of a comparison (the CLI's ``compare``, the compare page, report.html and report.md) and its JSON
form: the side-by-side cells (the chosen latency percentiles, throughput, cost, and each run against the
baseline at the same cell) and, per input length, each run against the baseline (``pair_rows``).

Every ratio is said one way: the verdict's words where the figures have intervals (``report/verdicts.py``:
"25% faster (22-28%)", "no detectable difference"), else (a result stored before intervals) a factor of at
least 1 with the direction in words (``report/comparison.py`` ``versus``), "2.50x faster" / "1.30x slower",
in a column whose header says what it compares ("decode speed vs baseline"); the baseline's own rows say
"baseline"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.report.comparison import (
    LATENCY_METRICS,
    CellResult,
    Comparison,
    Growth,
    PairRatios,
    advantage_phrase,
    decode_versus,
    fmt_num,
    fmt_usd,
    throughput_versus,
)
from accelbench.report.formatting import fmt_pct
from accelbench.report.percentiles import DEFAULT, label
from accelbench.report.verdict_phrases import known, said
from accelbench.report.verdicts import MetricVerdict, find

# ------------------------------------------------------------------------------ side-by-side table
#: the side-by-side table's ratio columns (always its last two: a single run's table leaves them out)
RATIO_COLUMNS: tuple[str, ...] = ("decode speed vs baseline", "throughput vs baseline")
BASELINE_MARK = "baseline"


def latency_header(name: str, p: int) -> str:
    """The column of one latency percentile: ``TPOT p99 ms``."""
    return f"{name} {label(p)} ms"


def side_by_side_columns(percentiles: Sequence[int] = DEFAULT) -> tuple[str, ...]:
    """The side-by-side table's columns: each latency metric at each chosen percentile (p50/p90/p99 by
    default, ``report/percentiles.py``), throughput, requests, cost, then the two ratio columns."""
    latencies = [latency_header(name, p) for _metric, name in LATENCY_METRICS for p in percentiles]
    return (
        "input",
        "conc",
        "run",
        *latencies,
        "out tok/s",
        "total tok/s",
        "req/s",
        "ok",
        "$/1M out tok",
        *RATIO_COLUMNS,
    )


#: the columns at the default percentiles
SIDE_BY_SIDE_COLUMNS: tuple[str, ...] = side_by_side_columns(DEFAULT)


def _verdict(comparison: Comparison, c: CellResult, metric: str) -> MetricVerdict | None:
    return find(comparison.verdicts, c.run_id, c.input_len, c.concurrency, metric)


def side_by_side_rows(comparison: Comparison, percentiles: Sequence[int] = DEFAULT) -> list[list[str]]:
    """Rows of the side-by-side table (``side_by_side_columns(percentiles)``): per cell, one row per run; the
    ratio columns set each run against the baseline's figure at the same cell ("25% faster (22-28%)"), the baseline's
    rows say "baseline"."""
    rows: list[list[str]] = []
    keys = sorted({(c.input_len, c.concurrency) for c in comparison.cells})
    for input_len, conc in keys:
        base = comparison.cell(comparison.baseline, input_len, conc)
        for run in comparison.runs:
            c = comparison.cell(run.id, input_len, conc)
            if c is None:
                continue
            decode = tput = ""
            if run.id == comparison.baseline:
                if len(comparison.runs) > 1:
                    decode = tput = BASELINE_MARK
            elif base is not None and base.repeats and c.repeats:
                decode = said(
                    decode_versus(c.tpot_p50_ms, base.tpot_p50_ms), _verdict(comparison, c, "tpot_p50_ms")
                )
                tput = said(
                    throughput_versus(c.total_throughput, base.total_throughput),
                    _verdict(comparison, c, "total_token_throughput"),
                )
            latencies = [
                fmt_num(c.latency(metric, p)) for metric, _name in LATENCY_METRICS for p in percentiles
            ]
            rows.append(
                [
                    str(input_len),
                    str(conc),
                    run.name,
                    *latencies,
                    fmt_num(c.output_throughput),
                    fmt_num(c.total_throughput),
                    fmt_num(c.request_throughput, 2),
                    f"{c.successful}/{c.successful + c.failed}",
                    fmt_usd(c.cost_per_1m_tokens_usd),
                    decode,
                    tput,
                ]
            )
    return rows


# ------------------------------------------------------------------------------ each run against the baseline
PAIR_COLUMNS: tuple[str, ...] = (
    "input",
    "run",
    "baseline",
    "conc",
    "decode speed vs baseline (lowest conc)",
    "total tok/s vs baseline, per conc",
    "throughput lead from low to high load",
    "TPOT growth run | baseline",
    "TTFT growth run | baseline",
    "out tok/s of 1 request run | baseline",
    "aggregate out tok/s run | baseline",
)


def _growth(g: Growth | None) -> str:
    return fmt_pct(None if g is None else g.growth_pct, signed=True)


def _tps(v: float | None) -> str:
    return fmt_num(v)


def _lead_moves(comparison: Comparison, p: PairRatios, a: str, b: str) -> str:
    """How the total-throughput lead moves from the lowest to the highest concurrency: the verdicts at the two
    ends where both have one, else ``advantage_phrase`` on the plain figures."""
    ends = [g.concurrency for g in p.throughput_gaps]
    if len(ends) < 2 or p.throughput_gap_trend is None:
        return "-"
    found = [
        find(comparison.verdicts, p.b, p.input_len, c, "total_token_throughput") for c in (ends[0], ends[-1])
    ]
    if all(known(v) for v in found):
        lo, hi = (said(None, v) for v in found)
        return f"{b} vs {a}: {lo} (c{ends[0]}) → {hi} (c{ends[-1]})"
    return advantage_phrase(p, a, b) or "-"


def pair_rows(comparison: Comparison) -> list[list[str]]:
    """One row per run and input length (``PAIR_COLUMNS``): the run against the baseline over the concurrencies
    both measured: decode speed at the lowest, total throughput at each, how the throughput lead moves under
    load (``advantage_phrase``), and each run's own TPOT and TTFT growth and per-request and aggregate speed."""
    rows: list[list[str]] = []
    for p in comparison.pairs:
        a, b = comparison.run(p.a).name, comparison.run(p.b).name
        sa, sb = p.a_scaling, p.b_scaling
        rows.append(
            [
                str(p.input_len),
                b,
                a,
                f"{p.lowest_concurrency}→{p.highest_concurrency}"
                if p.highest_concurrency != p.lowest_concurrency
                else str(p.lowest_concurrency),
                said(
                    decode_versus(p.tpot_b_ms, p.tpot_a_ms),
                    find(comparison.verdicts, p.b, p.input_len, p.lowest_concurrency, "tpot_p50_ms"),
                    "-",
                ),
                ", ".join(
                    f"c{g.concurrency}: "
                    + said(
                        throughput_versus(g.b_tok_s, g.a_tok_s),
                        find(comparison.verdicts, p.b, p.input_len, g.concurrency, "total_token_throughput"),
                    )
                    for g in p.throughput_gaps
                )
                or "-",
                _lead_moves(comparison, p, a, b),
                f"{_growth(sb.tpot_growth)} | {_growth(sa.tpot_growth)}",
                f"{_growth(sb.ttft_growth)} | {_growth(sa.ttft_growth)}",
                f"{_tps(sb.per_request_output_tps)} | {_tps(sa.per_request_output_tps)}",
                f"{_tps(sb.aggregate_output_tps)} | {_tps(sa.aggregate_output_tps)}",
            ]
        )
    return rows


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    """The JSON form of a comparison (what ``compare --format json`` prints)."""
    return comparison.model_dump(mode="json")
