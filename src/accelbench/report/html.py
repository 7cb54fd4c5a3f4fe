"""The offline HTML report: one self-contained file with interactive plotly charts.

Why self-contained: a report is mailed, attached to tickets and opened on machines without network. So
plotly's JavaScript is embedded inline once, styles are inline, fonts are the system's, and there is no
image, font, script or stylesheet by URL: opening the file makes no network request at all (checked in a
real headless Chromium by the e2e tests).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from plotly.subplots import make_subplots

from accelbench.report.compare import (
    SIDE_BY_SIDE_COLUMNS,
    TIER_LABELS,
    ComparedRun,
    fmt_num,
    fmt_usd,
    side_by_side_rows,
)
from accelbench.report.document import TELEMETRY_GAUGES, CellLatencies, ReportData
from accelbench.report.plots import build_series

# Charts of a metric against concurrency: (div id, title, CellAggregate metric, y-axis title).
CONCURRENCY_CHARTS: tuple[tuple[str, str, str, str], ...] = (
    ("chart-tpot", "Median TPOT vs concurrency", "tpot_p50_ms", "TPOT p50 (ms)"),
    (
        "chart-throughput",
        "Total throughput vs concurrency",
        "total_token_throughput",
        "total tok/s (in + out)",
    ),
    ("chart-ttft", "Median TTFT vs concurrency", "ttft_p50_ms", "TTFT p50 (ms)"),
)
PLOT_CONFIG: dict[str, Any] = {"displaylogo": False, "responsive": True}
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
_DASHES = ("solid", "dash", "dot", "dashdot")


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js, minified, to embed inline (about 4.8 MB)."""
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def _color(run_index: int) -> str:
    return _PALETTE[run_index % len(_PALETTE)]


def _layout(fig: go.Figure, title: str, **kw: Any) -> go.Figure:
    # The page shows the chart's title as a heading; the figure keeps it only as metadata (hover, export).
    fig.update_layout(
        meta={"title": title},
        template="plotly_white",
        font={"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 13},
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
        legend={"orientation": "h", "y": -0.2},
        hovermode="closest",
        **kw,
    )
    return fig


def concurrency_figure(data: ReportData, metric: str, title: str, ytitle: str) -> go.Figure:
    """One line per (run, input length): the mean of repeat medians, min-max over repeats as error bars."""
    runs = [r.id for r in data.comparison.runs]
    series = build_series(data.aggregates, metric, data.run_names)
    input_lens = sorted({s.input_len for s in series})
    fig = go.Figure()
    for s in series:
        ri, li = runs.index(s.run_id), input_lens.index(s.input_len)
        has_range = any(lo != hi for lo, hi in zip(s.ymin, s.ymax, strict=True))
        fig.add_trace(
            go.Scatter(
                x=s.x,
                y=s.y,
                name=s.label,
                mode="lines+markers",
                line={"color": _color(ri), "dash": _DASHES[li % len(_DASHES)]},
                error_y=(
                    {
                        "type": "data",
                        "symmetric": False,
                        "array": [hi - y for y, hi in zip(s.y, s.ymax, strict=True)],
                        "arrayminus": [y - lo for y, lo in zip(s.y, s.ymin, strict=True)],
                    }
                    if has_range
                    else None
                ),
                hovertemplate="concurrency %{x}<br>%{y:,.2f}<extra>%{fullData.name}</extra>",
            )
        )
    xs = sorted({x for s in series for x in s.x})
    xaxis: dict[str, Any] = {"title": "concurrency (requests in flight)", "tickvals": xs}
    if xs and xs[-1] / max(xs[0], 1) >= 8:
        xaxis["type"] = "log"
    return _layout(fig, title, xaxis=xaxis, yaxis={"title": ytitle, "rangemode": "tozero"})


def _cdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    xs = sorted(values)
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def cdf_figure(data: ReportData) -> go.Figure | None:
    """Per-request TTFT, TPOT and E2E latency CDFs, one line per run and cell; None without records."""
    cells: list[CellLatencies] = [c for c in data.latencies if c.e2e_ms]
    if not cells:
        return None
    runs = [r.id for r in data.comparison.runs]
    multi = len(runs) > 1
    fig = make_subplots(rows=1, cols=3, subplot_titles=("TTFT (ms)", "TPOT (ms)", "E2E latency (ms)"))
    keys = sorted({(c.input_len, c.concurrency) for c in cells})
    for c in cells:
        ri, ki = runs.index(c.run_id), keys.index((c.input_len, c.concurrency))
        name = f"input {c.input_len} · c={c.concurrency}"
        if multi:
            name = f"{data.run_names[c.run_id]} · {name}"
        group = f"{c.run_id}-{c.input_len}-{c.concurrency}"
        for col, values in enumerate((c.ttft_ms, c.tpot_ms, c.e2e_ms), start=1):
            if not values:
                continue
            x, y = _cdf(values)
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    name=name,
                    legendgroup=group,
                    showlegend=col == 1,
                    mode="lines",
                    line={
                        "color": _color(ri if multi else ki),
                        "dash": _DASHES[ki % len(_DASHES)] if multi else "solid",
                    },
                    hovertemplate="%{x:,.1f} ms<br>%{y:.0%} of requests<extra>%{fullData.name}</extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_yaxes(title_text="fraction of requests", range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(range=[0, 1.02])
    fig = _layout(fig, "Per-request latency CDFs", height=430)
    fig.update_layout(margin={"t": 40})
    return fig


def telemetry_figure(data: ReportData) -> go.Figure | None:
    """Running and waiting requests and KV-cache usage over time, one line per run; None when no run has
    any of them (llama.cpp serves no /metrics)."""
    series = [s for s in data.telemetry if any(s.has(k) for k, *_ in TELEMETRY_GAUGES)]
    if not series:
        return None
    runs = [r.id for r in data.comparison.runs]
    fig = make_subplots(
        rows=len(TELEMETRY_GAUGES),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[t for _, t, *_ in TELEMETRY_GAUGES],
    )
    for s in series:
        ri = runs.index(s.run_id)
        for row, (key, _title, *_rest) in enumerate(TELEMETRY_GAUGES, start=1):
            if not s.has(key):
                continue
            fig.add_trace(
                go.Scatter(
                    x=s.t_s,
                    y=s.values[key],
                    name=data.run_names[s.run_id],
                    legendgroup=s.run_id,
                    showlegend=row == 1 or not s.has(TELEMETRY_GAUGES[0][0]),
                    mode="lines",
                    line={"color": _color(ri), "shape": "hv"},
                    hovertemplate="t=%{x:.0f} s<br>%{y:,.1f}<extra>%{fullData.name}</extra>",
                ),
                row=row,
                col=1,
            )
    fig.update_xaxes(title_text="seconds since the run's first scrape", row=len(TELEMETRY_GAUGES), col=1)
    fig.update_yaxes(rangemode="tozero")
    fig = _layout(fig, "Server telemetry over time", height=640)
    fig.update_layout(margin={"t": 40})
    return fig


def figure_html(fig: go.Figure, div_id: str) -> Markup:
    """The figure as a <div> plus the script that draws it; plotly.js itself is embedded once elsewhere."""
    html = pio.to_html(
        fig,
        include_plotlyjs=False,
        full_html=False,
        div_id=div_id,
        config=PLOT_CONFIG,
        default_width="100%",
        default_height=f"{fig.layout.height or 460}px",
        validate=True,
    )
    return Markup(html)


def charts(data: ReportData) -> list[dict[str, Any]]:
    """The report's charts in order: id, title, rendered HTML (or a note saying why one is absent)."""
    out: list[dict[str, Any]] = []
    for div_id, title, metric, ytitle in CONCURRENCY_CHARTS:
        fig = concurrency_figure(data, metric, title, ytitle)
        out.append({"id": div_id, "title": title, "html": figure_html(fig, div_id), "note": None})
    cdf = cdf_figure(data)
    out.append(
        {
            "id": "chart-cdf",
            "title": "Per-request latency CDFs (successful requests, all repeats)",
            "html": figure_html(cdf, "chart-cdf") if cdf is not None else None,
            "note": None if cdf is not None else "No per-request records were stored for these runs.",
        }
    )
    tel = telemetry_figure(data)
    missing = [
        data.run_names[s.run_id] for s in data.telemetry if not any(s.has(k) for k, *_ in TELEMETRY_GAUGES)
    ]
    missing += [r.name for r in data.comparison.runs if r.id not in {s.run_id for s in data.telemetry}]
    note = None
    if missing:
        note = (
            f"No server telemetry for {', '.join(dict.fromkeys(missing))}: the engine exposed no running/waiting/"
            "KV-cache gauges (llama.cpp serves no /metrics) or scraping was off."
        )
    out.append(
        {
            "id": "chart-telemetry",
            "title": "Server telemetry over time (the engine's /metrics)",
            "html": figure_html(tel, "chart-telemetry") if tel is not None else None,
            "note": note,
        }
    )
    return out


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


@lru_cache(maxsize=1)
def _env() -> Environment:
    return Environment(
        loader=PackageLoader("accelbench.report", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_html(data: ReportData) -> str:
    """The whole report as one HTML document."""
    cmp = data.comparison
    template = _env().get_template("report.html.j2")
    return template.render(
        title=data.title,
        cmp=cmp,
        tier_label=TIER_LABELS[cmp.tier],
        compared=compared_rows(data),
        findings=cmp.findings,
        table_columns=SIDE_BY_SIDE_COLUMNS if len(cmp.runs) > 1 else SIDE_BY_SIDE_COLUMNS[:-2],
        table_rows=side_by_side_rows(cmp) if len(cmp.runs) > 1 else [r[:-2] for r in side_by_side_rows(cmp)],
        charts=charts(data),
        cost_columns=COST_COLUMNS,
        cost_rows=cost_rows(data),
        prediction_columns=PREDICTION_COLUMNS,
        prediction_rows=prediction_rows(data),
        prediction_notes=data.prediction_notes,
        notes=cmp.notes,
        plotly_js=Markup(plotly_js()),
        data_json=Markup(json.dumps(cmp.model_dump(mode="json"), allow_nan=False).replace("<", "\\u003c")),
    )


def write_html(data: ReportData, path: Path) -> Path:
    """Write the report to ``path`` (UTF-8) and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return path
