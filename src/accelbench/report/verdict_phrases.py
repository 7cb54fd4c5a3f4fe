"""How the findings and the headline say a verdict (``report/verdicts.py``): a difference the data supports with
its size and interval ("TPOT 12% lower (8-16%)"), one it does not as "no detectable difference" with the repeats
that would settle it, and a ratio that only looks different said as on par."""

from __future__ import annotations

from accelbench.bench.intervals import half_width_pct
from accelbench.report.comparison import ON_PAR, CapacityRun, Comparison, Finding, Versus
from accelbench.report.formatting import fmt_num
from accelbench.report.verdicts import NO_DIFFERENCE, MetricVerdict, no_difference_phrase


def known(v: MetricVerdict | None) -> bool:
    """True when there is a verdict resting on intervals (not ``unknown``)."""
    return v is not None and v.verdict != "unknown" and v.ratio_ci95 is not None


def undetected(vs: Versus | None, v: MetricVerdict | None) -> Versus | None:
    """``vs`` said as on par when the verdict finds no detectable difference: a ratio the interval does not
    support is never written as a lead."""
    if vs is None or v is None or v.verdict != NO_DIFFERENCE:
        return vs
    return Versus(factor=vs.factor, better=None, word=ON_PAR, digits=vs.digits)


def size_phrase(v: MetricVerdict, what: str) -> str:
    """A supported difference: ``"TPOT 12% lower (8-16%)"``."""
    assert v.ratio_ci95 is not None
    near, far = sorted(abs(x - 1) * 100 for x in v.ratio_ci95)
    way = "lower" if v.ratio < 1 else "higher"
    return f"{what} {abs(v.ratio - 1) * 100:.0f}% {way} ({near:.0f}-{far:.0f}% at 95% confidence)"


def clause(v: MetricVerdict | None, what: str) -> str:
    """What the verdict adds to a sentence, starting ``"; "``; empty without a known verdict."""
    if v is None or not known(v):
        return ""
    if v.verdict == NO_DIFFERENCE:
        return f"; {what}: {no_difference_phrase(v)}"
    return f"; {size_phrase(v, what)}"


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


def supported_sentence(sentence: str, names: tuple[str, str], what: str, v: MetricVerdict | None) -> str:
    """A headline's ``X is N.Nx faster than Y ...`` sentence as the verdict allows: unchanged without one; with
    a supported difference, its size and interval added; without one, replaced by the two ``names`` showing no
    detectable difference ``what`` (the quantity, e.g. "at decoding")."""
    if v is None or not known(v):
        return sentence
    if v.verdict == NO_DIFFERENCE:
        return f"Between {names[0]} and {names[1]} there is {no_difference_phrase(v)} {what}."
    short = "TPOT" if v.metric.startswith("tpot") else v.label
    return f"{sentence.rstrip('.')}; {size_phrase(v, short)}."


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
                _with_ci(v.baseline_value, base_cell.ci95.get(v.metric) if base_cell else None),
                _with_ci(v.value, cell.ci95.get(v.metric) if cell else None),
                f"{v.ratio:.3f}",
                f"{v.ratio_ci95[0]:.3f}-{v.ratio_ci95[1]:.3f}",
                v.verdict if v.verdict == NO_DIFFERENCE else f"{v.verdict} ({v.direction})",
                str(v.repeats_needed) if v.repeats_needed is not None else "",
            ]
        )
    return rows


def _with_ci(value: float, ci: list[float] | None) -> str:
    text = fmt_num(value, 2)
    pct = half_width_pct(value, ci)
    if pct is None:
        return text
    return f"{text} +-{pct:.1f}%" if pct < 1 else f"{text} +-{pct:.0f}%"


def capacity_difference_findings(cmp: Comparison) -> list[Finding]:
    """Whether the capacities of searches with the same SLO and load differ: each set against the first, by
    their 90% confidence ranges (``bench.capacity_confidence``): apart when the ranges do not overlap, else no
    detectable difference. Searches without a range on both ends say nothing."""
    from accelbench.bench.capacity_confidence import LEVEL, confidence_range

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
