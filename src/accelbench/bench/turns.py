"""Figures per turn index of multi-turn conversations (``BenchConfig.turns`` > 1)."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.bench.metrics import stats_ms
from accelbench.domain.bench_summary import TurnMetrics
from accelbench.domain.request_record import RequestRecord


def turn_metrics(records: Sequence[RequestRecord]) -> list[TurnMetrics]:
    """One entry per turn index the records carry, in order; empty for single-turn runs."""
    by_turn: dict[int, list[RequestRecord]] = {}
    for r in records:
        if r.turn is not None:
            by_turn.setdefault(r.turn, []).append(r)
    out: list[TurnMetrics] = []
    for turn in sorted(by_turn):
        rs = by_turn[turn]
        ok = [r for r in rs if r.success]
        prompts = [r.server_prompt_tokens if r.server_prompt_tokens is not None else r.prompt_len for r in ok]
        out.append(
            TurnMetrics(
                turn=turn,
                completed=len(ok),
                failed=len(rs) - len(ok),
                mean_prompt_tokens=sum(prompts) / len(prompts) if prompts else 0.0,
                ttft_ms=stats_ms([r.ttft_s for r in ok]),
                tpot_ms=stats_ms([t for r in ok if (t := r.tpot_s) is not None]),
                e2el_ms=stats_ms([r.latency_s for r in ok]),
            )
        )
    return out
