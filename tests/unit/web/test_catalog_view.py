"""The Catalog page's view over the shipped catalog: the search (every word must match, with the tier
chips), the sort keys (numbers as numbers, blanks last), the address that keeps a view, and one instance type's
detail: its specs, the sources the catalog cites, and its prices with their dates, sources and which one is used."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.catalog import get_catalog, snapshot_price
from accelbench.domain.instance_types import Price, PriceTier
from accelbench.errors import NotFoundError, UserInputError
from accelbench.report.formatting import MISSING
from accelbench.store.repo import Store
from accelbench.web.catalog_view import (
    catalog_context,
    catalog_page_view,
    catalog_rows,
    detail_context,
    matches,
    page_url,
    query_terms,
    safe_url,
    sort_rows,
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'store.db'}")


@pytest.fixture
def rows() -> list[dict]:
    cat = get_catalog()
    prices = {i.name: p for i in cat.instances if (p := snapshot_price(i)) is not None}
    return catalog_rows(cat.instances, cat.accelerators, prices)


def _price(
    usd: float, date: str, *, tier: PriceTier = PriceTier.on_demand, region: str = "us-east-1"
) -> Price:
    """A price as ``catalog refresh-prices`` stores it for g6.xlarge."""
    return Price(
        instance_type="g6.xlarge",
        region=region,
        tier=tier,
        usd_per_hour=usd,
        effective_date=date,
        source="aws-pricing-api",
    )


def _facts(rows: list[dict[str, str]]) -> dict[str, str]:
    return {f["label"]: f["value"] for f in rows}


# ------------------------------------------------------------------------------------------- search
def test_a_query_keeps_the_rows_naming_it_and_counts_them(rows: list[dict]) -> None:
    cat = get_catalog()
    view = catalog_page_view(rows, q="L40S")
    shown = [r["name"] for r in view["rows"] if r["shown"]]
    expected = [i.name for i in cat.instances if i.accelerator_name == "L40S"]
    assert shown == expected and len(shown) >= 4
    assert view["count_text"] == f"{len(expected)} of {len(cat.instances)} instance types"
    assert view["total"] == len(cat.instances) == len(view["rows"])  # every row stays, the others hidden


def test_every_word_must_match_and_the_tier_narrows(rows: list[dict]) -> None:
    cat = get_catalog()
    amx_cpu = [i.name for i in cat.instances if i.accelerator_type.value == "cpu" and "amx" in i.cpu_isa]
    view = catalog_page_view(rows, q="amx", tier="cpu")
    assert [r["name"] for r in view["rows"] if r["shown"]] == amx_cpu and amx_cpu
    # two words: Graviton4 AND metal, fewer than either alone
    both = {r["name"] for r in rows if matches(r, query_terms("graviton4 metal"))}
    graviton4 = {r["name"] for r in rows if matches(r, ["graviton4"])}
    assert both and both < graviton4 and all("metal" in n for n in both)
    # the architecture's other spelling, a tier word, the GPU vendor
    assert {r["name"] for r in rows if matches(r, ["aarch64"])} == {
        i.name for i in cat.instances if i.arch == "arm64"
    }
    assert all(r["tier"] == "neuron" for r in rows if matches(r, ["neuron"]))
    assert not any(matches(r, ["nvidia"]) for r in rows if r["tier"] != "gpu")
    assert catalog_page_view(rows, q="no-such-thing")["shown"] == 0


def test_chip_links_and_the_page_address_keep_the_view(rows: list[dict]) -> None:
    view = catalog_page_view(rows, q="l4", tier="gpu", sort="price", direction="desc")
    chips = {c["key"]: c for c in view["chips"]}
    assert chips["gpu"]["on"] and not chips["all"]["on"]
    assert chips["cpu"]["href"] == "/catalog?accelerator_type=cpu&q=l4&sort=price&dir=desc"
    assert chips["all"]["href"] == "/catalog?q=l4&sort=price&dir=desc"
    assert page_url("gpu") == "/catalog?accelerator_type=gpu"
    assert page_url(q="  graviton4 metal ") == "/catalog?q=graviton4+metal"


# ------------------------------------------------------------------------------------------- sort
def test_price_sorts_numerically_with_blanks_last_either_way(rows: list[dict]) -> None:
    up = sort_rows(rows, "price")
    prices = [r["price"] for r in up if r["price"] is not None]
    assert prices == sorted(prices) and prices[0] < 0.1 < 10 < prices[-1]
    unpriced = {r["name"] for r in rows if r["price"] is None}
    assert "p5e.48xlarge" in unpriced
    assert {r["name"] for r in up[-len(unpriced) :]} == unpriced
    down = sort_rows(rows, "price", descending=True)
    assert [r["price"] for r in down if r["price"] is not None] == sorted(prices, reverse=True)
    assert {r["name"] for r in down[-len(unpriced) :]} == unpriced


def test_names_sort_naturally_and_numbers_are_not_text(rows: list[dict]) -> None:
    names = [r["name"] for r in sort_rows(rows, "name") if r["family"] == "g6"]
    assert names.index("g6.2xlarge") < names.index("g6.12xlarge") < names.index("g6.48xlarge")
    vcpus = [r["vcpus"] for r in sort_rows(rows, "vcpus")]
    assert vcpus == sorted(vcpus) and vcpus[-1] >= 192  # as text "96" would follow "192"


def test_the_server_side_sort_sets_aria_sort_and_refuses_unknown_keys(rows: list[dict]) -> None:
    view = catalog_page_view(rows, sort="serving_memory_gib", direction="desc")
    assert {c["key"]: c["aria_sort"] for c in view["columns"]}["serving_memory_gib"] == "descending"
    assert sum(c["aria_sort"] != "none" for c in view["columns"]) == 1
    memory = [r["serving_memory_gib"] for r in view["rows"]]
    assert memory == sorted(memory, reverse=True)
    with pytest.raises(UserInputError):
        catalog_page_view(rows, sort="bogus")
    with pytest.raises(UserInputError):
        catalog_page_view(rows, sort="price", direction="sideways")


# ------------------------------------------------------------------------------------------- detail
def test_a_gpu_instance_detail_has_its_device_specs_sources_and_dated_price(store: Store) -> None:
    d = detail_context(store, "g6.xlarge")
    facts = _facts(d["accelerator_facts"])
    assert facts["Device"] == "L4" and facts["Count"] == "1"
    assert facts["Memory per device"] == "24 GiB"
    assert facts["Memory bandwidth per device"] == "300 GB/s"
    assert facts["BF16 per device"] == "121 TFLOPS" and facts["FP8 per device"] == "242 TFLOPS"
    assert facts["Interconnect per device"] == MISSING  # a PCIe card: the catalog gives none
    assert facts["PCIe generation"] == "4"  # which its all-reduces run over
    assert facts["FP8 KV cache"] == "yes"
    assert d["cpu_facts"] is None
    inst = _facts(d["instance"])
    assert inst["vCPUs"] == "4" and inst["Physical cores"] == "2" and inst["Threads per core"] == "2"
    # the catalog's own citations, with the date each was read
    l4 = next(s for s in d["sources"] if "L4" in s["title"] and "datasheet" in s["title"])
    assert l4["url"] == "https://www.nvidia.com/en-us/data-center/l4/" and l4["accessed"] == "2026-11-30"
    [price] = d["prices"]
    assert (price["usd_per_hour"], price["effective_date"], price["source"], price["region"]) == (
        0.8048,
        "2026-01-19",
        "aws-price-list snapshot",
        "us-east-1",
    )
    assert price["in_use"] and price["usd_per_month"] == pytest.approx(0.8048 * 730)
    assert d["on_demand_text"] == "$0.805"
    assert [r["name"] for r in d["family"] if r["current"]] == ["g6.xlarge"] and len(d["family"]) == 8


def test_a_cpu_instance_detail_has_its_topology_isa_and_socket_figures(store: Store) -> None:
    d = detail_context(store, "M7I.2XLARGE")  # names are case-insensitive, shown as the catalog spells them
    assert d["name"] == "m7i.2xlarge" and d["accelerator_facts"] is None
    inst = _facts(d["instance"])
    assert inst["Physical cores"] == "4" and inst["Threads per core"] == "2" and inst["AMX"] == "yes"
    assert "amx_bf16" in inst["ISA flags"]
    assert inst["Measured DRAM read"] == "52 GB/s"  # Spare Cores' bw_mem with every vCPU reading
    cpu = _facts(d["cpu_facts"])
    assert cpu["CPU spec"] == "Xeon-SPR" and cpu["Cores per socket"] == "48"
    assert cpu["Memory bandwidth per socket"] == "307.2 GB/s" and cpu["FP16 per socket"] == MISSING
    graviton = _facts(detail_context(store, "c7g.large")["instance"])
    assert "AMX" not in graviton and graviton["Threads per core"] == "1"
    assert _facts(detail_context(store, "c9g.large")["instance"])["Measured DRAM read"] == MISSING


def test_a_refreshed_price_is_used_and_every_price_keeps_its_date(store: Store) -> None:
    store.upsert_prices(
        [
            _price(0.75, "2026-03-02"),
            _price(0.49, "2026-03-02", tier=PriceTier.reserved_1yr),
            _price(0.9, "2026-03-02", region="eu-west-1"),
        ]
    )
    d = detail_context(store, "g6.xlarge")
    got = [(p["region"], p["tier"], p["usd_per_hour"], p["effective_date"], p["in_use"]) for p in d["prices"]]
    assert got == [
        ("us-east-1", "on_demand", 0.75, "2026-03-02", True),
        ("us-east-1", "on_demand", 0.8048, "2026-01-19", False),  # the snapshot, still listed, older
        ("us-east-1", "reserved_1yr", 0.49, "2026-03-02", True),
        ("eu-west-1", "on_demand", 0.9, "2026-03-02", False),  # the table prices us-east-1
    ]
    assert d["prices"][1]["origin"] == "shipped catalog snapshot"
    assert d["on_demand_text"] == "$0.750"
    # the table uses the refreshed price too, with its date in the cell's title
    view = catalog_context(store, q="g6.xlarge", tier=None, sort=None, direction=None)
    row = next(r for r in view["rows"] if r["name"] == "g6.xlarge")
    assert row["price"] == 0.75 and row["price_title"] == "aws-pricing-api, us-east-1, dated 2026-03-02"


def test_an_older_stored_price_does_not_replace_the_snapshot(store: Store) -> None:
    store.upsert_prices([_price(0.7, "2025-06-01")])
    used = [p for p in detail_context(store, "g6.xlarge")["prices"] if p["in_use"]]
    assert [(p["usd_per_hour"], p["effective_date"]) for p in used] == [(0.8048, "2026-01-19")]


def test_unknowns_are_shown_as_missing_never_invented(store: Store, rows: list[dict]) -> None:
    d = detail_context(store, "p5e.48xlarge")  # no on-demand price in us-east-1 (Capacity Blocks)
    assert d["prices"] == [] and d["on_demand"] is None and d["on_demand_text"] == MISSING
    # an estimated price is flagged as one, from the catalog's own source text
    c9g = [r for r in rows if r["family"] == "c9g"]
    assert c9g and all(r["price_estimated"] and r["price_source"].startswith("estimate") for r in c9g)
    assert not any(r["price_estimated"] for r in rows if r["family"] == "g6")
    # where the table's prices come from: by source, with the span of their dates
    cat = get_catalog()
    published = [
        i.price_date for i in cat.instances if i.price_source == "aws-price-list snapshot" and i.on_demand_usd
    ]
    summary = catalog_page_view(rows)["price_summary"]
    assert summary[0] == f"{len(published)} aws-price-list snapshot, {min(published)} to {max(published)}"
    unpriced = sum(1 for i in cat.instances if i.on_demand_usd is None)
    assert summary[-1] == f"{unpriced} without a known price" and unpriced >= 1
    estimated = sum(1 for r in rows if r["price_estimated"])
    assert estimated > len(c9g) and any(line.startswith(f"{estimated} estimate (") for line in summary)
    with pytest.raises(NotFoundError):
        detail_context(store, "g6.nosuchsize")


def test_only_web_addresses_become_links() -> None:
    assert safe_url("https://aws.amazon.com/ec2/") == "https://aws.amazon.com/ec2/"
    assert safe_url("javascript:alert(1)") is None and safe_url(None) is None
