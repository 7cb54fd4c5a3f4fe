"""The catalog as ``accelbench catalog`` shows it: instance types filtered and priced, one instance with its
accelerator spec and prices, prices refreshed from the AWS Pricing API into the store, instance types read
from an EC2-compatible endpoint into the catalog overlay."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelbench.catalog import get_catalog, price_map, prices_for, refresh_prices, serving_memory_gib
from accelbench.catalog.pricing import SNAPSHOT_REGION
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType, Price, PriceTier
from accelbench.errors import UserInputError
from accelbench.store import Store

__all__ = [
    "SNAPSHOT_REGION",
    "InstanceDetail",
    "InstanceQuery",
    "InstanceView",
    "PriceRefresh",
    "instance_detail",
    "list_instances",
    "refresh_instance_types",
    "refresh_region_prices",
]


@dataclass(frozen=True)
class InstanceView:
    """One instance type with the memory an engine may use and its best known on-demand price."""

    instance: InstanceType
    price: Price | None
    serving_memory_gib: float

    def as_json(self) -> dict[str, Any]:
        """Every catalog field, the serving memory and the price (``catalog list --format json``)."""
        row = self.instance.model_dump(mode="json")
        row["cores"] = self.instance.cores
        row["serving_memory_gib"] = self.serving_memory_gib
        row["price"] = self.price.model_dump(mode="json") if self.price else None
        return row


def view(inst: InstanceType, price: Price | None) -> InstanceView:
    return InstanceView(instance=inst, price=price, serving_memory_gib=serving_memory_gib(inst))


@dataclass(frozen=True)
class InstanceQuery:
    accelerator: AcceleratorType | None = None
    family: list[str] | None = None
    min_memory_gib: float | None = None
    max_price: float | None = None
    arch: str | None = None
    region: str = SNAPSHOT_REGION


def list_instances(store: Store | None, q: InstanceQuery) -> list[InstanceView]:
    """The instance types that pass the filters, priced on demand in the region (stored prices first, else
    the shipped snapshot; ``store`` None: the snapshot only)."""
    prices = price_map(PriceTier.on_demand, q.region, store)
    rows = get_catalog().filter(
        accelerator_type=q.accelerator,
        family=q.family or None,
        min_memory_gib=q.min_memory_gib,
        max_price=q.max_price,
        arch=q.arch,
        prices={k: p.usd_per_hour for k, p in prices.items()},
    )
    return [view(i, prices.get(i.name)) for i in rows]


@dataclass(frozen=True)
class InstanceDetail:
    view: InstanceView
    spec: AcceleratorSpec
    prices: dict[PriceTier, Price]


def instance_detail(store: Store | None, name: str, region: str) -> InstanceDetail:
    """One instance type, its accelerator's spec and its price in every tier."""
    cat = get_catalog()
    inst = cat.instance(name)
    prices = prices_for(inst.name, region, store, catalog=cat)
    return InstanceDetail(
        view=view(inst, prices.get(PriceTier.on_demand)), spec=cat.accelerator_for(inst), prices=prices
    )


@dataclass(frozen=True)
class PriceRefresh:
    """``refresh-prices``: the regions (each once), the instance types named and the families whose types are
    added to them (none: the whole catalog), the pause between API calls."""

    regions: list[str] = field(default_factory=lambda: [SNAPSHOT_REGION])
    instances: list[str] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    delay_s: float = 0.2

    def instance_names(self) -> list[str]:
        """The catalog names of the types to price (checked first: an unknown type is refused)."""
        cat = get_catalog()
        names = [cat.instance(n).name for n in self.instances]
        if self.families:
            names += [i.name for i in cat.filter(family=self.families) if i.name not in names]
        return names

    def checked_regions(self) -> list[str]:
        if len(set(self.regions)) != len(self.regions):
            raise UserInputError("A region is given twice.", hint="Give each --region once.")
        return self.regions


def refresh_region_prices(
    store: Store,
    req: PriceRefresh,
    region: str,
    names: list[str],
    on_progress: Callable[[str, int, int], None],
) -> Any:
    """Fetch one region's prices into the store; its refresh report."""
    return refresh_prices(
        store, region, names or None, delay_s=req.delay_s, catalog=get_catalog(), on_progress=on_progress
    )


def refresh_instance_types(
    endpoint_url: str, region: str | None, instance_types: list[str] | None, provider_name: str | None
) -> Any:
    """Read instance types from an EC2-compatible endpoint into the catalog overlay; the report."""
    # start-up: the refresh loads boto3; `catalog list` and `show` share this module
    from accelbench.catalog.instances_refresh import refresh_instances

    return refresh_instances(endpoint_url, region, instance_types, provider_name)
