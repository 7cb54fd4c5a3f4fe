"""How the findings, the headline and the side-by-side tables say a verdict (``report/verdicts.py``): a
difference the data supports in the verdict's own words with its size and interval ("25% faster (22-28%)"),
one it does not as "no detectable difference" with the repeats that would settle it. Only a figure without an
interval (a result stored before intervals existed) keeps its plain factor ("2.50x faster"): nothing judges it."""

from __future__ import annotations

from accelbench.bench.capacity_confidence import LEVEL, confidence_range
from accelbench.report.comparison import ON_PAR, CapacityRun, Comparison, Finding, Versus
from accelbench.report.tables import value_with_ci
from accelbench.report.verdicts import NO_DIFFERENCE, MetricVerdict, no_difference_phrase, vocabulary


def known(v: MetricVerdict | None) -> bool:
    """True when there is a verdict resting on intervals (not ``unknown``)."""
    return v is not None and v.verdict != "unknown" and v.ratio_ci95 is not None


def undetected(vs: Versus | None, v: MetricVerdict | None) -> Versus | None:
    """``vs`` as the verdict has it: on par when it finds no detectable difference (a ratio the interval does
    not support is never written as a lead), in its words when it finds one, as it is without a verdict."""
    if vs is None or not known(v):
        return vs
    assert v is not None
    if v.verdict == NO_DIFFERENCE:
        return Versus(factor=vs.factor, better=None, word=ON_PAR, digits=vs.digits)
    better = v.verdict == "better"
    word = vocabulary(v.metric)[0 if better else 1]
    return Versus(factor=vs.factor, better=better, word=word, digits=vs.digits, text=v.words)


def said(vs: Versus | None, v: MetricVerdict | None, missing: str = "") -> str:
    """One figure against the baseline's in a table cell: the verdict's words, else (no interval) the plain
    factor, else ``missing``."""
    if known(v):
        assert v is not None
        return v.words
    return str(vs) if vs is not None else missing


def clause(v: MetricVerdict | None, what: str) -> str:
    """What a verdict of no detectable difference adds to a sentence, starting ``"; "``: its ratio, interval and
    the repeats that would settle it; empty otherwise (a supported difference is said in the sentence itself,
    in the verdict's words)."""
    if v is None or not known(v) or v.verdict != NO_DIFFERENCE:
        return ""
    return f"; {what}: {no_difference_phrase(v)}"


def figures(v: MetricVerdict | None, prefix: str = "") -> dict[str, float | int | str | None]:
    """The verdict's figures for a finding (empty without a known verdict)."""
    if v is None or not known(v):
        return {}
    assert v.ratio_ci95 is not None
    return {
        f"{prefix}verdict": v.verdict,
        f"{prefix}ratio": v.ratio,
        f"{prefix}ratio_ci95_low": v.ratio_ci95[0],
        f"{prefix}ratio_ci95_high": v.ratio_ci95[1],
        f"{prefix}repeats_needed": v.repeats_needed,
    }


def supported_sentence(
    sentence: str, names: tuple[str, str], what: str, v: MetricVerdict | None, figures: str = ""
) -> str:
    """A headline's sentence as the verdict has it: ``sentence`` (the plain factor) without a verdict; with a
    supported difference, the run (``names[1]``) against the baseline (``names[0]``) in the verdict's words,
    "B is 25% faster (22-28%) than A at decoding (figures)"; without one, "Between A and B there is no detectable
    difference at decoding (ratio ...)". ``what`` is the quantity ("at decoding ..."), ``figures`` the two
    figures quoted."""
    if v is None or not known(v):
        return sentence
    if v.verdict == NO_DIFFERENCE:
        return f"Between {names[0]} and {names[1]} there is {no_difference_phrase(v)} {what}."
    quoted = f": {figures}" if figures else ""
    return f"{names[1]} is {v.words} than {names[0]} {what}{quoted}."


#: the verdict table of a comparison (CLI, compare page, report)
VERDICT_TABLE_COLUMNS: tuple[str, ...] = (
    "Run",
    "Input",
    "Conc.",
    "Metric",
    "Baseline",
    "Run's",
    "Ratio",
    "Ratio 95% interval",
    "Verdict",
    "Repeats for 5%",
)


def verdict_rows(cmp: Comparison) -> list[list[str]]:
    """One row per matched cell and metric with a verdict resting on intervals: both figures (with their
    ``+-`` interval), the ratio, its interval, the verdict with its direction, and the repeats that would
    detect a 5% difference where none was detected."""
    rows: list[list[str]] = []
    for v in cmp.verdicts:
        if not known(v):
            continue
        assert v.ratio_ci95 is not None
        base_cell = cmp.cell(v.baseline, v.input_len, v.concurrency)
        cell = cmp.cell(v.run_id, v.input_len, v.concurrency)
        rows.append(
            [
                cmp.run(v.run_id).name,
                str(v.input_len),
                str(v.concurrency),
                v.label,
                value_with_ci(v.baseline_value, base_cell.ci95.get(v.metric) if base_cell else None),
                value_with_ci(v.value, cell.ci95.get(v.metric) if cell else None),
                f"{v.ratio:.3f}",
                f"{v.ratio_ci95[0]:.3f}-{v.ratio_ci95[1]:.3f}",
                v.verdict if v.verdict == NO_DIFFERENCE else f"{v.verdict} ({v.direction})",
                str(v.repeats_needed) if v.repeats_needed is not None else "",
            ]
        )
    return rows


def capacity_difference_findings(cmp: Comparison) -> list[Finding]:
    """Whether the capacities of searches with the same SLO and load differ: each set against the first, by
    their 90% confidence ranges (``bench.capacity_confidence``): apart when the ranges do not overlap, else no
    detectable difference. Searches without a range on both ends say nothing."""
    groups: dict[tuple[str | None, str], list[CapacityRun]] = {}
    for c in cmp.capacity:
        if c.finished and c.max_load is not None:
            groups.setdefault((c.slo_label, c.load), []).append(c)
    out: list[Finding] = []
    for group in groups.values():
        ranged = [
            (c, r) for c in group if (r := confidence_range(c.probes, c.max_load, c.load)) and None not in r
        ]
        for (a, ra), (b, rb) in ((ranged[0], x) for x in ranged[1:]):
            assert a.max_load is not None and b.max_load is not None
            lo_a, hi_a, lo_b, hi_b = (float(x) for x in (*ra, *rb) if x is not None)
            apart = hi_a < lo_b or hi_b < lo_a
            span = f"{a.hardware} {lo_a:g}-{hi_a:g}, {b.hardware} {lo_b:g}-{hi_b:g}"
            if apart:
                more, less = (b, a) if b.max_load > a.max_load else (a, b)
                text = (
                    f"At {a.slo_label}, {more.hardware} holds more load than {less.hardware} "
                    f"({more.max_load:g} vs {less.max_load:g}): their {LEVEL:.0%} ranges do not overlap ({span})."
                )
            else:
                text = (
                    f"At {a.slo_label}, the capacities of {a.hardware} and {b.hardware} ({a.max_load:g} vs "
                    f"{b.max_load:g}) show no detectable difference: their {LEVEL:.0%} ranges overlap ({span})."
                )
            out.append(
                Finding(
                    kind="capacity_difference",
                    text=text,
                    runs=[a.run_id, b.run_id],
                    figures={
                        "differ": "yes" if apart else "no",
                        "a_low": lo_a,
                        "a_high": hi_a,
                        "b_low": lo_b,
                        "b_high": hi_b,
                    },
                )
            )
    return out
