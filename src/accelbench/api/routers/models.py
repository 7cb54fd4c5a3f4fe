"""Models: the shipped presets and the models prepared on this machine, and one model's spec."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, Field

from accelbench import services as service
from accelbench.api.auth import Principal, require_read
from accelbench.api.errors import ERROR_RESPONSES
from accelbench.services.paths import confine

router = APIRouter(prefix="/models", tags=["models"], responses=ERROR_RESPONSES)


class ModelList(BaseModel):
    presets: list[dict[str, Any]] = Field(description="Shipped model presets (name, parameters, ...).")
    prepared: list[dict[str, Any]] = Field(description="Models prepared on this machine for local runs.")


@router.get("", response_model=ModelList, summary="Model presets and prepared models")
def list_models(_: Principal = Depends(require_read)) -> ModelList:
    return ModelList(presets=service.presets(), prepared=service.prepared_models())


@router.get("/{name:path}", summary="One model's spec (parameters, layers, KV bytes per token)")
def get_model(
    name: Annotated[str, Path(min_length=1, max_length=300)], _: Principal = Depends(require_read)
) -> dict[str, Any]:
    confine(name, "model")
    return service.model_spec(name)
