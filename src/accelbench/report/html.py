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

from accelbench.report.capacity import (
    CAPACITY_COLUMNS,
    answer_level,
    answer_sentence,
    axis_title,
    bar_label,
    capacity_rows,
    curve_metrics,
    curve_points,
    devices_sentence,
    load_phrase,
    load_title,
    prediction_sentence,
    probe_at,
    probe_columns,
    probe_rows,
)
from accelbench.report.compare import (
    SIDE_BY_SIDE_COLUMNS,
    TIER_LABELS,
    CapacityRun,
    ComparedRun,
    Comparison,
    fmt_num,
    fmt_usd,
    side_by_side_rows,
)
from accelbench.report.document import REPORT_SECTIONS, TELEMETRY_GAUGES, CellLatencies, ReportData
from accelbench.report.fleet import fleet_body_html
from accelbench.report.latency_throughput import LatencyThroughput
from accelbench.report.plots import build_series
from accelbench.report.series_styles import series_styles
from accelbench.report.timeline import DEVICE_COLUMNS, DEVICE_SERIES, CellWindow, RunTimeline, device_table
from accelbench.report.verdict_phrases import VERDICT_TABLE_COLUMNS, verdict_rows

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
# every dash plotly draws, the plainest first: the CDFs' runs x cells take pairs of colour and dash from these
_CDF_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


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
    # colour tells the cell, dash the run: each line its own pair, however many cells
    styles = series_styles(len(keys), len(runs), len(_PALETTE), len(_CDF_DASHES))
    for c in cells:
        ri, ki = runs.index(c.run_id), keys.index((c.input_len, c.concurrency))
        style = styles[ki][ri]
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
                    line={"color": _PALETTE[style.colour], "dash": _CDF_DASHES[style.dash]},
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
    add_cell_bands(fig, telemetry_cells(data))
    fig = _layout(fig, "Server telemetry over time", height=640)
    fig.update_layout(margin={"t": 40})
    return fig


# ------------------------------------------------------------------------------------------ latency vs throughput
_MISSED_SYMBOL, _BEST_COLOR = "x", "#111111"


def _verdict(met: bool | None) -> str:
    """A point's SLO verdict for its hover text; empty where there is no SLO or it cannot be judged."""
    return "" if met is None else "meets the SLO" if met else "misses the SLO"


def latency_throughput_figure(chart: LatencyThroughput) -> go.Figure | None:
    """Output tok/s against latency (``report/latency_throughput.py``): a panel per metric, one line per run and
    input length with a point per concurrency (labelled ``c4``; a cross where the cell misses its SLO), each
    SLO target judged at the charted percentile as a dashed line, each run's best configuration as a star.
    None when no cell has a measured throughput."""
    if chart.empty:
        return None
    fig = make_subplots(
        rows=1, cols=len(chart.metrics), subplot_titles=[chart.title(m) for m in chart.metrics]
    )
    runs = list(dict.fromkeys(s.run_id for s in chart.series))
    input_lens = sorted({s.input_len for s in chart.series})
    multi = len(runs) > 1
    xmax = max(p.output_tps for s in chart.series for p in s.points) * 1.08 or 1.0
    shown: set[str] = set()
    for col, m in enumerate(chart.metrics, start=1):
        for s in chart.series:
            pts = [p for p in s.points if p.latency_ms.get(m) is not None]
            if not pts:
                continue
            ri, li = runs.index(s.run_id), input_lens.index(s.input_len)
            color = _color(ri if multi else li)
            fig.add_trace(
                go.Scatter(
                    x=[p.output_tps for p in pts],
                    y=[p.latency_ms[m] for p in pts],
                    name=s.label,
                    legendgroup=s.label,
                    showlegend=s.label not in shown,
                    mode="lines+markers+text",
                    text=[f"c{p.concurrency}" for p in pts],
                    textposition="top center",
                    textfont={"size": 10, "color": "#555"},
                    line={"color": color, "dash": _DASHES[li % len(_DASHES)] if multi else "solid"},
                    marker={
                        "size": 8,
                        "symbol": [_MISSED_SYMBOL if p.met is False else "circle" for p in pts],
                    },
                    customdata=[[p.concurrency, _verdict(p.met)] for p in pts],
                    hovertemplate="concurrency %{customdata[0]}<br>%{x:,.1f} out tok/s<br>%{y:,.2f} ms"
                    "<br>%{customdata[1]}<extra>%{fullData.name}</extra>",
                ),
                row=1,
                col=col,
            )
            shown.add(s.label)
            for p in pts:
                if not p.best:
                    continue
                best = f"best: {s.run_name}" if multi else "best configuration"
                fig.add_trace(
                    go.Scatter(
                        x=[p.output_tps],
                        y=[p.latency_ms[m]],
                        name=best,
                        legendgroup=best,
                        showlegend=best not in shown,
                        mode="markers",
                        marker={
                            "symbol": "star",
                            "size": 16,
                            "color": color,
                            "line": {"width": 1, "color": _BEST_COLOR},
                        },
                        hovertemplate=f"{best}: input {s.input_len}, concurrency {p.concurrency}<br>"
                        "%{x:,.1f} out tok/s<br>%{y:,.2f} ms<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )
                shown.add(best)
        for t in (t for t in chart.targets if t.metric == m):
            fig.add_trace(
                go.Scatter(
                    x=[0.0, xmax],
                    y=[t.target_ms, t.target_ms],
                    name=t.label,
                    mode="lines",
                    line={"color": _SLO_LINE, "dash": "dash"},
                    hoverinfo="name",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="output tok/s", rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    fig = _layout(fig, "Latency vs throughput", height=460)
    fig.update_layout(margin={"t": 40})
    return fig


def telemetry_cells(data: ReportData) -> list[CellWindow]:
    """The cell windows the server telemetry chart marks: those of its one run when one run has gauges (each
    run has its own clock, so with several none; each run's device chart marks its own)."""
    series = [s for s in data.telemetry if any(s.has(k) for k, *_ in TELEMETRY_GAUGES)]
    if len(series) != 1:
        return []
    timeline = next((t for t in data.devices if t.run_id == series[0].run_id), None)
    return list(timeline.cells) if timeline is not None else []


# ------------------------------------------------------------------------------------------ devices
_BANDS = ("rgba(31,119,180,0.08)", "rgba(255,127,14,0.08)")


def cell_band_layout(cells: Sequence[CellWindow]) -> dict[str, list[dict[str, Any]]]:
    """Each cell's window (first send to last completion) as a shaded band across every panel, its edges
    dotted, its label ("in 256 / c 4 / r1") written down its left edge at the top: plotly layout ``shapes`` and
    ``annotations``, for a figure made here and for the run page's script alike."""
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": c.start_s,
            "x1": c.end_s,
            "y0": 0,
            "y1": 1,
            "fillcolor": _BANDS[i % len(_BANDS)],
            "line": {"color": "rgba(0,0,0,0.35)", "width": 1, "dash": "dot"},
            "layer": "below",
            "name": c.label,
        }
        for i, c in enumerate(cells)
    ]
    annotations = [
        {
            "x": c.start_s,
            "xref": "x",
            "y": 1,
            "yref": "paper",
            "text": c.label,
            "showarrow": False,
            "textangle": -90,
            "xanchor": "left",
            "yanchor": "top",
            "font": {"size": 10, "color": "#555"},
        }
        for c in cells
    ]
    return {"shapes": shapes, "annotations": annotations}


def add_cell_bands(fig: go.Figure, cells: Sequence[CellWindow]) -> None:
    """The cells' bands (``cell_band_layout``) on ``fig``."""
    bands = cell_band_layout(cells)
    for shape in bands["shapes"]:
        fig.add_shape(**shape)
    for note in bands["annotations"]:
        fig.add_annotation(**note)


def device_figure(timeline: RunTimeline) -> go.Figure | None:
    """One run's devices over the whole run: a panel per series some sample gave (utilisation, memory used,
    power, memory bandwidth; a series no device gave has no panel, never a line at zero), one line per device,
    every cell's window marked. None without device samples."""
    panels = [(name, title) for name, title in DEVICE_SERIES if timeline.has(name)]
    if not panels or not timeline.has_devices:
        return None
    fig = make_subplots(
        rows=len(panels),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        subplot_titles=[title for _, title in panels],
    )
    for di, d in enumerate(timeline.devices):
        shown = False
        for row, (name, title) in enumerate(panels, start=1):
            if not d.has(name):
                continue
            x, y = d.points(name)
            unit = title.rsplit("(", 1)[-1].rstrip(")")
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=y,
                    name=d.device,
                    legendgroup=d.device,
                    showlegend=not shown,
                    mode="lines+markers",
                    marker={"size": 4},
                    line={"color": _color(di)},
                    hovertemplate=f"t=%{{x:.1f}} s<br>%{{y:,.2f}} {unit}<extra>%{{fullData.name}}</extra>",
                ),
                row=row,
                col=1,
            )
            shown = True
    fig.update_yaxes(rangemode="tozero")
    if panels[0][0] == "util_pct":
        fig.update_yaxes(range=[0, 105], row=1, col=1)
    fig.update_xaxes(title_text="seconds into the run", row=len(panels), col=1)
    add_cell_bands(fig, timeline.cells)
    fig = _layout(fig, "Device telemetry over the run", height=180 + 190 * len(panels))
    fig.update_layout(margin={"t": 40})
    return fig


def device_context(data: ReportData) -> list[dict[str, Any]]:
    """The report's Device telemetry section: per run, its chart (cells marked), its cells' device rows and
    the sources its machine lacked; a run without device telemetry says why it has none."""
    out: list[dict[str, Any]] = []
    names = data.run_names
    for i, t in enumerate(data.devices, start=1):
        fig = device_figure(t)
        div_id = f"chart-devices-{i}"
        out.append(
            {
                "run_id": t.run_id,
                "name": names.get(t.run_id, t.run_id),
                "chart_id": div_id,
                "chart": figure_html(fig, div_id) if fig is not None else None,
                "columns": DEVICE_COLUMNS,
                "rows": device_table(t),
                "sources": t.sources,
                "missing": t.missing,
            }
        )
    return out


# ------------------------------------------------------------------------------------------ capacity
_MET, _MISSED, _SLO_LINE = "#2ca02c", "#d62728", "#555555"


def capacity_figure(c: CapacityRun) -> go.Figure | None:
    """A search's latency against throughput, one point per probe (x: output tok/s, y: the judged percentile
    of each SLO metric, one panel per metric), the SLO's target as a line, the capacity (max load) and the
    knee marked; green points met the SLO, red crosses missed it. None without probes."""
    metrics = [m for m in curve_metrics(c) if curve_points(c, m)]
    if not metrics:
        return None
    fig = make_subplots(rows=1, cols=len(metrics), subplot_titles=[axis_title(c, m) for m in metrics])
    xmax = max(p.output_tokens_per_s for p in c.probes) * 1.08 or 1.0
    for col, m in enumerate(metrics, start=1):
        first = col == 1
        line = curve_points(c, m, repeat=1)
        fig.add_trace(
            go.Scatter(
                x=[p.output_tokens_per_s for p in line],
                y=[p.percentiles[m] for p in line],
                name="probes (by load)",
                legendgroup="probes",
                showlegend=first,
                mode="lines+markers",
                line={"color": "#1f77b4"},
                marker={
                    "size": 9,
                    "color": [_MISSED if p.met is False else _MET if p.met else "#1f77b4" for p in line],
                    "symbol": ["x" if p.met is False else "circle" for p in line],
                },
                customdata=[[load_phrase(c.load, p.level), p.why or ""] for p in line],
                hovertemplate="%{customdata[0]}<br>%{x:,.1f} out tok/s<br>%{y:,.2f} ms<br>%{customdata[1]}"
                "<extra></extra>",
            ),
            row=1,
            col=col,
        )
        again = curve_points(c, m, repeat=2)
        if again:
            fig.add_trace(
                go.Scatter(
                    x=[p.output_tokens_per_s for p in again],
                    y=[p.percentiles[m] for p in again],
                    name="re-measures",
                    legendgroup="again",
                    showlegend=first,
                    mode="markers",
                    marker={"size": 9, "symbol": "circle-open", "color": "#555"},
                    customdata=[load_phrase(c.load, p.level) for p in again],
                    hovertemplate="%{customdata} (again)<br>%{x:,.1f} out tok/s<br>%{y:,.2f} ms<extra></extra>",
                ),
                row=1,
                col=col,
            )
        if c.slo is not None and m in c.slo.targets:
            target = c.slo.targets[m]
            fig.add_trace(
                go.Scatter(
                    x=[0.0, xmax],
                    y=[target, target],
                    name=f"SLO {axis_title(c, m).removesuffix(' (ms)')} <= {target:g} ms",
                    mode="lines",
                    line={"color": _SLO_LINE, "dash": "dash"},
                    hoverinfo="name",
                ),
                row=1,
                col=col,
            )
        for level, label, symbol, color, met in (
            (c.max_load, "max load", "star", "#111", True),
            (c.knee, "knee", "diamond-open", "#9467bd", False),
        ):
            p = probe_at(c, level, met=met)
            if p is None or m not in p.percentiles:
                continue
            assert level is not None
            fig.add_trace(
                go.Scatter(
                    x=[p.output_tokens_per_s],
                    y=[p.percentiles[m]],
                    name=f"{label}: {load_phrase(c.load, level)}",
                    legendgroup=label,
                    showlegend=first,
                    mode="markers+text",
                    text=[f"{label} {load_phrase(c.load, level)}"],
                    textposition="top left" if symbol == "star" else "bottom right",
                    marker={
                        "size": 17 if symbol == "star" else 20,
                        "symbol": symbol,
                        "color": color,
                        "line": {"width": 1, "color": "#fff"}
                        if symbol == "star"
                        else {"width": 3, "color": color},
                    },
                    hovertemplate=f"{label}: {load_phrase(c.load, level)}<br>%{{x:,.1f}} out tok/s<br>"
                    "%{y:,.2f} ms<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="output tok/s", rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    title = f"Latency vs throughput: {c.name}"
    fig = _layout(fig, title, height=440)
    fig.update_layout(margin={"t": 40})
    return fig


def capacity_compare_figure(runs: Sequence[CapacityRun]) -> go.Figure | None:
    """The searches side by side: output tok/s at the SLO per run (bars, labelled with the load sustained and
    $/1M output tokens), and every run's latency-vs-throughput curve on one axis (the first SLO metric of the
    first search) with each SLO's line. None with fewer than two searches."""
    if len(runs) < 2:
        return None
    metric = curve_metrics(runs[0])[0]
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("Output tok/s at the SLO", f"{axis_title(runs[0], metric)} vs output tok/s"),
    )
    labels = [bar_label(c) for c in runs]
    fig.add_trace(
        go.Bar(
            x=[c.hardware for c in runs],
            y=[c.output_tokens_per_s_at_max or 0.0 for c in runs],
            text=labels,
            textposition="auto",
            marker={"color": [_color(i) for i in range(len(runs))]},
            name="output tok/s at max load",
            showlegend=False,
            hovertemplate="%{x}<br>%{y:,.1f} out tok/s at max load<br>%{text}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    targets: dict[float, list[str]] = {}
    xmax = 0.0
    for i, c in enumerate(runs):
        pts = curve_points(c, metric, repeat=1)
        xmax = max([xmax, *(p.output_tokens_per_s for p in pts)])
        fig.add_trace(
            go.Scatter(
                x=[p.output_tokens_per_s for p in pts],
                y=[p.percentiles[metric] for p in pts],
                name=c.hardware,
                mode="lines+markers",
                line={"color": _color(i)},
                marker={"symbol": ["x" if p.met is False else "circle" for p in pts], "size": 8},
                customdata=[load_phrase(c.load, p.level) for p in pts],
                hovertemplate="%{customdata}<br>%{x:,.1f} out tok/s<br>%{y:,.2f} ms<extra>%{fullData.name}</extra>",
            ),
            row=1,
            col=2,
        )
        chosen = probe_at(c, c.max_load, met=True)
        if chosen is not None and metric in chosen.percentiles and c.max_load is not None:
            fig.add_trace(
                go.Scatter(
                    x=[chosen.output_tokens_per_s],
                    y=[chosen.percentiles[metric]],
                    name=f"{c.hardware} max load: {load_phrase(c.load, c.max_load)}",
                    mode="markers",
                    marker={"symbol": "star", "size": 16, "color": _color(i)},
                    showlegend=False,
                    hovertemplate="%{fullData.name}<extra></extra>",
                ),
                row=1,
                col=2,
            )
        if c.slo is not None and metric in c.slo.targets:
            targets.setdefault(c.slo.targets[metric], []).append(c.hardware)
    for target, who in targets.items():
        fig.add_trace(
            go.Scatter(
                x=[0.0, xmax * 1.08 or 1.0],
                y=[target, target],
                name=f"SLO {target:g} ms" + ("" if len(targets) == 1 else f" ({', '.join(who)})"),
                mode="lines",
                line={"color": _SLO_LINE, "dash": "dash"},
                hoverinfo="name",
            ),
            row=1,
            col=2,
        )
    fig.update_yaxes(title_text="output tok/s", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="output tok/s", rangemode="tozero", row=1, col=2)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=2)
    fig = _layout(fig, "Capacity at the SLO, per run", height=460)
    fig.update_layout(margin={"t": 40})
    return fig


def capacity_context(data: ReportData) -> dict[str, Any] | None:
    """What the report's capacity section shows; None when no run is a capacity search."""
    runs = data.comparison.capacity
    if not runs:
        return None
    compare = capacity_compare_figure(runs)
    sections = []
    for i, c in enumerate(runs):
        fig = capacity_figure(c)
        div_id = f"chart-capacity-{i + 1}"
        sections.append(
            {
                "run": c,
                "index": i + 1,
                "load_title": load_title(c.load),
                "answer": answer_sentence(c),
                "devices": devices_sentence(c.devices_at_max, c.load, answer_level(c)),
                "prediction": prediction_sentence(c),
                "chart_id": div_id,
                "chart": figure_html(fig, div_id) if fig is not None else None,
                "probe_columns": probe_columns(c),
                "probe_rows": probe_rows(c),
            }
        )
    return {
        "columns": CAPACITY_COLUMNS,
        "rows": capacity_rows(runs),
        "compare_chart": figure_html(compare, "chart-capacity-compare") if compare is not None else None,
        "runs": sections,
    }


def capacity_page(cmp: Comparison) -> dict[str, Any] | None:
    """The compare page's capacity block: the table and one chart as a plotly figure (data and layout) for the
    page's script: the searches side by side, or the one search's curve. None without capacity searches."""
    if not cmp.capacity:
        return None
    fig = capacity_compare_figure(cmp.capacity) or capacity_figure(cmp.capacity[0])
    return {
        "columns": CAPACITY_COLUMNS,
        "rows": capacity_rows(cmp.capacity),
        "chart": json.loads(fig.to_json()) if fig is not None else None,
    }


def compare_charts(data: ReportData) -> list[dict[str, Any]]:
    """The compare page's charts, the report's own figures (TPOT, throughput and TTFT against concurrency, the
    per-request latency CDFs) as plotly JSON (data and layout) for the page's script: id, title, figure, and
    wide: the CDFs' three panels of a line per run and cell get the page's whole width."""
    out: list[dict[str, Any]] = []
    for div_id, title, metric, ytitle in CONCURRENCY_CHARTS:
        fig = concurrency_figure(data, metric, title, ytitle)
        out.append({"id": div_id, "title": title, "figure": json.loads(fig.to_json()), "wide": False})
    cdf = cdf_figure(data)
    if cdf is not None:
        out.append(
            {
                "id": "chart-cdf",
                "title": "Per-request latency CDFs (successful requests, all repeats)",
                "figure": json.loads(cdf.to_json()),
                "wide": True,
            }
        )
    return out


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


#: the percentile table's columns that hold words, not numbers (left-aligned)
TEXT_COLUMNS: frozenset[str] = frozenset({"Run", "SLO met", "Top failure reason"})


def sections(data: ReportData) -> list[tuple[str, str]]:
    """The report's sections in order (``REPORT_SECTIONS``), less those this report has nothing for: (id,
    heading), for the page's navigation."""
    absent = set()
    if not (data.failures or data.warnings):
        absent.add("failures")
    if not data.comparison.capacity:
        absent.add("capacity")
    if not data.fleet_plans:
        absent.add("fleet")
    return [(sid, heading) for sid, heading in REPORT_SECTIONS if sid not in absent]


def latency_throughput_context(data: ReportData) -> dict[str, Any]:
    """The Latency vs throughput section: the chart (or None), its percentile and whether it marks an SLO."""
    chart = data.latency_throughput()
    fig = latency_throughput_figure(chart)
    return {
        "percentile": chart.percentile,
        "targets": bool(chart.targets),
        "judged": any(data.slos.values()),
        "html": figure_html(fig, "chart-latency-throughput") if fig is not None else None,
    }


def render_html(data: ReportData) -> str:
    """The whole report as one HTML document: the headline first, then the sections in ``REPORT_SECTIONS``'s
    order."""
    cmp = data.comparison
    template = _env().get_template("report.html.j2")
    every_chart = charts(data)
    pct_columns, pct_rows = data.percentile_table()
    return template.render(
        title=data.title,
        cmp=cmp,
        tier_label=TIER_LABELS[cmp.tier],
        sections=sections(data),
        headline=data.headline,
        percentile_columns=pct_columns,
        percentile_rows=pct_rows,
        percentile_text=[i for i, h in enumerate(pct_columns) if h in TEXT_COLUMNS],
        percentiles=", ".join(f"p{p}" for p in data.percentiles),
        slo_notes=data.slo_notes(),
        latency_throughput=latency_throughput_context(data),
        compared=compared_rows(data),
        findings=cmp.findings,
        table_columns=SIDE_BY_SIDE_COLUMNS if len(cmp.runs) > 1 else SIDE_BY_SIDE_COLUMNS[:-2],
        table_rows=side_by_side_rows(cmp) if len(cmp.runs) > 1 else [r[:-2] for r in side_by_side_rows(cmp)],
        verdict_columns=VERDICT_TABLE_COLUMNS,
        verdict_rows=verdict_rows(cmp),
        charts=[c for c in every_chart if c["id"] != "chart-telemetry"],
        server_telemetry=next(c for c in every_chart if c["id"] == "chart-telemetry"),
        telemetry_banded=bool(telemetry_cells(data)),
        cost_columns=COST_COLUMNS,
        cost_rows=cost_rows(data),
        prediction_columns=PREDICTION_COLUMNS,
        prediction_rows=prediction_rows(data),
        prediction_notes=data.prediction_notes,
        failures=data.failures,
        warnings=data.warnings,
        multi_run=len(cmp.runs) > 1,
        notes=cmp.notes,
        capacity=capacity_context(data),
        fleet=[Markup(fleet_body_html(p, f"chart-fleet-{i}")) for i, p in enumerate(data.fleet_plans)],
        devices=device_context(data),
        plotly_js=Markup(plotly_js()),
        data_json=Markup(json.dumps(cmp.model_dump(mode="json"), allow_nan=False).replace("<", "\\u003c")),
    )


def write_html(data: ReportData, path: Path) -> Path:
    """Write the report to ``path`` (UTF-8) and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return path
