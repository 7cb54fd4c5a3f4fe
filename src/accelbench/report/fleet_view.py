"""How a fleet plan is shown to people, the same everywhere: the ranked table (``fleet_rows``, used by the CLI,
the Fleet page and the fleet report), the sentences under it (``fleet_lines``), the chart of servers needed
over the traffic's span per candidate (``servers_figure``), and the fleet report (``fleet_markdown``,
``fleet_html``, ``write_fleet_report``: ``fleet.md`` and a self-contained ``fleet.html``)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from accelbench.fleet.result import Candidate, FleetPlan
from accelbench.report.formatting import MISSING, fmt_num, fmt_usd

FLEET_COLUMNS = (
    "#",
    "instance",
    "capacity req/s",
    "source",
    "servers",
    "$/day on demand",
    "$/day reserved+peak",
    "$/1M out tok",
    "utilisation",
    "idle",
    "SLO risk",
    "cold start",
)


def _capacity(c: Candidate) -> str:
    cap = c.capacity
    text = fmt_num(cap.requests_per_s, 2)
    if cap.low is not None and cap.high is not None:
        text += f" ({fmt_num(cap.low, 2)}-{fmt_num(cap.high, 2)})"
    return text


def risk_text(c: Candidate) -> str:
    r = c.slo_risk
    if r is None:
        return "measured" if c.capacity.source == "measured" else "no range"
    if r.intervals_short == 0:
        return "none at range low"
    return (
        f"{r.intervals_short} int. short by <= {r.servers_short_max} (+{fmt_usd(r.usd_per_day_to_cover)}/day)"
    )


def cold_text(c: Candidate) -> str:
    cs = c.cold_start
    return (
        f"{cs.lead_s:,.0f} s lead, {cs.rises} rises, +{fmt_usd(cs.usd_per_day)}/day, "
        f"{cs.late_misses_per_day:,.0f} late misses/day"
    )


def fleet_rows(plan: FleetPlan) -> list[list[str]]:
    """One row per candidate, in the plan's (cheapest first) order."""
    rows = []
    for n, c in enumerate(plan.candidates, 1):
        reserved = MISSING
        if c.usd_per_day_reserved is not None:
            reserved = f"{fmt_usd(c.usd_per_day_reserved)} ({c.reserved_base_servers} reserved)"
        rows.append(
            [
                str(n),
                c.instance,
                _capacity(c),
                c.capacity.source,
                f"{c.min_servers}-{c.max_servers}",
                fmt_usd(c.usd_per_day),
                reserved,
                fmt_usd(c.usd_per_million_tokens),
                f"{c.utilisation:.0%}",
                f"{c.idle_share:.0%}",
                risk_text(c),
                cold_text(c),
            ]
        )
    return rows


def fleet_lines(plan: FleetPlan) -> list[str]:
    """What the table rests on, in sentences."""
    t = plan.traffic
    lines = [
        f"Traffic {t.source} ({t.format}): {t.requests:,.0f} requests over {t.seconds / 3600:,.1f} h in "
        f"{t.intervals} intervals, mean {t.mean_requests_per_s:.3g} req/s, busiest interval "
        f"{t.peak_requests_per_s:.3g} req/s, burstiness {t.burstiness:.2f}, mean {t.input_tokens:,.0f} in / "
        f"{t.output_tokens:,.0f} out tokens.",
        f"Model {plan.model} at {plan.slo}; {plan.peak_rule}.",
    ]
    if plan.candidates:
        best = plan.candidates[0]
        cs = best.cold_start
        lines.append(
            f"Cheapest: {best.instance}, {best.min_servers}-{best.max_servers} servers, "
            f"{fmt_usd(best.usd_per_day)}/day on demand ({best.capacity.detail}). Cold start: "
            f"provisioning {cs.provision_s:,.0f} s ({cs.provision_source}) + engine and model "
            f"{cs.ready_s:,.0f} s ({cs.ready_source}): add servers {cs.lead_s:,.0f} s before each rise."
        )
        if cs.steps:
            shown = "; ".join(
                f"+{x.add} at {x.start_at_s / 3600:.2f} h for {x.rise_at_s / 3600:.2f} h"
                + (f" ({x.late_misses:,.0f} would miss if late)" if x.late_misses else "")
                for x in cs.steps[:6]
            )
            more = f"; {len(cs.steps) - 6} more in the JSON" if len(cs.steps) > 6 else ""
            lines.append(f"Scale ahead ({best.instance}): {shown}{more}.")
    lines.extend(plan.notes)
    if plan.skipped:
        lines.append(
            f"{len(plan.skipped)} instance type(s) cannot serve it at this SLO (see the JSON's skipped)."
        )
    return lines


def servers_figure(plan: FleetPlan, top: int = 8) -> go.Figure:
    """Servers needed over the traffic's span, one step line per candidate (the cheapest ``top``)."""
    fig = go.Figure()
    for c in plan.candidates[:top]:
        xs: list[float] = []
        ys: list[int] = []
        for i in c.intervals:
            xs.extend([i.start_s / 3600.0, (i.start_s + i.seconds) / 3600.0])
            ys.extend([i.servers, i.servers])
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=c.instance, line={"shape": "hv"}))
    fig.update_layout(
        title="Servers needed over the traffic's span",
        xaxis_title="hours from the start",
        yaxis_title="servers",
        height=420,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
    )
    return fig


def servers_table(plan: FleetPlan, top: int = 8) -> tuple[list[str], list[list[str]]]:
    """(header, rows): each interval's start (hours), mean and peak rate, and the servers of the cheapest
    ``top`` candidates (the peak is the interval's, the same for every candidate)."""
    shown = plan.candidates[:top]
    header = ["start h", "req/s", "peak req/s", *[c.instance for c in shown]]
    rows: list[list[str]] = []
    if shown:
        for j, i in enumerate(shown[0].intervals):
            rates = [f"{i.start_s / 3600:.2f}", f"{i.requests_per_s:.3g}", f"{i.peak_requests_per_s:.3g}"]
            rows.append(rates + [str(c.intervals[j].servers) for c in shown])
    return header, rows


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *["| " + " | ".join(r) + " |" for r in rows],
    ]


def fleet_markdown(plan: FleetPlan) -> str:
    lines = ["## Fleet plan", "", *[f"- {line}" for line in fleet_lines(plan)], ""]
    lines += _md_table(list(FLEET_COLUMNS), fleet_rows(plan))
    lines += ["", "### Servers per interval", "", *_md_table(*servers_table(plan)), ""]
    return "\n".join(lines)


def _html_table(header: list[str], rows: list[list[str]], css: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _figure_html(plan: FleetPlan, div_id: str) -> str:
    """The servers chart as a <div> and its drawing script (plotly.js itself must be on the page)."""
    return str(
        pio.to_html(
            servers_figure(plan),
            include_plotlyjs=False,
            full_html=False,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True},
            default_width="100%",
            default_height="420px",
        )
    )


def fleet_body_html(plan: FleetPlan, div_id: str = "fleet-servers") -> str:
    """One plan as HTML (sentences, ranked table, chart, servers per interval), for a page that has a heading."""
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in fleet_lines(plan))
    chart = _figure_html(plan, div_id) if plan.candidates else ""
    return (
        f'<ul class="fleet-lines">{lines}</ul>'
        + _html_table(list(FLEET_COLUMNS), fleet_rows(plan), "fleet")
        + chart
        + "<h3>Servers per interval</h3>"
        + _html_table(*servers_table(plan), "fleet-servers")
    )


def fleet_html(plan: FleetPlan) -> str:
    """The fleet report: one self-contained page (plotly.js embedded)."""
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Fleet plan</title>'
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:nth-child(2){text-align:left}</style>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        f'<section id="fleet"><h2>Fleet plan</h2>{fleet_body_html(plan)}</section></body></html>'
    )


def fleet_plans(extras: Iterable[Mapping[str, Any]]) -> list[FleetPlan]:
    """The fleet plans stored with runs (``extra["fleet_plan"]``, kept by ``fleet --validate``); an unreadable
    one is left out."""
    out = []
    for extra in extras:
        stored = extra.get("fleet_plan") if isinstance(extra, Mapping) else None
        if isinstance(stored, dict):
            try:
                out.append(FleetPlan.model_validate(stored))
            except ValueError:
                continue
    return out


def write_fleet_report(plan: FleetPlan, out_dir: Path) -> list[Path]:
    """``fleet.md`` and ``fleet.html`` in ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "fleet.md"
    md.write_text(fleet_markdown(plan), encoding="utf-8")
    page = out_dir / "fleet.html"
    page.write_text(fleet_html(plan), encoding="utf-8")
    return [md, page]
