"""Aggregation of stored results into the per-cell table every report uses.

A sweep stores one result per (input length, concurrency, repeat). People decide on the *cell*: for each
(input length, concurrency) this module takes each repeat's median (TTFT p50, TPOT p50, ITL p50, E2E p50)
and throughput, and reports their **mean and min-max over repeats**, plus the request counts summed over
repeats. The CLI table, ``results.md``, ``results.csv``, the plots, ``compare`` and the HTML report all read
the same ``CellAggregate`` objects, so a number never differs between two outputs.

Rules, stated once:
- Metrics are aggregated over the repeats whose cell status is ``completed``. A cell with no completed
  repeat falls back to its ``partial`` repeats (an interrupted run still shows what it measured) and is
  flagged ``partial``. ``failed`` repeats never contribute metrics: they have no successful request.
- A repeat whose value is missing (e.g. TPOT when every request produced one token) is left out of that
  metric only; ``MetricAggregate.n`` says how many repeats a figure rests on.
- ``completed`` / ``failed`` / ``num_prompts`` sum over every stored repeat of the cell, partial and failed
  ones included, so no failure is hidden by the fallback above.
- Results of several runs are never mixed: cells are keyed by (run id, input length, concurrency).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import Field

from accelbench.bench.intervals import cell_interval, half_width_pct, is_wide
from accelbench.domain.results import ResultInfo
from accelbench.domain.run import CellStatus
from accelbench.domain.strict import StrictModel
from accelbench.report.formatting import MISSING, fmt_num
from accelbench.report.percentiles import STORED, value


@dataclass(frozen=True)
class MetricColumn:
    """One aggregated metric: the ``ResultInfo`` attribute it reads and how it is shown."""

    key: str
    header: str
    digits: int
    higher_is_better: bool


#: the latency metrics a per-cell table shows, as (key prefix, header name, digits)
LATENCIES: tuple[tuple[str, str, int], ...] = (
    ("ttft", "TTFT", 1),
    ("tpot", "TPOT", 2),
    ("itl", "ITL", 2),
    ("e2el", "E2E", 1),
)


def _latencies_at(p: int) -> tuple[MetricColumn, ...]:
    """Every latency metric at one stored percentile, in ms (lower is better)."""
    return tuple(
        MetricColumn(f"{key}_p{p}_ms", f"{name} p{p} (ms)", digits, False) for key, name, digits in LATENCIES
    )


# The table's metric columns, in order. ``key`` is both the ResultInfo attribute and the CellAggregate field.
METRICS: tuple[MetricColumn, ...] = (
    *_latencies_at(50),
    MetricColumn("output_throughput", "Output tok/s", 1, True),
    MetricColumn("total_token_throughput", "Total tok/s", 1, True),
)
# Also aggregated (JSON, compare), not shown in the default table: the rates, then the latencies' other percentiles.
EXTRA_METRICS: tuple[MetricColumn, ...] = (
    MetricColumn("request_throughput", "Req/s", 3, True),
    MetricColumn("request_goodput", "Goodput req/s", 3, True),
    *(m for p in STORED if p != 50 for m in _latencies_at(p)),
)
ALL_METRICS: tuple[MetricColumn, ...] = METRICS + EXTRA_METRICS


class MetricAggregate(StrictModel):
    """One metric of one cell over its repeats."""

    mean: float = Field(description="Mean over repeats of the per-repeat value.")
    min: float = Field(description="Smallest per-repeat value.")
    max: float = Field(description="Largest per-repeat value.")
    n: int = Field(ge=1, description="Repeats this figure rests on.")
    values: list[float] = Field(description="The per-repeat values, in repeat order.")
    ci95: list[float] | None = Field(
        default=None,
        description="95% interval of the mean, [low, high]: a bootstrap over repeats, then requests within them "
        "(``bench.intervals``); None when no repeat stored one.",
    )
    ci95_basis: str | None = Field(
        default=None,
        description="What the interval rests on: 'repeats and requests', 'requests only' (one repeat) or "
        "'repeats only' (some repeat stored no request-level interval).",
    )
    repeat_ci95: list[list[float] | None] | None = Field(
        default=None,
        description="Each repeat's own request-level interval, in the order of ``values`` (what comparisons "
        "resample); None when no repeat stored one.",
    )

    @property
    def spread_pct(self) -> float | None:
        """(max - min) / mean in percent: how much the repeats disagree."""
        if self.n < 2 or self.mean == 0:
            return None
        return 100.0 * (self.max - self.min) / abs(self.mean)

    @property
    def ci95_pct(self) -> float | None:
        """The interval's half-width as a percentage of the mean (the ``+-3%`` shown)."""
        return half_width_pct(self.mean, self.ci95)

    @property
    def wide(self) -> bool:
        """True when the interval is wider than +-10% of the mean."""
        return is_wide(self.mean, self.ci95)

    @classmethod
    def of(
        cls, values: Sequence[float], cis: Sequence[Sequence[float] | None] | None = None
    ) -> MetricAggregate | None:
        """The aggregate of per-repeat values; ``cis`` (one request-level interval or None per value) give it
        a 95% interval."""
        pairs = [
            (float(v), cis[i] if cis is not None else None)
            for i, v in enumerate(values)
            if v is not None and math.isfinite(float(v))
        ]
        if not pairs:
            return None
        vals = [v for v, _ in pairs]
        agg = cls(mean=sum(vals) / len(vals), min=min(vals), max=max(vals), n=len(vals), values=vals)
        if cis is not None:
            within = [(float(c[0]), float(c[1])) if c is not None and len(c) == 2 else None for _, c in pairs]
            ci, basis = cell_interval(vals, within)
            if ci is not None:
                agg.ci95, agg.ci95_basis = [ci[0], ci[1]], basis
                agg.repeat_ci95 = [list(w) if w is not None else None for w in within]
        return agg


class CellAggregate(StrictModel):
    """One (run, input length, concurrency) cell, aggregated over its repeats."""

    run_id: str = Field(description="The run the cell belongs to.")
    input_len: int = Field(description="Input tokens per request.")
    concurrency: int = Field(description="Requests in flight (max_concurrency of each repeat).")
    output_len: int | None = Field(default=None, description="max_tokens per request.")
    repeats: int = Field(description="Stored repeats of the cell, whatever their status.")
    repeats_used: int = Field(description="Repeats the metrics are aggregated over.")
    status: CellStatus = Field(
        description="completed when the metrics rest on completed repeats; partial when only on "
        "interrupted ones; failed when no repeat produced a result."
    )
    partial_repeats: int = Field(default=0, description="Repeats kept from an interruption.")
    failed_repeats: int = Field(default=0, description="Repeats in which every request failed.")
    num_prompts: int = Field(default=0, description="Requests planned, summed over repeats.")
    completed: int = Field(default=0, description="Successful requests, summed over repeats.")
    failed: int = Field(default=0, description="Failed requests, summed over repeats.")
    ttft_p50_ms: MetricAggregate | None = None
    tpot_p50_ms: MetricAggregate | None = None
    itl_p50_ms: MetricAggregate | None = None
    e2el_p50_ms: MetricAggregate | None = None
    output_throughput: MetricAggregate | None = None
    total_token_throughput: MetricAggregate | None = None
    request_throughput: MetricAggregate | None = None
    request_goodput: MetricAggregate | None = None
    ttft_p90_ms: MetricAggregate | None = None
    tpot_p90_ms: MetricAggregate | None = None
    itl_p90_ms: MetricAggregate | None = None
    e2el_p90_ms: MetricAggregate | None = None
    ttft_p95_ms: MetricAggregate | None = None
    tpot_p95_ms: MetricAggregate | None = None
    itl_p95_ms: MetricAggregate | None = None
    e2el_p95_ms: MetricAggregate | None = None
    ttft_p99_ms: MetricAggregate | None = None
    tpot_p99_ms: MetricAggregate | None = None
    itl_p99_ms: MetricAggregate | None = None
    e2el_p99_ms: MetricAggregate | None = None

    def metric(self, key: str) -> MetricAggregate | None:
        """The aggregate of a metric by its key (one of ``ALL_METRICS``)."""
        if key not in _METRIC_KEYS:
            raise KeyError(f"unknown metric {key!r}; known: {', '.join(sorted(_METRIC_KEYS))}")
        value = getattr(self, key)
        return value if isinstance(value, MetricAggregate) else None

    def mean(self, key: str) -> float | None:
        agg = self.metric(key)
        return agg.mean if agg else None


_METRIC_KEYS = {m.key for m in ALL_METRICS}
_BY_KEY = {m.key: m for m in ALL_METRICS}

#: the throughput columns that follow the latencies in a per-cell table
THROUGHPUTS: tuple[MetricColumn, ...] = tuple(
    m for m in METRICS if m.key in ("output_throughput", "total_token_throughput")
)


def latency_columns(
    percentiles: Sequence[int], metrics: Sequence[str] = ("ttft", "tpot", "itl", "e2el")
) -> list[MetricColumn]:
    """The columns of ``metrics`` at each chosen percentile (``report/percentiles.py`` chooses them), metric by
    metric: TTFT p50, TTFT p90, TTFT p99, TPOT p50, ..."""
    out = []
    for key, _name, _digits in LATENCIES:
        if key not in metrics:
            continue
        for p in percentiles:
            if p not in STORED:
                raise KeyError(f"percentile {p} is not stored; stored: {STORED}")
            out.append(_BY_KEY[f"{key}_p{p}_ms"])
    return out


def percentile_columns(percentiles: Sequence[int]) -> list[MetricColumn]:
    """A per-cell table's metric columns: every latency at the chosen percentiles, then output and total tok/s."""
    return [*latency_columns(percentiles), *THROUGHPUTS]


def result_value(r: ResultInfo, key: str) -> float | None:
    """One metric of one stored (cell, repeat): a ``ResultInfo`` column, else (p90) its summary's statistics."""
    if key in ResultInfo.model_fields:
        v = getattr(r, key)
        return None if v is None else float(v)
    metric, _, rest = key.partition("_p")
    return value((r.summary or {}).get(f"{metric}_ms"), int(rest.removesuffix("_ms")))


def result_ci95(r: ResultInfo, key: str) -> list[float] | None:
    """The request-level 95% interval one stored (cell, repeat) keeps for a metric, from its summary (a
    throughput's ``<key>_ci95``, a latency's ``<metric>_ms.p<N>_ci95``); None when it has none."""
    summary = r.summary or {}
    if key in _THROUGHPUT_KEYS:
        ci = summary.get(f"{key}_ci95")
    else:
        metric, _, rest = key.partition("_p")
        stats = summary.get(f"{metric}_ms")
        ci = stats.get(f"p{rest.removesuffix('_ms')}_ci95") if isinstance(stats, dict) else None
    return [float(ci[0]), float(ci[1])] if isinstance(ci, list) and len(ci) == 2 else None


_THROUGHPUT_KEYS = ("request_throughput", "output_throughput", "total_token_throughput", "request_goodput")


def _cell_metric(used: Sequence[ResultInfo], key: str) -> MetricAggregate | None:
    kept = [(v, r) for r in used if (v := result_value(r, key)) is not None]
    return MetricAggregate.of([v for v, _ in kept], [result_ci95(r, key) for _, r in kept])


def aggregate_results(results: Iterable[ResultInfo]) -> list[CellAggregate]:
    """Aggregate stored (cell, repeat) results into one ``CellAggregate`` per (run, input length, concurrency).

    Sorted by run id (in the order runs first appear in ``results``), then input length, then concurrency.
    See the module docstring for which repeats count.
    """
    groups: dict[tuple[str, int, int], list[ResultInfo]] = defaultdict(list)
    run_order: dict[str, int] = {}
    for r in results:
        run_order.setdefault(r.run_id, len(run_order))
        groups[(r.run_id, r.input_len, r.concurrency)].append(r)
    cells: list[CellAggregate] = []
    for (run_id, input_len, concurrency), reps in sorted(
        groups.items(), key=lambda kv: (run_order[kv[0][0]], kv[0][1], kv[0][2])
    ):
        reps = sorted(reps, key=lambda r: r.repeat)
        done = [r for r in reps if r.status == CellStatus.completed]
        partial = [r for r in reps if r.status == CellStatus.partial]
        used = done or partial
        if done:
            status = CellStatus.completed
        elif partial:
            status = CellStatus.partial
        else:
            status = CellStatus.failed
        metrics = {m.key: _cell_metric(used, m.key) for m in ALL_METRICS}
        output_lens = {r.output_len for r in reps if r.output_len is not None}
        cells.append(
            CellAggregate(
                run_id=run_id,
                input_len=input_len,
                concurrency=concurrency,
                output_len=output_lens.pop() if len(output_lens) == 1 else None,
                repeats=len(reps),
                repeats_used=len(used),
                status=status,
                partial_repeats=len(partial),
                failed_repeats=sum(1 for r in reps if r.status == CellStatus.failed),
                num_prompts=sum(r.num_prompts for r in reps),
                completed=sum(r.completed for r in reps),
                failed=sum(r.failed for r in reps),
                **metrics,
            )
        )
    return cells


# ------------------------------------------------------------------------------------ presentation
def format_value(value: float | None, digits: int) -> str:
    return fmt_num(value, digits)


def value_with_ci(value: float, ci: Sequence[float] | None, digits: int = 2) -> str:
    """A figure with its 95% interval as it follows it (``"20.10 +-3%"``, ``"+-0.4%"`` under 1%); the figure alone
    without an interval."""
    text = fmt_num(value, digits)
    pct = half_width_pct(value, ci)
    if pct is None:
        return text
    return f"{text} +-{pct:.1f}%" if pct < 1 else f"{text} +-{pct:.0f}%"


def format_ci(agg: MetricAggregate | None) -> str:
    """The interval as it follows a figure: ``"+-3%"``, ``"+-0.4%"``, ``"+-12% (wide)"`` past +-10%; empty
    without one."""
    pct = agg.ci95_pct if agg is not None else None
    if pct is None:
        return ""
    text = f"+-{pct:.1f}%" if pct < 1 else f"+-{pct:.0f}%"
    return f"{text} (wide)" if agg is not None and agg.wide else text


def format_metric(agg: MetricAggregate | None, digits: int, *, with_range: bool, with_ci: bool = True) -> str:
    """``"27.31"``; with its 95% interval (``with_ci``, when it has one) ``"27.31 +-3%"``; with ``with_range``
    and more than one repeat, ``"27.31 +-3% (26.90-27.80)"``."""
    if agg is None:
        return MISSING
    text = format_value(agg.mean, digits)
    if with_ci and (ci := format_ci(agg)):
        text += f" {ci}"
    if with_range and agg.n > 1:
        text += f" ({format_value(agg.min, digits)}-{format_value(agg.max, digits)})"
    return text


def has_repeats(cells: Sequence[CellAggregate]) -> bool:
    """True when some cell's figures rest on more than one repeat (then tables show min-max)."""
    return any(c.repeats_used > 1 for c in cells)


def table_headers(*, with_run: bool = False, metrics: Sequence[MetricColumn] = METRICS) -> list[str]:
    head = ["Run"] if with_run else []
    return [*head, "Input", "Conc.", *(m.header for m in metrics), "Completed", "Failed"]


def table_rows(
    cells: Sequence[CellAggregate],
    *,
    with_range: bool | None = None,
    with_run: bool = False,
    run_names: dict[str, str] | None = None,
    metrics: Sequence[MetricColumn] = METRICS,
) -> list[list[str]]:
    """Display rows matching ``table_headers``; a partial cell is marked ``(partial)`` in its Failed column.

    ``with_range`` defaults to ``has_repeats(cells)``; ``run_names`` maps run ids to labels for the Run column.
    """
    rng = has_repeats(cells) if with_range is None else with_range
    rows = []
    for c in cells:
        row = [run_names.get(c.run_id, c.run_id) if run_names else c.run_id] if with_run else []
        row += [str(c.input_len), str(c.concurrency)]
        row += [format_metric(c.metric(m.key), m.digits, with_range=rng) for m in metrics]
        failed = str(c.failed)
        if c.status != CellStatus.completed:
            failed += f" ({c.status.value})"
        rows.append([*row, str(c.completed), failed])
    return rows


def csv_header(*, with_range: bool, metrics: Sequence[MetricColumn] = METRICS) -> list[str]:
    """Machine-readable column names: ``<metric>`` is the mean; ``<metric>_min``/``_max`` with ranges; then
    ``<metric>_ci95_low``/``_high``, its 95% interval (blank without one)."""
    cols = ["run_id", "input_len", "concurrency", "output_len", "repeats", "status"]
    for m in metrics:
        cols.append(m.key)
        if with_range:
            cols += [f"{m.key}_min", f"{m.key}_max"]
        cols += [f"{m.key}_ci95_low", f"{m.key}_ci95_high"]
    return [*cols, "completed", "failed"]


def csv_rows(
    cells: Sequence[CellAggregate], *, with_range: bool, metrics: Sequence[MetricColumn] = METRICS
) -> list[list[object]]:
    """Rows matching ``csv_header``: numbers unformatted (full precision), empty where there is no value."""
    rows: list[list[object]] = []
    for c in cells:
        row: list[object] = [
            c.run_id,
            c.input_len,
            c.concurrency,
            c.output_len,
            c.repeats_used,
            c.status.value,
        ]
        for m in metrics:
            agg = c.metric(m.key)
            row.append(agg.mean if agg else "")
            if with_range:
                row += [agg.min if agg else "", agg.max if agg else ""]
            ci = agg.ci95 if agg else None
            row += [ci[0], ci[1]] if ci else ["", ""]
        rows.append([*row, c.completed, c.failed])
    return rows


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; numeric columns are right-aligned."""

    def numeric(col: int) -> bool:
        vals = [r[col] for r in rows if r[col] not in ("", "-")]
        return bool(vals) and all(v[:1].isdigit() or v[:1] == "-" for v in vals)

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---:" if numeric(i) else "---" for i in range(len(headers))) + "|")
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
