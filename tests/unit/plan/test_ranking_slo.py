"""The ranked catalog answers the user's question: with an SLO the rows that meet it come first, then
by cost ($ per 1M output tokens, then $/h); without one by cost; the rows that do not fit last."""

from __future__ import annotations

import math

from accelbench.domain.estimate import SLO
from accelbench.domain.plan_query import PlanQuery
from accelbench.plan import estimate_catalog
from accelbench.plan.ranking import CatalogFilters

M = "llama-3.1-8b-instruct"


def _cost(r) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    usd = r.usd_per_million_output_tokens
    return (usd if usd is not None else math.inf, r.hourly_usd if r.hourly_usd is not None else math.inf)


def test_with_an_slo_the_rows_meeting_it_come_first_each_part_by_cost() -> None:
    # a target the cheapest row misses: since a spread closed loop's groups wait a full step and their whole
    # prefill, g5.xlarge (A10G, 2,048-token steps) serves fewer requests per hour and the cheapest row is
    # g7e.2xlarge, whose TPOT (about 14 ms) a 30 ms target no longer separates from the rest
    slo = SLO(tpot_ms=12)
    tab = estimate_catalog(
        M,
        PlanQuery(input_len=512, output_len=128, concurrency=8, slo=slo),
        filters=CatalogFilters(accelerator="gpu"),
    )
    verdicts = [r.slo_met for r in tab.rows if r.feasible]
    met = verdicts.count(True)
    assert 0 < met < len(verdicts), "the case needs rows on both sides of the SLO"
    assert verdicts == [True] * met + [False] * (len(verdicts) - met)
    feasible = [r for r in tab.rows if r.feasible]
    for part in (feasible[:met], feasible[met:]):
        assert [_cost(r) for r in part] == sorted(_cost(r) for r in part)
    # the cheapest row overall misses the SLO here, so a cost-only rank would have put a failing row first
    cheapest = min(feasible, key=_cost)
    assert cheapest.slo_met is False and tab.rows[0].slo_met is True
    assert all(not r.feasible for r in tab.rows[len(feasible) :])


def test_without_an_slo_rows_are_ranked_by_cost() -> None:
    tab = estimate_catalog(
        M, PlanQuery(input_len=512, output_len=128, concurrency=8), filters=CatalogFilters(accelerator="gpu")
    )
    feasible = [r for r in tab.rows if r.feasible]
    assert all(r.slo_met is None for r in feasible)
    assert [_cost(r) for r in feasible] == sorted(_cost(r) for r in feasible)
