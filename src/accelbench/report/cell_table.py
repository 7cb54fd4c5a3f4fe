"""The per-cell table every human view shows (``cell_table``: latencies at the chosen percentiles, throughput,
requests, with an SLO its attainment, goodput and verdict, and the top failure reason) and the sentence under it
(``slo_note``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from accelbench.domain.results import ResultInfo
from accelbench.report.cell_slo import CellSLO, Key, SLOChoice
from accelbench.report.failures import CellFailures, cell_failures
from accelbench.report.formatting import MISSING, fmt_num
from accelbench.report.tables import CellAggregate, percentile_columns, table_headers, table_rows

if TYPE_CHECKING:
    pass


def cell_table(
    cells: Sequence[CellAggregate],
    results: Sequence[ResultInfo],
    percentiles: Sequence[int],
    *,
    slo: Mapping[Key, CellSLO] | None = None,
    with_range: bool | None = None,
    with_run: bool = False,
    run_names: Mapping[str, str] | None = None,
) -> tuple[list[str], list[list[str]]]:
    """The per-cell table every human view shows: input, concurrency, each latency at the chosen percentiles,
    output and total tok/s, completed and failed requests, then (with an SLO) attainment, goodput and whether
    the SLO is met, then the most common failure reason. Headers and display strings."""
    cols = percentile_columns(percentiles)
    headers = table_headers(with_run=with_run, metrics=cols)
    names = dict(run_names or {})
    rows = table_rows(cells, with_range=with_range, with_run=with_run, run_names=names, metrics=cols)
    # min-max over repeats on the medians and throughputs only: a tail's spread over repeats is its own noise
    bare = table_rows(cells, with_range=False, with_run=with_run, run_names=names, metrics=cols)
    first = len(headers) - len(cols) - 2
    for i, m in enumerate(cols):
        if "_p" in m.key and not m.key.endswith("_p50_ms"):
            for row, plain in zip(rows, bare, strict=True):
                row[first + i] = plain[first + i]
    if slo is not None:
        headers += ["SLO attainment", "SLO met", "Goodput tok/s", "Goodput req/s"]
    headers.append("Top failure reason")
    failures: dict[Key, CellFailures] = {}
    by_run: dict[str, list[ResultInfo]] = defaultdict(list)
    for r in results:
        by_run[r.run_id].append(r)
    for run_id, rs in by_run.items():
        for f in cell_failures(rs):
            failures[(run_id, f.input_len, f.concurrency)] = f
    for c, row in zip(cells, rows, strict=True):
        key = (c.run_id, c.input_len, c.concurrency)
        if slo is not None:
            e = slo.get(key)
            row += (
                [
                    e.attainment_text(),
                    e.met_text(),
                    (">=" if e.bound else "") + fmt_num(e.goodput_tps, 1),
                    (">=" if e.bound else "") + fmt_num(e.goodput_rps, 2),
                ]
                if e is not None
                else [MISSING] * 4
            )
        top = failures.get(key)
        row.append(f"({top.reason_count}x) {top.reason}" if top is not None and top.reason else MISSING)
    return headers, rows


def slo_note(choice: SLOChoice | None, evaluation: Mapping[Key, CellSLO] | None) -> str | None:
    """The sentence under a cell table with SLO columns: the SLO, where it came from, what the figures rest on."""
    if choice is None or not evaluation:
        return None
    sources = {e.source for e in evaluation.values()}
    rest = (
        "from each request's record"
        if sources == {"records"}
        else "from the cells' stored percentiles: lower bounds (>=), no per-request records were stored"
        if sources == {"percentiles"}
        else "from each request's record where stored, else from the stored percentiles (>=: a lower bound)"
    )
    return (
        f"SLO: {choice.label()}. Attainment is the share of requests (failed ones included) meeting every target, "
        f"goodput the requests/s and output tok/s of those requests; {rest}."
    )
