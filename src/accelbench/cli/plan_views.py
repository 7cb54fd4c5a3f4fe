"""How the planning commands print their answers (cli/plan.py): a recommendation with its settings and way
forward, a memory breakdown, an estimate (one instance, its alternatives, or the ranked table) and a
calibration with its capacity checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.table import Table

from accelbench.cli.common import console, err_console
from accelbench.cli.render import Col, print_bullets, print_records, print_table
from accelbench.domain.calibration import CalibrationReport, CapacityComparison
from accelbench.domain.estimate import Estimate, EstimateRow, EstimateTable, SettingsOption, range_bases
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.recommendation import Alternative, MemoryBreakdown, Recommendation
from accelbench.report.formatting import fmt_num, fmt_pct, fmt_usd
from accelbench.services.model_fit import verdict_sentence

# which estimate columns matter most on a narrow terminal (cli/render.py): 0 always shown, higher drops first
OVERLAPS_SHOWN = 5  # the top of a ranking is where an uncertain order changes a choice
_ESTIMATE_PRIORITY = {
    "#": 0, "instance": 0, "TPOT ms": 0, "out tok/s": 0, "$/1M out": 0, "SLO": 0,
    "accelerator": 1, "TTFT ms": 1, "$/h": 1, "max C": 1,
    "weights": 2, "TP": 2, "E2E ms": 2, "$/req": 3, "tot tok/s": 3,
}  # fmt: skip


def _num(v: float | None, digits: int = 1) -> str:
    return fmt_num(v, digits)


def _usd(v: float | None) -> str:
    return fmt_usd(v)


# --------------------------------------------------------------------------------------------- recommend
# the instances a refusal offers instead, one row each
_INSTEAD_COLUMNS: tuple[tuple[Col, Callable[[Alternative], str]], ...] = (
    (Col("instance", 0, whole=True), lambda a: a.instance),
    (Col("accelerator", 1), lambda a: f"{a.accelerator_type.value}: {a.accelerator_name}"),
    (Col("weights", 1), lambda a: a.quantization or "native"),
    (Col("TP", 2, num=True), lambda a: str(a.tensor_parallel_size)),
    (Col("context", 2, num=True), lambda a: f"{a.max_model_len:,}"),
    (Col("$/h", 1, num=True), lambda a: _usd(a.hourly_usd)),
    (Col("TTFT ms", 2, num=True), lambda a: _num(a.ttft_ms, 0)),
    (Col("TPOT ms", 0, num=True), lambda a: _num(a.tpot_ms, 1)),
    (Col("out tok/s", 0, num=True), lambda a: _num(a.output_tokens_per_s, 1)),
    (Col("$/1M out", 0, num=True), lambda a: _usd(a.usd_per_million_output_tokens)),
)


def render_recommendation(rec: Recommendation, *, model_max: int, asked: int | None = None) -> None:
    colour = "green" if rec.fits else "red"
    title = f"{rec.model} on {rec.instance} ({rec.accelerator_type.value}: {rec.accelerator_name})"
    console.print(f"[bold]{title}[/]")
    if rec.fits:
        max_len = rec.settings.max_model_len if rec.settings is not None else None
        said = verdict_sentence(
            rec.verdict.value,
            max_len=max_len,
            model_max=model_max,
            asked=asked,
            kv_tokens=rec.memory.kv_cache_tokens if rec.memory is not None else None,
            at_max=rec.settings.concurrency_at_max_len if rec.settings is not None else None,
        )
        console.print(f"[bold {colour}]FITS[/]{said.removeprefix('fits')}", highlight=False)
    elif rec.refusal is not None:
        console.print(f"[bold {colour}]Refused:[/] {rec.refusal.reason}", highlight=False)
    else:
        console.print(f"[bold {colour}]REFUSED[/]")
    if rec.settings is not None:
        s = rec.settings
        t = Table(title="Settings", header_style="bold", show_header=False)
        t.add_column("setting")
        t.add_column("value", overflow="fold")
        rows: list[tuple[str, Any]] = [
            ("engine", s.engine),
            ("tensor_parallel_size", s.tensor_parallel_size),
            ("max_model_len", f"{s.max_model_len:,}"),
            ("max_num_seqs", s.max_num_seqs),
            ("dtype", s.dtype),
            ("weights", f"{s.weight_format} ({s.weight_bits:g} bits)"),
            ("quantization", s.quantization),
            ("checkpoint quantization", s.checkpoint_quantization),
            ("kv_cache_dtype", s.kv_cache_dtype),
            ("gpu_memory_utilization", s.gpu_memory_utilization),
            ("kv_cache_space_gib (VLLM_CPU_KVCACHE_SPACE)", s.kv_cache_space_gib),
            ("VLLM_CPU_OMP_THREADS_BIND", s.omp_threads_bind),
            ("neuron_cores", s.neuron_cores),
            ("sequences at max_model_len", s.concurrency_at_max_len),
        ]
        for k, v in rows:
            if v is not None:
                t.add_row(k, str(v))
        console.print(t)
    if rec.memory is not None:
        m = rec.memory
        console.print(
            f"Memory ({m.units} x {m.unit.replace('_', ' ')}, {m.unit_memory_gib:g} GiB, x{m.utilization}): "
            f"usable {m.usable_gib:,.2f} GiB = weights {m.weights_gib:,.2f} + overhead {m.overhead_gib:,.2f} "
            f"+ KV cache {m.kv_cache_gib:,.2f} ({m.kv_cache_tokens:,} tokens)"
            + (f" + free {m.free_gib:,.2f}" if m.free_gib else "")
            + " GiB",
            highlight=False,
        )
    print_bullets(rec.reasons, "[bold]Why[/]")
    print_bullets(rec.warnings, "[bold yellow]Warnings[/]")
    _render_way_forward(rec)


def _render_way_forward(rec: Recommendation) -> None:
    """A refusal's way forward (its reason is said once, by the caller): what to do, the instances that serve
    the model instead with their predicted speed and cost, and the changes of the user's own settings that
    would make this instance work, each the user's choice."""
    if rec.refusal is None:
        return
    console.print("[bold]Way forward[/]")
    print_bullets(rec.refusal.way_forward)
    if rec.alternatives:
        when = rec.alternatives[0].predicted_for
        title = "Cheapest instances that fit" + (f" (predicted at {when})" if when else "")
        print_records(_INSTEAD_COLUMNS, rec.alternatives, title=title, formats="json")
    if not rec.refusal.changes:
        console.print(f"No change of your own settings makes {rec.instance} serve it.", highlight=False)
    else:
        console.print(
            f"[bold]Or change a setting of yours[/] (your choice, not applied; {rec.instance} then serves it):",
            highlight=False,
        )
        for c in rec.refusal.changes:
            figures = (
                f"; predicted TPOT {_num(c.tpot_ms, 1)} ms, {_num(c.output_tokens_per_s, 1)} output tok/s, "
                f"{_usd(c.usd_per_million_output_tokens)} per 1M output tokens"
                if c.tpot_ms is not None
                else ""
            )
            console.print(f"  - {c.flag}: {c.effect}{figures}", highlight=False)


# --------------------------------------------------------------------------------------------- breakdown
def render_breakdown(b: MemoryBreakdown, *, model_max: int, asked: int | None = None) -> None:
    console.print(
        f"[bold]{b.model} on {b.instance}[/]: {b.units} x {b.unit.replace('_', ' ')} of {b.unit_memory_gib:g} GiB "
        f"(usable {b.usable_gib_per_unit:,.2f} GiB each at {b.utilization:.0%}); weights {b.weight_format}, "
        f"KV {b.kv_cache_dtype}, max_model_len {b.max_model_len:,}, {b.concurrency} sequences",
        highlight=False,
    )
    print_table(
        [Col("item", 0), Col("GiB per unit", 0, num=True), Col("GiB total", 0, num=True), Col("how", 0)],
        [[it.name, f"{it.gib_per_unit:,.3f}", f"{it.gib_total:,.3f}", it.detail] for it in b.items],
        formats="json",
    )
    colour = {"fits": "green", "clamps": "yellow", "infeasible": "red"}[b.verdict]
    said = verdict_sentence(b.verdict, max_len=b.max_model_len, model_max=model_max, asked=asked)
    console.print(f"Verdict: [bold {colour}]{said}[/]", highlight=False)
    print_bullets(b.reasons)


# --------------------------------------------------------------------------------------------- estimate
def _ranged(row: EstimateRow, key: str, unit: str = "", digits: int = 1, usd: bool = False) -> str:
    """e.g. "190.0 ms, 80% range 160.0-230.0 ms": the point value, then its range when it has one."""

    def fmt(v: float | None) -> str:
        return _usd(v) if usd else _num(v, digits)

    tail = f" {unit}" if unit else ""
    text = fmt(getattr(row, key)) + tail
    r = row.ranges.get(key)
    if r is not None and getattr(row, key) is not None:
        text += f", 80% range {fmt(r.p10)}-{fmt(r.p90)}{tail}"
    return text


def render_estimate(e: Estimate) -> None:
    console.print(
        f"[bold]{e.model} on {e.instance}[/] ({e.accelerator_type.value}: {e.accelerator_name}), engine {e.engine}: "
        f"{e.input_len:,} in / {e.output_len:,} out tokens, concurrency {e.concurrency}",
        highlight=False,
    )
    if not e.feasible:
        console.print(f"[bold red]Not feasible:[/] {e.explanation}", highlight=False)
        _render_way_forward(e.recommendation)
        return
    t = Table(show_header=False, header_style="bold")
    t.add_column("metric")
    t.add_column("value", overflow="fold")
    t.add_row(
        "settings",
        f"TP {e.tensor_parallel_size}, {e.weight_format}, max_model_len {e.max_model_len:,}, batch {e.batch}",
    )
    t.add_row("TTFT (typical)", _ranged(e, "ttft_ms", "ms"))
    t.add_row("TPOT (typical)", _ranged(e, "tpot_ms", "ms", 2))
    t.add_row("E2E latency", _ranged(e, "e2e_ms", "ms"))
    t.add_row("output tokens/s", _ranged(e, "output_tokens_per_s"))
    t.add_row("total tokens/s", _ranged(e, "total_tokens_per_s"))
    t.add_row("requests/s", _ranged(e, "requests_per_s", digits=3))
    t.add_row("hourly", f"{_usd(e.hourly_usd)} ({e.price_source or 'no price'})")
    t.add_row("per 1M output tokens", _ranged(e, "usd_per_million_output_tokens", usd=True))
    t.add_row("per request", _ranged(e, "usd_per_request", usd=True))
    if e.slo_met is not None:
        t.add_row("SLO met", "yes" if e.slo_met else "no")
        t.add_row("max concurrency meeting SLO", _ranged(e, "max_concurrency_meeting_slo", digits=0))
    for name, basis in range_bases({k: r.basis for k, r in e.ranges.items()}):
        t.add_row(f"{name} range from" if name else "80% ranges from", basis)
    console.print(t)
    if e.topology:
        console.print(f"Topology: {e.topology}", highlight=False)
    if e.alternatives:
        _render_alternatives(e)
    if e.times is not None:
        x = e.times
        console.print(
            f"Decode step {x.decode_step_ms:.2f} ms ({x.decode_bound}-bound: weights {x.decode_weights_ms:.2f} + KV "
            f"{x.decode_kv_ms:.2f} ms vs compute {x.decode_compute_ms:.2f} ms; all-reduce {x.decode_allreduce_ms:.2f}, "
            f"overhead {x.decode_overhead_ms:.2f}); prefill {x.prefill_ms:.1f} ms ({x.prefill_bound}-bound; ridge "
            f"{x.ridge_flops_per_byte:,.0f} FLOP/B); {x.achievable_bandwidth_gbps:,.0f} GB/s and "
            f"{x.achievable_tflops:,.2f} TFLOP/s achievable per rank",
            highlight=False,
        )
    print_bullets(e.notes)
    print_bullets(e.recommendation.warnings, mark="[yellow]![/]")


# the settings an estimate weighed (--alternatives), one row each
_WEIGHED_COLUMNS: tuple[tuple[Col, Callable[[SettingsOption], str]], ...] = (
    (Col("", 0, whole=True), lambda a: "*" if a.chosen else ""),
    (Col("TP", 1, num=True), lambda a: str(a.tensor_parallel_size or "-")),
    (Col("weights", 1), lambda a: a.weight_format or "-"),
    (Col("max seqs", 0, num=True), lambda a: str(a.max_num_seqs or "-")),
    (Col("batch", 2, num=True), lambda a: str(a.batch or "-")),
    (Col("TTFT ms", 1, num=True), lambda a: _num(a.ttft_ms, 0)),
    (Col("TPOT ms", 0, num=True), lambda a: _num(a.tpot_ms, 2)),
    (Col("out tok/s", 0, num=True), lambda a: _num(a.output_tokens_per_s, 1)),
    (Col("$/1M out", 0, num=True), lambda a: _usd(a.usd_per_million_output_tokens)),
    (Col("SLO", 1, whole=True), lambda a: "-" if a.slo_met is None else ("yes" if a.slo_met else "no")),
    (Col("why", 2), lambda a: a.why if not a.feasible else a.why.split(";")[0]),
)


def _render_alternatives(e: Estimate) -> None:
    title = f"Settings weighed (goal: {e.goal or 'given'})"
    print_records(_WEIGHED_COLUMNS, e.alternatives, title=title, formats="json")


def render_table(tab: EstimateTable, show: int) -> None:
    console.print(
        f"[bold]{tab.model}[/]: {tab.input_len:,} in / {tab.output_len:,} out tokens, concurrency {tab.concurrency}"
        + f" ({tab.filters.get('arrivals') or 'bursts'} arrivals)"
        + (f", SLO {tab.slo.label()}" if tab.slo else ""),
        highlight=False,
    )
    cols = [
        "#",
        "instance",
        "accelerator",
        "weights",
        "TP",
        "TTFT ms",
        "TPOT ms",
        "E2E ms",
        "out tok/s",
        "tot tok/s",
        "$/h",
        "$/1M out",
        "$/req",
    ]
    if tab.slo:
        cols += ["SLO", "max C"]
    rows = []
    feasible = [r for r in tab.rows if r.feasible]
    for i, r in enumerate(feasible[:show], start=1):
        accel = (
            r.accelerator_name
            if r.accelerator_type == AcceleratorType.cpu
            else f"{r.accelerator_count}x {r.accelerator_name}"
        )
        row = [
            str(i),
            r.instance + (" *" if r.calibrated else ""),
            accel,
            r.weight_format or "",
            str(r.tensor_parallel_size),
            _num(r.ttft_ms, 0),
            _num(r.tpot_ms, 1),
            _num(r.e2e_ms, 0),
            _num(r.output_tokens_per_s, 1),
            _num(r.total_tokens_per_s, 0),
            _usd(r.hourly_usd),
            _usd(r.usd_per_million_output_tokens),
            _usd(r.usd_per_request),
        ]
        if tab.slo:
            row += ["yes" if r.slo_met else "no", str(r.max_concurrency_meeting_slo)]
        rows.append(row)
    print_table(
        [
            Col(
                c,
                _ESTIMATE_PRIORITY.get(c, 3),
                num=c not in ("instance", "accelerator", "weights", "SLO"),
                whole=c == "instance",
            )
            for c in cols
        ],
        rows,
        formats="json",
    )
    for i, r in enumerate(feasible[: min(show, OVERLAPS_SHOWN)], start=1):
        if r.range_overlaps:
            console.print(
                f"  #{i} {r.instance}: $/1M output tokens {_ranged(r, 'usd_per_million_output_tokens', usd=True)}"
                f" overlaps {', '.join(r.range_overlaps)}: the order between them is not certain.",
                highlight=False,
            )
    s = tab.summary
    console.print(
        f"{s.feasible_native} fit natively, {s.feasible_quantized} only with quantization, {s.infeasible} do not fit. "
        f"Cheapest per 1M output tokens: {s.cheapest or '-'}; fastest TPOT: {s.fastest or '-'}; most headroom: "
        f"{s.most_headroom or '-'}.",
        highlight=False,
    )
    if tab.slo and s.slo_choice:
        console.print(
            f"[bold green]Cheapest meeting {tab.slo.label()}:[/] {s.slo_choice} (sustains concurrency "
            f"{s.slo_max_concurrency})",
            highlight=False,
        )
    if len(feasible) > show:
        console.print(
            f"({len(feasible) - show} more feasible rows; --limit to show more, --format json for all)"
        )
    if tab.calibrations_used:
        console.print(
            "* calibrated from measured runs: "
            + ", ".join(f"{c.accelerator}/{c.engine} ({c.n_points} points)" for c in tab.calibrations_used),
            highlight=False,
        )
    print_bullets(tab.notes)
    err_console.print(f"[dim]{len(tab.rows)} instances estimated in {tab.elapsed_ms:.0f} ms[/]")


# --------------------------------------------------------------------------------------------- calibrate
def render_calibration(rep: CalibrationReport) -> None:
    for g in rep.groups:
        console.print(
            f"[bold]{g.accelerator} / {g.engine}[/]: {g.n_points} point(s) from {len(g.runs)} run(s); before: "
            f"{g.before_source}"
            + (f"; saved as calibration {g.saved_id}" if g.saved_id else " (dry run: not saved)"),
            highlight=False,
        )
        pri = (0, 0, 0, 2, 0, 1, 1, 0, 0, 2, 2, 3, 3)
        heads = ["run", "input", "C", "out", "TPOT meas", "TPOT before", "err", "TPOT after", "err"]
        heads += ["TTFT meas", "TTFT after", "tok/s meas", "tok/s after"]
        cal_rows = []
        for c in g.cells:
            cal_rows.append(
                [
                    c.run_id,
                    str(c.input_len),
                    f"{c.request_rate:.4g}/s" if c.request_rate is not None else str(c.concurrency),
                    str(c.output_len),
                    _num(c.measured_tpot_ms, 2),
                    _num(c.predicted_tpot_ms, 2),
                    fmt_pct(c.tpot_error_pct, 1, signed=True),
                    _num(c.fitted_tpot_ms, 2),
                    fmt_pct(c.fitted_tpot_error_pct, 1, signed=True),
                    _num(c.measured_ttft_ms, 0),
                    _num(c.fitted_ttft_ms, 0),
                    _num(c.measured_output_tps, 1),
                    _num(c.fitted_output_tps, 1),
                ]
            )
        print_table(
            [Col(h, p, num=h != "run", whole=h == "run") for h, p in zip(heads, pri, strict=True)],
            cal_rows,
            formats="json",
        )
        if g.capacity:
            _render_capacity_checks(g.capacity)
        eb, ea = g.error_before, g.error_after

        def e(d: dict[str, float], k: str) -> str:
            return f"{d[k]:.1f}%" if k in d else "-"

        console.print(
            f"Mean absolute error: TPOT {e(eb, 'tpot_mape_pct')} -> {e(ea, 'tpot_mape_pct')} "
            f"(worst {e(eb, 'tpot_max_abs_pct')} -> {e(ea, 'tpot_max_abs_pct')}), TTFT {e(eb, 'ttft_mape_pct')} -> "
            f"{e(ea, 'ttft_mape_pct')}, throughput {e(eb, 'throughput_mape_pct')} -> {e(ea, 'throughput_mape_pct')}"
            + (
                f", capacity {e(eb, 'capacity_mape_pct')} -> {e(ea, 'capacity_mape_pct')}"
                if "capacity_mape_pct" in eb or "capacity_mape_pct" in ea
                else ""
            ),
            highlight=False,
        )
        hb, ha = g.held_out_error_before, g.held_out_error_after
        if g.held_out_runs:
            console.print(
                f"On {len(g.held_out_runs)} other stored run(s) of {g.accelerator} / {g.engine}, not fitted: TPOT "
                f"{e(hb, 'tpot_mape_pct')} -> {e(ha, 'tpot_mape_pct')}, TTFT {e(hb, 'ttft_mape_pct')} -> "
                f"{e(ha, 'ttft_mape_pct')}, throughput {e(hb, 'throughput_mape_pct')} -> "
                f"{e(ha, 'throughput_mape_pct')}",
                highlight=False,
            )
        fb, fa = g.factors_before.model_dump(), g.factors_after.model_dump()
        ft = Table(header_style="bold", title="Factors")
        for col in ("factor", "before", "after"):
            ft.add_column(col, justify="left" if col == "factor" else "right")
        for k in fb:
            ft.add_row(k, f"{fb[k]:.4g}", f"{fa[k]:.4g}")
        console.print(ft)
        if g.note:
            console.print(f"  - {g.note}", highlight=False)
    for s in rep.skipped:
        err_console.print(f"[dim]skipped {s}[/]", highlight=False)


def _render_capacity_checks(checks: list[CapacityComparison]) -> None:
    """Each capacity run: the measured capacity at its SLO against the planner's (when the search ran, and
    with the factors before and after this fit)."""
    t = Table(header_style="bold", title="Capacity at the SLO: measured vs predicted")
    for col in ("run", "load", "SLO", "measured", "at run", "before", "err", "after", "err"):
        t.add_column(col, justify="left" if col in ("run", "load", "SLO") else "right")
    for k in checks:
        unit = "/s" if k.load == "request_rate" else ""

        def lv(v: float | None, unit: str = unit) -> str:
            return "-" if v is None else f"{v:.4g}{unit}"

        t.add_row(
            k.run_id,
            "rate" if k.load == "request_rate" else "users",
            k.slo,
            lv(k.measured_max_load),
            lv(k.predicted_at_run),
            lv(k.predicted_before),
            fmt_pct(k.error_before_pct, 1, signed=True),
            lv(k.predicted_after),
            fmt_pct(k.error_after_pct, 1, signed=True),
        )
    console.print(t)
