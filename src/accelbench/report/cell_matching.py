"""Which cells a comparison sets side by side: the (input length, concurrency) cells every run measured (the
others are shown but left out of the ratios, said in a note), and each run against the baseline at every input
length both measured (``report/scaling.py`` ``pair_ratios``)."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.report.comparison import CellResult, PairRatios
from accelbench.report.scaling import pair_ratios


def matched_cells(
    run_ids: Sequence[str], cells: Sequence[CellResult]
) -> tuple[list[tuple[int, int]], list[str]]:
    """The cells with a successful repeat in every run, sorted, and notes on what could not be matched."""
    keysets = [
        {(c.input_len, c.concurrency) for c in cells if c.run_id == run_id and c.repeats}
        for run_id in run_ids
    ]
    matched = sorted(set.intersection(*keysets)) if keysets else []
    notes: list[str] = []
    if len(run_ids) > 1:
        union = set.union(*keysets)
        unmatched = sorted(union - set(matched))
        if not matched:
            notes.append("No (input length, concurrency) cell was measured by every run: nothing to match.")
        elif unmatched:
            notes.append(
                "Cells not measured by every run, shown but left out of the ratios: "
                + ", ".join(f"input {i} x concurrency {c}" for i, c in unmatched)
                + "."
            )
    return matched, notes


def baseline_pairs(
    run_ids: Sequence[str], names: Sequence[str], cells: Sequence[CellResult]
) -> tuple[list[PairRatios], list[str]]:
    """Every run after the first against the first (the baseline), per input length, and a note wherever the
    two asked for different output lengths."""
    baseline = run_ids[0]
    pairs: list[PairRatios] = []
    notes: list[str] = []
    for i, run_id in enumerate(run_ids[1:], start=1):
        for il in sorted({c.input_len for c in cells}):
            p = pair_ratios(baseline, run_id, il, cells)
            if p is not None:
                pairs.append(p)
                if p.output_len_differs:
                    notes.append(
                        f"At input {il} the runs {names[0]} and {names[i]} asked for different "
                        "output lengths: their TPOT compares, their throughput and cost less so."
                    )
    return pairs, notes
