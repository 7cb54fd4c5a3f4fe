"""What the pages show, computed from the store and the library (kept out of the templates so it is tested
like code): catalog rows, the run form's choices, a run's table, charts and findings, comparisons."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from markupsafe import Markup

from accelbench import services as service
from accelbench.api.responses import finite
from accelbench.domain.capacity import CapacitySpec
from accelbench.domain.instance_types import AcceleratorType, InstanceType, PriceTier
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import EngineSettings, SweepSpec
from accelbench.errors import AccelbenchError, UserInputError
from accelbench.redact import redact
from accelbench.report.attribution import model_label, tokenizer_of, where_label
from accelbench.report.capacity_results import (
    answer_level,
    devices_at_capacity,
    devices_sentence,
    fmt_level,
    fmt_usd_per_million,
    load_phrase,
    slo_label,
)
from accelbench.report.cell_table import cell_table, slo_note
from accelbench.report.compare_runs import baseline_first, not_comparable
from accelbench.report.document import TELEMETRY_GAUGES, telemetry_series
from accelbench.report.failures import RunWarnings, any_completed
from accelbench.report.formatting import MISSING, fmt_num, fmt_pct, fmt_usd
from accelbench.report.html import capacity_page, compare_charts
from accelbench.report.html_figures import cell_band_layout, device_figure
from accelbench.report.like_for_like import like_for_like_lines
from accelbench.report.percentiles import parse_percentiles
from accelbench.report.served_view import served_context
from accelbench.report.side_by_side import PAIR_COLUMNS, pair_rows, side_by_side_columns, side_by_side_rows
from accelbench.report.tables import has_repeats
from accelbench.report.timeline import DEVICE_COLUMNS, device_table, run_timeline
from accelbench.report.verdict_phrases import VERDICT_TABLE_COLUMNS, verdict_rows
from accelbench.services.capacity_at_slo import capacity_answer
from accelbench.services.instances import all_instances, runtime_choices
from accelbench.services.results import report_data
from accelbench.services.run_view import RunViewRequest, run_view
from accelbench.services.session import Store
from accelbench.services.stored_runs import get_run
from accelbench.web.estimate_view import estimate_page_view
from accelbench.web.import_view import imported_view
from accelbench.web.run_progress import cancel_warning, progress_view

TIER_LABEL = {"gpu": "GPU", "neuron": "Neuron", "cpu": "CPU"}
TIER_ORDER = ("gpu", "neuron", "cpu")
#: the latency metrics an SLO may name (domain/capacity.py METRICS), as the pages write them
METRIC_LABEL = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}


# ------------------------------------------------------------------------------------------- filters
def fmt_dt(value: datetime | str | None) -> str:
    if value is None:
        return MISSING
    if isinstance(value, str):
        return value
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def accelerator_label(run: RunInfo) -> str:
    """ "CPU" for CPU runs (a CPU is not an accelerator count), "1 x L4" for GPU, "2 x Inferentia2" for Neuron."""
    kind = (run.accelerator_type or "").lower()
    if kind == "cpu" or (not kind and run.target == "local"):
        return "CPU"
    if run.accelerator_name:
        count = f"{run.accelerator_count} x " if run.accelerator_count else ""
        return f"{count}{run.accelerator_name}"
    return TIER_LABEL.get(kind, kind or "-")


def progress_text(run: RunInfo) -> str:
    """The one line a list shows of a run in flight: its phase in words and the time left (or so far), e.g.
    "Benchmarking cell 3 of 8 (input 512, concurrency 4) · about 4 minutes left" (``web/run_progress.py``)."""
    view = progress_view(run)
    return view.line() if view is not None else ""


def status_class(status: Any) -> str:
    value = getattr(status, "value", status)
    return f"status status-{value}"


def to_json(value: Any) -> Markup:
    """JSON for a <script type="application/json"> block. Script content is not HTML-decoded, so it must not be
    HTML-escaped; instead '<', '>' and '&' are written as JSON unicode escapes, so no '</script>' can close it."""
    text = json.dumps(finite(value), allow_nan=False, default=str)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


FILTERS: dict[str, Callable[..., Any]] = {
    "num": fmt_num,
    "usd": fmt_usd,
    "dt": fmt_dt,
    "accel": accelerator_label,
    "status_class": status_class,
    "progress": progress_text,
    "progress_view": progress_view,
    "cancel_warning": cancel_warning,
    "where": where_label,
    "model_label": model_label,
    "tokenizer": tokenizer_of,
    "tojson_safe": to_json,
}


# ------------------------------------------------------------------------------------------- catalog
def instance_label(inst: InstanceType) -> str:
    """Dropdown text: CPU entries show vCPUs and memory; accelerator entries their devices."""
    if inst.accelerator_type == AcceleratorType.cpu:
        gen = f", {inst.cpu_generation}" if inst.cpu_generation else ""
        return f"{inst.name} — {inst.vcpus} vCPU, {fmt_num(inst.memory_gib, 0)} GiB{gen}"
    devices = f"{inst.accelerator_count} x {inst.accelerator_name}"
    return f"{inst.name} — {devices} ({fmt_num(inst.total_accelerator_memory_gib, 0)} GiB)"


def catalog_tier_counts() -> dict[str, int]:
    counts = dict.fromkeys(TIER_ORDER, 0)
    for inst in all_instances():
        counts[inst.accelerator_type.value] += 1
    return counts


# ------------------------------------------------------------------------------------------ run form
def model_choices() -> dict[str, list[str]]:
    """Names for the model pickers: prepared models (runnable locally now) and presets (for planning)."""
    out: dict[str, list[str]] = {"prepared": [], "presets": []}
    try:
        out["prepared"] = sorted({str(m.get("name")) for m in service.prepared_models() if m.get("name")})
    except (ImportError, AttributeError, AccelbenchError):
        out["prepared"] = []
    try:
        out["presets"] = sorted({str(p.get("name")) for p in service.presets() if p.get("name")})
    except (ImportError, AttributeError, AccelbenchError):
        out["presets"] = []
    return out


def run_form_context() -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = {t: [] for t in TIER_ORDER}
    for inst in all_instances():
        groups[inst.accelerator_type.value].append(
            {
                "name": inst.name,
                "label": instance_label(inst),
                "tier": inst.accelerator_type.value,
                "numa_nodes": inst.numa_nodes,
                "vcpus": inst.vcpus,
                "memory_gib": inst.memory_gib,
            }
        )
    choices = runtime_choices()
    sweep = SweepSpec()
    return {
        "groups": [(TIER_LABEL[t], groups[t]) for t in TIER_ORDER if groups[t]],
        "form_data": {
            # The one table that decides a tier's runtime, handed to the page script as data.
            "default_runtime": choices.default_runtime,
            "runtimes": choices.runtimes,
        },
        "models": model_choices(),
        "sweep": sweep,
        "capacity": CapacitySpec(),
        "slo_metrics": list(METRIC_LABEL.items()),
        "engine_fields": EngineSettings.model_fields,
    }


# ---------------------------------------------------------------------------------------- result
def _series_by_input(cells: Sequence[Any], metric: str) -> list[dict[str, Any]]:
    by_input: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for c in cells:
        agg = c.metric(metric)
        if agg is not None:
            by_input[c.input_len].append((c.concurrency, agg.mean))
    return [
        {"name": f"input {il}", "x": [p[0] for p in sorted(pts)], "y": [p[1] for p in sorted(pts)]}
        for il, pts in sorted(by_input.items())
    ]


def _capacity_state(run: RunInfo, cap: Any, level: Callable[[float | None], str]) -> tuple[str, str]:
    """(state, answer line) of a capacity search: in progress, stopped, met, none met, or the knee."""
    slo = cap.slo
    label = slo_label(slo)
    if not cap.complete and run.status.value == "pending":
        return "progress", "Queued: the search starts when the worker picks the run up."
    if not cap.complete and not run.status.finished:
        return "progress", f"Searching: {len(cap.probes)} level(s) measured so far."
    if not cap.complete:  # stopped (cancelled, failed, interrupted) before it answered
        return "stopped", cap.reason or "The search stopped before it answered."
    if slo is not None and cap.max_load is not None:
        answer = (
            f"Capacity at {label}: {level(cap.max_load)}, "
            f"{fmt_num(cap.output_tokens_per_s_at_max)} output tokens/s"
        )
        if cap.total_tokens_per_s_at_max is not None:
            answer += f" ({fmt_num(cap.total_tokens_per_s_at_max)} total)"
        if cap.usd_per_million_output_tokens is not None:
            answer += f", {fmt_usd_per_million(cap.usd_per_million_output_tokens)} per 1M output tokens"
            if cap.usd_per_million_total_tokens is not None:
                answer += f" ({fmt_usd_per_million(cap.usd_per_million_total_tokens)} per 1M total)"
        return "met", answer + "."
    if slo is not None:
        return "none", f"No level meets {label}: {cap.reason or 'no level was measured'}"
    if cap.knee is not None:
        return "knee", f"No SLO given: the knee (throughput stops growing) is at {level(cap.knee)}."
    return "none", cap.reason or "No SLO given and no knee found: too few levels rose in throughput."


def _capacity_point(p: Any, metric: str, level: Callable[[float | None], str]) -> dict[str, Any] | None:
    y = p.percentiles.get(metric)
    if y is None:
        return None
    return {"x": p.output_tokens_per_s, "y": y, "level": p.level, "label": level(p.level),
            "repeat": p.repeat, "met": p.met}  # fmt: skip


def _capacity_charts(
    cap: Any, probes: Sequence[Any], marked: tuple[Any, Any], level: Callable[[float | None], str], unit: str
) -> list[dict[str, Any]]:
    """One latency-vs-throughput chart per judged metric: each probe a point, the SLO target, the chosen point
    and the knee (``marked``) marked."""
    slo = cap.slo
    chosen, knee = marked
    metrics = [m for m in METRIC_LABEL if slo is not None and m in slo.targets] or ["tpot", "ttft"]
    percentile = slo.percentile if slo is not None else 90.0
    charts = []
    for m in metrics:
        pts = [q for p in probes if (q := _capacity_point(p, m, level)) is not None]
        if not pts:
            continue
        charts.append(
            {
                "metric": m,
                "title": f"p{percentile:g} {METRIC_LABEL[m]} vs output throughput",
                "y": f"{METRIC_LABEL[m]} p{percentile:g} (ms)",
                "unit": unit,
                "target": slo.targets.get(m) if slo is not None else None,
                "points": pts,
                "chosen": _capacity_point(chosen, m, level) if chosen is not None else None,
                "knee": _capacity_point(knee, m, level) if knee is not None else None,
            }
        )
    return charts


def _probe_row(p: Any, marked: tuple[Any, Any]) -> dict[str, Any]:
    return {
        "level": fmt_level(p.level),
        "repeat": p.repeat,
        "requests": p.requests,
        "failed": p.failed,
        "metrics": [fmt_num(p.percentiles.get(m), 2 if m in ("tpot", "itl") else 1) for m in METRIC_LABEL],
        "attainment": MISSING if p.attainment is None else f"{p.attainment:.0%}",
        "output_tps": fmt_num(p.output_tokens_per_s),
        "total_tps": fmt_num(p.total_tokens_per_s),
        "rps": fmt_num(p.requests_per_s, 2),
        "achieved_rate": fmt_num(p.achieved_rate, 2),
        "oversaturated": "yes" if p.oversaturated else "",
        "met": MISSING if p.met is None else ("yes" if p.met else "no"),
        "why": p.why,
        "chosen": p is marked[0],
        "knee": p is marked[1],
    }


def _capacity_prediction(cap: Any, level: Callable[[float | None], str]) -> dict[str, Any] | None:
    """The planner's predicted capacity beside the measured one, None when it predicted none."""
    if cap.predicted_max_load is None:
        return None
    error = fmt_pct(cap.prediction_error_pct, signed=True)
    return {
        "predicted": level(cap.predicted_max_load),
        "measured": level(cap.max_load),
        "error": error,
        "text": (
            f"{error} against the measured {level(cap.max_load)}"
            if cap.prediction_error_pct is not None
            else "no measured capacity to hold it against"
        ),
    }


def capacity_view(run: RunInfo, results: Sequence[ResultInfo] = ()) -> dict[str, Any] | None:
    """A capacity run's section of its page (whatever the run's kind: the answer is in ``extra["capacity"]``):
    the answer line, the planner's prediction beside the measured capacity, one latency-vs-throughput chart
    per judged metric (each probe a point; the SLO target, the chosen point and the knee marked) and the
    probe table, and what the serving devices did at the answer (from ``results``' device telemetry). None for a
    run without a capacity answer."""
    try:
        cap = capacity_answer(run)
    except AccelbenchError as exc:
        return {"error": exc.message}
    if cap is None:
        return None
    unit = "requests/s" if cap.load == "request_rate" else "users"

    def level(x: float | None) -> str:
        return MISSING if x is None else load_phrase(cap.load, x)

    slo = cap.slo
    percentile = slo.percentile if slo is not None else 90.0
    probes = sorted(cap.probes, key=lambda p: (p.level, p.repeat))
    chosen = next((p for p in probes if cap.max_load is not None and p.level == cap.max_load and p.met), None)
    knee = next((p for p in probes if cap.knee is not None and p.level == cap.knee), None)
    state, answer = _capacity_state(run, cap, level)
    return {
        "error": None,
        "result": cap,
        "state": state,
        "answer": answer,
        "unit": unit,
        "rate": cap.load == "request_rate",
        "slo": slo_label(slo),
        "attainment": f"{slo.attainment:.0%}" if slo is not None else None,
        "percentile": f"p{percentile:g}",
        "max_load": level(cap.max_load),
        "knee": level(cap.knee),
        "hourly_usd": cap.hourly_usd,
        "prediction": _capacity_prediction(cap, level),
        "charts": _capacity_charts(cap, probes, (chosen, knee), level, unit),
        "metric_headers": [f"{METRIC_LABEL[m]} p{percentile:g} (ms)" for m in METRIC_LABEL],
        "rows": [_probe_row(p, (chosen, knee)) for p in probes],
        "notes": cap.notes,
        "devices": devices_sentence(devices_at_capacity(cap, results), cap.load, answer_level(cap))
        if cap.complete
        else None,
    }


def _cell_charts(cells: Sequence[Any]) -> dict[str, dict[str, Any]]:
    return {
        "tpot": {"title": "Median TPOT vs concurrency", "y": "TPOT p50 (ms)",
                 "series": _series_by_input(cells, "tpot_p50_ms")},
        "ttft": {"title": "Median TTFT vs concurrency", "y": "TTFT p50 (ms)",
                 "series": _series_by_input(cells, "ttft_p50_ms")},
        "throughput": {"title": "Total token throughput vs concurrency", "y": "tokens/s",
                       "series": _series_by_input(cells, "total_token_throughput")},
    }  # fmt: skip


def _telemetry_lines(series: Any) -> list[dict[str, Any]]:
    """The server's /metrics gauges as chart lines, the report's own reading of the scrapes (canonical names,
    vLLM's or not), so page and report agree."""
    return [
        {
            "name": title,
            "kv": key == "kv_cache_pct",
            "x": [round(t, 2) for t, v in zip(series.t_s, series.values[key], strict=True) if v is not None],
            "y": [v for v in series.values[key] if v is not None],
        }
        for key, title, *_ in TELEMETRY_GAUGES
        if any(v is not None for v in series.values.get(key, []))
    ]


def _devices(timeline: Any) -> dict[str, Any]:
    figure = device_figure(timeline)
    return {
        "chart": json.loads(figure.to_json()) if figure is not None else None,
        "columns": DEVICE_COLUMNS,
        "rows": device_table(timeline),
        "missing": timeline.missing,
    }


def _failures(warned: RunWarnings) -> dict[str, Any]:
    return {
        "failures": [
            {
                "cell": f.cell,
                "failed": f.failed,
                "ended": f.ended,
                "share": f"{f.share:.0%}",
                "reason": f.reason,
                "count": f.reason_count,
            }
            for f in warned.failures
        ],
        "warnings": [{"text": n.text, "where": n.where()} for n in warned.notes],
    }


def result_context(store: Store, run_ref: str, percentiles: str | None = None) -> dict[str, Any]:
    """The result page of one run (its ``RunView``, as ``runs show`` and the API read it): the headline, the
    per-cell table at the chosen latency percentiles (with SLO attainment and goodput when the run has an SLO,
    and each cell's top failure reason: ``report/headline.py`` ``cell_table``), the charts, the server's
    /metrics and the devices on one axis with each cell's window, findings, failures, settings and
    environment."""
    chosen = parse_percentiles(percentiles)  # a percentile that is not stored is refused saying which are
    view = run_view(store, RunViewRequest(run_ref=run_ref, public=True, telemetry=True, keep_going=True))
    run, results, cells = view.run, view.results, view.cells
    series = telemetry_series(run.id, view.samples)
    # the devices and the cells' windows on the /metrics chart's own clock (report/timeline.py)
    timeline = run_timeline(run.id, results, origin_wall=series.origin_wall)
    headers, rows = cell_table(cells, results, chosen, slo=view.judged)
    settings = ((run.spec or {}).get("engine") or {}).get("settings") or {}
    return {
        "run": run,
        "accelerator": accelerator_label(run),
        "is_cpu": accelerator_label(run) == "CPU",
        "results": results,
        "headers": headers,
        "rows": rows,
        "ranged": has_repeats(cells),
        "percentiles": chosen,
        "slo_note": slo_note(view.choice, view.judged) if view.choice is not None else None,
        "cell_bands": cell_band_layout(timeline.cells),
        "devices": _devices(timeline),
        "charts": _cell_charts(cells),
        "telemetry": _telemetry_lines(series),
        "telemetry_samples": len(view.samples),
        "findings": [f.text for f in view.findings],
        "findings_error": view.findings_error,
        "headline": view.headline,
        "environment": view.environment,
        **served_context(run),  # what it served and its quality (report/served_view.py)
        "settings": {k: v for k, v in redact(settings).items() if v not in (None, [], {}, "")},
        "in_flight": not run.status.finished,
        "capacity": capacity_view(run, results),
        "imported": imported_view(run, results),  # where an imported run's figures came from
        **_failures(view.warnings),
        "charted": any_completed(results),
    }


# ---------------------------------------------------------------------------------------- compare
def comparison_view(
    store: Store,
    run_ids: Sequence[str],
    tier: PriceTier,
    baseline: str | None = None,
    percentiles: Sequence[int] = (50, 90, 99),
) -> dict[str, Any]:
    """The Compare page's comparison: the runs against the baseline (``baseline``, else the first ticked), the
    side-by-side table at the chosen percentiles, each run against the baseline, the report's charts, findings,
    notes and capacity. A run that cannot be compared (``not_comparable``) is refused saying why."""
    order = baseline_first(store, run_ids, baseline)
    for run_id in order:
        why = not_comparable(get_run(store, run_id))
        if why:
            raise UserInputError(
                f"Run {run_id} cannot be compared: {why}.", hint="Pick completed runs that have results."
            )
    data = report_data(store, order, tier)
    cmp = data.comparison
    return {
        "runs": cmp.runs,
        "baseline": cmp.run(cmp.baseline),
        "columns": side_by_side_columns(percentiles),
        "rows": side_by_side_rows(cmp, percentiles),
        "pair_columns": PAIR_COLUMNS,
        "pair_rows": pair_rows(cmp),
        "charts": compare_charts(data),
        "findings": [f.text for f in cmp.findings],
        "notes": cmp.notes,
        "capacity": capacity_page(cmp),
        "like_for_like": like_for_like_lines(cmp),
        "verdict_columns": VERDICT_TABLE_COLUMNS,
        "verdict_rows": verdict_rows(cmp),
    }


# --------------------------------------------------------------------------------------- estimate
def estimate_view(result: dict[str, Any], *, slo: str | None = None, concurrency: int = 1) -> dict[str, Any]:
    """A ranked estimate as the page shows it, in the planner's order: each row's SLO verdict, measured badge
    and sort keys, and the cost vs latency chart (``web/estimate_view.py``)."""
    return estimate_page_view(result, slo_text=slo, concurrency=concurrency)
