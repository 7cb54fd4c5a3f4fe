"""The compare CSV: ``#`` comment lines saying what was compared, then one row per run and cell.

Blank means "no value", never zero: throughput per accelerator is blank when the run has no accelerator
(a CPU instance, count 0) or an unknown count; accelerator utilisation and memory are blank when they were
not collected (``accelerator_telemetry`` says what they describe: gpu, neuron, cpu for the host's CPU and memory
on a CPU run, or metrics for the server's /metrics), energy and tokens per joule when no power source was
there; a note says why for each run; cost columns are blank when the run has no price (a local machine has no instance type).
Numbers are written unrounded (10 significant digits) so a spreadsheet can recompute every ratio.

When some of the runs compared are capacity searches, ``CAPACITY_COLUMNS`` follow (after every column above,
so a reader of the sweep columns is undisturbed): each row of a search carries its SLO, load, the highest
load meeting the SLO, the throughput and cost per million output and total tokens there, the planner's
prediction with its error, the knee, and whether the row's level met the SLO; they are blank on the rows of a
sweep. A comparison of sweeps only has exactly the columns above.

The last of ``COLUMNS`` (``VERDICT_COLUMNS``) carry, per table metric, the cell's 95% interval and, on a run's
rows, its ratio to the baseline's cell with the ratio's interval, the verdict (better, worse, no detectable
difference, unknown) and the repeats that would detect a 5% difference; then ``WORDS_COLUMNS``, each verdict
(the cost per 1M output tokens' too) in the words the findings, the headline and the tables use.
"""

from __future__ import annotations

import csv
import io
from typing import TextIO

from accelbench.report.compare_runs import TIER_LABELS, CapacityRun, CellResult, ComparedRun, Comparison
from accelbench.report.like_for_like import like_for_like_lines, row_difference
from accelbench.report.tables import METRICS as VERDICT_METRICS
from accelbench.report.verdicts import COST_METRIC, find

#: for each table metric (``report.verdicts``): the cell's 95% interval, then against the baseline's cell its
#: ratio, the ratio's interval, the verdict and the repeats that would detect 5% (blank on the baseline's rows)
VERDICT_COLUMNS: tuple[str, ...] = tuple(
    f"{m.key}_{what}"
    for m in VERDICT_METRICS
    for what in (
        "ci95_low",
        "ci95_high",
        "ratio",
        "ratio_ci95_low",
        "ratio_ci95_high",
        "verdict",
        "repeats_needed",
    )
)

#: per table metric, then the cost per 1M output tokens: the verdict against the baseline in the words every view
#: uses ("25% faster (22-28%)", "no detectable difference"; ``report/verdicts.py`` ``verdict_words``)
WORDS_COLUMNS: tuple[str, ...] = tuple(
    f"{key}_vs_baseline" for key in (*(m.key for m in VERDICT_METRICS), COST_METRIC)
)

# The exact columns of the compare CSV, in order.
COLUMNS: tuple[str, ...] = (
    "run_id",
    "model",
    "instance_type",
    "accelerator_count",
    "framework",
    "framework_version",
    "tp_degree",
    "quantization",
    "concurrency",
    "input_len",
    "output_len",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p95_ms",
    "tpot_p99_ms",
    "itl_p50_ms",
    "itl_p95_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "e2e_p95_ms",
    "e2e_p99_ms",
    "output_throughput_tok_s",
    "total_throughput_tok_s",
    "throughput_per_accelerator_tok_s",
    "requests_per_s",
    "successful",
    "failed",
    "success_rate",
    "accelerator_util_avg_pct",
    "accelerator_util_peak_pct",
    "accelerator_memory_avg_gib",
    "accelerator_memory_peak_gib",
    "hourly_usd",
    "cost_per_request_usd",
    "cost_per_1m_tokens_usd",
    "accelerator_telemetry",
    "energy_j",
    "tokens_per_joule",
    "joules_per_output_token",
    *VERDICT_COLUMNS,
    *WORDS_COLUMNS,
)

# Appended when the comparison holds a capacity search.
CAPACITY_COLUMNS: tuple[str, ...] = (
    "capacity_slo",
    "capacity_load",
    "capacity_max_load",
    "capacity_output_tok_s_at_max",
    "capacity_total_tok_s_at_max",
    "capacity_hourly_usd",
    "capacity_usd_per_1m_output_tokens",
    "capacity_usd_per_1m_total_tokens",
    "capacity_predicted_max_load",
    "capacity_prediction_error_pct",
    "capacity_knee",
    "capacity_level_met",
    "capacity_reason",
)


def _num(value: float | int | None) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return str(value)
    return format(value, ".10g")


def _text(value: object) -> str:
    return "" if value is None else str(value)


def comment_lines(cmp: Comparison) -> list[str]:
    """The ``#`` header: what was compared, how cells were aggregated and priced."""
    lines = [
        f"# accelbench {cmp.accelbench_version} compare, generated {cmp.generated_at.isoformat(timespec='seconds')}",
        f"# runs compared ({len(cmp.runs)}; the first is the baseline):",
    ]
    for r in cmp.runs:
        where = r.instance_type or (f"local machine: {r.machine}" if r.machine else "local machine")
        engine = " ".join(x for x in (r.engine, r.engine_version) if x) or "engine unknown"
        lines.append(f"#   {r.id} ({r.name}): model {r.model or 'unknown'}, {engine}, {where}")
    if len(cmp.runs) > 1:
        matched = ", ".join(f"{i}x{c}" for i, c in cmp.matched) or "none"
        lines.append(f"# cells matched on (input_len x concurrency): {matched}")
    lines.append(
        "# each row: one run and cell; repeats aggregated as the mean of their medians (p95/p99 alike)"
    )
    lines.append(
        f"# cost: {TIER_LABELS[cmp.tier]} prices; cost_per_request = hourly / requests_per_s / 3600; "
        "cost_per_1m_tokens = hourly / output tok/s / 3600 x 1e6 (per million output tokens)"
    )
    lines.append(
        "# blank = no value: no price (no instance type), no accelerators (per-accelerator throughput), "
        "not collected (utilisation, memory, energy: the notes say why)"
    )
    if cmp.capacity:
        lines.append(
            "# capacity_*: the run's capacity search (blank for sweeps): the highest load meeting the SLO, "
            "output / total tok/s and cost per 1M output / total tokens there (hourly / tok/s / 3600 x 1e6), the "
            "planner's prediction and its error (predicted / measured - 1, %), the knee; capacity_level_met: "
            "whether every probe of the row's concurrency met the SLO"
        )
        for c in cmp.capacity:
            what = (
                f"{c.slo_label}, attainment >= {c.slo.attainment:g}" if c.slo is not None else "no SLO (knee)"
            )
            lines.append(f"# capacity {c.run_id} ({c.name}): {what}, load {c.load}")
    lines.extend(f"# note: {n}" for n in cmp.notes)
    lines += [f"# {line}" for line in like_for_like_lines(cmp)]
    return lines


def _level_met(c: CapacityRun, cell: CellResult) -> str:
    """Whether every probe stored in this cell met the SLO; blank for a rate search (its cell mixes rates)."""
    if c.slo is None or c.load != "concurrency":
        return ""
    met = [p.met for p in c.probes if p.level == cell.concurrency and p.met is not None]
    return "" if not met else str(all(met)).lower()


def capacity_cells(c: CapacityRun | None, cell: CellResult) -> list[str]:
    """The capacity columns of one row (blank for a run that is no capacity search)."""
    if c is None:
        return [""] * len(CAPACITY_COLUMNS)
    return [
        _text(c.slo_label),
        c.load,
        _num(c.max_load),
        _num(c.output_tokens_per_s_at_max),
        _num(c.total_tokens_per_s_at_max),
        _num(c.hourly_usd),
        _num(c.usd_per_million_output_tokens),
        _num(c.usd_per_million_total_tokens),
        _num(c.predicted_max_load),
        _num(c.prediction_error_pct),
        _num(c.knee),
        _level_met(c, cell),
        _text(c.reason),
    ]


def row_for(run: ComparedRun, cell: CellResult) -> list[str]:
    """One CSV row (strings, matching ``COLUMNS``)."""
    return [
        run.id,
        _text(run.model),
        _text(run.instance_type),
        _num(run.accelerator_count),
        _text(run.engine),
        _text(run.engine_version),
        _num(run.tp_degree),
        _text(run.quantization),
        _num(cell.concurrency),
        _num(cell.input_len),
        _num(cell.output_len),
        _num(cell.ttft_p50_ms),
        _num(cell.ttft_p95_ms),
        _num(cell.ttft_p99_ms),
        _num(cell.tpot_p50_ms),
        _num(cell.tpot_p95_ms),
        _num(cell.tpot_p99_ms),
        _num(cell.itl_p50_ms),
        _num(cell.itl_p95_ms),
        _num(cell.itl_p99_ms),
        _num(cell.e2e_p50_ms),
        _num(cell.e2e_p95_ms),
        _num(cell.e2e_p99_ms),
        _num(cell.output_throughput),
        _num(cell.total_throughput),
        _num(cell.throughput_per_accelerator),
        _num(cell.request_throughput),
        _num(cell.successful),
        _num(cell.failed),
        _num(cell.success_rate),
        _num(cell.accelerator_util_avg_pct),
        _num(cell.accelerator_util_peak_pct),
        _num(cell.accelerator_memory_avg_gib),
        _num(cell.accelerator_memory_peak_gib),
        _num(cell.hourly_usd),
        _num(cell.cost_per_request_usd),
        _num(cell.cost_per_1m_tokens_usd),
        cell.accelerator_telemetry or "",
        _num(cell.energy_j),
        _num(cell.tokens_per_joule),
        _num(cell.joules_per_output_token),
    ]


def verdict_cells(cmp: Comparison, cell: CellResult) -> list[str]:
    """The ``VERDICT_COLUMNS`` and ``WORDS_COLUMNS`` of one row: the cell's intervals and its verdicts against
    the baseline."""
    out: list[str] = []
    for m in VERDICT_METRICS:
        ci = cell.ci95.get(m.key)
        v = find(cmp.verdicts, cell.run_id, cell.input_len, cell.concurrency, m.key)
        rci = v.ratio_ci95 if v is not None else None
        out += [
            _num(ci[0] if ci else None),
            _num(ci[1] if ci else None),
            _num(v.ratio if v is not None else None),
            _num(rci[0] if rci else None),
            _num(rci[1] if rci else None),
            v.verdict if v is not None else "",
            _num(v.repeats_needed if v is not None else None),
        ]
    keys = (*(m.key for m in VERDICT_METRICS), COST_METRIC)
    return out + [
        v.words if (v := find(cmp.verdicts, cell.run_id, cell.input_len, cell.concurrency, k)) else ""
        for k in keys
    ]


def rows(cmp: Comparison) -> list[list[str]]:
    """Data rows: runs in the order given, each run's cells by input length then concurrency."""
    out: list[list[str]] = []
    capacity = {c.run_id: c for c in cmp.capacity}
    for run in cmp.runs:
        for cell in sorted(cmp.cells_of(run.id), key=lambda c: (c.input_len, c.concurrency)):
            row = row_for(run, cell) + verdict_cells(cmp, cell)
            if capacity:
                row += capacity_cells(capacity.get(run.id), cell)
            if cmp.mismatches:  # every row says how its run differs from the baseline
                row.append(row_difference(cmp, run.id))
            out.append(row)
    return out


def columns(cmp: Comparison) -> tuple[str, ...]:
    """The header: ``COLUMNS``, and ``CAPACITY_COLUMNS`` after them when a run is a capacity search."""
    cols = COLUMNS + CAPACITY_COLUMNS if cmp.capacity else COLUMNS
    return (*cols, "like_for_like") if cmp.mismatches else cols


def write_compare_csv(cmp: Comparison, out: TextIO | None = None) -> str:
    """The compare CSV as text (also written to ``out`` when given)."""
    buf = io.StringIO()
    for line in comment_lines(cmp):
        buf.write(line + "\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns(cmp))
    writer.writerows(rows(cmp))
    text = buf.getvalue()
    if out is not None:
        out.write(text)
    return text


def read_compare_csv(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """Parse a compare CSV back into (comment lines, rows as dicts): for tests and for tools that re-read."""
    comments = [line for line in text.splitlines() if line.startswith("#")]
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return comments, list(csv.DictReader(io.StringIO(body)))
