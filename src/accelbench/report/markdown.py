"""The report as Markdown with PNG charts, for pasting into docs and pull requests.

Same content as ``report.html``, in the same order (``REPORT_SECTIONS``): the headline, the percentile table
(with SLO attainment and goodput when an SLO is known) and each run against the baseline, the failures and
warnings (each distinct note once, with the cells it applies to), capacity at the SLO
when some runs searched it, the latency-throughput chart, the other charts, telemetry (each cell's window
marked), predicted vs measured, the environment, findings, cost, notes. The charts are PNG files next to
``report.md``, linked by relative path. The charts against concurrency, the latency-throughput chart and the
capacity charts come from ``report.plots``; the latency CDFs, the telemetry and device charts are drawn here
with matplotlib's object API (no pyplot, no display).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from accelbench.report.capacity_results import (
    CAPACITY_COLUMNS,
    answer_level,
    answer_sentence,
    capacity_rows,
    devices_sentence,
    prediction_sentence,
    probe_columns,
    probe_rows,
)
from accelbench.report.compare_runs import SIDE_BY_SIDE_COLUMNS, TIER_LABELS, side_by_side_rows
from accelbench.report.document import TELEMETRY_GAUGES, ReportData
from accelbench.report.fleet_view import fleet_markdown
from accelbench.report.like_for_like import like_for_like_lines
from accelbench.report.plots import (
    SWEEP_PLOTS,
    capacity_compare_figure,
    capacity_curve_figure,
    latency_throughput_plot,
    write_sweep_plots,
)
from accelbench.report.report_tables import (
    COST_COLUMNS,
    PREDICTION_COLUMNS,
    compared_rows,
    cost_rows,
    prediction_rows,
    telemetry_cells,
)
from accelbench.report.sections import markdown_sections
from accelbench.report.series_styles import series_styles
from accelbench.report.tables import markdown_table
from accelbench.report.timeline import DEVICE_COLUMNS, DEVICE_SERIES, CellWindow, RunTimeline, device_table
from accelbench.report.verdict_phrases import VERDICT_TABLE_COLUMNS, verdict_rows

CDF_PNG = "latency_cdf.png"
TELEMETRY_PNG = "telemetry.png"
LATENCY_THROUGHPUT_PNG = "latency_throughput.png"
CAPACITY_COMPARE_PNG = "capacity_compare.png"
#: image titles of the capacity charts start so; they are shown in the capacity section, not under Charts
CAPACITY_PREFIX = "Capacity: "
#: image titles of each run's device chart start so; they are shown under Device telemetry
DEVICES_PREFIX = "Devices: "
LATENCY_THROUGHPUT_TITLE = "Latency vs throughput"
TELEMETRY_TITLE = "Server telemetry over time"
_STYLES = ("-", "--", ":", "-.")


def _md_escape(text: str) -> str:
    # markdown_table escapes "|" itself; a newline would end the row
    return text.replace("\n", " ")


def cdf_png(data: ReportData, path: Path) -> Path | None:
    """TTFT, TPOT and E2E CDFs side by side, one line per run and cell; None without records."""
    cells = [c for c in data.latencies if c.e2e_ms]
    if not cells:
        return None
    runs = [r.id for r in data.comparison.runs]
    multi = len(runs) > 1
    keys = sorted({(c.input_len, c.concurrency) for c in cells})
    fig = Figure(figsize=(13.0, 4.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3, sharey=True)
    for ax, title in zip(axes, ("TTFT (ms)", "TPOT (ms)", "E2E latency (ms)"), strict=True):
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(0, 1.02)
    axes[0].set_ylabel("fraction of requests")
    # colour tells the cell, dash the run: each line its own pair, however many cells (report/html.py's rule)
    styles = series_styles(len(keys), len(runs), 10, len(_STYLES))
    for c in cells:
        ri, ki = runs.index(c.run_id), keys.index((c.input_len, c.concurrency))
        label = f"input {c.input_len} · c={c.concurrency}"
        if multi:
            label = f"{data.run_names[c.run_id]} · {label}"
        look = styles[ki][ri]
        color, style = f"C{look.colour}", _STYLES[look.dash]
        for ax, values in zip(axes, (c.ttft_ms, c.tpot_ms, c.e2e_ms), strict=True):
            if not values:
                continue
            xs = sorted(values)
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step(
                xs, ys, where="post", color=color, linestyle=style, label=label if ax is axes[0] else None
            )
    fig.legend(loc="outside lower center", ncol=min(4, len(cells)), fontsize=8)
    fig.suptitle("Per-request latency CDFs (successful requests, all repeats)", fontsize=11)
    fig.savefig(path, format="png")
    return path


def telemetry_png(data: ReportData, path: Path) -> Path | None:
    """Running, waiting and KV-cache usage over time, one line per run; None when no run has them."""
    series = [s for s in data.telemetry if any(s.has(k) for k, *_ in TELEMETRY_GAUGES)]
    if not series:
        return None
    runs = [r.id for r in data.comparison.runs]
    fig = Figure(figsize=(11.0, 7.0), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(TELEMETRY_GAUGES), 1, sharex=True)
    for ax, (key, title, *_rest) in zip(axes, TELEMETRY_GAUGES, strict=True):
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        for s in series:
            if not s.has(key):
                continue
            pts = [(t, v) for t, v in zip(s.t_s, s.values[key], strict=True) if v is not None]
            ax.step(
                [p[0] for p in pts],
                [p[1] for p in pts],
                where="post",
                color=f"C{runs.index(s.run_id) % 10}",
                label=data.run_names[s.run_id],
            )
        ax.set_ylim(bottom=0)
    _cell_bands(axes, telemetry_cells(data))
    axes[-1].set_xlabel("seconds since the run's first scrape")
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        axes[0].legend(handles, labels, fontsize=8, loc="upper right")
    fig.suptitle("Server telemetry over time (the engine's /metrics)", fontsize=11)
    fig.savefig(path, format="png")
    return path


_BANDS = ("#1f77b4", "#ff7f0e")


def _cell_bands(axes: Sequence[Any], cells: Sequence[CellWindow]) -> None:
    """Each cell's window (first send to last completion) shaded across every panel, its edges dotted, labelled
    on the top one (as ``report/html.py``'s ``add_cell_bands`` marks the HTML charts)."""
    for i, c in enumerate(cells):
        for ax in axes:
            ax.axvspan(c.start_s, c.end_s, color=_BANDS[i % len(_BANDS)], alpha=0.08, linewidth=0)
            for edge in (c.start_s, c.end_s):
                ax.axvline(edge, color="0.35", linestyle=":", linewidth=0.7)
        axes[0].annotate(
            c.label, (c.start_s, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -2),
            textcoords="offset points", rotation=90, va="top", fontsize=6, color="#555",
        )  # fmt: skip


def devices_png(timeline: RunTimeline, path: Path, title: str) -> Path | None:
    """One run's devices over the whole run: a panel per series some sample gave, one line per device, every
    cell's window shaded; None without device samples."""
    panels = [(name, label) for name, label in DEVICE_SERIES if timeline.has(name)]
    if not panels or not timeline.has_devices:
        return None
    fig = Figure(figsize=(11.0, 1.2 + 2.2 * len(panels)), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0])
    for ax, (name, label) in zip(axes, panels, strict=True):
        ax.set_title(label, fontsize=10)
        ax.grid(True, alpha=0.3)
        for di, d in enumerate(timeline.devices):
            if d.has(name):
                x, y = d.points(name)
                ax.plot(x, y, marker=".", markersize=3, color=f"C{di % 10}", label=d.device)
        ax.set_ylim(bottom=0)
    _cell_bands(axes, timeline.cells)
    axes[-1].set_xlabel("seconds into the run")
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        axes[0].legend(handles, labels, fontsize=8, loc="upper right")
    fig.suptitle(title, fontsize=11)
    fig.savefig(path, format="png")
    return path


def write_pngs(data: ReportData, out_dir: Path) -> dict[str, Path | None]:
    """Every chart as a PNG in ``out_dir``; a chart with no data maps to None."""
    out_dir.mkdir(parents=True, exist_ok=True)
    images: dict[str, Path | None] = {}
    lt = latency_throughput_plot(data.latency_throughput())
    if lt is not None:
        lt.savefig(out_dir / LATENCY_THROUGHPUT_PNG, format="png")
    images[LATENCY_THROUGHPUT_TITLE] = out_dir / LATENCY_THROUGHPUT_PNG if lt is not None else None
    specs = SWEEP_PLOTS[:3]  # TPOT, total throughput, TTFT against concurrency
    paths = write_sweep_plots(data.aggregates, out_dir, run_names=data.run_names, plots=specs)
    images.update({spec.title: p for spec, p in zip(specs, paths, strict=True)})
    images["Per-request latency CDFs"] = cdf_png(data, out_dir / CDF_PNG)
    images[TELEMETRY_TITLE] = telemetry_png(data, out_dir / TELEMETRY_PNG)
    for i, t in enumerate(data.devices, start=1):
        name = data.run_names.get(t.run_id, t.run_id)
        images[f"{DEVICES_PREFIX}{i}"] = devices_png(
            t, out_dir / f"devices_{i}.png", f"Device telemetry over the run: {name}"
        )
    images.update(capacity_pngs(data, out_dir))
    return images


def capacity_png_title(index: int) -> str:
    return f"{CAPACITY_PREFIX}latency vs throughput {index}"


def capacity_pngs(data: ReportData, out_dir: Path) -> dict[str, Path | None]:
    """The capacity charts: one latency-vs-throughput curve per search with probes, and the searches side
    by side when there are two or more; nothing for a report without capacity runs."""
    runs = data.comparison.capacity
    images: dict[str, Path | None] = {}
    for i, c in enumerate(runs, start=1):
        if not c.probes:
            images[capacity_png_title(i)] = None
            continue
        path = out_dir / f"capacity_curve_{i}.png"
        capacity_curve_figure(c).savefig(path, format="png")
        images[capacity_png_title(i)] = path
    if len(runs) >= 2:
        path = out_dir / CAPACITY_COMPARE_PNG
        capacity_compare_figure(runs).savefig(path, format="png")
        images[f"{CAPACITY_PREFIX}per run"] = path
    return images


def capacity_markdown(data: ReportData, images: dict[str, Path | None]) -> list[str]:
    """The capacity section (empty without capacity runs): the table, the side-by-side chart, then per
    search its answer, the prediction beside it, its curve and its probes."""
    runs = data.comparison.capacity
    if not runs:
        return []
    out = ["## Capacity at the SLO", ""]
    out.append(
        "The highest load at which the SLO's percentile of every named metric is within its target and enough "
        "requests meet all targets (attainment). Cost per 1M tokens = hourly price / tokens per second at that "
        f'load / 3600 x 10^6, at {TIER_LABELS[data.comparison.tier]} prices; "predicted" is the planner\'s '
        "capacity for the same SLO, its error (predicted / measured - 1) beside it."
    )
    out += ["", _table(CAPACITY_COLUMNS, capacity_rows(runs)), ""]
    both = images.get(f"{CAPACITY_PREFIX}per run")
    if both is not None:
        out += [f"![Capacity at the SLO, per run]({both.name})", ""]
    for i, c in enumerate(runs, start=1):
        out += [f"### {c.name}: {c.slo_label or 'no SLO (knee search)'}, load by {c.load}", ""]
        out += [_md_escape(answer_sentence(c)), ""]
        devices = devices_sentence(c.devices_at_max, c.load, answer_level(c))
        if devices:
            out += [_md_escape(devices), ""]
        out += [_md_escape(prediction_sentence(c)), ""]
        path = images.get(capacity_png_title(i))
        if path is not None:
            out += [f"![Latency vs throughput: {c.name}]({path.name})", ""]
        if c.probes:
            out += [_table(probe_columns(c), probe_rows(c)), ""]
        out += [*(_md_escape(n) for n in c.notes), ""] if c.notes else []
    return out


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return markdown_table([_md_escape(h) for h in headers], [[_md_escape(v) for v in r] for r in rows])


def headline_markdown(data: ReportData) -> list[str]:
    """The section the report opens with: the headline's title in bold, then its sentences."""
    h = data.headline
    if h is None:
        return []
    return ["## Headline", "", f"**{_md_escape(h.title)}**", "", *(f"- {_md_escape(x)}" for x in h.lines), ""]


def results_markdown(data: ReportData) -> list[str]:
    """The percentile table (with the SLO columns and what they rest on when an SLO is known) and, for several
    runs, each run against the baseline."""
    cmp = data.comparison
    multi = len(cmp.runs) > 1
    pcts = ", ".join(f"p{p}" for p in data.percentiles)
    out = ["## Results", ""]
    out.append(
        f"One row per {'run and ' if multi else ''}cell (input length x concurrency). Latencies in ms at {pcts}: "
        "the mean over repeats of each repeat's percentile; where a cell has repeats, its medians and throughputs "
        "show their min-max over repeats in brackets."
    )
    out.append("")
    headers, rows = data.percentile_table()
    out += [_table(headers, rows), ""]
    out += [*(_md_escape(n) for n in data.slo_notes()), ""] if data.slo_notes() else []
    if multi:
        out += ["### Each run against the baseline", ""]
        out.append(
            f'Per cell, each run beside the baseline, {cmp.run(cmp.baseline).name}; "vs baseline" columns set '
            "each run against the baseline's figure at the same cell."
        )
        out += ["", _table(SIDE_BY_SIDE_COLUMNS, side_by_side_rows(cmp)), ""]
        if verdicts := verdict_rows(cmp):
            out += ["### Is each difference real?", ""]
            out.append(
                "Each run's figure over the baseline's with the ratio's 95% interval (repeats and requests "
                "resampled); better or worse only where the interval leaves 1 out."
            )
            out += ["", _table(VERDICT_TABLE_COLUMNS, verdicts), ""]
    return out


def failures_markdown(data: ReportData) -> list[str]:
    """Failures and warnings, as the HTML report has them: each failed cell's line, then each distinct note of
    each run once with the cells it applies to; nothing when there are none."""
    if not (data.failures or data.warnings):
        return []
    multi = len(data.comparison.runs) > 1
    out = ["## Failures and warnings", ""]
    if data.failures:
        rows = [[_md_escape(run), cell, _md_escape(line)] for run, cell, line in data.failures]
        out += [_table(["run", "cell", "failed requests and the most common reason"], rows), ""]
    for run, note in data.warnings:
        out.append(f"- {f'**{_md_escape(run)}**: ' if multi else ''}{_md_escape(note.line())}")
    return [*out, ""] if data.warnings else out


def telemetry_markdown(data: ReportData, images: dict[str, Path | None]) -> list[str]:
    """The server's gauges over time (each cell's window shaded when one run has them) and, per run, its devices
    over the run (cells shaded) and each cell's device figures."""
    out = ["## Telemetry", "", f"### {TELEMETRY_TITLE}", ""]
    path = images.get(TELEMETRY_TITLE)
    if path is not None:
        if telemetry_cells(data):
            out += ["Each shaded band is one cell's window, first send to last completion.", ""]
        out += [f"![{TELEMETRY_TITLE}]({path.name})", ""]
        missing = [
            data.run_names[s.run_id]
            for s in data.telemetry
            if not any(s.has(k) for k, *_ in TELEMETRY_GAUGES)
        ]
        if missing:
            out += [
                f"No server telemetry for {', '.join(missing)}: the engine exposed no running/waiting/KV-cache "
                "gauges (llama.cpp serves no /metrics) or scraping was off.",
                "",
            ]
    else:
        out += ["No server telemetry: the engines exposed no running/waiting/KV-cache gauges.", ""]
    out += ["## Device telemetry", ""]
    out.append(
        "What this machine's devices did while each cell ran (sampled when the engine ran where it was measured); "
        'each shaded band and each table row is one cell\'s repeat ("in 256 / c 4 / r1": input length, '
        "concurrency, repeat). Tokens per joule are over the devices that served and need a power or energy source."
    )
    out.append("")
    for i, t in enumerate(data.devices, start=1):
        name = data.run_names.get(t.run_id, t.run_id)
        if len(data.devices) > 1:
            out += [f"### {name}", ""]
        chart = images.get(f"{DEVICES_PREFIX}{i}")
        if chart is not None:
            out += [f"![Device telemetry: {name}]({chart.name})", ""]
        rows = device_table(t)
        if rows:
            out += [_table(DEVICE_COLUMNS, rows), ""]
        else:
            out += [
                f"No device telemetry for {name}: the engine was not on the measuring machine, or its results "
                "predate device telemetry.",
                "",
            ]
        if t.missing:
            out += ["Not measured on this machine:", "", *(f"- {_md_escape(m)}" for m in t.missing), ""]
    return out


def render_markdown(data: ReportData, images: dict[str, Path | None]) -> str:
    """The report as Markdown, opening with the headline, then the sections in ``REPORT_SECTIONS``'s order;
    images are linked by file name (they sit next to the .md file)."""
    cmp = data.comparison
    multi = len(cmp.runs) > 1
    out: list[str] = [f"# {data.title}", ""]
    line = (
        f"Generated {cmp.generated_at.strftime('%Y-%m-%d %H:%M UTC')} by accelbench {cmp.accelbench_version}."
    )
    if multi:
        line += f" Baseline: **{cmp.run(cmp.baseline).name}**; ratios are each run against it."
    out += [line + f" Cost at {TIER_LABELS[cmp.tier]} prices.", ""]

    out += headline_markdown(data)
    out += results_markdown(data)
    out += failures_markdown(data)
    out += capacity_markdown(data, images)
    out += [fleet_markdown(plan) for plan in data.fleet_plans]

    out += [f"## {LATENCY_THROUGHPUT_TITLE}", ""]
    lt = images.get(LATENCY_THROUGHPUT_TITLE)
    if lt is not None:
        chart = data.latency_throughput()
        out.append(
            f"One point per cell, labelled with its concurrency, at its output tok/s and its p{chart.percentile} "
            "latency (the mean over repeats); a cross marks a cell missing its run's SLO, a dashed line an SLO "
            "target, a star each run's best configuration (the headline's)."
        )
        out += ["", f"![{LATENCY_THROUGHPUT_TITLE}]({lt.name})", ""]
    else:
        out += ["No cell has a measured throughput, so there is nothing to chart.", ""]

    out += ["## Charts", ""]
    for title, path in images.items():
        if title.startswith((CAPACITY_PREFIX, DEVICES_PREFIX)) or title in (
            LATENCY_THROUGHPUT_TITLE,
            TELEMETRY_TITLE,
        ):
            continue  # shown in their own sections
        out += [f"### {title}", ""]
        if path is not None:
            out += [f"![{title}]({path.name})", ""]
        else:
            out += ["No per-request records were stored for these runs.", ""]

    out += telemetry_markdown(data, images)

    out += ["## Predicted vs measured", ""]
    prow = prediction_rows(data)
    if prow:
        out += [_table(PREDICTION_COLUMNS, prow), ""]
    out += [*data.prediction_notes, ""] if data.prediction_notes else []
    if not prow and not data.prediction_notes:
        out += ["The planner has no estimate for these runs.", ""]

    out += ["## Environment", ""]
    out += [
        "What each run ran: model, engine, machine, accelerators, CPU features, deployment and price.",
        "",
    ]
    head = [""] + [r.name + (" (baseline)" if multi and r.id == cmp.baseline else "") for r in cmp.runs]
    out += [_table(head, [[label, *values] for label, values in compared_rows(data)]), ""]

    if len(cmp.runs) > 1:  # whether the findings rank like with like (report/like_for_like.py)
        out += ["## Like for like", "", *(_md_escape(line) for line in like_for_like_lines(cmp)), ""]
    out += ["## Findings", ""]
    out += [f"- {f.text}" for f in cmp.findings] or ["No findings: no cell has the figures they need."]
    out.append("")

    out += ["## Cost", ""]
    out.append(
        "Cost per request = hourly price / requests per second / 3600; cost per 1M tokens = hourly price / "
        "tokens per second / 3600 x 10^6. A run without an instance type has no price: its cost is blank."
    )
    out.append("")
    crow = cost_rows(data)
    out += [_table(COST_COLUMNS, crow) if crow else "No run has a price, so no cost is shown.", ""]

    out += ["## Notes", ""]
    out += [f"- {n}" for n in cmp.notes]
    out += [
        "- TTFT: request sent to the first streamed chunk carrying text. TPOT: (E2E - TTFT) / (output tokens - 1). "
        "ITL: gaps between text-carrying chunks. E2E: request sent to the last text-carrying chunk. Percentiles by "
        "linear interpolation, in ms.",
        '- Throughputs are totals divided by each benchmark\'s wall time; "total" counts input and output tokens.',
        "",
    ]
    out += markdown_sections(data)
    return "\n".join(out)


def write_markdown(data: ReportData, out_dir: Path, name: str = "report.md") -> tuple[Path, list[Path]]:
    """Write ``report.md`` and its PNG charts into ``out_dir``; returns (markdown path, PNG paths)."""
    images = write_pngs(data, out_dir)
    path = out_dir / name
    path.write_text(render_markdown(data, images), encoding="utf-8")
    return path, [p for p in images.values() if p is not None]
