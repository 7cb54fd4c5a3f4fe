"""The capacity searches' plotly figures: one search's latency against throughput with its SLO, capacity and
knee marked, and several searches side by side."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from accelbench.domain.capacity import Probe
from accelbench.report.capacity_results import (
    axis_title,
    bar_label,
    capacity_mark,
    curve_marks,
    curve_metrics,
    curve_points,
    load_phrase,
)
from accelbench.report.compare_runs import (
    CapacityRun,
)
from accelbench.report.html_figures import figure_layout, run_color, slo_line

_MET, _MISSED = "#2ca02c", "#d62728"
#: a curve mark's plotly symbol and colour, by its label
_MARK_STYLE = {"max load": ("star", "#111"), "knee": ("diamond-open", "#9467bd")}


def _points(probes: Sequence[Probe], metric: str) -> dict[str, list[float]]:
    """A curve's x (output tok/s) and y (``metric``'s judged percentile, ms), one point per probe."""
    return {"x": [p.output_tokens_per_s for p in probes], "y": [p.percentiles[metric] for p in probes]}


def _probe_traces(c: CapacityRun, metric: str, first: bool) -> list[go.Scatter]:
    """The probes by load (green met, red crosses missed), then the re-measures (open circles) if any."""
    line = curve_points(c, metric, repeat=1)
    traces = [
        go.Scatter(
            **_points(line, metric),
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
        )
    ]
    again = curve_points(c, metric, repeat=2)
    if again:
        traces.append(
            go.Scatter(
                **_points(again, metric),
                name="re-measures",
                legendgroup="again",
                showlegend=first,
                mode="markers",
                marker={"size": 9, "symbol": "circle-open", "color": "#555"},
                customdata=[load_phrase(c.load, p.level) for p in again],
                hovertemplate="%{customdata} (again)<br>%{x:,.1f} out tok/s<br>%{y:,.2f} ms<extra></extra>",
            )
        )
    return traces


def _level_marks(c: CapacityRun, metric: str, first: bool) -> list[go.Scatter]:
    """The capacity (max load, a star) and the knee (an open diamond), where a probe measured them."""
    traces = []
    for mark in curve_marks(c, metric):
        label, p = mark.label, mark.probe
        symbol, color = _MARK_STYLE[label]
        traces.append(
            go.Scatter(
                x=[p.output_tokens_per_s],
                y=[p.percentiles[metric]],
                name=f"{label}: {mark.load}",
                legendgroup=label,
                showlegend=first,
                mode="markers+text",
                text=[f"{label} {mark.load}"],
                textposition="top left" if symbol == "star" else "bottom right",
                marker={
                    "size": 17 if symbol == "star" else 20,
                    "symbol": symbol,
                    "color": color,
                    "line": {"width": 1, "color": "#fff"}
                    if symbol == "star"
                    else {"width": 3, "color": color},
                },
                hovertemplate=f"{label}: {mark.load}<br>%{{x:,.1f}} out tok/s<br>"
                "%{y:,.2f} ms<extra></extra>",
            )
        )
    return traces


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
        traces = _probe_traces(c, m, first)
        if c.slo is not None and m in c.slo.targets:
            target = c.slo.targets[m]
            traces.append(
                slo_line(target, f"SLO {axis_title(c, m).removesuffix(' (ms)')} <= {target:g} ms", xmax)
            )
        for trace in traces + _level_marks(c, m, first):
            fig.add_trace(trace, row=1, col=col)
    fig.update_xaxes(title_text="output tok/s", rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    title = f"Latency vs throughput: {c.name}"
    fig = figure_layout(fig, title, height=440)
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
            marker={"color": [run_color(i) for i in range(len(runs))]},
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
                line={"color": run_color(i)},
                marker={"symbol": ["x" if p.met is False else "circle" for p in pts], "size": 8},
                customdata=[load_phrase(c.load, p.level) for p in pts],
                hovertemplate="%{customdata}<br>%{x:,.1f} out tok/s<br>%{y:,.2f} ms<extra>%{fullData.name}</extra>",
            ),
            row=1,
            col=2,
        )
        chosen = capacity_mark(c, metric)
        if chosen is not None:
            fig.add_trace(
                go.Scatter(
                    x=[chosen.probe.output_tokens_per_s],
                    y=[chosen.probe.percentiles[metric]],
                    name=f"{c.hardware} max load: {chosen.load}",
                    mode="markers",
                    marker={"symbol": "star", "size": 16, "color": run_color(i)},
                    showlegend=False,
                    hovertemplate="%{fullData.name}<extra></extra>",
                ),
                row=1,
                col=2,
            )
        if c.slo is not None and metric in c.slo.targets:
            targets.setdefault(c.slo.targets[metric], []).append(c.hardware)
    for target, who in targets.items():
        name = f"SLO {target:g} ms" + ("" if len(targets) == 1 else f" ({', '.join(who)})")
        fig.add_trace(slo_line(target, name, xmax * 1.08 or 1.0), row=1, col=2)
    fig.update_yaxes(title_text="output tok/s", rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text="output tok/s", rangemode="tozero", row=1, col=2)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=2)
    fig = figure_layout(fig, "Capacity at the SLO, per run", height=460)
    fig.update_layout(margin={"t": 40})
    return fig
