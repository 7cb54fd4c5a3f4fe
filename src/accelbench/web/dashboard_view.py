"""What the dashboard charts: the recent completed runs' output throughput against concurrency (one line per
run, named by its model and where it ran) and the recent capacity answers (the load each deployment sustained
at its SLO, its output tokens/s there and $ per million output tokens), read from the store the way the result
page reads them (``report/tables.py`` aggregates, ``services.capacity.capacity_answer``); the names come from
``report/attribution.py`` (``model_label``, ``where_label``), as on every other page."""

from __future__ import annotations

from collections import Counter
from typing import Any

from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunStatus
from accelbench.errors import AccelbenchError
from accelbench.report.attribution import model_label, where_label
from accelbench.report.capacity_results import fmt_usd_per_million, load_phrase, slo_label
from accelbench.report.formatting import MISSING, fmt_num, fmt_usd
from accelbench.services import aggregate
from accelbench.services.capacity_at_slo import capacity_answer
from accelbench.services.session import Store
from accelbench.services.stored_runs import RunListRequest, get_results, list_runs
from accelbench.web.views import accelerator_label

#: completed runs drawn as throughput lines, newest first
THROUGHPUT_RUNS = 6
#: capacity answers shown, newest first
CAPACITY_RUNS = 8
#: completed runs read to find them (the newest first): bounds the dashboard's work on a large store
SCAN_RUNS = 60


def run_name(run: RunInfo) -> str:
    """A run as the charts name it: its model and where it ran, "qwen2.5-7b-instruct on 1 x L4 (g6.2xlarge)",
    "smollm2-135m-instruct on CPU (this machine)"; only the model when neither the hardware nor the place is
    known."""
    accel, where = accelerator_label(run), where_label(run)
    if accel == MISSING and where == MISSING:
        return model_label(run)
    if accel == MISSING:
        hardware = where
    elif where == MISSING:
        hardware = accel
    else:
        hardware = f"{accel} ({where})"
    return f"{model_label(run)} on {hardware}"


def is_capacity_run(run: RunInfo) -> bool:
    """A capacity search (``accelbench capacity``, or a run spec with a ``capacity:`` section), whatever its
    kind: its cells are the search's probes, not a sweep, so it is drawn as a capacity answer, not a line."""
    spec = run.spec if isinstance(run.spec, dict) else {}
    extra = run.extra if isinstance(run.extra, dict) else {}
    return isinstance(spec.get("capacity"), dict) or isinstance(extra.get("capacity"), dict)


def _distinct(items: list[dict[str, Any]]) -> None:
    """Make each item's ``name`` unique in place: two runs of one model on one machine are told apart by their
    labels when those differ, else by their run ids (a bar chart merges bars of one name into one)."""
    counts = Counter(item["name"] for item in items)
    for name, n in counts.items():
        if n < 2:
            continue
        twins = [item for item in items if item["name"] == name]
        labels = [item["label"] for item in twins]
        by_label = all(labels) and len(set(labels)) == len(labels)
        for item in twins:
            item["name"] = f"{name} · {item['label'] if by_label else item['run']}"


def _throughput_line(store: Store, run: RunInfo) -> dict[str, Any] | None:
    """The run's output tokens/s by concurrency at the input length it measured at the most concurrencies
    (the shortest of a tie): a sweep over several input lengths would otherwise zigzag on one line. None when
    no cell has a throughput (every cell failed)."""
    points: dict[int, list[tuple[int, float]]] = {}
    for cell in aggregate(get_results(store, run.id)):
        tps = cell.mean("output_throughput")
        if tps is not None:
            points.setdefault(cell.input_len, []).append((cell.concurrency, tps))
    if not points:
        return None
    input_len = min(points, key=lambda n: (-len(points[n]), n))
    line = sorted(points[input_len])
    return {
        "run": run.id,
        "href": f"/runs/{run.id}",
        "name": run_name(run),
        "label": run.label,
        "input_len": input_len,
        "other_inputs": sorted(n for n in points if n != input_len),
        "x": [c for c, _ in line],
        "y": [round(tps, 2) for _, tps in line],
    }


def _capacity_row(run: RunInfo) -> dict[str, Any] | None:
    """A run's capacity answer as the dashboard shows it; None when it has none yet or it cannot be read (the
    run's own page says why)."""
    try:
        cap = capacity_answer(run)
    except AccelbenchError:
        return None
    if cap is None or not cap.complete:
        return None
    met = cap.slo is not None and cap.max_load is not None
    if met:
        assert cap.max_load is not None  # for mypy: met says so
        answer = load_phrase(cap.load, cap.max_load)
    elif cap.slo is not None:
        answer = "no level meets it"
    elif cap.knee is not None:
        answer = f"no SLO; the knee is at {load_phrase(cap.load, cap.knee)}"
    else:
        answer = "no SLO and no knee found"
    # the figures at the answer only: without one there is no load they would describe
    tps = cap.output_tokens_per_s_at_max if met else None
    per_million = cap.usd_per_million_output_tokens if met else None
    return {
        "run": run.id,
        "href": f"/runs/{run.id}",
        "name": run_name(run),
        "label": run.label,
        "slo": slo_label(cap.slo) or "none (the knee)",
        "met": met,
        "answer": answer,
        "output_tps": tps,
        "output_tps_text": fmt_num(tps),
        "usd_per_million": per_million,
        "usd_per_million_text": fmt_usd_per_million(per_million),
        "hourly_usd": cap.hourly_usd,
        "hourly_text": f"{fmt_usd(cap.hourly_usd)}/h" if cap.hourly_usd is not None else MISSING,
    }


def _bar(row: dict[str, Any]) -> dict[str, Any]:
    text = f"{row['answer']} at {row['slo']}"
    if row["usd_per_million"] is not None:
        text += f", {row['usd_per_million_text']} per 1M output tokens"
    return {"run": row["run"], "href": row["href"], "name": row["name"], "y": row["output_tps"], "text": text}


def dashboard_view(store: Store) -> dict[str, Any]:
    """The dashboard's charts: ``throughput`` (one line per recent completed run that is no capacity search,
    newest first), ``capacity`` (one row per recent completed capacity answer, newest first) and
    ``capacity_bars`` (those that met their SLO, with output tokens/s there; oldest first, so a horizontal bar
    chart, which draws its first category at the bottom, shows the newest on top)."""
    runs = list_runs(store, RunListRequest(status=[RunStatus.completed], limit=SCAN_RUNS)).items
    lines: list[dict[str, Any]] = []
    capacity: list[dict[str, Any]] = []
    for run in runs:
        if is_capacity_run(run):
            if len(capacity) < CAPACITY_RUNS and (row := _capacity_row(run)) is not None:
                capacity.append(row)
        elif len(lines) < THROUGHPUT_RUNS and (line := _throughput_line(store, run)) is not None:
            lines.append(line)
        if len(lines) >= THROUGHPUT_RUNS and len(capacity) >= CAPACITY_RUNS:
            break
    _distinct(lines)
    _distinct(capacity)
    return {
        "throughput": lines,
        "capacity": capacity,
        "capacity_bars": [
            _bar(row) for row in reversed(capacity) if row["met"] and row["output_tps"] is not None
        ],
    }
