"""What a remote run cost: the instance's hourly price x the time it was held (deploy to teardown)."""

from __future__ import annotations

from typing import Any

from accelbench.catalog.pricing import SNAPSHOT_REGION, price_for
from accelbench.errors import AccelbenchError


def record_held_cost(
    store: Any, run_id: str, instance_name: str, held_s: float, *, region: str | None
) -> None:
    """Store ``hourly_usd`` and ``extra.cost`` for a run that held one instance for ``held_s`` seconds. The
    price is the run's region's when known, else the snapshot region's (the record says which); without a
    price the cost says so instead of being 0."""
    price = None
    for where in dict.fromkeys([region or SNAPSHOT_REGION, SNAPSHOT_REGION]):
        try:
            price = price_for(instance_name, region=where, store=store)
        except AccelbenchError:
            price = None
        if price is not None:
            break
    if price is None:
        store.merge_run_extra(
            run_id, cost={"usd": None, "held_s": round(held_s, 1), "note": "no price known"}
        )
        return
    store.update_run(run_id, hourly_usd=price.usd_per_hour)
    store.merge_run_extra(
        run_id,
        cost={
            "usd": round(price.usd_per_hour * held_s / 3600.0, 6),
            "hourly_usd": price.usd_per_hour,
            "held_s": round(held_s, 1),
            "price_region": price.region,
            "price_source": price.source,
            "price_date": price.effective_date,
            "basis": "hourly price x time from deploy to teardown",
        },
    )
