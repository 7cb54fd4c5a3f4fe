"""The offline HTML report: one self-contained file with interactive plotly charts.

Why self-contained: a report is mailed, attached to tickets and opened on machines without network. So
plotly's JavaScript is embedded inline once, styles are inline, fonts are the system's, and there is no
image, font, script or stylesheet by URL: opening the file makes no network request at all (checked in a
real headless Chromium by the e2e tests).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from plotly.offline import get_plotlyjs

from accelbench.report.capacity_results import (
    CAPACITY_COLUMNS,
    answer_level,
    answer_sentence,
    capacity_rows,
    devices_sentence,
    load_title,
    prediction_sentence,
    probe_columns,
    probe_rows,
)
from accelbench.report.compare_runs import (
    SIDE_BY_SIDE_COLUMNS,
    TIER_LABELS,
    Comparison,
    side_by_side_rows,
)
from accelbench.report.document import REPORT_SECTIONS, TELEMETRY_GAUGES, ReportData
from accelbench.report.fleet_view import fleet_body_html
from accelbench.report.html_capacity_figures import capacity_compare_figure, capacity_figure
from accelbench.report.html_figures import (
    CONCURRENCY_CHARTS,
    cdf_figure,
    concurrency_figure,
    device_figure,
    latency_throughput_figure,
    telemetry_figure,
)
from accelbench.report.report_tables import (
    COST_COLUMNS,
    PREDICTION_COLUMNS,
    compared_rows,
    cost_rows,
    prediction_rows,
    telemetry_cells,
)
from accelbench.report.sections import html_sections
from accelbench.report.timeline import DEVICE_COLUMNS, device_table
from accelbench.report.verdict_phrases import VERDICT_TABLE_COLUMNS, verdict_rows

PLOT_CONFIG: dict[str, Any] = {"displaylogo": False, "responsive": True}


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js, minified, to embed inline (about 4.8 MB)."""
    return str(get_plotlyjs())


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
        added_sections=html_sections(data),
        plotly_js=Markup(plotly_js()),
        data_json=Markup(json.dumps(cmp.model_dump(mode="json"), allow_nan=False).replace("<", "\\u003c")),
    )


def write_html(data: ReportData, path: Path) -> Path:
    """Write the report to ``path`` (UTF-8) and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return path
