"""Repeats until the answer is clear: a sweep's ``target_ci`` stops repeating a cell once its figures are known
well enough.

With ``target_ci = PCT`` a cell is measured repeat after repeat, up to ``repeats`` (the cap), until the 95%
intervals of its median TPOT and median TTFT (``bench.intervals.cell_interval``: the repeats resampled, then
their requests) are both within +-PCT of the figure. A cell is judged from its second completed repeat on: one
repeat's interval rests on its requests alone and cannot see how much repeats disagree (a closed loop's waves
move whole repeats). The run records, per cell, the repeats it took, both intervals and whether it reached the
target or hit the cap (``record``, kept in the run's ``extra`` under ``target_ci``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelbench.bench.intervals import cell_interval, half_width_pct
from accelbench.domain.results import ResultInfo
from accelbench.domain.run import CellStatus

#: the figures that must be known within the target: (result column, summary statistics key)
JUDGED: tuple[tuple[str, str], ...] = (("tpot_p50_ms", "tpot_ms"), ("ttft_p50_ms", "ttft_ms"))
#: repeats a cell needs before it can be judged settled
MIN_REPEATS = 2


def _ci(r: ResultInfo, stats_key: str) -> tuple[float, float] | None:
    stats = (r.summary or {}).get(stats_key)
    ci = stats.get("p50_ci95") if isinstance(stats, dict) else None
    return (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 else None


def cell_precision(results: Sequence[ResultInfo]) -> dict[str, float | None]:
    """The half-width (percent of the figure) of the 95% interval of each judged figure over a cell's completed
    repeats; None where there is no interval."""
    done = [r for r in results if r.status == CellStatus.completed]
    out: dict[str, float | None] = {}
    for column, stats_key in JUDGED:
        kept = [(float(v), _ci(r, stats_key)) for r in done if (v := getattr(r, column)) is not None]
        if not kept:
            out[column] = None
            continue
        ci, _basis = cell_interval([v for v, _ in kept], [c for _, c in kept])
        mean = sum(v for v, _ in kept) / len(kept)
        out[column] = half_width_pct(mean, list(ci)) if ci is not None else None
    return out


def settled(results: Sequence[ResultInfo], target_pct: float) -> bool:
    """True when the cell has at least ``MIN_REPEATS`` completed repeats and every judged figure's interval is
    within +-``target_pct``."""
    if sum(1 for r in results if r.status == CellStatus.completed) < MIN_REPEATS:
        return False
    widths = cell_precision(results).values()
    return all(w is not None and w <= target_pct for w in widths)


def record(results: Sequence[ResultInfo], target_pct: float, cap: int) -> dict[str, Any]:
    """What the run keeps: the target, the cap and per cell its repeats, intervals and whether it reached the
    target (``reached``) or stopped at the cap without it."""
    cells: dict[tuple[int, int], list[ResultInfo]] = {}
    for r in results:
        cells.setdefault((r.input_len, r.concurrency), []).append(r)
    rows = []
    for (input_len, concurrency), reps in sorted(cells.items()):
        widths = cell_precision(reps)
        rows.append(
            {
                "input_len": input_len,
                "concurrency": concurrency,
                "repeats": sum(1 for r in reps if r.status == CellStatus.completed),
                "tpot_p50_ci95_pct": widths["tpot_p50_ms"],
                "ttft_p50_ci95_pct": widths["ttft_p50_ms"],
                "reached": settled(reps, target_pct),
            }
        )
    return {"target_pct": target_pct, "cap": cap, "min_repeats": MIN_REPEATS, "cells": rows}


def summary_line(rec: dict[str, Any]) -> str:
    """``"target +-5%: 3 of 4 cells reached it; input 512 x concurrency 8 hit the cap of 5 repeats (TPOT +-7.1%,
    TTFT +-12.0%)"``."""
    cells = rec.get("cells") or []
    reached = [c for c in cells if c.get("reached")]
    text = f"target +-{rec['target_pct']:g}%: {len(reached)} of {len(cells)} cells reached it"
    capped = [c for c in cells if not c.get("reached")]
    if capped:

        def pct(v: float | None) -> str:
            return "-" if v is None else f"+-{v:.1f}%"

        text += "; " + "; ".join(
            f"input {c['input_len']} x concurrency {c['concurrency']} stopped at {c['repeats']} of "
            f"{rec['cap']} repeats (TPOT {pct(c['tpot_p50_ci95_pct'])}, TTFT {pct(c['ttft_p50_ci95_pct'])})"
            for c in capped
        )
    return text
