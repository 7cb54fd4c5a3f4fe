"""Compare runs side by side: JSON (cells, ratios, findings) or the compare CSV. When some of the runs are
capacity searches, the JSON carries ``capacity`` (per search: SLO, load, max load, throughput and $/1M output
and total tokens there, the planner's prediction and its error, the knee, the probes) and the CSV its
``capacity_*`` columns; a comparison of sweeps has neither."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Response

from accelbench import services as service
from accelbench.api.auth import Principal, require_read
from accelbench.api.deps import StoreDep
from accelbench.api.errors import ERROR_RESPONSES
from accelbench.domain.instance_types import PriceTier

router = APIRouter(tags=["compare"], responses=ERROR_RESPONSES)


@router.get(
    "/compare",
    summary="Compare two or more runs",
    responses={
        200: {
            "description": "The comparison (json) or the compare CSV (csv); capacity searches among the runs add "
            "`capacity` (json) and `capacity_*` columns (csv).",
            "content": {"application/json": {}, "text/csv": {"schema": {"type": "string"}}},
        }
    },
)
def compare(
    store: StoreDep,
    runs: list[str] = Query(..., min_length=2, max_length=20, description="Run ids (repeat the parameter)."),
    tier: PriceTier = Query(PriceTier.on_demand, description="Price tier for cost figures."),
    format: str = Query("json", pattern="^(json|csv)$", description="json or csv."),
    allow_mismatch: bool = Query(
        False,
        description="Keep runs that are not like for like with the baseline in the ratios and findings (each "
        "difference is named in `mismatches` either way).",
    ),
    _: Principal = Depends(require_read),
) -> Any:
    if format == "csv":
        text = service.compare_csv(store, runs, tier, allow_mismatch=allow_mismatch)
        return Response(
            text,
            media_type="text/csv",
            headers={"Content-Disposition": 'attachment; filename="compare.csv"'},
        )
    return service.compare_json(store, runs, tier, allow_mismatch=allow_mismatch)
