"""The catalog: instance types (filters as ``accelbench catalog list``) and prices."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field

from accelbench.api.auth import Principal, require_read
from accelbench.api.deps import StoreDep
from accelbench.api.errors import ERROR_RESPONSES
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType, Price, PriceTier
from accelbench.services import instances

router = APIRouter(tags=["catalog"], responses=ERROR_RESPONSES)


class InstanceRow(InstanceType):
    """An instance type with its serving memory (accelerator memory, or host DRAM on CPU instances)."""

    serving_memory_gib: float = Field(description="Memory that holds weights and KV cache.")


class InstanceList(BaseModel):
    items: list[InstanceRow]
    total: int


class InstanceDetail(BaseModel):
    instance: InstanceRow
    accelerator: AcceleratorSpec
    prices: list[Price] = Field(description="Best known price per tier (store, else shipped snapshot).")


class PriceList(BaseModel):
    items: list[Price]
    total: int
    region: str
    tier: PriceTier


def _row(inst: InstanceType) -> InstanceRow:
    data: dict[str, Any] = inst.model_dump()
    return InstanceRow(**data, serving_memory_gib=instances.serving_memory_gib(inst))


@router.get("/instance-types", response_model=InstanceList, summary="Instance types, filtered")
def list_instance_types(
    accelerator_type: AcceleratorType | None = Query(None, description="gpu, neuron or cpu."),
    family: list[str] | None = Query(
        None, max_length=20, description="Instance family, e.g. g6 (repeatable)."
    ),
    min_memory_gib: float | None = Query(
        None, ge=0, le=1e7, description="Serving memory at least this (GiB; host memory for CPU)."
    ),
    max_price: float | None = Query(None, ge=0, le=1e6, description="On-demand USD per hour at most."),
    arch: str | None = Query(None, max_length=16, description="x86_64 or arm64."),
    _: Principal = Depends(require_read),
) -> InstanceList:
    rows = instances.find_instances(
        instances.InstanceFilter(
            accelerator_type=accelerator_type,
            family=family,
            min_memory_gib=min_memory_gib,
            max_price=max_price,
            arch=arch,
        )
    )
    return InstanceList(items=[_row(i) for i in rows], total=len(rows))


@router.get("/instance-types/{name}", response_model=InstanceDetail, summary="One instance type")
def get_instance_type(
    name: Annotated[str, Path(min_length=1, max_length=64)],
    store: StoreDep,
    region: str = Query("us-east-1", min_length=1, max_length=32),
    _: Principal = Depends(require_read),
) -> InstanceDetail:
    found = instances.instance_prices(store, name, region)
    return InstanceDetail(
        instance=_row(found.instance), accelerator=found.accelerator, prices=list(found.best.values())
    )


@router.get("/pricing", response_model=PriceList, summary="Best known hourly prices")
def pricing(
    store: StoreDep,
    instance_type: str | None = Query(None, max_length=64, description="One instance type; default all."),
    region: str = Query("us-east-1", min_length=1, max_length=32),
    tier: PriceTier = Query(PriceTier.on_demand, description="on_demand, reserved_1yr or reserved_3yr."),
    _: Principal = Depends(require_read),
) -> PriceList:
    items = instances.prices(
        store, instances.PriceQuery(instance_type=instance_type, region=region, tier=tier)
    )
    return PriceList(items=items, total=len(items), region=region, tier=tier)
