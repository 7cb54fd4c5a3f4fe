"""The HTML report's plotly figures: metrics against concurrency, the per-request latency CDFs, server and
device telemetry over time with each cell's window marked, and latency against throughput. The page around
them is ``report/html.py``; the capacity searches' figures are ``report/html_capacity_figures.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from accelbench.report.document import TELEMETRY_GAUGES, CellLatencies, ReportData
from accelbench.report.latency_throughput import LatencyThroughput
from accelbench.report.plots import build_series
from accelbench.report.report_tables import telemetry_cells
from accelbench.report.series_styles import series_styles
from accelbench.report.timeline import DEVICE_SERIES, CellWindow, RunTimeline

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


_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


_DASHES = ("solid", "dash", "dot", "dashdot")


# every dash plotly draws, the plainest first: the CDFs' runs x cells take pairs of colour and dash from these
_CDF_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def run_color(run_index: int) -> str:
    return _PALETTE[run_index % len(_PALETTE)]


def figure_layout(fig: go.Figure, title: str, **kw: Any) -> go.Figure:
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
                line={"color": run_color(ri), "dash": _DASHES[li % len(_DASHES)]},
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
    return figure_layout(fig, title, xaxis=xaxis, yaxis={"title": ytitle, "rangemode": "tozero"})


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
    fig = figure_layout(fig, "Per-request latency CDFs", height=430)
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
                    line={"color": run_color(ri), "shape": "hv"},
                    hovertemplate="t=%{x:.0f} s<br>%{y:,.1f}<extra>%{fullData.name}</extra>",
                ),
                row=row,
                col=1,
            )
    fig.update_xaxes(title_text="seconds since the run's first scrape", row=len(TELEMETRY_GAUGES), col=1)
    fig.update_yaxes(rangemode="tozero")
    add_cell_bands(fig, telemetry_cells(data))
    fig = figure_layout(fig, "Server telemetry over time", height=640)
    fig.update_layout(margin={"t": 40})
    return fig


_MISSED_SYMBOL, _BEST_COLOR = "x", "#111111"
_SLO_LINE = "#555555"


def slo_line(target: float, name: str, xmax: float) -> go.Scatter:
    """An SLO's target as a dashed horizontal line across a latency panel, from 0 to ``xmax`` output tok/s."""
    return go.Scatter(
        x=[0.0, xmax],
        y=[target, target],
        name=name,
        mode="lines",
        line={"color": _SLO_LINE, "dash": "dash"},
        hoverinfo="name",
    )


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
            color = run_color(ri if multi else li)
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
            fig.add_trace(slo_line(t.target_ms, t.label, xmax), row=1, col=col)
    fig.update_xaxes(title_text="output tok/s", rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    fig = figure_layout(fig, "Latency vs throughput", height=460)
    fig.update_layout(margin={"t": 40})
    return fig


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
                    line={"color": run_color(di)},
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
    fig = figure_layout(fig, "Device telemetry over the run", height=180 + 190 * len(panels))
    fig.update_layout(margin={"t": 40})
    return fig
