"""Instance types and their prices as use cases: filter the catalog, one instance type with its accelerator and
best known prices, the price table (the store's prices, else the shipped snapshot), and what the run form
offers (instances by tier, each tier's runtimes and default). The API's catalog routes and the Catalog and Run
pages call these.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from accelbench.catalog import (
    get_catalog,
    price_for,
    price_map,
    prices_for,
    serving_memory_gib,
    snapshot_price,
)
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType, Price, PriceTier
from accelbench.errors import NotFoundError
from accelbench.runtimes.runtime import DEFAULT_RUNTIME, RUNTIMES
from accelbench.services.run_checks import as_input_error
from accelbench.store import Store

__all__ = [
    "CatalogTable",
    "InstanceFilter",
    "InstancePrices",
    "PriceQuery",
    "RuntimeChoices",
    "all_instances",
    "catalog_table",
    "find_instances",
    "instance_prices",
    "prices",
    "runtime_choices",
    "serving_memory_gib",
]


class InstanceFilter(BaseModel):
    accelerator_type: AcceleratorType | None = None
    family: list[str] | None = None
    min_memory_gib: float | None = None
    max_price: float | None = None
    arch: str | None = None


class InstancePrices(BaseModel):
    """One instance type, its accelerator, its best known price per tier, the shipped snapshot's price and the
    store's price rows, and its family's on-demand prices."""

    instance: InstanceType
    accelerator: AcceleratorSpec
    best: dict[PriceTier, Price]
    snapshot: Price | None = None
    stored: list[Price] = Field(default_factory=list)
    siblings: list[InstanceType] = Field(default_factory=list)
    accelerators: dict[str, AcceleratorSpec] = Field(default_factory=dict)
    family_prices: dict[str, Price] = Field(default_factory=dict)


class PriceQuery(BaseModel):
    instance_type: str | None = None
    region: str = "us-east-1"
    tier: PriceTier = PriceTier.on_demand


class CatalogTable(BaseModel):
    """Every instance type, the accelerators by name, and each instance's best on-demand price by name."""

    instances: list[InstanceType]
    accelerators: dict[str, AcceleratorSpec]
    prices: dict[str, Price]


class RuntimeChoices(BaseModel):
    """The runtimes each tier may use and the one it gets by default."""

    runtimes: dict[str, list[str]]
    default_runtime: dict[str, str]


def all_instances() -> list[InstanceType]:
    return list(get_catalog().instances)


def find_instances(request: InstanceFilter) -> list[InstanceType]:
    """The catalog's instance types that pass every filter; an unknown family or architecture is bad input."""
    try:
        return get_catalog().filter(
            accelerator_type=request.accelerator_type,
            family=([f for f in request.family if f] or None) if request.family else None,
            min_memory_gib=request.min_memory_gib,
            max_price=request.max_price,
            arch=request.arch or None,
        )
    except NotFoundError as exc:
        raise as_input_error(exc, "filter") from None


def instance_prices(store: Store, name: str, region: str, *, with_family: bool = False) -> InstancePrices:
    """One instance type (NotFoundError, with suggestions, for a name the catalog does not have) with its prices;
    ``with_family``: also the snapshot price, the stored rows and its family's on-demand prices (its page)."""
    cat = get_catalog()
    inst = cat.instance(name)
    out = InstancePrices(
        instance=inst,
        accelerator=cat.accelerator_for(inst),
        best=prices_for(inst.name, region, store, catalog=cat),
    )
    if with_family:
        out.snapshot = snapshot_price(inst)
        out.stored = store.latest_prices(instance_type=inst.name)
        out.siblings = [i for i in cat.instances if i.family == inst.family]
        out.accelerators = dict(cat.accelerators)
        out.family_prices = price_map(PriceTier.on_demand, region, store=store, catalog=cat)
    return out


def prices(store: Store, query: PriceQuery) -> list[Price]:
    """The best known hourly price of one instance type, or of all, in a region and tier."""
    cat = get_catalog()
    if query.instance_type:
        p = price_for(query.instance_type, query.tier, query.region, store, catalog=cat)
        return [p] if p is not None else []
    return list(price_map(query.tier, query.region, store, catalog=cat).values())


def catalog_table(store: Store, region: str) -> CatalogTable:
    """The Catalog page's table: the catalog and the store's on-demand prices (one query)."""
    cat = get_catalog()
    return CatalogTable(
        instances=list(cat.instances),
        accelerators=dict(cat.accelerators),
        prices=price_map(PriceTier.on_demand, region, store=store, catalog=cat),
    )


def runtime_choices() -> RuntimeChoices:
    return RuntimeChoices(
        runtimes={name: sorted(a.value for a in rt.accelerators) for name, rt in RUNTIMES.items()},
        default_runtime={k.value: v for k, v in DEFAULT_RUNTIME.items()},
    )
