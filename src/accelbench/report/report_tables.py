"""The report's plain tables, the same in the HTML and the Markdown: what was compared, cost per cell,
predicted vs measured, and which cell windows the server telemetry chart marks."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.report.compare_runs import (
    TIER_LABELS,
    ComparedRun,
    fmt_num,
    fmt_usd,
)
from accelbench.report.document import TELEMETRY_GAUGES, ReportData
from accelbench.report.timeline import CellWindow


def telemetry_cells(data: ReportData) -> list[CellWindow]:
    """The cell windows the server telemetry chart marks: those of its one run when one run has gauges (each
    run has its own clock, so with several none; each run's device chart marks its own)."""
    series = [s for s in data.telemetry if any(s.has(k) for k, *_ in TELEMETRY_GAUGES)]
    if len(series) != 1:
        return []
    timeline = next((t for t in data.devices if t.run_id == series[0].run_id), None)
    return list(timeline.cells) if timeline is not None else []


def _accelerators(r: ComparedRun) -> str | None:
    if r.accelerator_count:
        return f"{r.accelerator_count} x {r.accelerator_name or r.accelerator_type or 'accelerator'}"
    if r.accelerator_count == 0:
        return "none (CPU)"
    return None


def compared_rows(data: ReportData) -> list[tuple[str, list[str]]]:
    """ "What was compared": one row per attribute, one column per run."""
    runs = data.comparison.runs

    def row(label: str, values: Sequence[str | None]) -> tuple[str, list[str]]:
        return label, [v if v not in (None, "") else "—" for v in values]

    return [
        row("Run id", [r.id for r in runs]),
        row("Model", [r.model for r in runs]),
        row("Engine", [" ".join(x for x in (r.engine, r.engine_version) if x) or None for r in runs]),
        row("Instance type", [r.instance_type or "none (local machine)" for r in runs]),
        row("Machine", [r.machine for r in runs]),
        row("Accelerators", [_accelerators(r) for r in runs]),
        row("CPU flags", [", ".join(r.cpu_flags) or None for r in runs]),
        row("CPU matrix path", [r.cpu_matrix_engine for r in runs]),
        row("ISA trace", [r.isa_trace for r in runs]),
        row("TP / quantization", [f"TP {r.tp_degree or 1}, {r.quantization or 'none'}" for r in runs]),
        row("Target", [r.target for r in runs]),
        row("Created", [r.created_at.strftime("%Y-%m-%d %H:%M UTC") for r in runs]),
        row(
            "Hourly price",
            [
                f"{fmt_usd(r.price.usd_per_hour)}/h ({TIER_LABELS[r.price.tier]}, {r.price.source})"
                if r.price
                else "none (no instance type)"
                if not r.instance_type
                else "unknown"
                for r in runs
            ],
        ),
    ]


def cost_rows(data: ReportData) -> list[list[str]]:
    """Cost per cell for priced runs: hourly, $/request, $/1M output tokens, $/1M total tokens."""
    cmp = data.comparison
    rows = []
    for r in cmp.runs:
        for c in sorted(cmp.cells_of(r.id), key=lambda c: (c.input_len, c.concurrency)):
            if c.hourly_usd is None:
                continue
            rows.append(
                [
                    r.name,
                    str(c.input_len),
                    str(c.concurrency),
                    fmt_usd(c.hourly_usd),
                    fmt_usd(c.cost_per_request_usd),
                    fmt_usd(c.cost_per_1m_tokens_usd),
                    fmt_usd(c.cost_per_1m_total_tokens_usd),
                ]
            )
    return rows


COST_COLUMNS = ("run", "input", "conc", "$/hour", "$/request", "$/1M output tok", "$/1M total tok")


PREDICTION_COLUMNS = ("run", "input", "conc", "metric", "predicted", "measured", "measured vs predicted")


def prediction_rows(data: ReportData) -> list[list[str]]:
    return [
        [
            data.run_names[p.run_id],
            str(p.input_len),
            str(p.concurrency),
            p.metric,
            fmt_num(p.predicted),
            fmt_num(p.measured),
            f"{p.error_pct:+.0f}%",
        ]
        for p in data.predictions
    ]
