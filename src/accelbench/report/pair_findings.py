"""Findings between two runs at one input length, each said against the baseline: decode speed, TPOT and TTFT
growth under load, the throughput gap and how it moves, what one request gets and the aggregate, and cost."""

from __future__ import annotations

from typing import Literal

from accelbench.report.comparison import (
    ON_PAR,
    TIER_LABELS,
    TREND_WORDS,
    CellResult,
    Comparison,
    Finding,
    PairRatios,
    Versus,
    cost_versus,
    decode_versus,
    fmt_usd,
    lead,
    throughput_versus,
)
from accelbench.report.finding_phrases import (
    fms,
    ftps,
    growth_figures,
    growth_parts,
    growth_phrase,
    stream_phrase,
)
from accelbench.report.verdict_phrases import clause as verdict_clause
from accelbench.report.verdict_phrases import figures as verdict_figures
from accelbench.report.verdict_phrases import known, undetected
from accelbench.report.verdicts import COST_METRIC, MetricVerdict, find


# Each sentence sets the run (B) against the baseline (A) and says so: in the verdict's words where the figures
# have intervals (report/verdict_phrases.py undetected), else a factor of at least 1 with the direction in words
# ("B decodes 2.5x faster than the baseline A"), never a ratio below 1 (report/comparison.py versus).
def pair_findings(cmp: Comparison, p: PairRatios) -> list[Finding]:
    a, b = cmp.run(p.a).name, cmp.run(p.b).name
    il, hi = p.input_len, p.highest_concurrency
    out = [f for f in (_decode_finding(cmp, p), _growth_finding(cmp, p, "tpot")) if f is not None]
    if p.throughput_gaps:
        ends = (p.throughput_gaps[0].concurrency, p.throughput_gaps[-1].concurrency)
        found = tuple(find(cmp.verdicts, p.b, il, c, "total_token_throughput") for c in ends)
        out.append(_gap_finding(p, a, b, (found[0], found[1])))
    out += [f for f in (_growth_finding(cmp, p, "ttft"), _stream_finding(cmp, p)) if f is not None]
    ca, cb = cmp.cell(p.a, il, hi), cmp.cell(p.b, il, hi)
    if (
        ca is not None
        and cb is not None
        and ca.cost_per_1m_tokens_usd is not None
        and cb.cost_per_1m_tokens_usd is not None
    ):
        out.append(_cost_pair_finding(cmp, ca, cb, a, b))
    return out


def _decode_finding(cmp: Comparison, p: PairRatios) -> Finding | None:
    """The decode speed (TPOT p50) of the two runs at the lowest concurrency both measured."""
    a, b = cmp.run(p.a).name, cmp.run(p.b).name
    base = f"the baseline {a}"
    il, lo = p.input_len, p.lowest_concurrency
    v_decode = find(cmp.verdicts, p.b, il, lo, "tpot_p50_ms")
    decode = undetected(decode_versus(p.tpot_b_ms, p.tpot_a_ms, digits=1), v_decode)
    if p.decode_speedup_a_over_b is None or decode is None:
        return None
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
    return Finding(kind="decode_speedup", text=text, input_len=il, runs=[p.a, p.b], figures=figures)


def _growth_finding(cmp: Comparison, p: PairRatios, metric: Literal["tpot", "ttft"]) -> Finding | None:
    """How each run's TPOT or TTFT grows from the lowest to the highest concurrency."""
    a, b = cmp.run(p.a).name, cmp.run(p.b).name
    base = f"the baseline {a}"
    il, lo, hi = p.input_len, p.lowest_concurrency, p.highest_concurrency
    if metric == "tpot":
        ga, gb = p.a_scaling.tpot_growth, p.b_scaling.tpot_growth
    else:
        ga, gb = p.a_scaling.ttft_growth, p.b_scaling.ttft_growth
    if ga is None or gb is None:
        return None
    if metric == "tpot":
        text = (
            f"At input {il}, under load (concurrency {lo} → {hi}) {b}'s TPOT {growth_phrase(gb)} "
            f"while {base}'s {growth_phrase(ga)}."
        )
    else:
        vb, pb, spb = growth_parts(gb)
        va, pa, spa = growth_parts(ga)
        second = (
            f"{pa} on {base} {spa}" if va == vb and pa else f"{va}{' ' + pa if pa else ''} on {base} {spa}"
        )
        text = (
            f"At input {il}, from concurrency {lo} to {hi} TTFT {vb}{' ' + pb if pb else ''} on {b} "
            f"{spb} and {second}."
        )
    return Finding(
        kind=f"{metric}_growth",
        text=text,
        input_len=il,
        runs=[p.a, p.b],
        figures={
            "from_concurrency": lo,
            "to_concurrency": hi,
            **growth_figures(f"{metric}_a", ga),
            **growth_figures(f"{metric}_b", gb),
        },
    )


def _stream_finding(cmp: Comparison, p: PairRatios) -> Finding | None:
    """The output tok/s one request gets at the lowest concurrency, and the aggregate at the highest."""
    a, b = cmp.run(p.a).name, cmp.run(p.b).name
    base = f"the baseline {a}"
    il, lo, hi = p.input_len, p.lowest_concurrency, p.highest_concurrency
    sa, sb = p.a_scaling, p.b_scaling
    if sa.per_request_output_tps is None or sb.per_request_output_tps is None:
        return None
    text = (
        stream_phrase(il, lo, sb.per_request_output_tps, b)
        + f" vs {ftps(sa.per_request_output_tps)} on {base}"
    )
    figures: dict[str, float | int | str | None] = {
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
    return Finding(
        kind="stream_and_aggregate", text=text + ".", input_len=il, runs=[p.a, p.b], figures=figures
    )


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
