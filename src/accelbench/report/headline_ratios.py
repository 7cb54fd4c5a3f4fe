"""The key ratios between runs in a headline: each run against the baseline in output throughput, cost per
million output tokens and decode speed, said as the comparison's verdicts say them (the plain factor where the
figures have no interval)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from accelbench.report.comparison import Comparison, lead
from accelbench.report.formatting import fmt_num
from accelbench.report.headline_data import Ratio, RunHeadline, per_million
from accelbench.report.verdict_phrases import known, supported_sentence
from accelbench.report.verdicts import COST_METRIC, MetricVerdict, find

if TYPE_CHECKING:
    pass


def _ratio(
    what: str, verb: str, a: tuple[str, float], b: tuple[str, float], unit: str, higher: bool
) -> Ratio:
    """``winner is N.Nx <verb> than loser`` with the figures; the factor is always >= 1."""
    (an, av), (bn, bv) = a, b
    a_wins = av >= bv if higher else av <= bv
    (wn, wv), (ln, lv) = ((an, av), (bn, bv)) if a_wins else ((bn, bv), (an, av))
    factor = lead(wv / lv)
    shown = per_million if unit == "$" else (lambda v: fmt_num(v, 2 if unit == "ms" else 1))
    figures = f"{shown(wv)} vs {shown(lv)}" + ("" if unit == "$" else f" {unit}")
    return Ratio(what, wn, ln, factor, wv, lv, f"{wn} is {factor:.1f}x {verb} than {ln} {what} ({figures}).")


def _shared_best(cmp: Comparison, base: RunHeadline, other: RunHeadline, metric: str) -> MetricVerdict | None:
    """The verdict of ``metric`` at the run's best configuration where the baseline measured it too, else at the
    baseline's best; None when neither cell has a verdict resting on intervals."""
    for best in (other.best, base.best):
        if best is not None:
            v = find(cmp.verdicts, other.run_id, best.input_len, best.concurrency, metric)
            if known(v):
                return v
    return None


def _whose_best(base: RunHeadline, other: RunHeadline, v: MetricVerdict) -> str:
    at = (v.input_len, v.concurrency)
    mine = [
        r.name for r in (other, base) if r.best is not None and (r.best.input_len, r.best.concurrency) == at
    ]
    return "the best configuration of both" if len(mine) == 2 else f"{mine[0]}'s best configuration"


def _judged_ratio(
    what: str, names: tuple[str, str], v: MetricVerdict, figures: str, fallback: Ratio
) -> Ratio:
    """A ratio as the verdict says it (``fallback``'s sentence where the verdict is unknown); the winner the
    verdict's better side, with no detectable difference the one ahead at that cell's figures."""
    ahead = (v.ratio > 1) == (v.direction == "higher is better")
    better = v.better == v.run_id if v.better else ahead
    winner, loser = (names[1], names[0]) if better else (names[0], names[1])
    mine, theirs = (v.value, v.baseline_value) if better else (v.baseline_value, v.value)
    sentence = supported_sentence(fallback.sentence, names, what, v, figures)
    return Ratio(what, winner, loser, lead(v.ratio), mine, theirs, sentence, v)


def comparison_ratios(cmp: Comparison, runs: Sequence[RunHeadline]) -> list[Ratio]:
    """Each run against the baseline, as the comparison's verdicts say it: output throughput and cost at the
    run's best configuration (else the baseline's) where both measured it, and decode speed (TPOT p50) at the
    lowest concurrency both measured; the plain factor at the two best configurations where the figures have
    no interval."""
    base = next((r for r in runs if r.run_id == cmp.baseline), None)
    if base is None:
        return []
    out: list[Ratio] = []
    for other in runs:
        if other is base or base.best is None or other.best is None or other.run_id in cmp.left_out:
            continue  # a run not like for like with the baseline is not ranked against it
        a, b = base.best, other.best
        names = (base.name, other.name)
        shared = _shared_best(cmp, base, other, "output_throughput")
        if a.output_tps and b.output_tps:
            r = _ratio(
                "in output throughput at their best configurations",
                "faster",
                (base.name, a.output_tps),
                (other.name, b.output_tps),
                "tok/s",
                True,
            )
            if shared is not None:
                what = f"in output throughput at input {shared.input_len}, concurrency {shared.concurrency}"
                figures = (
                    f"{fmt_num(shared.value)} vs {fmt_num(shared.baseline_value)} tok/s, "
                    f"{_whose_best(base, other, shared)}"
                )
                r = _judged_ratio(what, names, shared, figures, r)
            out.append(r)
        cost = (
            find(cmp.verdicts, other.run_id, shared.input_len, shared.concurrency, COST_METRIC)
            if shared is not None
            else None
        )
        usd = (
            (cost.baseline_value, cost.value)
            if cost is not None and known(cost)
            else (a.usd_per_1m_output, b.usd_per_1m_output)
        )
        if usd[0] and usd[1]:
            r = _ratio(
                "per 1M output tokens there", "cheaper", (base.name, usd[0]), (other.name, usd[1]), "$", False
            )
            if cost is not None and known(cost):
                what = f"per 1M output tokens at input {cost.input_len}, concurrency {cost.concurrency}"
                r = _judged_ratio(what, names, cost, f"{per_million(usd[1])} vs {per_million(usd[0])}", r)
            out.append(r)
        pair = next(
            (
                p
                for p in cmp.pairs
                if p.a == base.run_id and p.b == other.run_id and p.tpot_a_ms and p.tpot_b_ms
            ),
            None,
        )
        if pair is not None and pair.tpot_a_ms and pair.tpot_b_ms:
            r = _ratio(
                f"at decoding (TPOT p50 at input {pair.input_len}, concurrency {pair.lowest_concurrency})",
                "faster",
                (base.name, pair.tpot_a_ms),
                (other.name, pair.tpot_b_ms),
                "ms",
                False,
            )
            v = find(cmp.verdicts, other.run_id, pair.input_len, pair.lowest_concurrency, "tpot_p50_ms")
            if known(v):
                assert v is not None
                figures = f"TPOT {fmt_num(pair.tpot_b_ms, 2)} vs {fmt_num(pair.tpot_a_ms, 2)} ms"
                r = _judged_ratio(r.what, names, v, figures, r)
            out.append(r)
    return out
