"""Prices: snapshot lookups, stored prices winning when newer, Price List parsing, and the refresh.

The refresh runs against moto's AWS mock for the client plumbing (credentials, endpoint resolution, retries).
moto does not implement the Pricing service (its GetProducts answers 404 "Not yet implemented", which a test
below pins down), so the product documents come from botocore's Stubber attached to the real pricing client:
it checks the exact request (service code, filters) and returns Price List documents shaped like AWS's.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber
from moto import mock_aws

from accelbench.catalog import (
    PricingUnavailableError,
    get_catalog,
    price_for,
    price_map,
    prices_for,
    refresh_prices,
)
from accelbench.catalog.pricing import (
    API_SOURCE,
    parse_price_documents,
    pricing_client,
    product_filters,
)
from accelbench.domain.instance_types import Price, PriceTier
from accelbench.errors import NotFoundError, UserInputError
from accelbench.store.repo import Store
from tests.unit.catalog.price_docs import as_price_list, product_doc

SNAP_DATE = "2026-01-19"


# ----------------------------------------------------------------------------------- snapshot lookups
def test_snapshot_price_without_a_store() -> None:
    p = price_for("g6.2xlarge")
    assert p is not None
    assert (p.usd_per_hour, p.region, p.tier, p.effective_date) == (
        0.9776,
        "us-east-1",
        PriceTier.on_demand,
        SNAP_DATE,
    )
    assert p.source == "aws-price-list snapshot"
    assert price_for("G6.2XLARGE") == p


def test_no_snapshot_for_reserved_tiers_other_regions_or_unpriced_rows() -> None:
    assert price_for("g6.2xlarge", PriceTier.reserved_1yr) is None
    assert price_for("g6.2xlarge", "reserved_3yr") is None
    assert price_for("g6.2xlarge", region="eu-west-1") is None
    assert price_for("p5e.48xlarge") is None
    assert prices_for("m8i.2xlarge") == {PriceTier.on_demand: price_for("m8i.2xlarge")}


def test_unknown_instance_raises_did_you_mean() -> None:
    with pytest.raises(NotFoundError, match=r"Did you mean 'inf2\.xlarge'"):
        price_for("inf2.xlarg")
    with pytest.raises(UserInputError, match="Unknown price tier 'spot'"):
        price_for("g6.2xlarge", "spot")


def test_price_map_covers_every_priced_instance() -> None:
    m = price_map()
    cat = get_catalog()
    assert set(m) == {i.name for i in cat.instances if i.on_demand_usd is not None}
    assert all(m[n] == price_for(n) for n in ("g6.2xlarge", "r8g.4xlarge", "trn2.48xlarge"))
    assert price_map(PriceTier.reserved_1yr) == {}


# ----------------------------------------------------------------------------------- with the store
def _p(
    name: str, usd: float, date: str, tier: PriceTier = PriceTier.on_demand, region: str = "us-east-1"
) -> Price:
    return Price(
        instance_type=name, region=region, tier=tier, usd_per_hour=usd, effective_date=date, source=API_SOURCE
    )


def test_stored_prices_win_when_at_least_as_new(store: Store) -> None:
    store.upsert_prices(
        [
            _p("g6.2xlarge", 0.9, "2026-11-30"),
            _p("g6.2xlarge", 0.95, "2026-06-01"),  # older stored row: the newest stored one counts
            _p("g6.2xlarge", 0.6, "2026-11-30", PriceTier.reserved_1yr),
            _p("g6.2xlarge", 0.4, "2026-11-30", PriceTier.reserved_3yr),
            _p("g6.2xlarge", 1.1, "2026-11-30", region="eu-west-1"),
            _p("r8g.4xlarge", 0.5, "2025-01-01"),  # older than the snapshot: the snapshot wins
            _p("g6.xlarge", 0.7, SNAP_DATE),  # same date: the fetched price wins
            _p("p5e.48xlarge", 80.0, "2026-11-30"),  # no snapshot at all
        ]
    )
    assert price_for("g6.2xlarge", store=store).usd_per_hour == 0.9  # type: ignore[union-attr]
    assert price_for("g6.2xlarge", PriceTier.reserved_1yr, store=store).usd_per_hour == 0.6  # type: ignore[union-attr]
    assert price_for("g6.2xlarge", region="eu-west-1", store=store).usd_per_hour == 1.1  # type: ignore[union-attr]
    snap = price_for("r8g.4xlarge", store=store)
    assert snap is not None and snap.usd_per_hour == 0.94256 and snap.source == "aws-price-list snapshot"
    assert price_for("g6.xlarge", store=store).usd_per_hour == 0.7  # type: ignore[union-attr]
    assert price_for("p5e.48xlarge", store=store).usd_per_hour == 80.0  # type: ignore[union-attr]
    tiers = prices_for("g6.2xlarge", store=store)
    assert set(tiers) == set(PriceTier)
    m = price_map(store=store)
    assert m["g6.2xlarge"].usd_per_hour == 0.9 and m["r8g.4xlarge"].usd_per_hour == 0.94256
    assert m["p5e.48xlarge"].usd_per_hour == 80.0
    assert set(price_map(PriceTier.reserved_3yr, store=store)) == {"g6.2xlarge"}


# ----------------------------------------------------------------------------------- document parsing
def test_parse_on_demand_and_reserved_all_upfront() -> None:
    doc = product_doc(
        "g6.xlarge",
        on_demand=0.8048,
        reserved=[
            ("1yr", "standard", "All Upfront", 4380.0, 0.0),
            ("3yr", "standard", "All Upfront", 7884.0, 0.01),
            ("1yr", "standard", "Partial Upfront", 2000.0, 0.2),  # ignored
            ("3yr", "convertible", "All Upfront", 9000.0, 0.0),  # ignored
            ("1yr", "standard", "No Upfront", 0.0, 0.55),  # ignored
        ],
    )
    prices = {
        p.tier: p for p in parse_price_documents(as_price_list(doc), "g6.xlarge", "us-east-1", "2026-11-30")
    }
    assert prices[PriceTier.on_demand].usd_per_hour == pytest.approx(0.8048)
    assert prices[PriceTier.reserved_1yr].usd_per_hour == pytest.approx(4380 / 8760)
    assert prices[PriceTier.reserved_3yr].usd_per_hour == pytest.approx(7884 / 26280 + 0.01)
    assert {p.effective_date for p in prices.values()} == {"2026-11-30"}
    assert {p.source for p in prices.values()} == {API_SOURCE}


def test_parse_prefers_the_plain_product_and_ignores_other_types() -> None:
    docs = [
        product_doc("g6.xlarge", on_demand=9.9, operation="RunInstances:0002", sku="WIN"),
        product_doc("g6.xlarge", on_demand=0.8048, sku="LNX"),
        product_doc("g6.2xlarge", on_demand=5.0, sku="OTHER"),
        product_doc("g6.xlarge", region="eu-west-1", on_demand=7.0, sku="EU"),
    ]
    prices = parse_price_documents(docs, "g6.xlarge", "us-east-1", "2026-11-30")
    assert [(p.tier, p.usd_per_hour) for p in prices] == [(PriceTier.on_demand, 0.8048)]
    assert parse_price_documents([], "g6.xlarge", "us-east-1", "2026-11-30") == []
    assert (
        parse_price_documents([product_doc("g6.xlarge", on_demand=0.0)], "g6.xlarge", "us-east-1", "x") == []
    )


# ----------------------------------------------------------------------------------- refresh
@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No real AWS configuration leaks in: no profile, no credential files, no instance metadata."""
    for var in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(var, raising=False)  # fmt: skip
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)


@pytest.fixture
def mocked_pricing(aws_env: None) -> Iterator[tuple[Any, Stubber]]:
    """A real boto3 pricing client inside moto's mock (fake credentials), with a Stubber for GetProducts."""
    with mock_aws():
        client = pricing_client()
        with Stubber(client) as stub:
            yield client, stub
            stub.assert_no_pending_responses()


def _expect(
    stub: Stubber,
    name: str,
    region: str,
    docs: list[str],
    token: str | None = None,
    next_token: str | None = None,
) -> None:
    params: dict[str, Any] = {
        "ServiceCode": "AmazonEC2",
        "Filters": product_filters(name, region),
        "FormatVersion": "aws_v1",
        "MaxResults": 100,
    }
    if token:
        params["NextToken"] = token
    resp: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": docs}
    if next_token:
        resp["NextToken"] = next_token
    stub.add_response("get_products", resp, params)


def test_filters_follow_the_seed_platform() -> None:
    f = {x["Field"]: x["Value"] for x in product_filters("g6.xlarge", "us-west-2")}
    assert f == {
        "instanceType": "g6.xlarge",
        "regionCode": "us-west-2",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    assert all(x["Type"] == "TERM_MATCH" for x in product_filters("g6.xlarge", "us-west-2"))


def test_refresh_writes_all_tiers_to_the_store(
    store: Store, mocked_pricing: tuple[Any, Stubber], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, stub = mocked_pricing
    sleeps: list[float] = []
    monkeypatch.setattr("accelbench.catalog.pricing.time.sleep", sleeps.append)
    _expect(
        stub, "g6.xlarge", "us-east-1",
        as_price_list(product_doc("g6.xlarge", on_demand=0.75, reserved=[("1yr", "standard", "All Upfront", 4380.0, 0.0)])),
        next_token="page2",
    )  # fmt: skip
    _expect(
        stub, "g6.xlarge", "us-east-1",
        as_price_list(product_doc("g6.xlarge", on_demand=None, reserved=[("3yr", "standard", "All Upfront", 7884.0, 0.0)], sku="S2")),
        token="page2",
    )  # fmt: skip
    _expect(stub, "r8g.4xlarge", "us-east-1", as_price_list(product_doc("r8g.4xlarge", on_demand=0.9)))
    _expect(stub, "p5e.48xlarge", "us-east-1", [])
    progress: list[tuple[str, int, int]] = []
    rep = refresh_prices(
        store,
        "us-east-1",
        ["g6.xlarge", "R8G.4XLARGE", "p5e.48xlarge"],
        client=client,
        today="2026-11-30",
        on_progress=lambda n, i, t: progress.append((n, i, t)),
    )
    assert rep.written == 4
    assert rep.missing == ["p5e.48xlarge"]
    assert sleeps == [0.2, 0.2]  # a pause between instance types, none before the first
    assert progress[0] == ("g6.xlarge", 0, 3) and progress[-1] == ("", 3, 3)
    assert price_for("g6.xlarge", store=store).usd_per_hour == 0.75  # type: ignore[union-attr]
    assert price_for("g6.xlarge", PriceTier.reserved_1yr, store=store).usd_per_hour == 0.5  # type: ignore[union-attr]
    assert price_for("g6.xlarge", PriceTier.reserved_3yr, store=store).usd_per_hour == 0.3  # type: ignore[union-attr]
    assert price_for("r8g.4xlarge", store=store).source == API_SOURCE  # type: ignore[union-attr]
    assert price_for("p5e.48xlarge", store=store) is None
    assert rep.as_dict()["instance_types_priced"] == 2


def test_refresh_other_region_and_rerun_replaces(store: Store, mocked_pricing: tuple[Any, Stubber]) -> None:
    client, stub = mocked_pricing
    _expect(
        stub,
        "m8i.2xlarge",
        "eu-west-1",
        as_price_list(product_doc("m8i.2xlarge", "eu-west-1", on_demand=0.47)),
    )
    _expect(
        stub,
        "m8i.2xlarge",
        "eu-west-1",
        as_price_list(product_doc("m8i.2xlarge", "eu-west-1", on_demand=0.46)),
    )
    for _ in range(2):
        refresh_prices(store, "eu-west-1", ["m8i.2xlarge"], client=client, today="2026-11-30", delay_s=0)
    assert price_for("m8i.2xlarge", region="eu-west-1", store=store).usd_per_hour == 0.46  # type: ignore[union-attr]
    assert price_for("m8i.2xlarge", store=store).usd_per_hour == 0.42336  # type: ignore[union-attr]


def test_refresh_refuses_unknown_names_before_calling(
    store: Store, mocked_pricing: tuple[Any, Stubber]
) -> None:
    client, _ = mocked_pricing
    with pytest.raises(NotFoundError, match="Did you mean"):
        refresh_prices(store, "us-east-1", ["g6.xlarg"], client=client)
    with pytest.raises(UserInputError, match="region is empty"):
        refresh_prices(store, " ", ["g6.xlarge"], client=client)


def test_interrupted_refresh_keeps_what_it_fetched(store: Store, mocked_pricing: tuple[Any, Stubber]) -> None:
    client, stub = mocked_pricing
    _expect(stub, "g6.xlarge", "us-east-1", as_price_list(product_doc("g6.xlarge", on_demand=0.7)))
    stub.add_client_error("get_products", "ThrottlingException", "Rate exceeded", 400)
    with pytest.raises(PricingUnavailableError) as exc:
        refresh_prices(
            store, "us-east-1", ["g6.xlarge", "g6.2xlarge"], client=client, today="2026-11-30", delay_s=0
        )
    assert "ThrottlingException" in exc.value.message
    assert "1 prices fetched before the failure were stored" in (exc.value.hint or "")
    assert price_for("g6.xlarge", store=store).usd_per_hour == 0.7  # type: ignore[union-attr]


def test_moto_does_not_implement_pricing_and_the_error_is_clear(store: Store, aws_env: None) -> None:
    # Pins down why the tests above use a Stubber: moto answers GetProducts with 404 "Not yet implemented".
    with mock_aws(), pytest.raises(PricingUnavailableError) as exc:
        refresh_prices(store, "us-east-1", ["g6.xlarge"], delay_s=0)
    assert "refused" in exc.value.message and "Not yet implemented" in exc.value.message
    assert "snapshot" in (exc.value.hint or "")
    assert price_for("g6.xlarge", store=store).source == "aws-price-list snapshot"  # type: ignore[union-attr]


def test_no_credentials_is_a_clear_error_and_the_snapshot_still_works(store: Store, aws_env: None) -> None:
    with pytest.raises(PricingUnavailableError) as exc:
        refresh_prices(store, "us-east-1", ["g6.xlarge"], delay_s=0)
    assert exc.value.message == "No AWS credentials found, so prices cannot be refreshed."
    assert "AWS_PROFILE" in (exc.value.hint or "") and "snapshot" in (exc.value.hint or "")
    assert exc.value.status_code == 503
    assert price_for("g6.xlarge", store=store).usd_per_hour == 0.8048  # type: ignore[union-attr]


def test_no_network_is_a_clear_error(store: Store, aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = pricing_client(endpoint_url=f"http://127.0.0.1:{port}")
    monkeypatch.setattr("accelbench.catalog.pricing.time.sleep", lambda _s: None)
    with pytest.raises(PricingUnavailableError, match="Cannot reach the AWS Pricing API") as exc:
        refresh_prices(store, "us-east-1", ["g6.xlarge"], client=client)
    assert "network" in (exc.value.hint or "")
