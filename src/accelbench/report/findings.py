"""Findings: short sentences made from a comparison's figures, every number computed, nothing canned.

Each ``Finding`` carries its sentence and the unrounded figures the sentence quotes, so the JSON output
and the prose always agree. Sentences round as the tables do: ratios to one decimal ("3.1x"), times to
0.1 ms, throughputs to 0.1 tok/s, growth to whole percents, dollars to a few significant digits.

With two or more runs, every run is set against the baseline (the first run given, or the one chosen) at each
input length, in sentences that name the baseline and state each difference in its verdict's words, with the
95% interval ("B decodes 25% faster (22-28%) than the baseline A"), "no detectable difference" where the
interval does not tell them apart, and a factor of at least 1 with its direction in words where the figures
have no interval ("B decodes 2.5x faster than the baseline A"); with one
run, the findings describe how that run scales with concurrency. Capacity searches among the runs come
first: per SLO and load, the highest load each run sustains and what 1M output tokens cost there ("At p90
TPOT <= 50 ms, g6.2xlarge sustains 24 users at $0.41/1M output tokens; m8i.2xlarge 3 users at $2.10/1M."),
then a warning when the searches used different SLOs or loads, then each prediction against its measurement.
"""

from __future__ import annotations

from accelbench.report.capacity import error_phrase, fmt_usd_per_million, load_phrase
from accelbench.report.comparison import (
    ON_PAR,
    TIER_LABELS,
    TREND_WORDS,
    CapacityRun,
    CellResult,
    Comparison,
    Finding,
    Growth,
    PairRatios,
    RunScaling,
    Versus,
    cost_versus,
    decode_versus,
    fmt_usd,
    lead,
    throughput_versus,
)
from accelbench.report.verdict_phrases import capacity_difference_findings, known, undetected
from accelbench.report.verdict_phrases import clause as verdict_clause
from accelbench.report.verdict_phrases import figures as verdict_figures
from accelbench.report.verdicts import COST_METRIC, MetricVerdict, find

__all__ = ["Finding", "generate_findings"]


# ------------------------------------------------------------------------------------ formatting
def fx(ratio: float) -> str:
    return f"{ratio:.1f}x"


def fms(value: float) -> str:
    return f"{value:,.1f} ms"


def ftps(value: float) -> str:
    return f"{value:,.1f} tok/s"


def _growth_parts(g: Growth) -> tuple[str, str, str]:
    """(verb, amount, span): ("grows", "12%", "(9.0 → 10.1 ms)"); "falls" below 0; ("stays flat", "", ...)
    when the growth rounds to 0%."""
    pct = round(g.growth_pct)
    span = f"({g.from_ms:,.1f} → {g.to_ms:,.1f} ms)"
    if pct > 0:
        return "grows", f"{pct:,}%", span
    if pct < 0:
        return "falls", f"{-pct:,}%", span
    return "stays flat", "", span


def growth_phrase(g: Growth) -> str:
    """ "grows 12% (9.0 → 10.1 ms)", "falls 4% (...)" or "stays flat (...)" (rounds to 0%)."""
    verb, amount, span = _growth_parts(g)
    return f"{verb} {amount} {span}" if amount else f"{verb} {span}"


def _growth_figures(prefix: str, g: Growth) -> dict[str, float | int | str | None]:
    return {f"{prefix}_from_ms": g.from_ms, f"{prefix}_to_ms": g.to_ms, f"{prefix}_growth_pct": g.growth_pct}


# ------------------------------------------------------------------------------------ pairs
# Each sentence sets the run (B) against the baseline (A) and says so: in the verdict's words where the figures
# have intervals (report/verdict_phrases.py undetected), else a factor of at least 1 with the direction in words
# ("B decodes 2.5x faster than the baseline A"), never a ratio below 1 (report/comparison.py versus).
def _pair_findings(cmp: Comparison, p: PairRatios) -> list[Finding]:
    a, b = cmp.run(p.a).name, cmp.run(p.b).name
    base = f"the baseline {a}"
    il, lo, hi = p.input_len, p.lowest_concurrency, p.highest_concurrency
    runs = [p.a, p.b]
    out: list[Finding] = []

    v_decode = find(cmp.verdicts, p.b, il, lo, "tpot_p50_ms")
    decode = undetected(decode_versus(p.tpot_b_ms, p.tpot_a_ms, digits=1), v_decode)
    if p.decode_speedup_a_over_b is not None and decode is not None:
        assert p.tpot_a_ms is not None and p.tpot_b_ms is not None
        s = p.decode_speedup_a_over_b
        figures: dict[str, float | int | str | None] = {
            "concurrency": lo,
            "tpot_a_ms": p.tpot_a_ms,
            "tpot_b_ms": p.tpot_b_ms,
            "decode_speedup_a_over_b": s,
            "baseline": p.a,
            "factor": decode.factor,
            "direction": decode.word,
            **verdict_figures(v_decode),
        }
        tpots = f"(TPOT {fms(p.tpot_b_ms)} vs {fms(p.tpot_a_ms)}{verdict_clause(v_decode, 'TPOT')})"
        if decode.better is None:
            like = "with no detectable difference from" if known(v_decode) else "as fast as"
            text = f"At input {il} and concurrency {lo}, {b} decodes {like} {base} {tpots}."
        else:
            # the faster side as the verdict has it (the verdict's words say it), else as the figures have it
            figures["faster"] = v_decode.better if v_decode and v_decode.better else (p.a if s > 1 else p.b)
            figures["speedup"] = lead(s)
            text = f"At input {il} and concurrency {lo}, {b} decodes {decode} than {base} {tpots}."
        out.append(Finding(kind="decode_speedup", text=text, input_len=il, runs=runs, figures=figures))

    ga, gb = p.a_scaling.tpot_growth, p.b_scaling.tpot_growth
    if ga is not None and gb is not None:
        out.append(
            Finding(
                kind="tpot_growth",
                text=(
                    f"At input {il}, under load (concurrency {lo} → {hi}) {b}'s TPOT {growth_phrase(gb)} "
                    f"while {base}'s {growth_phrase(ga)}."
                ),
                input_len=il,
                runs=runs,
                figures={
                    "from_concurrency": lo,
                    "to_concurrency": hi,
                    **_growth_figures("tpot_a", ga),
                    **_growth_figures("tpot_b", gb),
                },
            )
        )

    if p.throughput_gaps:
        ends = (p.throughput_gaps[0].concurrency, p.throughput_gaps[-1].concurrency)
        found = tuple(find(cmp.verdicts, p.b, il, c, "total_token_throughput") for c in ends)
        out.append(_gap_finding(p, a, b, (found[0], found[1])))

    ta, tb = p.a_scaling.ttft_growth, p.b_scaling.ttft_growth
    if ta is not None and tb is not None:
        vb, pb, spb = _growth_parts(tb)
        va, pa, spa = _growth_parts(ta)
        second = (
            f"{pa} on {base} {spa}" if va == vb and pa else f"{va}{' ' + pa if pa else ''} on {base} {spa}"
        )
        out.append(
            Finding(
                kind="ttft_growth",
                text=(
                    f"At input {il}, from concurrency {lo} to {hi} TTFT {vb}{' ' + pb if pb else ''} on {b} "
                    f"{spb} and {second}."
                ),
                input_len=il,
                runs=runs,
                figures={
                    "from_concurrency": lo,
                    "to_concurrency": hi,
                    **_growth_figures("ttft_a", ta),
                    **_growth_figures("ttft_b", tb),
                },
            )
        )

    sa, sb = p.a_scaling, p.b_scaling
    if sa.per_request_output_tps is not None and sb.per_request_output_tps is not None:
        # per request, end to end (its TTFT included): the speed one user sees, not the decode rate alone
        who = "one request gets" if lo == 1 else "each request gets"
        text = (
            f"At input {il} and concurrency {lo}, {who} {ftps(sb.per_request_output_tps)} of output end to end "
            f"on {b} vs {ftps(sa.per_request_output_tps)} on {base}"
        )
        figures = {
            "low_concurrency": lo,
            "per_request_output_tps_a": sa.per_request_output_tps,
            "per_request_output_tps_b": sb.per_request_output_tps,
        }
        if hi != lo and sa.aggregate_output_tps is not None and sb.aggregate_output_tps is not None:
            text += (
                f"; at concurrency {hi} {b} delivers {ftps(sb.aggregate_output_tps)} of output in aggregate "
                f"vs {ftps(sa.aggregate_output_tps)} on {a}"
            )
            figures.update(
                high_concurrency=hi,
                aggregate_output_tps_a=sa.aggregate_output_tps,
                aggregate_output_tps_b=sb.aggregate_output_tps,
            )
        out.append(
            Finding(kind="stream_and_aggregate", text=text + ".", input_len=il, runs=runs, figures=figures)
        )

    ca, cb = cmp.cell(p.a, il, hi), cmp.cell(p.b, il, hi)
    if (
        ca is not None
        and cb is not None
        and ca.cost_per_1m_tokens_usd is not None
        and cb.cost_per_1m_tokens_usd is not None
    ):
        out.append(_cost_pair_finding(cmp, ca, cb, a, b))
    return out


def _gap_finding(
    p: PairRatios, a: str, b: str, found: tuple[MetricVerdict | None, MetricVerdict | None] = (None, None)
) -> Finding:
    """The total-throughput gap from the lowest to the highest concurrency; a gap that the verdict at an end
    (``found``: lowest, highest) does not support is said as on par there."""
    il, gaps = p.input_len, p.throughput_gaps
    first, last = gaps[0], gaps[-1]
    trend = p.throughput_gap_trend
    base = f"the baseline {a}"
    figures: dict[str, float | int | str | None] = {
        "from_concurrency": first.concurrency,
        "to_concurrency": last.concurrency,
        "ratio_a_over_b_low": first.ratio_a_over_b,
        "ratio_a_over_b_high": last.ratio_a_over_b,
        "total_tps_a_high": last.a_tok_s,
        "total_tps_b_high": last.b_tok_s,
        "trend": p.throughput_gap_trend,
        "lead_low": lead(first.ratio_a_over_b),
        "lead_high": lead(last.ratio_a_over_b),
        "baseline": p.a,
    }
    # B against the baseline at each end, one decimal, as the trend is judged
    v_lo = undetected(throughput_versus(first.b_tok_s, first.a_tok_s, digits=1), found[0])
    v_hi = undetected(throughput_versus(last.b_tok_s, last.a_tok_s, digits=1), found[1])
    assert v_lo is not None and v_hi is not None  # a gap is stored only with both throughputs
    figures["direction_low"], figures["direction_high"] = v_lo.word, v_hi.word
    figures.update({**verdict_figures(found[0], "low_"), **verdict_figures(found[1], "high_")})
    tps = f"({ftps(last.b_tok_s)} vs {ftps(last.a_tok_s)}{verdict_clause(found[1], 'total tok/s')}"
    if trend is not None and trend != "reverses" and v_lo.better is None and v_hi.better is None:
        trend = "holds"

    def than(v: Versus) -> str:
        return f"on par with that of {base}" if v.better is None else f"{v} than that of {base}"

    def at_end(v: Versus) -> str:
        return ON_PAR if v.better is None else str(v)

    def leader(ratio: float) -> str:
        return a if ratio >= 1.0 else b

    if trend is None:
        text = f"At input {il} and concurrency {last.concurrency}, {b}'s total throughput is {than(v_hi)} {tps})."
    elif trend == "reverses":
        text = (
            f"At input {il}, the total-throughput lead changes hands under load: {b}'s total throughput is "
            f"{than(v_lo)} at concurrency {first.concurrency} and {at_end(v_hi)} at concurrency "
            f"{last.concurrency} {tps} at {last.concurrency})."
        )
    elif trend == "holds" and v_lo.better is None:
        text = (
            f"At input {il}, {b}'s total throughput stays on par with that of {base} from concurrency "
            f"{first.concurrency} to {last.concurrency} {tps} at {last.concurrency})."
        )
    else:
        # the leader is the one ahead where the lead is larger: at the end if it grows, at the start if it
        # shrinks, so a lead that shrinks to parity is still attributed correctly
        ref = last if trend == "widens" else first
        text = (
            f"At input {il}, {b}'s total throughput is {than(v_lo)} at concurrency {first.concurrency} and "
            f"{at_end(v_hi)} at concurrency {last.concurrency}: {leader(ref.ratio_a_over_b)}'s lead "
            f"{TREND_WORDS[trend]} under load {tps} at {last.concurrency})."
        )
    return Finding(kind="throughput_gap", text=text, input_len=il, runs=[p.a, p.b], figures=figures)


def _cost_pair_finding(cmp: Comparison, ca: CellResult, cb: CellResult, a: str, b: str) -> Finding:
    assert ca.cost_per_1m_tokens_usd is not None and cb.cost_per_1m_tokens_usd is not None
    x, y = ca.cost_per_1m_tokens_usd, cb.cost_per_1m_tokens_usd
    tier = TIER_LABELS[cmp.tier]
    figures: dict[str, float | int | str | None] = {
        "tier": cmp.tier.value,
        "concurrency": ca.concurrency,
        "cost_per_1m_tokens_a_usd": x,
        "cost_per_1m_tokens_b_usd": y,
        "hourly_a_usd": ca.hourly_usd,
        "hourly_b_usd": cb.hourly_usd,
        "baseline": ca.run_id,
    }
    head = f"At input {ca.input_len} and concurrency {ca.concurrency}, at {tier} prices"
    judged = find(cmp.verdicts, cb.run_id, cb.input_len, cb.concurrency, COST_METRIC)
    v = undetected(cost_versus(y, x, digits=1), judged)
    assert v is not None
    figures["direction"] = v.word
    figures.update(verdict_figures(judged))
    if v.better is None:
        text = (
            f"{head}, 1M output tokens cost about the same on {b} ({fmt_usd(y)}) as on the baseline {a} "
            f"({fmt_usd(x)}{verdict_clause(judged, 'cost')})."
        )
    else:
        figures["cheaper"] = ca.run_id if x < y else cb.run_id
        figures["cost_ratio"] = max(x, y) / min(x, y)
        text = (
            f"{head}, {b} serves 1M output tokens for {fmt_usd(y)}: {v} than the baseline {a} ({fmt_usd(x)})."
        )
    return Finding(
        kind="cost", text=text, input_len=ca.input_len, runs=[ca.run_id, cb.run_id], figures=figures
    )


# ------------------------------------------------------------------------------------ single run
def _scaling_findings(cmp: Comparison, s: RunScaling) -> list[Finding]:
    name = cmp.run(s.run_id).name
    il, lo, hi = s.input_len, s.lowest_concurrency, s.highest_concurrency
    runs = [s.run_id]
    out: list[Finding] = []
    if s.tpot_growth is not None:
        out.append(
            Finding(
                kind="tpot_growth",
                text=f"At input {il}, {name}'s TPOT {growth_phrase(s.tpot_growth)} from concurrency {lo} to {hi}.",
                input_len=il,
                runs=runs,
                figures={
                    "from_concurrency": lo,
                    "to_concurrency": hi,
                    **_growth_figures("tpot", s.tpot_growth),
                },
            )
        )
    if s.throughput_scaling is not None and s.total_throughput_low and s.total_throughput_high:
        out.append(
            Finding(
                kind="throughput_scaling",
                text=(
                    f"At input {il}, {name}'s total throughput rises {fx(s.throughput_scaling)} from concurrency "
                    f"{lo} to {hi} ({ftps(s.total_throughput_low)} → {ftps(s.total_throughput_high)}) while "
                    f"concurrency rises {fx(hi / lo)}."
                ),
                input_len=il,
                runs=runs,
                figures={
                    "from_concurrency": lo,
                    "to_concurrency": hi,
                    "total_tps_low": s.total_throughput_low,
                    "total_tps_high": s.total_throughput_high,
                    "throughput_scaling": s.throughput_scaling,
                    "concurrency_scaling": hi / lo,
                },
            )
        )
    if s.ttft_growth is not None:
        out.append(
            Finding(
                kind="ttft_growth",
                text=f"At input {il}, {name}'s TTFT {growth_phrase(s.ttft_growth)} from concurrency {lo} to {hi}.",
                input_len=il,
                runs=runs,
                figures={
                    "from_concurrency": lo,
                    "to_concurrency": hi,
                    **_growth_figures("ttft", s.ttft_growth),
                },
            )
        )
    if s.per_request_output_tps is not None:
        who = "one request gets" if lo == 1 else "each request gets"
        text = (
            f"At input {il} and concurrency {lo}, {who} {ftps(s.per_request_output_tps)} of output end to end "
            f"on {name}"
        )
        figures: dict[str, float | int | str | None] = {
            "low_concurrency": lo,
            "per_request_output_tps": s.per_request_output_tps,
        }
        if hi != lo and s.aggregate_output_tps is not None:
            text += f"; at concurrency {hi} it delivers {ftps(s.aggregate_output_tps)} of output in aggregate"
            figures.update(high_concurrency=hi, aggregate_output_tps=s.aggregate_output_tps)
        out.append(
            Finding(kind="stream_and_aggregate", text=text + ".", input_len=il, runs=runs, figures=figures)
        )
    cell = cmp.cell(s.run_id, il, hi)
    run = cmp.run(s.run_id)
    if cell is not None and cell.cost_per_1m_tokens_usd is not None and run.price is not None:
        out.append(
            Finding(
                kind="cost",
                text=(
                    f"At input {il} and concurrency {hi}, at {TIER_LABELS[cmp.tier]} prices "
                    f"({fmt_usd(run.price.usd_per_hour)}/h), {name} serves 1M output tokens for "
                    f"{fmt_usd(cell.cost_per_1m_tokens_usd)}."
                ),
                input_len=il,
                runs=runs,
                figures={
                    "tier": cmp.tier.value,
                    "concurrency": hi,
                    "hourly_usd": run.price.usd_per_hour,
                    "cost_per_1m_tokens_usd": cell.cost_per_1m_tokens_usd,
                },
            )
        )
    return out


# ------------------------------------------------------------------------------------ whole
def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _failure_findings(cmp: Comparison) -> list[Finding]:
    """One finding per run with failed requests: the total, and the cell where most failed."""
    out: list[Finding] = []
    for run in cmp.runs:
        cells = [c for c in cmp.cells_of(run.id) if c.failed > 0]
        if not cells:
            continue
        failed = sum(c.failed for c in cells)
        total = sum(c.successful + c.failed for c in cmp.cells_of(run.id))
        worst = max(cells, key=lambda c: (c.failed, -c.input_len, -c.concurrency))
        head = f"{run.name} failed {failed} of {total} requests ({failed / total * 100:.1f}%)"
        if len(cells) == 1:
            text = f"{head}, all at input {worst.input_len}, concurrency {worst.concurrency}."
        else:
            text = (
                f"{head} in {len(cells)} cells; the most at input {worst.input_len}, concurrency "
                f"{worst.concurrency} ({worst.failed} of {worst.successful + worst.failed})."
            )
        out.append(
            Finding(
                kind="failures",
                text=text,
                runs=[run.id],
                figures={
                    "failed": failed,
                    "requests": total,
                    "failed_pct": failed / total * 100,
                    "cells": len(cells),
                    "worst_input_len": worst.input_len,
                    "worst_concurrency": worst.concurrency,
                    "worst_failed": worst.failed,
                    "worst_requests": worst.successful + worst.failed,
                },
            )
        )
    return out


def _cost_coverage(cmp: Comparison) -> list[Finding]:
    priced = [r for r in cmp.runs if r.price is not None]
    unpriced = [r for r in cmp.runs if r.price is None]
    if not unpriced:
        return []
    local = [r.name for r in unpriced if not r.instance_type]
    missing = [f"{r.name} ({r.instance_type})" for r in unpriced if r.instance_type]
    parts = []
    if local:
        machines = "a machine" if len(local) == 1 else "machines"
        parts.append(f"{_and(local)} ran on {machines} without an instance type, so no price applies")
    if missing:
        parts.append(f"no {TIER_LABELS[cmp.tier]} price is known for {_and(missing)}")
    head = "No cost figures" if not priced else "Cost is compared only where a price is known"
    return [
        Finding(
            kind="cost_coverage",
            text=f"{head}: {'; '.join(parts)}.",
            runs=[r.id for r in unpriced],
            figures={"priced_runs": len(priced), "unpriced_runs": len(unpriced)},
        )
    ]


# ------------------------------------------------------------------------------------ capacity
def _knee_group(group: list[CapacityRun], figures: dict[str, float | int | str | None]) -> Finding:
    """Knee searches (no SLO): where each run's throughput stops growing."""
    with_knee = [c for c in group if c.knee is not None]
    parts = [
        f"{c.hardware}'s throughput stops growing at {load_phrase(c.load, c.knee)}"
        if i == 0
        else f"{c.hardware}'s at {load_phrase(c.load, c.knee)}"
        for i, c in enumerate(with_knee)
        if c.knee is not None
    ]
    flat = [c.hardware for c in group if c.knee is None]
    text = "Without an SLO, " + "; ".join(parts) + (" (the knee)" if parts else "")
    if flat:
        text += ("; " if parts else "") + f"no knee shows for {_and(flat)}"
    figures.update({f"{c.run_id}_knee": c.knee for c in group})
    return Finding(kind="capacity", text=text + ".", runs=[c.run_id for c in group], figures=figures)


def _capacity_group(group: list[CapacityRun]) -> Finding:
    """One sentence for the searches of one SLO and load: the runs meeting it in the order given, each with
    its highest load and cost, then the runs meeting it at no load measured."""
    first = group[0]
    figures: dict[str, float | int | str | None] = {"slo": first.slo_label, "load": first.load}
    for c in group:
        figures[f"{c.run_id}_max_load"] = c.max_load
        figures[f"{c.run_id}_usd_per_million_output_tokens"] = c.usd_per_million_output_tokens
    runs = [c.run_id for c in group]
    if first.slo is None:
        return _knee_group(group, figures)
    met = [c for c in group if c.max_load is not None]
    unmet = [c for c in group if c.max_load is None]
    parts: list[str] = []
    for c in met:
        assert c.max_load is not None
        load = load_phrase(c.load, c.max_load)
        if c.usd_per_million_output_tokens is None:
            cost = " (no price)"
        elif not parts:
            cost = f" at {fmt_usd_per_million(c.usd_per_million_output_tokens)}/1M output tokens"
        else:
            cost = f" at {fmt_usd_per_million(c.usd_per_million_output_tokens)}/1M"
        parts.append(f"{c.hardware} sustains {load}{cost}" if not parts else f"{c.hardware} {load}{cost}")
    for c in unmet:
        lowest = min((p.level for p in c.probes), default=None)
        why = f" (even {load_phrase(c.load, lowest)} misses it)" if lowest is not None else ""
        parts.append(f"{c.hardware} meets it at no load measured{why}")
    return Finding(
        kind="capacity", text=f"At {first.slo_label}, " + "; ".join(parts) + ".", runs=runs, figures=figures
    )


def _capacity_findings(cmp: Comparison) -> list[Finding]:
    searches = [c for c in cmp.capacity if c.finished]
    if not searches:
        return []
    groups: dict[tuple[str | None, str], list[CapacityRun]] = {}
    for c in searches:
        groups.setdefault((c.slo_label, c.load), []).append(c)
    out = [_capacity_group(g) for g in groups.values()]
    if len(groups) > 1:
        slos = {c.slo_label for c in searches}
        loads = {c.load for c in searches}
        what = [w for w, differ in (("SLOs", len(slos) > 1), ("loads", len(loads) > 1)) if differ]

        def how(c: CapacityRun) -> str:
            bits = [c.slo_label or "no SLO (knee)"] if len(slos) > 1 else []
            bits += [c.load.replace("_", " ")] if len(loads) > 1 else []
            return f"{c.hardware}: {', '.join(bits)}"

        out.append(
            Finding(
                kind="capacity_mismatch",
                text=(
                    f"The capacity searches used different {' and '.join(what)} "
                    f"({'; '.join(how(c) for c in searches)}): their capacities do not compare directly."
                ),
                runs=[c.run_id for c in searches],
                figures={"slos": len(slos), "loads": len(loads)},
            )
        )
    for c in searches:
        if c.predicted_max_load is None or c.max_load is None or c.prediction_error_pct is None:
            continue
        out.append(
            Finding(
                kind="capacity_prediction",
                text=(
                    f"For {c.hardware} at {c.slo_label}, the planner predicted "
                    f"{load_phrase(c.load, c.predicted_max_load)} against {load_phrase(c.load, c.max_load)} "
                    f"measured ({error_phrase(c.prediction_error_pct)})."
                ),
                runs=[c.run_id],
                figures={
                    "predicted_max_load": c.predicted_max_load,
                    "max_load": c.max_load,
                    "prediction_error_pct": c.prediction_error_pct,
                },
            )
        )
    return out


def generate_findings(cmp: Comparison) -> list[Finding]:
    """All findings of a comparison, in reading order: capacity at the SLO (when some runs searched it), per
    input length the pair (or single-run) findings, then failures, then cost coverage."""
    out: list[Finding] = _capacity_findings(cmp) + capacity_difference_findings(cmp)
    if len(cmp.runs) == 1:
        for s in cmp.scaling:
            out.extend(_scaling_findings(cmp, s))
    else:
        for other in cmp.runs[1:]:
            pairs = [p for p in cmp.pairs if p.b == other.id]
            if not pairs:
                base = cmp.run(cmp.baseline).name
                out.append(
                    Finding(
                        kind="no_match",
                        text=(
                            f"No (input length, concurrency) cell was measured by both {base} and {other.name}, "
                            "so no ratios are given for them."
                        ),
                        runs=[cmp.baseline, other.id],
                    )
                )
            for p in pairs:
                out.extend(_pair_findings(cmp, p))
    out.extend(_failure_findings(cmp))
    out.extend(_cost_coverage(cmp))
    return out
