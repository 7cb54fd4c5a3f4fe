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

from typing import Literal

from accelbench.report.capacity_results import error_phrase, fmt_usd_per_million, load_phrase
from accelbench.report.comparison import (
    TIER_LABELS,
    CapacityRun,
    Comparison,
    Finding,
    Growth,
    RunScaling,
    fmt_usd,
)
from accelbench.report.finding_phrases import ftps, fx, growth_figures, growth_phrase, stream_phrase
from accelbench.report.pair_findings import pair_findings
from accelbench.report.verdict_phrases import capacity_difference_findings

__all__ = ["Finding", "generate_findings"]


def _growth_finding(name: str, s: RunScaling, metric: Literal["tpot", "ttft"], g: Growth) -> Finding:
    """How one run's TPOT or TTFT grows from its lowest to its highest concurrency at one input length."""
    il, lo, hi = s.input_len, s.lowest_concurrency, s.highest_concurrency
    return Finding(
        kind=f"{metric}_growth",
        text=f"At input {il}, {name}'s {metric.upper()} {growth_phrase(g)} from concurrency {lo} to {hi}.",
        input_len=il,
        runs=[s.run_id],
        figures={"from_concurrency": lo, "to_concurrency": hi, **growth_figures(metric, g)},
    )


def _scaling_findings(cmp: Comparison, s: RunScaling) -> list[Finding]:
    name = cmp.run(s.run_id).name
    il, lo, hi = s.input_len, s.lowest_concurrency, s.highest_concurrency
    runs = [s.run_id]
    out: list[Finding] = []
    if s.tpot_growth is not None:
        out.append(_growth_finding(name, s, "tpot", s.tpot_growth))
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
        out.append(_growth_finding(name, s, "ttft", s.ttft_growth))
    if s.per_request_output_tps is not None:
        text = stream_phrase(il, lo, s.per_request_output_tps, name)
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
                out.extend(pair_findings(cmp, p))
    out.extend(_failure_findings(cmp))
    out.extend(_cost_coverage(cmp))
    return out
