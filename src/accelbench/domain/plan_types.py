"""Planning types, re-exported from the modules that hold them so ``accelbench.domain.plan_types`` stays the one
import for callers: ``domain/recommendation.py`` (does it fit, with which settings, and why; memory
breakdowns), ``domain/estimate.py`` (factors, SLOs, predicted figures, the ranked table),
``domain/calibration.py`` (measured against predicted, fitted factors) and ``domain/plan_query.py`` (the
questions put to the planner)."""

from __future__ import annotations

from accelbench.domain.calibration import (
    CalibrationGroup,
    CalibrationReport,
    CapacityComparison,
    CellComparison,
    error_pct,
)
from accelbench.domain.estimate import (
    SLO,
    CalibrationRef,
    EfficiencyFactors,
    Estimate,
    EstimateRow,
    EstimateSummary,
    EstimateTable,
    PredictionRange,
    SettingsOption,
    TimeBreakdown,
)
from accelbench.domain.plan_query import (
    EstimateQuery,
    FitQuery,
    PlanQuery,
    Traffic,
)
from accelbench.domain.recommendation import (
    Alternative,
    Attempt,
    BandwidthAdvisory,
    BreakdownItem,
    MemoryBreakdown,
    MemoryBudget,
    Recommendation,
    Refusal,
    RefusalCode,
    ServingSettings,
    SettingChange,
    Verdict,
)

__all__ = [
    "SLO",
    "Alternative",
    "Attempt",
    "BandwidthAdvisory",
    "BreakdownItem",
    "CalibrationGroup",
    "CalibrationRef",
    "CalibrationReport",
    "CapacityComparison",
    "CellComparison",
    "EfficiencyFactors",
    "Estimate",
    "EstimateQuery",
    "EstimateRow",
    "EstimateSummary",
    "EstimateTable",
    "FitQuery",
    "MemoryBreakdown",
    "MemoryBudget",
    "PlanQuery",
    "PredictionRange",
    "Recommendation",
    "Refusal",
    "RefusalCode",
    "ServingSettings",
    "SettingChange",
    "SettingsOption",
    "TimeBreakdown",
    "Traffic",
    "Verdict",
    "error_pct",
]
