"""The active calibrations the planner applies, by (accelerator, engine), and the factors an estimate uses.

Built from plain rows (``CalibrationSet.from_rows``: what a store's ``active_calibrations`` returns); the
caller reads them (``services.plan.calibrations``), the planner never opens a store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from accelbench.domain.estimate import CalibrationRef, EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorType
from accelbench.plan.hardware import default_factors
from accelbench.plan.perf_model import (
    ENGINE_KIND,
)


# --------------------------------------------------------------------------------------------- calibrations
@dataclass
class CalibrationSet:
    """Active calibrations by (accelerator, engine)."""

    factors: dict[tuple[str, str], EfficiencyFactors]
    refs: dict[tuple[str, str], CalibrationRef]

    @classmethod
    def empty(cls) -> CalibrationSet:
        return cls({}, {})

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> CalibrationSet:
        out = cls.empty()
        for row in rows:
            key = (str(row["accelerator"]), str(row["engine"]))
            kind = ENGINE_KIND.get(key[1], "cpu" if key[0].startswith("local:") else "gpu")
            base = default_factors(kind, key[1]).model_dump()
            base.update({k: float(v) for k, v in (row.get("factors") or {}).items() if k in base})
            try:
                out.factors[key] = EfficiencyFactors(**base)
            except ValueError:
                continue  # a calibration from an older factor set: ignore rather than fail every estimate
            before = (row.get("error_before") or {}).get("tpot_mape_pct")
            after = (row.get("error_after") or {}).get("tpot_mape_pct")
            created = row.get("created_at")
            out.refs[key] = CalibrationRef(
                id=int(row["id"]),
                accelerator=key[0],
                engine=key[1],
                n_points=int(row.get("n_points") or 0),
                created_at=_iso(created),
                tpot_error_before_pct=before,
                tpot_error_after_pct=after,
            )
        return out


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else str(value)


def factors_for(
    kind: AcceleratorType, accel: str, engine: str, calibrations: CalibrationSet | None
) -> tuple[EfficiencyFactors, CalibrationRef | None]:
    if calibrations is not None:
        key = (accel, engine)
        if key in calibrations.factors:
            return calibrations.factors[key], calibrations.refs[key]
    return default_factors(kind.value, engine), None
