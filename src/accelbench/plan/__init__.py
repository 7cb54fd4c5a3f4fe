"""Planning: does a model fit an instance (recommend), where its memory goes (memory_breakdown), how fast and
at what cost it will serve (estimate, estimate_catalog), the capacity it sustains at an SLO (capacity), and
learning from measurements (calibrate).

The package reads the domain types, the catalog and the model specs; it never imports bench, deploy, api,
cli or the store: what a store knows (calibrations, prices, measured runs) is handed to it as plain data by
``services.plan``.
"""

from accelbench.plan.breakdown import memory_breakdown
from accelbench.plan.calibrations import CalibrationSet
from accelbench.plan.context import PlanContext
from accelbench.plan.estimate import estimate, estimate_local, parse_slo
from accelbench.plan.ranking import estimate_catalog
from accelbench.plan.recommend import find_alternatives, recommend

__all__ = [
    "CalibrationSet",
    "PlanContext",
    "estimate",
    "estimate_catalog",
    "estimate_local",
    "find_alternatives",
    "memory_breakdown",
    "parse_slo",
    "recommend",
]
