"""PNG plots of sweeps: a metric against concurrency, one line per input length (and per run when several
runs are compared, e.g. CPU against GPU on the same axes); and of capacity searches: latency against
throughput per probe with the SLO line, the capacity and the knee marked, and the searches side by side.

Each point is the mean over repeats of the repeat medians (see ``report.tables``); when a cell has several
repeats a vertical bar shows their min-max. Figures are built with matplotlib's object API and the Agg
canvas, never ``pyplot``: no display is needed and plotting from several threads (the API server) is safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from accelbench.report.capacity_results import (
    axis_title,
    bar_label,
    capacity_mark,
    curve_marks,
    curve_metrics,
    curve_points,
)
from accelbench.report.comparison import CapacityRun
from accelbench.report.latency_throughput import LatencyThroughput
from accelbench.report.tables import CellAggregate


@dataclass(frozen=True)
class PlotSpec:
    """One standard sweep plot."""

    metric: str
    filename: str
    title: str
    ylabel: str


# The plots a sweep writes, in this order.
SWEEP_PLOTS: tuple[PlotSpec, ...] = (
    PlotSpec("tpot_p50_ms", "tpot_vs_concurrency.png", "Median TPOT vs concurrency", "TPOT p50 (ms)"),
    PlotSpec(
        "total_token_throughput",
        "throughput_vs_concurrency.png",
        "Total token throughput vs concurrency",
        "Total tokens/s (input + output)",
    ),
    PlotSpec("ttft_p50_ms", "ttft_vs_concurrency.png", "Median TTFT vs concurrency", "TTFT p50 (ms)"),
    PlotSpec(
        "output_throughput",
        "output_throughput_vs_concurrency.png",
        "Output token throughput vs concurrency",
        "Output tokens/s",
    ),
)

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
#: a capacity curve mark's marker and colour, by its label
_MARK_STYLE = {"max load": ("*", "black"), "knee": ("D", "C4")}
_STYLES = ("-", "--", ":", "-.")


@dataclass
class Series:
    """One line: a run at one input length."""

    run_id: str
    input_len: int
    label: str
    x: list[int] = field(default_factory=list)
    y: list[float] = field(default_factory=list)
    ymin: list[float] = field(default_factory=list)
    ymax: list[float] = field(default_factory=list)
    partial: list[bool] = field(default_factory=list)


def build_series(
    cells: Sequence[CellAggregate], metric: str, run_names: Mapping[str, str] | None = None
) -> list[Series]:
    """The lines of a plot of ``metric``: one per (run, input length), points sorted by concurrency.

    Labels are ``"input 128"`` for a single run and ``"<run name> · input 128"`` for several; cells without a
    value for the metric are left out.
    """
    runs = list(dict.fromkeys(c.run_id for c in cells))
    multi = len(runs) > 1
    by_key: dict[tuple[str, int], Series] = {}
    for c in sorted(cells, key=lambda c: (runs.index(c.run_id), c.input_len, c.concurrency)):
        agg = c.metric(metric)
        if agg is None:
            continue
        key = (c.run_id, c.input_len)
        if key not in by_key:
            name = (run_names or {}).get(c.run_id, c.run_id)
            label = f"{name} · input {c.input_len}" if multi else f"input {c.input_len}"
            by_key[key] = Series(run_id=c.run_id, input_len=c.input_len, label=label)
        s = by_key[key]
        s.x.append(c.concurrency)
        s.y.append(agg.mean)
        s.ymin.append(agg.min)
        s.ymax.append(agg.max)
        s.partial.append(c.status.value != "completed")
    return list(by_key.values())


def build_figure(
    cells: Sequence[CellAggregate],
    spec: PlotSpec,
    *,
    run_names: Mapping[str, str] | None = None,
    subtitle: str | None = None,
) -> Figure:
    """A matplotlib Figure of ``spec.metric`` against concurrency (not yet saved)."""
    series = build_series(cells, spec.metric, run_names)
    fig = Figure(figsize=(8.0, 5.0), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    runs = list(dict.fromkeys(s.run_id for s in series))
    input_lens = sorted({s.input_len for s in series})
    colors = [f"C{i % 10}" for i in range(max(len(runs), len(input_lens), 1))]
    handles: list[Any] = []
    for s in series:
        if len(runs) > 1:
            # colour tells the run (the hardware), marker and dash tell the input length
            color = colors[runs.index(s.run_id) % len(colors)]
            li = input_lens.index(s.input_len)
            marker, style = _MARKERS[li % len(_MARKERS)], _STYLES[li % len(_STYLES)]
        else:
            color = colors[input_lens.index(s.input_len) % len(colors)]
            marker, style = "o", "-"
        has_range = any(lo != hi for lo, hi in zip(s.ymin, s.ymax, strict=True))
        if has_range:
            handle: Any = ax.errorbar(
                s.x,
                s.y,
                yerr=[
                    [y - lo for y, lo in zip(s.y, s.ymin, strict=True)],
                    [hi - y for y, hi in zip(s.y, s.ymax, strict=True)],
                ],
                color=color,
                marker=marker,
                linestyle=style,
                capsize=3,
                label=s.label,
            )
        else:
            (handle,) = ax.plot(s.x, s.y, color=color, marker=marker, linestyle=style, label=s.label)
        handles.append(handle)
        for x, y, partial in zip(s.x, s.y, s.partial, strict=True):
            if partial:  # an interrupted cell: hollow marker, so nobody mistakes it for a full measurement
                ax.plot([x], [y], marker="o", markersize=11, markerfacecolor="none", color="red")
    xs = sorted({x for s in series for x in s.x})
    if xs and xs[-1] / max(xs[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    if xs:
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel("Concurrency (requests in flight)")
    ax.set_ylabel(spec.ylabel)
    ax.set_ylim(bottom=0)
    title = spec.title if not subtitle else f"{spec.title}\n{subtitle}"
    ax.set_title(title, fontsize=11)
    ax.grid(True, alpha=0.3)
    if series:
        # explicit handles keep the legend in series order (matplotlib would list error-bar lines last)
        ax.legend(handles, [s.label for s in series], fontsize=8, loc="best")
        if any(any(s.partial) for s in series):
            ax.annotate(
                "red ring: interrupted cell (partial)",
                xy=(0.01, 0.01),
                xycoords="axes fraction",
                fontsize=7,
                color="red",
            )
        if any(lo != hi for s in series for lo, hi in zip(s.ymin, s.ymax, strict=True)):
            ax.annotate(
                "points: mean of repeat medians; bars: min-max over repeats",
                xy=(0.99, 0.01),
                xycoords="axes fraction",
                ha="right",
                fontsize=7,
                color="gray",
            )
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    return fig


def write_sweep_plots(
    cells: Sequence[CellAggregate],
    out_dir: Path,
    *,
    run_names: Mapping[str, str] | None = None,
    subtitle: str | None = None,
    plots: Sequence[PlotSpec] = SWEEP_PLOTS,
) -> list[Path]:
    """Write the standard sweep plots as PNG files into ``out_dir`` and return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in plots:
        fig = build_figure(cells, spec, run_names=run_names, subtitle=subtitle)
        path = out_dir / spec.filename
        fig.savefig(path, format="png")
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------------------ capacity
def capacity_curve_figure(c: CapacityRun) -> Figure:
    """One search: the judged percentile of each SLO metric (one panel each) against output tok/s, one point
    per probe (crosses missed the SLO, hollow rings are re-measures), the target as a dashed line, the
    capacity as a star and the knee as a diamond."""
    metrics = curve_metrics(c)
    fig = Figure(figsize=(5.2 * len(metrics) + 1.0, 4.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, m in zip(axes, metrics, strict=True):
        line = curve_points(c, m, repeat=1)
        ax.plot([p.output_tokens_per_s for p in line], [p.percentiles[m] for p in line], color="C0", zorder=1)
        for p in line:
            missed = p.met is False
            ax.plot(
                [p.output_tokens_per_s],
                [p.percentiles[m]],
                marker="x" if missed else "o",
                color="C3" if missed else "C2" if p.met else "C0",
                linestyle="none",
                zorder=2,
            )
            ax.annotate(
                f"{p.level:g}", (p.output_tokens_per_s, p.percentiles[m]), xytext=(4, -10),
                textcoords="offset points", fontsize=7, color="gray",
            )  # fmt: skip
        again = curve_points(c, m, repeat=2)
        if again:
            ax.plot(
                [p.output_tokens_per_s for p in again],
                [p.percentiles[m] for p in again],
                marker="o",
                markerfacecolor="none",
                color="gray",
                linestyle="none",
                label="re-measures",
            )
        if c.slo is not None and m in c.slo.targets:
            ax.axhline(c.slo.targets[m], color="0.3", linestyle="--", label=f"SLO <= {c.slo.targets[m]:g} ms")
        for mark in curve_marks(c, m):
            marker, color = _MARK_STYLE[mark.label]
            ax.plot(
                [mark.probe.output_tokens_per_s],
                [mark.probe.percentiles[m]],
                marker=marker,
                markersize=15 if marker == "*" else 13,
                markerfacecolor=color if marker == "*" else "none",
                markeredgewidth=1 if marker == "*" else 2,
                color=color,
                linestyle="none",
                label=f"{mark.label}: {mark.load}",
                zorder=3,
            )
        ax.set_xlabel("Output tokens/s")
        ax.set_ylabel(axis_title(c, m))
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Latency vs throughput: {c.name} ({c.slo_label or 'no SLO, knee search'})", fontsize=11)
    return fig


def capacity_compare_figure(runs: Sequence[CapacityRun]) -> Figure:
    """Searches side by side: output tok/s at the highest load meeting the SLO per run, each bar labelled
    with that load and $/1M output tokens; and the runs' curves on one axis with the SLO line(s)."""
    fig = Figure(figsize=(12.0, 4.8), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    bars, curves = fig.subplots(1, 2)
    names = [c.hardware for c in runs]
    values = [c.output_tokens_per_s_at_max or 0.0 for c in runs]
    drawn = bars.bar(range(len(runs)), values, color=[f"C{i % 10}" for i in range(len(runs))])
    labels = [bar_label(c, "\n") for c in runs]
    bars.bar_label(drawn, labels=labels, fontsize=8, padding=2)
    bars.set_xticks(range(len(runs)), names, fontsize=8)
    bars.set_ylabel("Output tokens/s at max load")
    bars.set_title("Output tok/s at the SLO", fontsize=10)
    bars.set_ylim(0, max([*values, 1.0]) * 1.25)
    metric = curve_metrics(runs[0])[0]
    for i, c in enumerate(runs):
        pts = curve_points(c, metric, repeat=1)
        curves.plot(
            [p.output_tokens_per_s for p in pts],
            [p.percentiles[metric] for p in pts],
            marker="o",
            color=f"C{i % 10}",
            label=c.hardware,
        )
        chosen = capacity_mark(c, metric)
        if chosen is not None:
            curves.plot(
                [chosen.probe.output_tokens_per_s], [chosen.probe.percentiles[metric]], marker="*", markersize=15,
                color=f"C{i % 10}", linestyle="none",
            )  # fmt: skip
    for target in sorted(
        {c.slo.targets[metric] for c in runs if c.slo is not None and metric in c.slo.targets}
    ):
        curves.axhline(target, color="0.3", linestyle="--", label=f"SLO <= {target:g} ms")
    curves.set_xlabel("Output tokens/s")
    curves.set_ylabel(axis_title(runs[0], metric))
    curves.set_title("Latency vs throughput (star: max load)", fontsize=10)
    curves.set_xlim(left=0)
    curves.set_ylim(bottom=0)
    curves.grid(True, alpha=0.3)
    curves.legend(fontsize=8, loc="upper left")
    fig.suptitle("Capacity at the SLO, per run", fontsize=11)
    return fig


# ------------------------------------------------------------------------------------------ latency vs throughput
def latency_throughput_plot(chart: LatencyThroughput) -> Figure | None:
    """``report/latency_throughput.py``'s chart as a PNG figure: a panel per metric, output tok/s against the
    charted percentile, one line per run and input length with each point's concurrency written beside it, a
    cross where a cell misses its SLO, each SLO target judged at that percentile dashed, each run's best
    configuration a star. None when no cell has a measured throughput."""
    if chart.empty:
        return None
    fig = Figure(figsize=(5.4 * len(chart.metrics) + 1.0, 4.8), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(chart.metrics), squeeze=False)[0]
    runs = list(dict.fromkeys(s.run_id for s in chart.series))
    input_lens = sorted({s.input_len for s in chart.series})
    multi = len(runs) > 1
    for ax, m in zip(axes, chart.metrics, strict=True):
        for s in chart.series:
            pts = [p for p in s.points if p.latency_ms.get(m) is not None]
            if not pts:
                continue
            li = input_lens.index(s.input_len)
            color = f"C{(runs.index(s.run_id) if multi else li) % 10}"
            xs, ys = [p.output_tps for p in pts], [p.latency_ms[m] or 0.0 for p in pts]
            ax.plot(
                xs, ys, color=color, linestyle=_STYLES[li % len(_STYLES)] if multi else "-", label=s.label
            )
            for p, x, y in zip(pts, xs, ys, strict=True):
                ax.plot([x], [y], marker="x" if p.met is False else "o", color=color, linestyle="none")
                ax.annotate(f"c{p.concurrency}", (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7,
                            color="gray")  # fmt: skip
                if p.best:
                    ax.plot([x], [y], marker="*", markersize=15, color=color, markeredgecolor="black",
                            linestyle="none", label=f"best: {s.run_name}" if multi else "best configuration")  # fmt: skip
        for t in (t for t in chart.targets if t.metric == m):
            ax.axhline(t.target_ms, color="0.3", linestyle="--", label=t.label)
        ax.set_xlabel("Output tokens/s")
        ax.set_ylabel(chart.title(m))
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:  # the targets of other panels too, each label once
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)), fontsize=8)
    fig.suptitle(f"Latency vs throughput (p{chart.percentile}; one point per concurrency)", fontsize=11)
    return fig
