"""``PlanContext``: what the planner is told besides the question (the catalog, the active calibrations,
prices, the models measured on each instance), passed down whole. ``services.plan`` builds it from a store;
the planner never opens one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.plan.calibrations import CalibrationSet
from accelbench.plan.measured import MeasuredRuns

if TYPE_CHECKING:
    from accelbench.catalog import Catalog


@dataclass(frozen=True)
class PlanContext:
    """What the planner is told besides the question."""

    calibrations: CalibrationSet | None = None
    prices: Mapping[str, Any] | None = None  # instance -> price (stored prices win over the snapshot)
    # instance type -> the names of each stored run measured there (plan/measured.py says which are this model)
    measured_runs: MeasuredRuns | None = None
    catalog: Catalog | None = None
