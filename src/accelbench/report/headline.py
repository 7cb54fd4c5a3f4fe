"""The answer a person reads first: per run (or comparison) the best configuration, whether the SLO is met and
where it stops being met, the cost per million output tokens there, the failure share, and between runs the
key ratios; and, per cell, the share of requests meeting an SLO (attainment) and the goodput.

One reading for every view: the report (HTML and Markdown), the result page and ``runs show`` render the plain
data made here (``Headline``, ``CellSLO``, ``cell_table``), never their own.

Rules, stated once:
- The SLO is the one the user gave (``--slo`` / ``?slo=``, parsed by ``domain/capacity.py``'s ``parse_slo``),
  else the run's own: a capacity search's SLO, a run spec's ``capacity:`` SLO, or its sweep's ``goodput``
  targets. ``SLOChoice.source`` says which.
- A request meets the SLO when every target holds for it, by the capacity search's own per-request rule
  (``bench/capacity_search.py``: TPOT of one request, ITL its longest gap); a failed request meets nothing. Attainment
  is the share of a cell's requests (its repeats pooled, failed ones included) meeting it; goodput is the mean
  over repeats of the requests/s and output tok/s of those requests.
- A cell meets the SLO when the SLO's percentile of each named metric is within its target and the attainment
  is at least the SLO's; as the capacity search judges a level.
- Without stored per-request records a cell is read from its stored percentiles: the attainment is then a lower
  bound (a target met at p95 is met by at least 95% of requests; several targets: one minus the sum of what
  each may miss), said so (``source="percentiles"``, written ``>=``); ITL cannot be judged so (the stored ITL
  percentiles are over gaps, not per request).
- The best configuration is the cell with the highest output tok/s that meets the SLO; without an SLO (or when
  none meets it) the cell with the highest output tok/s, said so. A capacity search's answer is its own
  (``report/capacity_results.py``).
- Ratios between runs are the comparison's verdicts (``report/verdicts.py``), at one matched cell each: output
  throughput and cost at the run's best configuration (else the baseline's) where both runs measured it, decode
  speed at the lowest concurrency both measured. A supported difference is said in the verdict's words, "B is 25%
  faster (22-28%) than A", otherwise "no detectable difference" (the same words as the findings, the tables and
  the CSV). Only figures without intervals (results stored before them) keep the plain factor, the larger figure
  first, "B is 2.5x faster than A", never below 1, at the two runs' best configurations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from accelbench.domain.capacity import CapacitySLO
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.report.cell_slo import CellSLO, Key, SLOChoice, evaluate_cells, load_records, run_slo
from accelbench.report.comparison import Comparison
from accelbench.report.formatting import fmt_num
from accelbench.report.headline_data import Headline, RunHeadline, per_million
from accelbench.report.headline_ratios import comparison_ratios
from accelbench.report.ranking_stability import best_configuration_stability
from accelbench.report.run_headline import run_headline
from accelbench.report.tables import CellAggregate

if TYPE_CHECKING:
    from accelbench.store.repo import Store


def build_headline(
    cmp: Comparison,
    cells: Sequence[CellAggregate],
    results: Sequence[ResultInfo],
    *,
    slos: Mapping[str, SLOChoice | None] | None = None,
    evaluation: Mapping[Key, CellSLO] | None = None,
) -> Headline:
    """The headline of one run or of a comparison: per run its answer, for several the key ratios, and a title
    naming the best configuration of all (meeting its SLO when one is known)."""
    slos = slos or {}
    runs = [
        run_headline(cmp, r.id, cells, results, slo=slos.get(r.id), evaluation=evaluation) for r in cmp.runs
    ]
    ratios = comparison_ratios(cmp, runs) if len(runs) > 1 else []
    by_key = {(c.run_id, c.input_len, c.concurrency): c for c in cells}
    best = [
        (r.name, by_key.get((r.run_id, r.best.input_len, r.best.concurrency)), r.best.hourly_usd)
        for r in runs
        if r.best is not None
    ]
    stability = best_configuration_stability(best) if len(runs) > 1 else []
    ranked = [r for r in runs if r.run_id not in cmp.left_out]  # the best of the runs like for like
    return Headline(title=_title(ranked), runs=runs, ratios=ratios, stability=stability)


def _title(runs: Sequence[RunHeadline]) -> str:
    candidates = [r for r in runs if r.best is not None and r.best.output_tps is not None]
    if not candidates:
        return "No configuration has a measured throughput yet."

    def score(r: RunHeadline) -> tuple[int, float]:
        assert r.best is not None
        return (1 if r.best.meets_slo else 0, r.best.output_tps or 0.0)

    top = max(candidates, key=score)
    b = top.best
    assert b is not None
    who = f"{top.name} at " if len(runs) > 1 else ""
    at = f"{who}input {b.input_len}, concurrency {b.concurrency}: {fmt_num(b.output_tps)} output tok/s"
    cost = f", {per_million(b.usd_per_1m_output)}/1M output tokens" if b.usd_per_1m_output is not None else ""
    if top.slo is None:
        verdict = "the highest throughput (no SLO known)"
    elif b.meets_slo:
        verdict = "meeting the SLO"
    else:
        verdict = "the highest throughput; the SLO is not met anywhere"
    share = f"; {top.failure_share:.1%} of {top.name}'s requests failed" if top.failed else ""
    return f"Best: {at}{cost}, {verdict}{share}."


def headline_for(
    store: Store | None,
    cmp: Comparison,
    cells: Sequence[CellAggregate],
    results: Sequence[ResultInfo],
    runs: Sequence[RunInfo],
    *,
    given: CapacitySLO | None = None,
    records: Mapping[int, Sequence[RequestRecord]] | None = None,
) -> tuple[Headline, dict[str, SLOChoice | None], dict[Key, CellSLO]]:
    """The headline and the per-cell SLO evaluation of stored runs: each run judged by ``given`` or its own SLO,
    from its per-request records (``records`` when given, else read from ``store``; without either, from the
    cells' stored percentiles)."""
    slos = {r.id: run_slo(r, given) for r in runs}
    evaluation: dict[Key, CellSLO] = {}
    if any(slos.values()):
        if records is None:
            judged = [r for r in results if slos.get(r.run_id)]
            records = load_records(store, judged) if store is not None else {}
        for run_id, choice in slos.items():
            if choice is None:
                continue
            mine = [c for c in cells if c.run_id == run_id]
            evaluation.update(
                evaluate_cells(mine, [r for r in results if r.run_id == run_id], choice.slo, records)
            )
    headline = build_headline(cmp, cells, results, slos=slos, evaluation=evaluation or None)
    return headline, slos, evaluation


__all__ = ["build_headline", "headline_for"]
