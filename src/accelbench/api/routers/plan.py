"""Planning: recommend, estimate and memory-breakdown, with the CLI's parameter names."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from accelbench import services as service
from accelbench.api.auth import Principal, require_read
from accelbench.api.deps import StoreDep
from accelbench.api.errors import ERROR_RESPONSES
from accelbench.domain.plan_query import EstimateQuery
from accelbench.services.paths import confine

router = APIRouter(tags=["plan"], responses=ERROR_RESPONSES)

_EQ = EstimateQuery.model_fields
ModelQ = Query(..., min_length=1, max_length=300, description="Model preset name, prepared model or path.")


class RecommendQuery(BaseModel):
    """``/recommend``'s query: the model, the instance, and the settings to keep (the CLI's names)."""

    model: str = Field(
        ..., min_length=1, max_length=300, description="Model preset name, prepared model or path."
    )
    instance_type: str = Field(
        ..., min_length=1, max_length=64, description="Catalog instance type, or 'local' for this machine."
    )
    quantization: str | None = Field(
        None, max_length=16, description="auto (fallback chain), none, fp8, int8 or int4."
    )
    max_model_len: int | None = Field(None, ge=16, le=10_000_000, description="Context length to fit.")
    kv_cache_dtype: str | None = Field(None, pattern="^(auto|fp8)$", description="auto or fp8 (GPU).")
    input_len: int | None = Field(
        None, ge=1, le=10_000_000, description="Input tokens the batch is sized for."
    )
    output_len: int | None = Field(
        None, ge=1, le=10_000_000, description="Output tokens the batch is sized for."
    )
    engine: str | None = Field(None, max_length=32, description=_EQ["engine"].description)
    tensor_parallel_size: int | None = Field(
        None, ge=1, le=64, description=_EQ["tensor_parallel_size"].description
    )
    max_num_seqs: int | None = Field(None, ge=1, le=100_000, description=_EQ["max_num_seqs"].description)
    max_num_batched_tokens: int | None = Field(
        None, ge=16, le=10_000_000, description=_EQ["max_num_batched_tokens"].description
    )
    kv_cache_space_gib: int | None = Field(
        None, ge=1, le=100_000, description=_EQ["kv_cache_space_gib"].description
    )
    threads: int | None = Field(None, ge=1, le=4096, description=_EQ["threads"].description)

    def planner_options(self) -> dict[str, Any]:
        """The planner's keywords: the settings asked for, the lengths and the engine settings to keep."""
        kept = EstimateQuery(model=self.model, **self.model_dump(include=_ENGINE_SETTINGS))
        return self.model_dump(include=_PLANNER_OPTIONS) | {"engine_settings": kept.engine_settings()}


# RecommendQuery's fields that are the planner's own keywords, and those that are engine settings to keep
_PLANNER_OPTIONS = {"quantization", "max_model_len", "kv_cache_dtype", "input_len", "output_len", "engine"}
_ENGINE_SETTINGS = {
    "tensor_parallel_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_cache_space_gib",
    "threads",
}


@router.get("/recommend", summary="Does the model fit on the instance, and with which settings")
def recommend(q: Annotated[RecommendQuery, Query()], _: Principal = Depends(require_read)) -> dict[str, Any]:
    """The JSON carries ``fits`` (a refusal is an answer with its reasons and alternatives, not an error).
    Settings given are kept and every memory figure is computed for them."""
    confine(q.model, "model")
    return service.recommend(q.model, q.instance_type, **q.planner_options())


@router.get("/estimate", summary="Predicted speed and cost, for one instance or ranked over the catalog")
def estimate(
    store: StoreDep,
    query: Annotated[EstimateQuery, Query()],
    _: Principal = Depends(require_read),
) -> dict[str, Any]:
    confine(query.model, "model")
    return service.estimate(store, query)


@router.get("/memory-breakdown", summary="Where accelerator memory goes (GPU and Neuron; 400 for CPU)")
def memory_breakdown(
    model: str = ModelQ,
    instance_type: str = Query(
        ..., min_length=1, max_length=64, description="Catalog GPU or Neuron instance."
    ),
    quantization: str | None = Query(None, max_length=16, description="none, fp8, int8 or int4."),
    max_model_len: int | None = Query(None, ge=16, le=10_000_000, description="Context length to fit."),
    kv_cache_dtype: str | None = Query(None, pattern="^(auto|fp8)$", description="auto or fp8 (GPU)."),
    _: Principal = Depends(require_read),
) -> dict[str, Any]:
    """A CPU instance is refused with 400: host RAM serves the model there (see /recommend)."""
    confine(model, "model")
    return service.memory_breakdown(
        model,
        instance_type,
        quantization=quantization,
        max_model_len=max_model_len,
        kv_cache_dtype=kv_cache_dtype,
    )
