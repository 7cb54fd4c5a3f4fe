"""`accelbench catalog list|show|refresh-prices`: JSON output, filters, did-you-mean errors, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber
from moto import mock_aws
from typer.testing import CliRunner

from accelbench.catalog.pricing import API_SOURCE, pricing_client, product_filters
from accelbench.cli.main import app
from accelbench.domain.instance_types import Price, PriceTier
from accelbench.store.repo import Store
from tests.unit.catalog.price_docs import as_price_list, product_doc

runner = CliRunner(env={"COLUMNS": "220"})


def run_json(*args: str) -> Any:
    res = runner.invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_list_json_filters_by_tier() -> None:
    for tier in ("gpu", "neuron", "cpu"):
        rows = run_json("catalog", "list", "--accelerator", tier)
        assert rows and {r["accelerator_type"] for r in rows} == {tier}
    rows = run_json("catalog", "list")
    assert len(rows) > 190
    g62 = next(r for r in rows if r["name"] == "g6.2xlarge")
    assert g62["serving_memory_gib"] == 24
    assert g62["price"]["usd_per_hour"] == 0.9776 and g62["price"]["source"] == "aws-price-list snapshot"
    assert g62["accelerator_name"] == "L4" and g62["vcpus"] == 8


def test_list_json_other_filters() -> None:
    rows = run_json("catalog", "list", "--family", "r8g", "--family", "m8g", "--min-memory", "700")
    assert {r["name"] for r in rows} == {
        "r8g.24xlarge", "r8g.48xlarge", "r8g.metal-24xl", "r8g.metal-48xl", "m8g.48xlarge", "m8g.metal-48xl",
    }  # fmt: skip
    cheap = run_json("catalog", "list", "--accelerator", "gpu", "--max-price", "1.0")
    assert {r["name"] for r in cheap} == {"g6.xlarge", "g6.2xlarge"}
    arm = run_json("catalog", "list", "--arch", "arm64")
    assert {r["arch"] for r in arm} == {"arm64"}
    assert run_json("catalog", "list", "--family", "g6", "--max-price", "0.01") == []


def test_list_table_and_unknown_family() -> None:
    res = runner.invoke(app, ["catalog", "list", "--accelerator", "neuron"])
    assert res.exit_code == 0
    assert "inf2.xlarge" in res.stdout and "trn2.48xlarge" in res.stdout and "9 instance types" in res.stdout
    bad = runner.invoke(app, ["catalog", "list", "--family", "r8gx", "--format", "json"])
    assert bad.exit_code != 0
    assert "Did you mean 'r8g'" in bad.stderr
    assert bad.stdout == ""
    bad_tier = runner.invoke(app, ["catalog", "list", "--accelerator", "tpu"])
    assert bad_tier.exit_code != 0


def test_show_json() -> None:
    out = run_json("catalog", "show", "m8i.2xlarge")
    assert out["instance"]["name"] == "m8i.2xlarge" and out["instance"]["cpu_generation"].startswith(
        "Granite"
    )
    assert out["accelerator"]["name"] == "Xeon-GNR" and "amx" in out["accelerator"]["isa"]
    assert out["accelerator"]["sources"] and out["accelerator"]["sources"][0]["url"].startswith("https://")
    assert set(out["prices"]) == {"on_demand"} and out["prices"]["on_demand"]["usd_per_hour"] == 0.42336
    neuron = run_json("catalog", "show", "inf2.xlarge")
    assert neuron["accelerator"]["neuron_cores"] == 2


def test_show_table_and_did_you_mean() -> None:
    res = runner.invoke(app, ["catalog", "show", "p5.48xlarge"])
    assert res.exit_code == 0
    for text in ("H100-SXM", "3350", "989", "55.04", "reserved_1yr", "source:"):
        assert text in res.stdout, text
    bad = runner.invoke(app, ["catalog", "show", "g6.2xlarg"])
    assert bad.exit_code == 2
    assert "Did you mean 'g6.2xlarge'" in bad.stderr and "Traceback" not in bad.output


def test_show_uses_refreshed_prices_from_the_store(store: Store) -> None:
    store.upsert_prices(
        [
            Price(instance_type="g6.2xlarge", region="us-east-1", tier=t, usd_per_hour=v,
                  effective_date="2026-11-30", source=API_SOURCE)
            for t, v in ((PriceTier.on_demand, 0.95), (PriceTier.reserved_1yr, 0.6), (PriceTier.reserved_3yr, 0.4))
        ]
    )  # fmt: skip
    out = run_json("catalog", "show", "g6.2xlarge")
    assert {k: v["usd_per_hour"] for k, v in out["prices"].items()} == {
        "on_demand": 0.95, "reserved_1yr": 0.6, "reserved_3yr": 0.4,
    }  # fmt: skip
    assert out["instance"]["price"]["source"] == API_SOURCE
    rows = run_json("catalog", "list", "--family", "g6", "--max-price", "0.96")
    assert {r["name"] for r in rows} == {"g6.xlarge", "g6.2xlarge"}


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_refresh_without_credentials_fails_cleanly(no_aws: None) -> None:
    res = runner.invoke(app, ["catalog", "refresh-prices", "--instance", "g6.xlarge", "--format", "json"])
    assert res.exit_code != 0
    assert "No AWS credentials found" in res.stderr and "snapshot" in res.stderr
    assert res.stdout == "" and "Traceback" not in res.output
    # The catalog keeps working offline.
    assert run_json("catalog", "show", "g6.xlarge")["prices"]["on_demand"]["usd_per_hour"] == 0.8048


def test_refresh_json_with_a_stubbed_price_list(
    store: Store, no_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mock_aws():
        client = pricing_client()
        with Stubber(client) as stub:
            for region, usd in (("us-east-1", 0.81), ("us-west-2", 0.83)):
                stub.add_response(
                    "get_products",
                    {"FormatVersion": "aws_v1", "PriceList": as_price_list(product_doc("g6.xlarge", region, on_demand=usd,
                        reserved=[("1yr", "standard", "All Upfront", 4380.0, 0.0)]))},
                    {"ServiceCode": "AmazonEC2", "Filters": product_filters("g6.xlarge", region),
                     "FormatVersion": "aws_v1", "MaxResults": 100},
                )  # fmt: skip
            monkeypatch.setattr("accelbench.catalog.pricing.pricing_client", lambda endpoint_url=None: client)
            res = runner.invoke(
                app,
                ["catalog", "refresh-prices", "--region", "us-east-1", "--region", "us-west-2",
                 "--instance", "g6.xlarge", "--delay", "0", "--format", "json"],
            )  # fmt: skip
            stub.assert_no_pending_responses()
    assert res.exit_code == 0, res.output
    reports = json.loads(res.stdout)
    assert [r["region"] for r in reports] == ["us-east-1", "us-west-2"]
    assert [r["written"] for r in reports] == [2, 2]
    shown = run_json("catalog", "show", "g6.xlarge", "--region", "us-west-2")
    assert shown["prices"]["on_demand"]["usd_per_hour"] == 0.83
    assert shown["prices"]["reserved_1yr"]["usd_per_hour"] == 0.5


def test_refresh_rejects_unknown_instance_and_duplicate_region() -> None:
    res = runner.invoke(app, ["catalog", "refresh-prices", "--instance", "g6.xlarg"])
    assert res.exit_code != 0 and "Did you mean 'g6.xlarge'" in res.stderr
    res = runner.invoke(app, ["catalog", "refresh-prices", "--region", "us-east-1", "--region", "us-east-1"])
    assert res.exit_code != 0 and "region is given twice" in res.stderr
