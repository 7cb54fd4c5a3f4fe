"""What the catalog says about a run: its instance type's hourly price in a tier (else the price the run
recorded, else why there is none) and its accelerator count."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.catalog import get_catalog, price_for
from accelbench.catalog.pricing import SNAPSHOT_REGION
from accelbench.domain.instance_types import PriceTier
from accelbench.domain.results import RunInfo
from accelbench.errors import NotFoundError
from accelbench.report.comparison import (
    TIER_LABELS,
    HourlyPrice,
)

if TYPE_CHECKING:
    from accelbench.store.repo import Store


def resolve_price(
    run: RunInfo, tier: PriceTier, store: Store | None
) -> tuple[HourlyPrice | None, str | None]:
    """The hourly price of the run's instance type in ``tier``, or (None, why not).

    Order: the catalog's best known price (the store's refreshed prices, else the shipped snapshot), then,
    for on-demand only, the hourly price the run recorded when it ran (an instance the catalog lacks).
    """
    if not run.instance_type:
        return None, local_note(run)
    region = _run_region(run) or SNAPSHOT_REGION
    unknown = False
    try:
        p = price_for(run.instance_type, tier, region, store)
    except NotFoundError:
        p, unknown = None, True
    if p is not None:
        return (
            HourlyPrice(
                usd_per_hour=p.usd_per_hour,
                tier=tier,
                region=p.region,
                source=f"{p.source}, {p.effective_date}",
            ),
            None,
        )
    if tier == PriceTier.on_demand and run.hourly_usd is not None:
        return HourlyPrice(usd_per_hour=run.hourly_usd, tier=tier, region=region, source="run record"), None
    why = "is not in the catalog" if unknown else f"has no known {TIER_LABELS[tier]} price in {region}"
    return None, f"{run.instance_type} ({run.id}) {why}; cost left blank."


def local_note(run: RunInfo) -> str:
    return f"{run.id} has no instance type (a local machine): no price applies, cost left blank."


def _run_region(run: RunInfo) -> str | None:
    target = run.spec.get("target") if isinstance(run.spec, dict) else None
    if isinstance(target, dict) and isinstance(target.get("region"), str):
        return str(target["region"])
    region = run.extra.get("region") if isinstance(run.extra, dict) else None
    return str(region) if isinstance(region, str) else None


def accelerator_count(run: RunInfo) -> int | None:
    """The run's accelerator count, else its instance type's from the catalog, else None."""
    if run.accelerator_count is not None:
        return run.accelerator_count
    if run.instance_type:
        try:
            return get_catalog().instance(run.instance_type).accelerator_count
        except NotFoundError:
            return None
    return None
