"""PNG plots of sweeps: a metric against concurrency, one line per input length (and per run when several
runs are compared, e.g. CPU against GPU on the same axes).

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
