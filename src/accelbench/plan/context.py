"""``PlanContext``: what the planner is told besides the question (the catalog, the active calibrations,
prices, the models measured on each instance), passed down whole. ``services.plan`` builds it from a store;
the planner never opens one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.domain.plan_query import PlanQuery
from accelbench.plan.calibrations import CalibrationSet
from accelbench.plan.measured import MeasuredRuns

if TYPE_CHECKING:
    from accelbench.catalog import Catalog

#: the keyword arguments of the planner's entry points that belong to the context, not the question
CONTEXT_FIELDS = ("catalog", "calibrations", "prices", "measured_runs")


@dataclass(frozen=True)
class PlanContext:
    """What the planner is told besides the question."""

    calibrations: CalibrationSet | None = None
    prices: Mapping[str, Any] | None = None  # instance -> price (stored prices win over the snapshot)
    # instance type -> the names of each stored run measured there (plan/measured.py says which are this model)
    measured_runs: MeasuredRuns | None = None
    catalog: Catalog | None = None


def query_and_context(
    query: PlanQuery | None, context: PlanContext | None, asked: dict[str, Any]
) -> tuple[PlanQuery, PlanContext]:
    """The question and context an entry point works from: the ones given, or built from the keyword
    arguments its callers pass (the traffic and settings into a ``PlanQuery``, ``CONTEXT_FIELDS`` into a
    ``PlanContext``). An unknown keyword is a TypeError, as for any function."""
    known = {k: asked.pop(k) for k in CONTEXT_FIELDS if k in asked}
    if known:
        if context is not None:
            raise TypeError(f"give the context or {', '.join(known)}, not both")
        context = PlanContext(**known)
    if query is None:
        query = PlanQuery(**asked)
    elif asked:
        raise TypeError(f"give the query or {', '.join(asked)}, not both")
    return query, context or PlanContext()
