"""Catalog, pricing, models and health endpoints, on SQLite and PostgreSQL (prices come from the store when
refreshed, else from the shipped snapshot)."""

from __future__ import annotations

import pytest

from accelbench.domain.instance_types import Price, PriceTier
from accelbench.store import Store
from tests.support.api_app import api_for


@pytest.fixture
def api(store: Store):
    with api_for(store) as a:
        yield a


def names(resp) -> list[str]:
    return [i["name"] for i in resp.json()["items"]]


def test_instance_types_filters(api) -> None:
    get = lambda **q: api.client.get("/api/v1/instance-types", params=q)  # noqa: E731
    everything = get().json()
    assert everything["total"] == len(everything["items"]) > 50
    tiers = {i["accelerator_type"] for i in everything["items"]}
    assert tiers == {"gpu", "neuron", "cpu"}
    cpu = get(accelerator_type="cpu").json()["items"]
    assert cpu and all(i["accelerator_type"] == "cpu" and i["accelerator_count"] == 0 for i in cpu)
    # CPU serving memory is host DRAM; GPU serving memory is accelerator memory.
    m8i = next(i for i in cpu if i["name"] == "m8i.2xlarge")
    assert m8i["serving_memory_gib"] == m8i["memory_gib"] == 32
    g6 = get(family="g6").json()["items"]
    assert g6 and all(i["family"] == "g6" for i in g6)
    assert next(i for i in g6 if i["name"] == "g6.12xlarge")["serving_memory_gib"] == 4 * 24
    assert set(names(get(family=["g6", "g5"]))) == {
        i["name"] for i in everything["items"] if i["family"] in ("g5", "g6")
    }
    big = get(min_memory_gib=600).json()["items"]
    assert big and all(i["serving_memory_gib"] >= 600 for i in big)
    cheap = get(max_price=0.5, accelerator_type="gpu").json()["items"]
    assert all(i["on_demand_usd"] is not None and i["on_demand_usd"] <= 0.5 for i in cheap)
    arm = get(arch="arm64").json()["items"]
    assert arm and all(i["arch"] == "arm64" for i in arm)


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [({"family": "g66"}, 400, "g6"), ({"accelerator_type": "tpu"}, 422, "accelerator_type"),
     ({"min_memory_gib": -1}, 422, "min_memory_gib"), ({"max_price": "cheap"}, 422, "max_price"),
     ({"arch": "sparc"}, 400, "architecture")],
)  # fmt: skip
def test_instance_type_filters_say_what_is_wrong(api, query, status, says) -> None:
    r = api.client.get("/api/v1/instance-types", params=query)
    assert r.status_code == status
    assert says in r.json()["error"]["message"]


def test_one_instance_type(api) -> None:
    r = api.client.get("/api/v1/instance-types/r8g.4xlarge").json()
    assert r["instance"]["accelerator_type"] == "cpu" and r["accelerator"]["kind"] == "cpu"
    assert r["instance"]["cpu_generation"]
    assert [p["tier"] for p in r["prices"]] == ["on_demand"]
    missing = api.client.get("/api/v1/instance-types/r8g.4xlargee")
    assert missing.status_code == 404 and "r8g.4xlarge" in missing.json()["error"]["message"]


def test_pricing_prefers_newer_stored_prices(api) -> None:
    snap = api.client.get("/api/v1/pricing", params={"instance_type": "g6.2xlarge"}).json()
    assert snap["total"] == 1 and snap["items"][0]["source"] != "aws-pricing-api"
    api.store.upsert_prices([
        Price(instance_type="g6.2xlarge", region="us-east-1", tier=PriceTier.on_demand, usd_per_hour=0.123,
              effective_date="2099-01-01", source="aws-pricing-api"),
        Price(instance_type="g6.2xlarge", region="us-east-1", tier=PriceTier.reserved_1yr, usd_per_hour=0.1,
              effective_date="2099-01-01", source="aws-pricing-api"),
    ])  # fmt: skip
    now = api.client.get("/api/v1/pricing", params={"instance_type": "g6.2xlarge"}).json()
    assert now["items"][0]["usd_per_hour"] == 0.123
    reserved = api.client.get("/api/v1/pricing", params={"tier": "reserved_1yr"}).json()
    assert [p["instance_type"] for p in reserved["items"]] == ["g6.2xlarge"] and reserved[
        "tier"
    ] == "reserved_1yr"
    everything = api.client.get("/api/v1/pricing").json()
    assert everything["total"] > 50 and everything["region"] == "us-east-1"
    assert api.client.get("/api/v1/pricing", params={"region": "eu-west-1"}).json()["total"] == 0
    assert api.client.get("/api/v1/pricing", params={"tier": "spot"}).status_code == 422
    assert api.client.get("/api/v1/pricing", params={"instance_type": "nope.large"}).status_code == 404
    detail = api.client.get("/api/v1/instance-types/g6.2xlarge").json()
    assert {p["tier"] for p in detail["prices"]} == {"on_demand", "reserved_1yr"}


def test_models(api) -> None:
    body = api.client.get("/api/v1/models").json()
    presets = {p["name"]: p for p in body["presets"]}
    assert presets["qwen2.5-7b-instruct"]["parameters"] == pytest.approx(7.62e9, rel=0.01)
    assert presets["mixtral-8x7b-instruct-v0.1"]["moe"] is True
    assert isinstance(body["prepared"], list)
    spec = api.client.get("/api/v1/models/qwen2.5-7b-instruct").json()
    assert spec["kv_bytes_per_token_bf16"] == 57344 and spec["attention_kind"] == "gqa"
    by_hub_id = api.client.get("/api/v1/models/Qwen/Qwen2.5-7B-Instruct")
    assert by_hub_id.status_code == 200 and by_hub_id.json()["name"] == "qwen2.5-7b-instruct"
    missing = api.client.get("/api/v1/models/qwen-7b")
    assert missing.status_code == 404 and "Did you mean" in missing.json()["error"]["message"]


def test_health(api) -> None:
    h = api.client.get("/api/v1/health").json()
    assert h["status"] == "ok" and h["database"]["ok"]
    assert h["database"]["dialect"] == ("postgresql" if api.store.is_postgres else "sqlite")
    assert h["worker"] is None  # this app runs without one
    assert h["auth"] == {"token_configured": True, "read_auth": False}


def test_unknown_routes_and_methods_are_json(api) -> None:
    r = api.client.get("/api/v1/nothing-here")
    assert r.status_code == 404 and r.json()["error"]["type"] == "HTTPError"
    r = api.client.put("/api/v1/runs", headers=api.auth)
    assert r.status_code == 405 and "not allowed" in r.json()["error"]["message"]


def test_nul_characters_are_bad_input(api) -> None:
    r = api.client.get("/api/v1/runs", params={"label": "\x00"})
    assert r.status_code == 400 and "NUL" in r.json()["error"]["message"]
    body = {
        "model": "smollm2-135m-instruct",
        "label": "a\x00b",
        "engine": {"settings": {"kv_cache_space_gib": 1}},
    }
    r = api.client.post("/api/v1/runs", json=body, headers=api.auth)
    # refused on both databases before anything is stored (PostgreSQL could not store it; SQLite used to)
    assert r.status_code == 400, r.text
    assert "NUL character in label" in r.json()["error"]["message"]


def test_options_and_405_name_every_method_of_the_path(api) -> None:
    """OPTIONS answered 405 naming one route's methods only (GET and POST on /api/v1/runs said "Allow: POST")."""
    r = api.client.options("/api/v1/runs")
    assert r.status_code == 204 and r.headers["Allow"] == "GET, OPTIONS, POST"
    r = api.client.options("/api/v1/runs/some-run")
    assert r.status_code == 204 and r.headers["Allow"] == "DELETE, GET, OPTIONS"
    r = api.client.put("/api/v1/runs", json={})
    assert r.status_code == 405 and r.headers["Allow"] == "GET, OPTIONS, POST"
    assert "not allowed" in r.json()["error"]["message"]
