"""Planning: recommend, estimate and memory-breakdown, with the CLI's parameter names."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from accelbench.api.auth import Principal, require_read
from accelbench.api.deps import StoreDep
from accelbench.api.errors import ERROR_RESPONSES
from accelbench.domain.catalog import AcceleratorType

router = APIRouter(tags=["plan"], responses=ERROR_RESPONSES)

ModelQ = Query(..., min_length=1, max_length=300, description="Model preset name, prepared model or path.")


@router.get("/recommend", summary="Does the model fit on the instance, and with which settings")
def recommend(
    model: str = ModelQ,
    instance_type: str = Query(..., min_length=1, max_length=64, description="Catalog instance type."),
    _: Principal = Depends(require_read),
) -> dict[str, Any]:
    from accelbench.api import service

    return service.recommend(model, instance_type)


@router.get("/estimate", summary="Predicted speed and cost, for one instance or ranked over the catalog")
def estimate(
    store: StoreDep,
    model: str = ModelQ,
    instance_type: str | None = Query(None, max_length=64, description="One instance; default the catalog."),
    accelerator_type: AcceleratorType | None = Query(None, description="gpu, neuron or cpu only."),
    max_cost: float | None = Query(None, gt=0, le=1e6, description="Hourly USD at most."),
    min_context: int | None = Query(None, ge=1, le=10_000_000, description="Max model length at least."),
    quantization: str | None = Query(None, max_length=16, description="none, fp8, int8 or int4."),
    input_len: int = Query(512, ge=1, le=10_000_000, description="Input tokens per request."),
    output_len: int = Query(128, ge=1, le=10_000_000, description="Output tokens per request."),
    concurrency: int = Query(1, ge=1, le=100_000, description="Requests in flight."),
    slo: str | None = Query(None, max_length=100, description="e.g. ttft:500,tpot:50 (ms)."),
    limit: int = Query(100, ge=1, le=10_000, description="Ranked rows returned."),
    _: Principal = Depends(require_read),
) -> dict[str, Any]:
    from accelbench.api import service

    return service.estimate(
        store,
        model=model,
        instance_type=instance_type,
        accelerator_type=accelerator_type,
        max_cost=max_cost,
        min_context=min_context,
        quantization=quantization,
        input_len=input_len,
        output_len=output_len,
        concurrency=concurrency,
        slo=slo,
        limit=limit,
    )


@router.get("/memory-breakdown", summary="Where accelerator memory goes (GPU and Neuron; 400 for CPU)")
def memory_breakdown(
    model: str = ModelQ,
    instance_type: str = Query(..., min_length=1, max_length=64, description="Catalog instance type."),
    _: Principal = Depends(require_read),
) -> dict[str, Any]:
    from accelbench.api import service

    return service.memory_breakdown(model, instance_type)
