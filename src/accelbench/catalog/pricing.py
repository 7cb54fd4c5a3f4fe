"""Prices: the shipped on-demand snapshot, stored prices, and a refresh from the AWS Pricing API.

Lookup order for ``price_for``: the newest price in the store (written by ``refresh-prices``) when it is at
least as new as the shipped snapshot, else the snapshot. The snapshot holds on-demand us-east-1 prices only,
so reserved tiers and other regions come only from a refresh. Without network or credentials nothing breaks:
the snapshot is what you get.

The refresh follows the AWS Price List query API: service code ``AmazonEC2`` at the ``us-east-1`` endpoint
(the API lives in a few regions only; the region being priced is a filter), one ``GetProducts`` call per
instance type with Linux / Shared tenancy / no pre-installed software / capacity status Used, a short pause
between calls. Reserved prices are the *standard* offering, all upfront, turned into an hourly figure as
upfront / 8760 (1 yr) or / 26280 (3 yr) plus any recurring hourly part.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelbench.catalog.loader import Catalog, get_catalog
from accelbench.domain.instance_types import InstanceType, Price, PriceTier
from accelbench.errors import AccelbenchError, UserInputError

if TYPE_CHECKING:
    from accelbench.store.repo import Store

SNAPSHOT_REGION = "us-east-1"
PRICING_ENDPOINT_REGION = "us-east-1"
API_SOURCE = "aws-pricing-api"
HOURS_1YR = 8760
HOURS_3YR = 26280
DEFAULT_DELAY_S = 0.2


class PricingUnavailableError(AccelbenchError):
    """The AWS Pricing API could not be reached or refused the call (credentials, network, permissions)."""

    status_code = 503


# --------------------------------------------------------------------------------------------- lookups
def snapshot_price(inst: InstanceType) -> Price | None:
    """The shipped on-demand price of an instance type, as a Price, or None when the row has none."""
    if inst.on_demand_usd is None or not inst.price_date or not inst.price_region:
        return None
    return Price(
        instance_type=inst.name,
        region=inst.price_region,
        tier=PriceTier.on_demand,
        usd_per_hour=inst.on_demand_usd,
        effective_date=inst.price_date,
        source=inst.price_source or "snapshot",
    )


def _tier(tier: PriceTier | str) -> PriceTier:
    try:
        return PriceTier(tier)
    except ValueError:
        raise UserInputError(
            f"Unknown price tier {tier!r}.", hint="Known: " + ", ".join(t.value for t in PriceTier)
        ) from None


def _newer(stored: Price | None, snap: Price | None) -> Price | None:
    if stored is None:
        return snap
    if snap is None:
        return stored
    # ISO dates compare as strings; a tie goes to the store because it was fetched, not shipped.
    return stored if stored.effective_date >= snap.effective_date else snap


def price_for(
    instance_name: str,
    tier: PriceTier | str = PriceTier.on_demand,
    region: str = SNAPSHOT_REGION,
    store: Store | None = None,
    *,
    catalog: Catalog | None = None,
) -> Price | None:
    """The best known hourly price of one instance type in one region and tier, or None when unknown.

    Unknown instance names raise NotFoundError (with suggestions). ``store=None`` uses the snapshot only.
    """
    cat = catalog or get_catalog()
    inst = cat.instance(instance_name)
    tier = _tier(tier)
    snap = snapshot_price(inst)
    if snap is not None and (snap.region != region or tier != PriceTier.on_demand):
        snap = None
    stored: Price | None = None
    if store is not None:
        rows = store.latest_prices(region=region, instance_type=inst.name, tier=tier)
        stored = rows[0] if rows else None
    return _newer(stored, snap)


def prices_for(
    instance_name: str,
    region: str = SNAPSHOT_REGION,
    store: Store | None = None,
    *,
    catalog: Catalog | None = None,
) -> dict[PriceTier, Price]:
    """Every tier with a known price for one instance type (tiers without a price are left out)."""
    out: dict[PriceTier, Price] = {}
    for tier in PriceTier:
        p = price_for(instance_name, tier, region, store, catalog=catalog)
        if p is not None:
            out[tier] = p
    return out


def price_map(
    tier: PriceTier | str = PriceTier.on_demand,
    region: str = SNAPSHOT_REGION,
    store: Store | None = None,
    *,
    catalog: Catalog | None = None,
) -> dict[str, Price]:
    """Prices of the whole catalog in one tier and region (one store query), keyed by instance name.

    For callers that price every instance at once (estimates over the catalog); same rules as price_for.
    """
    cat = catalog or get_catalog()
    tier = _tier(tier)
    stored: dict[str, Price] = {}
    if store is not None:
        stored = {p.instance_type: p for p in store.latest_prices(region=region, tier=tier)}
    out: dict[str, Price] = {}
    for inst in cat.instances:
        snap = snapshot_price(inst)
        if snap is not None and (snap.region != region or tier != PriceTier.on_demand):
            snap = None
        best = _newer(stored.get(inst.name), snap)
        if best is not None:
            out[inst.name] = best
    return out


# --------------------------------------------------------------------------------------------- refresh
def product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """GetProducts filters selecting the plain Linux, shared-tenancy, on-demand-capacity product."""
    pairs = {
        "instanceType": instance_type,
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in pairs.items()]


def _usd(dim: dict[str, Any]) -> float:
    try:
        return float(dim["pricePerUnit"]["USD"])
    except (KeyError, TypeError, ValueError):
        return 0.0


def _product_rank(doc: dict[str, Any]) -> int:
    """Prefer the plain RunInstances product with on-demand market option when several match."""
    attrs = doc.get("product", {}).get("attributes", {})
    rank = 0
    if attrs.get("operation", "RunInstances") != "RunInstances":
        rank += 2
    if attrs.get("marketoption", "OnDemand") != "OnDemand":
        rank += 1
    if attrs.get("licenseModel", "No License required") != "No License required":
        rank += 1
    return rank


def parse_price_documents(
    documents: Iterable[str | dict[str, Any]], instance_type: str, region: str, date: str
) -> list[Price]:
    """Turn Price List product documents into Prices: on-demand hourly, reserved standard all-upfront
    1 yr / 3 yr as hourly. Documents for other instance types or regions are ignored."""
    docs = [json.loads(d) if isinstance(d, str) else d for d in documents]
    docs = [
        d
        for d in docs
        if d.get("product", {}).get("attributes", {}).get("instanceType", instance_type) == instance_type
        and d.get("product", {}).get("attributes", {}).get("regionCode", region) == region
    ]
    docs.sort(key=_product_rank)
    found: dict[PriceTier, float] = {}
    for doc in docs:
        terms = doc.get("terms", {})
        if PriceTier.on_demand not in found:
            for term in terms.get("OnDemand", {}).values():
                hourly = [
                    _usd(d)
                    for d in term.get("priceDimensions", {}).values()
                    if str(d.get("unit", "")).lower().startswith("hr")
                ]
                hourly = [h for h in hourly if h > 0]
                if hourly:
                    found[PriceTier.on_demand] = min(hourly)
                    break
        for term in terms.get("Reserved", {}).values():
            attrs = term.get("termAttributes", {})
            if attrs.get("OfferingClass") != "standard" or attrs.get("PurchaseOption") != "All Upfront":
                continue
            length = attrs.get("LeaseContractLength")
            tier, hours = {
                "1yr": (PriceTier.reserved_1yr, HOURS_1YR),
                "3yr": (PriceTier.reserved_3yr, HOURS_3YR),
            }.get(length, (None, 0))
            if tier is None or tier in found:
                continue
            upfront = recurring = 0.0
            for d in term.get("priceDimensions", {}).values():
                unit = str(d.get("unit", "")).lower()
                if unit == "quantity":
                    upfront += _usd(d)
                elif unit.startswith("hr"):
                    recurring += _usd(d)
            total = upfront / hours + recurring
            if total > 0:
                found[tier] = round(total, 6)
    return [
        Price(
            instance_type=instance_type,
            region=region,
            tier=tier,
            usd_per_hour=usd,
            effective_date=date,
            source=API_SOURCE,
        )
        for tier, usd in sorted(found.items(), key=lambda kv: list(PriceTier).index(kv[0]))
    ]


@dataclass
class RefreshReport:
    """What a refresh did: prices written, instance types without a product in that region, failures."""

    region: str
    date: str
    prices: list[Price] = field(default_factory=list)
    written: int = 0
    missing: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "date": self.date,
            "written": self.written,
            "instance_types_priced": len({p.instance_type for p in self.prices}),
            "missing": self.missing,
            "prices": [p.model_dump(mode="json") for p in self.prices],
        }


def pricing_client(endpoint_url: str | None = None) -> Any:
    """A boto3 Pricing client at the API's home region, with quick retries (a refresh makes many calls)."""
    import boto3  # heavy: boto3/botocore, only when AWS is called
    from botocore.config import Config  # heavy: boto3/botocore, only when AWS is called

    cfg = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=30)
    return boto3.client("pricing", region_name=PRICING_ENDPOINT_REGION, endpoint_url=endpoint_url, config=cfg)


def _fetch_documents(client: Any, instance_type: str, region: str) -> list[str]:
    docs: list[str] = []
    kwargs: dict[str, Any] = {
        "ServiceCode": "AmazonEC2",
        "Filters": product_filters(instance_type, region),
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
    }
    while True:
        resp = client.get_products(**kwargs)
        docs.extend(resp.get("PriceList", []))
        token = resp.get("NextToken")
        if not token:
            return docs
        kwargs["NextToken"] = token


def _explain(exc: Exception) -> PricingUnavailableError:
    from botocore.exceptions import (  # heavy: boto3/botocore, only when AWS is called
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    offline = "The shipped on-demand snapshot (us-east-1) stays in use; reserved tiers need a refresh."
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return PricingUnavailableError(
            "No AWS credentials found, so prices cannot be refreshed.",
            hint="Set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (the pricing:GetProducts "
            "permission is enough). " + offline,
        )
    if isinstance(exc, EndpointConnectionError):
        return PricingUnavailableError(
            f"Cannot reach the AWS Pricing API ({exc}).", hint="Check the network or proxy. " + offline
        )
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        return PricingUnavailableError(
            f"The AWS Pricing API refused the call: {err.get('Code', '?')}: {err.get('Message', exc)}.",
            hint="Check that the credentials allow pricing:GetProducts. " + offline,
        )
    if isinstance(exc, BotoCoreError):
        return PricingUnavailableError(f"AWS Pricing API call failed: {exc}.", hint=offline)
    raise exc


def refresh_prices(
    store: Store,
    region: str = SNAPSHOT_REGION,
    instances: Sequence[str] | None = None,
    *,
    client: Any = None,
    delay_s: float = DEFAULT_DELAY_S,
    catalog: Catalog | None = None,
    today: str | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> RefreshReport:
    """Fetch on-demand and reserved (1 yr / 3 yr all-upfront) prices for catalog instance types in
    ``region`` and write them to the store, dated today. Names not in the catalog are refused up front.

    Prices are written as each instance type is fetched, so an interrupted refresh keeps what it got.
    A failure on the first call (no credentials, no network) raises PricingUnavailableError; a failure
    later in the run raises too, after what was fetched is stored.
    """
    cat = catalog or get_catalog()
    region = region.strip()
    if not region:
        raise UserInputError("The region is empty.", hint="e.g. --region us-east-1")
    # Resolved (and deduplicated) up front, so a typo fails before any API call.
    names = list(dict.fromkeys(cat.instance(n).name for n in instances)) if instances else cat.names()
    date = today or dt.datetime.now(dt.UTC).date().isoformat()
    report = RefreshReport(region=region, date=date)
    try:
        cl = client or pricing_client()
    except Exception as exc:  # botocore raises at client creation for a bad config or region
        raise _explain(exc) from None
    for i, name in enumerate(names):
        if on_progress:
            on_progress(name, i, len(names))
        if i and delay_s > 0:
            time.sleep(delay_s)  # the Price List API throttles bursts; the seed platform waits 200 ms too
        try:
            docs = _fetch_documents(cl, name, region)
        except Exception as exc:
            err = _explain(exc)
            if report.prices:
                err.hint = (
                    err.hint or ""
                ) + f" {report.written} prices fetched before the failure were stored."
            raise err from None
        prices = parse_price_documents(docs, name, region, date)
        if not prices:
            report.missing.append(name)
            continue
        report.written += store.upsert_prices(prices)
        report.prices.extend(prices)
    if on_progress:
        on_progress("", len(names), len(names))
    return report
