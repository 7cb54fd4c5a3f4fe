"""One run's headline: its best configuration (the highest output tok/s meeting the SLO, else the highest),
how many cells meet the SLO and where it stops being met, the cost there and the failure share, in sentences."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from accelbench.domain.results import ResultInfo
from accelbench.report.capacity_results import answer_sentence
from accelbench.report.cell_slo import CellSLO, Key, SLOChoice
from accelbench.report.comparison import TIER_LABELS, CapacityRun, Comparison
from accelbench.report.failures import cell_failures
from accelbench.report.formatting import fmt_num, fmt_usd
from accelbench.report.headline_data import BestCell, RunHeadline, per_million
from accelbench.report.tables import CellAggregate

if TYPE_CHECKING:
    pass


def _best(
    cells: Sequence[CellAggregate], evaluation: Mapping[Key, CellSLO] | None
) -> tuple[CellAggregate | None, bool | None]:
    """The cell with the highest output tok/s meeting the SLO (True), else the highest overall (False without
    one meeting it, None without an SLO)."""
    measured = [c for c in cells if c.mean("output_throughput") is not None]
    if not measured:
        return None, None

    def tps(c: CellAggregate) -> float:
        return c.mean("output_throughput") or 0.0

    if evaluation is not None:
        meeting = [
            c for c in measured if (e := evaluation.get((c.run_id, c.input_len, c.concurrency))) and e.met
        ]
        if meeting:
            return max(meeting, key=tps), True
        return max(measured, key=tps), False
    return max(measured, key=tps), None


def _boundaries(cells: Sequence[CellAggregate], evaluation: Mapping[Key, CellSLO]) -> list[str]:
    """Per input length, where the SLO stops being met as concurrency grows."""
    out = []
    by_len: dict[int, list[CellAggregate]] = defaultdict(list)
    for c in cells:
        by_len[c.input_len].append(c)
    for input_len in sorted(by_len):
        row = sorted(by_len[input_len], key=lambda c: c.concurrency)
        evals = [evaluation.get((c.run_id, c.input_len, c.concurrency)) for c in row]
        verdicts = [e.met if e is not None else None for e in evals]
        where = f"At input {input_len}"
        if all(v is True for v in verdicts):
            out.append(f"{where} the SLO holds at every concurrency measured (up to {row[-1].concurrency}).")
            continue
        if all(v is False for v in verdicts):
            first = evals[0]
            why = f": {first.why}" if first is not None and first.why else ""
            out.append(
                f"{where} the SLO is missed at every concurrency measured (from {row[0].concurrency}{why})."
            )
            continue
        held = [c.concurrency for c, v in zip(row, verdicts, strict=True) if v is True]
        broke = next(
            (
                (c, e)
                for c, v, e in zip(row, verdicts, evals, strict=True)
                if v is False and (not held or c.concurrency > max(held))
            ),
            None,
        )
        if held and broke is not None:
            c, e = broke
            why = f" ({e.why})" if e is not None and e.why else ""
            out.append(
                f"{where} the SLO holds up to concurrency {max(held)} and breaks at {c.concurrency}{why}."
            )
        elif held:
            unknown = [c.concurrency for c, v in zip(row, verdicts, strict=True) if v is None]
            out.append(
                f"{where} the SLO holds up to concurrency {max(held)}; it cannot be judged at "
                + ", ".join(str(u) for u in unknown)
                + "."
            )
        else:
            e = next((e for e in evals if e is not None and e.met is None), None)
            out.append(f"{where} the SLO cannot be judged: {e.why if e else 'no figures'}.")
    return out


def run_headline(
    cmp: Comparison,
    run_id: str,
    cells: Sequence[CellAggregate],
    results: Sequence[ResultInfo],
    *,
    slo: SLOChoice | None = None,
    evaluation: Mapping[Key, CellSLO] | None = None,
) -> RunHeadline:
    """One run's headline from its comparison (price, cost), cells, results and SLO evaluation."""
    compared = cmp.run(run_id)
    cells = [c for c in cells if c.run_id == run_id]
    results = [r for r in results if r.run_id == run_id]
    capacity: CapacityRun | None = next((c for c in cmp.capacity if c.run_id == run_id), None)
    failures = cell_failures(results)
    failed = sum(r.failed for r in results)
    ended = sum(r.completed + r.failed for r in results)
    h = RunHeadline(run_id=run_id, name=compared.name, best=None, slo=slo, failed=failed, ended=ended)
    if failures:
        worst = max(failures, key=lambda f: (f.failed, f.share))
        h.top_failure = f"most at {worst.cell}: {worst.text()}"
    evaluation = evaluation if slo is not None else None
    if evaluation is not None:
        mine = [e for e in evaluation.values() if e.run_id == run_id]
        h.met_cells = sum(1 for e in mine if e.met is True)
        h.missed_cells = sum(1 for e in mine if e.met is False)
        h.unknown_cells = sum(1 for e in mine if e.met is None)
        h.boundaries = _boundaries(cells, evaluation)
    if capacity is not None:
        h.capacity_answer = answer_sentence(capacity)
    best, meets = _best(cells, evaluation)
    if best is not None:
        cr = cmp.cell(run_id, best.input_len, best.concurrency)
        h.best = BestCell(
            input_len=best.input_len,
            concurrency=best.concurrency,
            output_tps=best.mean("output_throughput"),
            tpot_p50_ms=best.mean("tpot_p50_ms"),
            ttft_p50_ms=best.mean("ttft_p50_ms"),
            usd_per_1m_output=cr.cost_per_1m_tokens_usd if cr is not None else None,
            hourly_usd=cr.hourly_usd if cr is not None else None,
            meets_slo=meets,
        )
    if compared.price is None:
        h.price_note = compared.price_note or "the run has no price"
    h.lines = _run_lines(h, cmp)
    return h


def _run_lines(h: RunHeadline, cmp: Comparison) -> list[str]:
    out: list[str] = []
    if h.capacity_answer:
        out.append(h.capacity_answer)
    b = h.best
    if b is None:
        out.append("No cell has a measured throughput, so there is no best configuration.")
    else:
        at = f"input {b.input_len}, concurrency {b.concurrency}"
        figures = (
            f"{fmt_num(b.output_tps)} output tok/s, TPOT p50 {fmt_num(b.tpot_p50_ms, 2)} ms, "
            f"TTFT p50 {fmt_num(b.ttft_p50_ms)} ms"
        )
        if h.slo is None:
            out.append(
                f"Best configuration: {at} ({figures}), the highest output throughput; no SLO is known."
            )
        elif b.meets_slo:
            out.append(f"Best configuration meeting the SLO: {at} ({figures}).")
        else:
            out.append(f"No cell meets the SLO; the highest output throughput is at {at} ({figures}).")
    if h.slo is not None:
        total = h.met_cells + h.missed_cells + h.unknown_cells
        verdict = {
            "all": f"SLO met in every cell ({total})",
            "some": f"SLO met in {h.met_cells} of {total} cells",
            "none": f"SLO met in none of the {total} cells",
            "unknown": f"SLO met in {h.met_cells} of {total} cells, {h.unknown_cells} cannot be judged",
        }[h.slo_verdict or "unknown"]
        out.append(f"{verdict}: {h.slo.label()}.")
        out += h.boundaries
    if b is not None:
        if b.usd_per_1m_output is not None:
            out.append(
                f"Cost there: {per_million(b.usd_per_1m_output)} per 1M output tokens "
                f"(at {fmt_usd(b.hourly_usd)}/h, {TIER_LABELS[cmp.tier]})."
            )
        else:
            out.append(
                f"No cost per token: {(h.price_note or 'no price is known for this run').rstrip('.')}."
            )
    if h.failed:
        line = f"{h.failed} of {h.ended} requests failed ({h.failure_share:.1%})"
        out.append(line + (f"; {h.top_failure}" if h.top_failure else "") + ".")
    else:
        out.append(f"No request failed ({h.ended} ended).")
    return out
