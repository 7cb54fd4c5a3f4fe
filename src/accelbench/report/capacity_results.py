"""Capacity at an SLO in reports and comparisons: the searches among the runs, their table, their sentences
and the points their latency-vs-throughput curves are drawn from.

A run is a capacity search when its ``extra["capacity"]`` holds a ``CapacityResult`` (``accelbench capacity``,
or a run spec with a ``capacity:`` section), whatever its kind. While a search runs (or after it was
interrupted) that entry holds only the probes so far; the load and SLO then come from the run's spec, and the
run is shown as unfinished: no answer is claimed for it.

Cost is priced as the rest of the comparison is, at its tier: hourly / tokens per second at ``max_load`` /
3600 x 1e6, for output tokens and for total (input + output) tokens. The error of the planner's prediction is
(predicted / measured - 1) x 100, positive when the planner promised more than was measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.bench.capacity_confidence import confidence_range, level_evidence, range_phrase
from accelbench.bench.capacity_search import cell_key
from accelbench.domain.capacity import CapacityResult, CapacitySLO, LoadKind, Probe
from accelbench.domain.device import DeviceTelemetry
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.report.comparison import CapacityRun, ComparedRun, DeviceAtCapacity, RunData, fmt_num, fmt_usd
from accelbench.report.tables import markdown_table

GIB = 2**30

METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
#: the percentile the search reports latencies at when it judges no SLO (bench.capacity.judge)
KNEE_PERCENTILE = 90.0

CAPACITY_COLUMNS: tuple[str, ...] = (
    "run",
    "instance",
    "engine",
    "SLO",
    "load",
    "max load",
    "out tok/s at max",
    "$/1M output",
    "$/1M total",
    "predicted",
    "knee",
)


# ------------------------------------------------------------------------------------------ reading
def _slo_from_spec(section: dict[str, Any]) -> CapacitySLO | None:
    """The SLO of a run's spec: the capacity command stores a ``CapacitySLO``; a run spec's ``capacity:``
    section has ``slo`` as metric -> ms with ``percentile`` and ``attainment`` beside it."""
    slo = section.get("slo")
    if not isinstance(slo, dict) or not slo:
        return None
    if "targets" in slo:
        return CapacitySLO.model_validate(slo)
    extra = {k: section[k] for k in ("percentile", "attainment") if k in section}
    return CapacitySLO(targets={str(k): float(v) for k, v in slo.items()}, **extra)


def capacity_result(run: RunInfo) -> tuple[CapacityResult | None, str | None]:
    """The run's capacity search, or (None, None) when it is none, or (None, why) when its record is unreadable."""
    stored = (run.extra or {}).get("capacity") if isinstance(run.extra, dict) else None
    if not isinstance(stored, dict):
        return None, None
    data = dict(stored)
    spec = run.spec.get("capacity") if isinstance(run.spec, dict) else None
    try:
        if "load" not in data:  # the probes of a search still running or interrupted
            section = spec if isinstance(spec, dict) else {}
            data["load"] = section.get("load", "concurrency")
            if "slo" not in data:
                slo = _slo_from_spec(section)
                data["slo"] = slo.model_dump(mode="json") if slo is not None else None
        return CapacityResult.model_validate(data), None
    except ValueError as exc:
        first = str(exc).splitlines()[1:2] or [str(exc)]
        return None, f"{run.id}'s capacity record cannot be read ({first[0].strip()}); it is left out."


def finished(run: RunInfo, result: CapacityResult) -> bool:
    """Whether the search has given its answer: it has one (or said why not), or the run completed."""
    if result.max_load is not None or result.reason is not None:
        return True
    return run.status.value == "completed"


def slo_label(slo: CapacitySLO | None) -> str | None:
    """ "p90 TPOT <= 50 ms, TTFT <= 1000 ms" (the finding's spelling); None without an SLO."""
    if slo is None:
        return None
    targets = ", ".join(f"{METRIC_NAMES.get(m, m.upper())} <= {ms:g} ms" for m, ms in slo.targets.items())
    return f"p{slo.percentile:g} {targets}"


def cost_per_million(hourly_usd: float | None, tokens_per_s: float | None) -> float | None:
    if hourly_usd is None or not tokens_per_s or tokens_per_s <= 0:
        return None
    return hourly_usd / tokens_per_s / 3600.0 * 1e6


def _hardware_names(runs: Sequence[tuple[RunInfo, ComparedRun]]) -> list[str]:
    base = [run.instance_type or cr.name for run, cr in runs]
    return [
        f"{b} ({cr.name})" if base.count(b) > 1 and b != cr.name else b
        for b, (_, cr) in zip(base, runs, strict=True)
    ]


def answer_probe(result: CapacityResult) -> tuple[int, Probe] | None:
    """The probe a search's answer rests on and its index in the order measured: the level meeting the SLO
    that is its capacity, else (no SLO) the knee; None when the search has no answer."""
    level = result.max_load if result.slo is not None else result.knee
    if level is None:
        return None
    found = [
        (i, p) for i, p in enumerate(result.probes) if p.level == level and (p.met or result.slo is None)
    ]
    return found[-1] if found else None


def devices_at_capacity(result: CapacityResult, results: Sequence[ResultInfo]) -> list[DeviceAtCapacity]:
    """What the serving devices (the accelerators, else the CPU) did at the search's answer: utilisation,
    memory, power and output tokens per joule over the probe's window, read from the device telemetry stored
    with that probe's cell (``bench/capacity_search.py`` ``cell_key``). Empty when no telemetry was stored with it."""
    found = answer_probe(result)
    if found is None:
        return []
    index, probe = found
    concurrency, repeat = cell_key(result.load, index, probe.level, probe.repeat)
    stored = next((r for r in results if r.concurrency == concurrency and r.repeat == repeat), None)
    raw = (stored.summary or {}).get("device_telemetry") if stored is not None else None
    if not raw:
        return []
    tel = DeviceTelemetry.model_validate(raw)
    tokens = int((stored.summary or {}).get("total_output_tokens") or 0) if stored is not None else 0
    tpj, jpt = tel.tokens_per_joule(tokens), tel.joules_per_output_token(tokens)
    return [
        DeviceAtCapacity(
            device=d.device,
            kind=d.kind.value,
            util_mean_pct=d.util_mean_pct,
            util_peak_pct=d.util_peak_pct,
            memory_used_peak_gib=None if d.memory_used_peak_bytes is None else d.memory_used_peak_bytes / GIB,
            memory_total_gib=None if d.memory_total_bytes is None else d.memory_total_bytes / GIB,
            power_mean_w=d.power_mean_w,
            tokens_per_joule=tpj,
            joules_per_output_token=jpt,
        )
        for d in tel.primary()
    ]


def devices_sentence(devices: Sequence[DeviceAtCapacity], load: LoadKind, level: float | None) -> str | None:
    """The devices at the answer in one sentence, e.g. "At 6 users the CPU ran at 96% mean utilisation (100%
    peak), 3.70 GiB of 15.6 GiB at most; 0.84 output tokens per joule (1.19 J per output token)."; None when
    no device telemetry was stored with the answer's probe."""
    if not devices or level is None:
        return None
    parts = []
    for d in devices:
        name = "the CPU" if d.kind == "cpu" else d.device
        bits = []
        if d.util_mean_pct is not None:
            bits.append(f"{d.util_mean_pct:.0f}% mean utilisation" + (
                f" ({d.util_peak_pct:.0f}% peak)" if d.util_peak_pct is not None else ""))  # fmt: skip
        if d.memory_used_peak_gib is not None:
            bits.append(f"{fmt_num(d.memory_used_peak_gib, 2)} GiB" + (
                f" of {fmt_num(d.memory_total_gib, 1)} GiB" if d.memory_total_gib else "") + " in use at most")  # fmt: skip
        if d.power_mean_w is not None:
            bits.append(f"{fmt_num(d.power_mean_w, 0)} W")
        if bits:
            parts.append(f"{name} ran at {', '.join(bits)}")
    if not parts:
        return None
    text = f"At {load_phrase(load, level)}, " + "; ".join(parts)
    first = devices[0]
    if first.tokens_per_joule is not None and first.joules_per_output_token is not None:
        text += (
            f"; {fmt_num(first.tokens_per_joule, 2)} output tokens per joule "
            f"({fmt_num(first.joules_per_output_token, 3)} J per output token)"
        )
    else:
        text += "; no power or energy source, so no tokens per joule"
    return text + "."


def answer_level(c: CapacityRun | CapacityResult) -> float | None:
    """The level a search's answer names: its capacity with an SLO, else its knee."""
    return c.max_load if c.slo is not None else c.knee


# the search's own figures (``CapacityResult`` fields), which a ``CapacityRun`` carries as they are
AS_SEARCHED = (
    "load",
    "slo",
    "max_load",
    "reason",
    "output_tokens_per_s_at_max",
    "total_tokens_per_s_at_max",
    "requests_per_s_at_max",
    "predicted_max_load",
    "knee",
    "probes",
    "notes",
)


def capacity_run(
    run: RunInfo,
    res: CapacityResult,
    *,
    name: str,
    hardware: str,
    hourly_usd: float | None,
    results: Sequence[ResultInfo] = (),
) -> CapacityRun:
    """One run's search as the views show it, priced at ``hourly_usd``; ``results`` (the run's stored cells)
    give the devices at its answer."""
    return CapacityRun(
        run_id=run.id,
        name=name,
        hardware=hardware,
        instance_type=run.instance_type,
        engine=run.engine,
        engine_version=run.engine_version,
        slo_label=slo_label(res.slo),
        finished=finished(run, res),
        hourly_usd=hourly_usd,
        usd_per_million_output_tokens=cost_per_million(hourly_usd, res.output_tokens_per_s_at_max),
        usd_per_million_total_tokens=cost_per_million(hourly_usd, res.total_tokens_per_s_at_max),
        prediction_error_pct=res.prediction_error(),
        devices_at_max=devices_at_capacity(res, results) if results else [],
        **{k: getattr(res, k) for k in AS_SEARCHED},
    )


def markdown_section(run: RunInfo, name: str) -> str | None:
    """A run's capacity answer, its prediction and its probes, for the run's own ``results.md`` (None: the run
    is not a capacity search)."""
    res, _ = capacity_result(run)
    if res is None:
        return None
    c = capacity_run(run, res, name=name, hardware=run.instance_type or name, hourly_usd=res.hourly_usd)
    lines = [f"## Capacity at the SLO ({name})" if name else "## Capacity at the SLO", "", answer_sentence(c)]
    if sure := confidence_sentence(c):
        lines += ["", sure]
    if c.predicted_max_load is not None:
        lines += ["", prediction_sentence(c)]
    lines += ["", markdown_table(probe_columns(c), probe_rows(c))]
    return "\n".join(lines) + "\n"


def build_capacity(
    runs: Sequence[RunData], compared: Sequence[ComparedRun], *, on_demand: bool
) -> tuple[list[CapacityRun], list[str]]:
    """The capacity searches among ``runs`` (in order), priced at the comparison's tier, and notes."""
    found: list[tuple[RunInfo, ComparedRun, CapacityResult]] = []
    notes: list[str] = []
    for d, cr in zip(runs, compared, strict=True):
        result, note = capacity_result(d.run)
        if note:
            notes.append(note)
        if result is not None:
            found.append((d.run, cr, result))
    names = _hardware_names([(run, cr) for run, cr, _ in found])
    out: list[CapacityRun] = []
    for (run, cr, res), hardware in zip(found, names, strict=True):
        hourly = cr.price.usd_per_hour if cr.price is not None else None
        if hourly is None and on_demand:
            hourly = res.hourly_usd  # the price the search itself was given
        results = next((d.results for d in runs if d.run.id == run.id), [])
        c = capacity_run(run, res, name=cr.name, hardware=hardware, hourly_usd=hourly, results=results)
        out.append(c)
        done = c.finished
        if not done:
            notes.append(
                f"{cr.name}'s capacity search has not finished (status {run.status.value}): "
                f"{len(res.probes)} probe(s) so far, no capacity is claimed for it."
            )
        if res.load == "request_rate":
            notes.append(
                f"{cr.name} searched request rates: its probes are stored under concurrency 0, one repeat per "
                "rate, so its cell row mixes rates and is left out of the ratios; its probes give each rate."
            )
    return out, notes


# ----------------------------------------------------------------------------------------- formatting
def fmt_level(value: float) -> str:
    return f"{value:,.4g}" if value >= 1000 else f"{value:g}"


def load_phrase(load: LoadKind, value: float) -> str:
    """ "24 users", "1 user", "2.5 requests/s"."""
    if load == "concurrency":
        return f"{fmt_level(value)} user" + ("" if value == 1 else "s")
    return f"{fmt_level(value)} requests/s"


def load_title(load: LoadKind) -> str:
    return "concurrency (users)" if load == "concurrency" else "request rate (requests/s)"


def fmt_usd_per_million(value: float | None) -> str:
    """ "$0.41", "$2.10", "$0.041": two decimals, more significant digits below ten cents."""
    if value is None or not math.isfinite(value):
        return "-"
    if value >= 0.1:
        return f"${value:,.2f}"
    if value <= 0:
        return "$0"
    return f"${value:.{1 - math.floor(math.log10(value))}f}"


def error_phrase(pct: float) -> str:
    return f"{pct:+.0f}%"


def max_load_text(c: CapacityRun) -> str:
    if not c.finished:
        return "unfinished"
    if c.max_load is not None:
        return load_phrase(c.load, c.max_load)
    return "none met" if c.slo is not None else "-"


def bar_label(c: CapacityRun, sep: str = " · ") -> str:
    """What a run's bar in the side-by-side chart says: the load sustained and $/1M output tokens there."""
    if c.slo is None:
        return "no SLO" + (f"{sep}knee {load_phrase(c.load, c.knee)}" if c.knee is not None else "")
    text = max_load_text(c)
    if c.usd_per_million_output_tokens is not None:
        text += f"{sep}{fmt_usd_per_million(c.usd_per_million_output_tokens)}/1M out"
    return text


def capacity_rows(runs: Sequence[CapacityRun]) -> list[list[str]]:
    """The capacity table: one row per search (``CAPACITY_COLUMNS``)."""
    rows = []
    for c in runs:
        predicted = "-"
        if c.predicted_max_load is not None:
            predicted = load_phrase(c.load, c.predicted_max_load)
            if c.prediction_error_pct is not None:
                predicted += f" ({error_phrase(c.prediction_error_pct)})"
        rows.append(
            [
                c.name,
                c.instance_type or "local machine",
                " ".join(x for x in (c.engine, c.engine_version) if x) or "-",
                c.slo_label or "none (knee search)",
                c.load,
                max_load_text(c),
                fmt_num(c.output_tokens_per_s_at_max),
                fmt_usd_per_million(c.usd_per_million_output_tokens),
                fmt_usd_per_million(c.usd_per_million_total_tokens),
                predicted,
                load_phrase(c.load, c.knee) if c.knee is not None else "-",
            ]
        )
    return rows


def percentile_of(c: CapacityRun) -> float:
    return c.slo.percentile if c.slo is not None else KNEE_PERCENTILE


def probe_columns(c: CapacityRun) -> list[str]:
    q = f"p{percentile_of(c):g}"
    cols = ["level", "#", "requests", f"TTFT {q} ms", f"TPOT {q} ms", f"max ITL {q} ms", f"E2EL {q} ms"]
    cols += ["attainment", "out tok/s", "total tok/s", "req/s"]
    if c.load == "request_rate":
        cols.append("sent req/s")
    return [*cols, "SLO sure", "met", "why"]


def probe_figures(p: Probe, num: Callable[[float | None, int], str] = fmt_num) -> list[str]:
    """A probe's repeat, requests, judged percentiles (TTFT, TPOT, max ITL, E2EL), goodput attainment and output
    tok/s: the cells every probe table starts with after the level (``num`` writes a number to some digits)."""
    pc = p.percentiles
    return [
        str(p.repeat),
        str(p.requests),
        num(pc.get("ttft"), 1),
        num(pc.get("tpot"), 2),
        num(pc.get("itl"), 2),
        num(pc.get("e2el"), 1),
        "-" if p.attainment is None else f"{p.attainment:.0%}",
        num(p.output_tokens_per_s, 1),
    ]


def probe_rows(c: CapacityRun) -> list[list[str]]:
    """The table of probes, by level then repeat: the percentiles judged, goodput attainment, throughput."""
    rows = []
    for p in sorted(c.probes, key=lambda p: (p.level, p.repeat)):
        row = [
            fmt_level(p.level),
            *probe_figures(p),
            fmt_num(p.total_tokens_per_s),
            fmt_num(p.requests_per_s, 2),
        ]
        if c.load == "request_rate":
            row.append(fmt_num(p.achieved_rate, 2))
        row.append("-" if p.confidence is None else f"{p.confidence:.0%}")
        row += ["-" if p.met is None else ("yes" if p.met else "no"), p.why or ""]
        rows.append(row)
    return rows


def answer_sentence(c: CapacityRun) -> str:
    """The answer of one search, in words."""
    if not c.finished:
        return (
            f"{c.name}'s capacity search has not finished: {len(c.probes)} probe(s) measured so far, "
            "no answer yet."
        )
    if c.slo is None:
        if c.knee is None:
            return f"Without an SLO, no knee shows in {c.name}'s {len(c.probes)} probe(s): throughput kept rising."
        knee = next((p for p in c.probes if p.level == c.knee), None)
        tail = f" ({fmt_num(knee.output_tokens_per_s)} output tok/s)" if knee is not None else ""
        return (
            f"Without an SLO, {c.hardware}'s throughput stops growing at {load_phrase(c.load, c.knee)}{tail}: "
            "the knee."
        )
    if c.max_load is None:
        return f"At {c.slo_label}, {c.hardware} meets the SLO at no load measured: {c.reason or 'no probe met it'}."
    sure = range_text(c)
    text = (
        f"At {c.slo_label} (attainment >= {c.slo.attainment:.0%}), {c.hardware} sustains "
        f"{load_phrase(c.load, c.max_load)}{f' ({sure})' if sure else ''}, "
        f"{fmt_num(c.output_tokens_per_s_at_max)} output tok/s and "
        f"{fmt_num(c.total_tokens_per_s_at_max)} total tok/s"
    )
    if c.usd_per_million_output_tokens is not None:
        text += f", at {fmt_usd_per_million(c.usd_per_million_output_tokens)}/1M output tokens"
        if c.usd_per_million_total_tokens is not None:
            text += f" and {fmt_usd_per_million(c.usd_per_million_total_tokens)}/1M total tokens"
        text += f" ({fmt_usd(c.hourly_usd)}/h)"
    else:
        text += " (no price: no cost per token)"
    return text + "."


def range_text(c: CapacityRun | CapacityResult) -> str:
    """The 90% range of a search's capacity from its probes, every level's repeats pooled: "14-16 with 90%
    confidence"; empty without a capacity or confidences."""
    return range_phrase(confidence_range(c.probes, c.max_load, c.load)) if c.max_load is not None else ""


def confidence_sentence(c: CapacityRun | CapacityResult) -> str | None:
    """How sure the SLO holds at each level measured, its repeats pooled, e.g. "How sure the SLO holds, by
    level: 8 100% · 14 97% · 15 72% (3 runs) · 16 35% (3 runs) · 17 1%."; None without an SLO or confidences."""
    if c.slo is None:
        return None
    parts = [
        f"{fmt_level(lv.level)} {lv.confidence:.0%}" + (f" ({lv.repeats} runs)" if lv.repeats > 1 else "")
        for lv in level_evidence(c.probes)
        if lv.confidence is not None
    ]
    return f"How sure the SLO holds, by level: {' · '.join(parts)}." if parts else None


def prediction_sentence(c: CapacityRun) -> str:
    """The planner's capacity beside the measured one."""
    if c.predicted_max_load is None:
        return "The planner gave no capacity prediction for this search."
    predicted = load_phrase(c.load, c.predicted_max_load)
    if c.max_load is None:
        return f"The planner predicted {predicted}; nothing was measured to meet the SLO."
    err = c.prediction_error_pct
    assert err is not None
    return (
        f"The planner predicted {predicted}; measured {load_phrase(c.load, c.max_load)} "
        f"(prediction {error_phrase(err)} against the measured)."
    )


# --------------------------------------------------------------------------------------------- curves
def curve_metrics(c: CapacityRun) -> list[str]:
    """The metrics a run's curve is drawn for: its SLO's (those measured), else TPOT."""
    wanted = list(c.slo.targets) if c.slo is not None else ["tpot"]
    measured = [m for m in wanted if any(m in p.percentiles for p in c.probes)]
    return measured or wanted[:1]


def curve_points(c: CapacityRun, metric: str, *, repeat: int | None = None) -> list[Probe]:
    """Probes with a value for ``metric``, by level (one repeat when given)."""
    return sorted(
        (p for p in c.probes if metric in p.percentiles and (repeat is None or p.repeat == repeat)),
        key=lambda p: (p.level, p.repeat),
    )


def probe_at(c: CapacityRun, level: float | None, *, met: bool = False) -> Probe | None:
    """The measurement of ``level`` a curve's marker sits on: the first one (the first that met the SLO when
    ``met``, as the capacity is a level that met it)."""
    if level is None:
        return None
    at = sorted((p for p in c.probes if p.level == level), key=lambda p: (not (met and p.met), p.repeat))
    return at[0] if at else None


@dataclass(frozen=True)
class CurveMark:
    """A level a search's curve marks, where a probe measured the curve's metric: the capacity ("max load", on a
    probe that met the SLO) or the knee; ``load`` says the level in words ("24 users")."""

    label: str
    probe: Probe
    load: str


def curve_marks(c: CapacityRun, metric: str) -> list[CurveMark]:
    """The capacity, then the knee, each where its probe measured ``metric`` (the figures draw a marker there)."""
    marks = []
    for label, level, met in (("max load", c.max_load, True), ("knee", c.knee, False)):
        p = probe_at(c, level, met=met)
        if p is not None and level is not None and metric in p.percentiles:
            marks.append(CurveMark(label, p, load_phrase(c.load, level)))
    return marks


def capacity_mark(c: CapacityRun, metric: str) -> CurveMark | None:
    """The capacity's mark on ``metric``'s curve; None where no probe measured it there."""
    return next((m for m in curve_marks(c, metric) if m.label == "max load"), None)


def axis_title(c: CapacityRun, metric: str) -> str:
    return f"p{percentile_of(c):g} {METRIC_NAMES.get(metric, metric)} (ms)"
