"""Planning endpoints on SQLite and PostgreSQL: recommend (fits, refusal with reasons, this machine),
estimate (ranked catalog with the CLI's filters, one instance, SLO, stored prices and benchmarked instances),
memory-breakdown (GPU and Neuron; 400 with the reason on CPU)."""

from __future__ import annotations

import pytest

from accelbench.domain.instance_types import Price, PriceTier
from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.support.api_app import api_for

M = "qwen2.5-7b-instruct"


@pytest.fixture
def api(store: Store):
    with api_for(store) as a:
        yield a


def test_recommend(api) -> None:
    r = api.client.get("/api/v1/recommend", params={"model": M, "instance_type": "m8i.2xlarge"})
    assert r.status_code == 200
    rec = r.json()
    assert rec["fits"] is True and rec["accelerator_type"] == "cpu"
    s = rec["settings"]
    assert s["engine"] == "vllm-cpu" and s["dtype"] == "bfloat16" and s["kv_cache_space_gib"] >= 1
    assert s["gpu_memory_utilization"] is None and s["kv_cache_dtype"] is None
    assert rec["reasons"] and rec["bandwidth"] is not None
    gpu = api.client.get("/api/v1/recommend", params={"model": M, "instance_type": "g6.2xlarge"}).json()
    assert gpu["fits"] and gpu["settings"]["engine"] == "vllm" and gpu["settings"]["gpu_memory_utilization"]


def test_recommend_refusal_is_an_answer(api) -> None:
    r = api.client.get(
        "/api/v1/recommend", params={"model": "qwen2.5-32b-instruct", "instance_type": "r8g.16xlarge"}
    )
    assert r.status_code == 200
    rec = r.json()
    assert rec["fits"] is False and rec["refusal"]["code"] == "dense_too_large_for_cpu"
    assert any("W8A8" in w for w in rec["refusal"]["way_forward"])
    int8 = api.client.get("/api/v1/recommend", params={"model": "qwen2.5-32b-instruct",
                                                        "instance_type": "r8g.16xlarge", "quantization": "int8"})  # fmt: skip
    assert int8.json()["fits"] is True


def test_recommend_for_this_machine(api) -> None:
    rec = api.client.get(
        "/api/v1/recommend", params={"model": "smollm2-135m-instruct", "instance_type": "local"}
    )
    assert rec.status_code == 200 and rec.json()["accelerator_type"] == "cpu"


@pytest.mark.parametrize(
    ("params", "status", "says"),
    [({"model": M}, 422, "query parameter 'instance_type': required"),
     ({"model": "qwen-7", "instance_type": "g6.2xlarge"}, 404, "Did you mean"),
     ({"model": M, "instance_type": "g6.2xlarg"}, 404, "g6.2xlarge"),
     ({"model": M, "instance_type": "g6.2xlarge", "max_model_len": 8}, 422, "max_model_len"),
     ({"model": M, "instance_type": "g6.2xlarge", "kv_cache_dtype": "int2"}, 422, "kv_cache_dtype")],
)  # fmt: skip
def test_recommend_bad_input(api, params, status, says) -> None:
    r = api.client.get("/api/v1/recommend", params=params)
    assert r.status_code == status
    assert says in r.json()["error"]["message"]


def test_estimate_ranks_the_catalog_with_filters(api) -> None:
    q = {"model": M, "input_len": 512, "output_len": 128, "concurrency": 4}
    body = api.client.get("/api/v1/estimate", params=q).json()
    rows = body["rows"]
    assert body["total_rows"] >= len(rows) > 50
    feasible = [r for r in rows if r["feasible"]]
    costs = [
        r["usd_per_million_output_tokens"] for r in feasible if r["usd_per_million_output_tokens"] is not None
    ]
    assert costs == sorted(costs)  # ranked by cost per 1M output tokens
    assert all(r["tpot_ms"] > 0 and r["output_tokens_per_s"] > 0 for r in feasible)
    assert body["summary"]["cheapest"] == feasible[0]["instance"]
    cpu = api.client.get("/api/v1/estimate", params=q | {"accelerator_type": "cpu"}).json()
    assert {r["accelerator_type"] for r in cpu["rows"]} == {"cpu"}
    cheap = api.client.get("/api/v1/estimate", params=q | {"max_cost": 1.0}).json()
    assert all(r["hourly_usd"] <= 1.0 for r in cheap["rows"])
    limited = api.client.get("/api/v1/estimate", params=q | {"limit": 5}).json()
    assert len(limited["rows"]) == 5 and limited["total_rows"] == body["total_rows"]
    ctx = api.client.get("/api/v1/estimate", params=q | {"min_context": 32768}).json()
    assert all(r["max_model_len"] >= 32768 for r in ctx["rows"] if r["feasible"])


def test_estimate_one_instance_and_slo(api) -> None:
    one = api.client.get("/api/v1/estimate", params={"model": M, "instance_type": "g6.2xlarge"}).json()
    assert len(one["rows"]) == 1 and one["rows"][0]["instance"] == "g6.2xlarge"
    assert one["estimate"]["recommendation"]["fits"] and one["estimate"]["times"]["decode_step_ms"] > 0
    local = api.client.get(
        "/api/v1/estimate", params={"model": "smollm2-135m-instruct", "instance_type": "local"}
    )
    assert local.status_code == 200 and local.json()["rows"][0]["accelerator_type"] == "cpu"
    slo = api.client.get(
        "/api/v1/estimate", params={"model": M, "slo": "ttft:2000,tpot:100", "concurrency": 8}
    ).json()
    choice = slo["summary"]["slo_choice"]
    assert choice is not None
    row = next(r for r in slo["rows"] if r["instance"] == choice)
    assert row["max_concurrency_meeting_slo"] >= 8


def test_estimates_carry_ranges_topology_and_precision_through_the_api(api) -> None:
    one = api.client.get(
        "/api/v1/estimate", params={"model": M, "instance_type": "m8i.2xlarge", "cores": 8, "smt": 1}
    ).json()
    est = one["estimate"]
    tpot = est["ranges"]["tpot_ms"]
    assert tpot["p10"] < est["tpot_ms"] < tpot["p90"]
    assert "Xeon AMX x vllm-cpu" in tpot["basis"] and "sources" in tpot["basis"]
    assert "as described (--cores/--smt): 8 vCPUs = 8 cores x 1 thread" in est["topology"]
    assert one["rows"][0]["ranges"] == est["ranges"]
    table = api.client.get(
        "/api/v1/estimate", params={"model": M, "accelerator_type": "gpu", "limit": 5}
    ).json()
    assert all(
        set(r["ranges"]) >= {"ttft_ms", "tpot_ms", "usd_per_million_output_tokens"} for r in table["rows"]
    )
    assert all(r["weight_format"] == "bf16" and r["like_for_like"] for r in table["rows"])
    fp8 = api.client.get(
        "/api/v1/estimate", params={"model": M, "instance_type": "g6.xlarge", "allow_quantization": True}
    ).json()["estimate"]
    assert fp8["weight_format"] == "fp8" and not fp8["like_for_like"] and not fp8["quantization_required"]
    bad = api.client.get("/api/v1/estimate", params={"model": M, "cores": 8})
    assert bad.status_code == 400 and "give --instance" in bad.text


def test_estimate_uses_stored_prices_and_benchmarks(api) -> None:
    api.store.upsert_prices([Price(instance_type="g6.2xlarge", region="us-east-1", tier=PriceTier.on_demand,
                                   usd_per_hour=0.5, effective_date="2099-01-01", source="aws-pricing-api")])  # fmt: skip
    api.store.create_run(kind="run", model=M, instance_type="g6.2xlarge", accelerator_type="gpu",
                         status=RunStatus.completed)  # fmt: skip
    row = api.client.get("/api/v1/estimate", params={"model": M, "instance_type": "g6.2xlarge"}).json()[
        "rows"
    ][0]
    assert row["hourly_usd"] == 0.5 and row["has_benchmark_data"] is True


@pytest.mark.parametrize(
    ("params", "status", "says"),
    [({"model": M, "slo": "fast"}, 400, "Bad SLO part"), ({"model": M, "concurrency": 0}, 422, "concurrency"),
     ({"model": M, "accelerator_type": "tpu"}, 422, "accelerator_type"), ({}, 422, "'model': required"),
     ({"model": M, "instance_type": "nope.large"}, 404, "instance type")],
)  # fmt: skip
def test_estimate_bad_input(api, params, status, says) -> None:
    r = api.client.get("/api/v1/estimate", params=params)
    assert r.status_code == status, r.text
    assert says in r.json()["error"]["message"]


def test_memory_breakdown(api) -> None:
    gpu = api.client.get("/api/v1/memory-breakdown", params={"model": M, "instance_type": "g6.2xlarge"})
    assert gpu.status_code == 200
    b = gpu.json()
    assert b["unit"] == "gpu" and b["verdict"] in ("fits", "clamps")
    assert {"weights", "kv_cache"} <= {i["name"] for i in b["items"]}
    neuron = api.client.get("/api/v1/memory-breakdown", params={"model": M, "instance_type": "inf2.8xlarge"})
    assert neuron.status_code == 200 and neuron.json()["unit"] == "neuron_core"
    cpu = api.client.get("/api/v1/memory-breakdown", params={"model": M, "instance_type": "m8i.2xlarge"})
    assert cpu.status_code == 400
    err = cpu.json()["error"]
    assert "CPU instance" in err["message"] and "recommend" in err["hint"]


@pytest.mark.parametrize("name", ["~no-such-user-here/model", "~no-such-user-here"])
@pytest.mark.parametrize("path", ["/api/v1/recommend", "/api/v1/estimate", "/api/v1/memory-breakdown"])
def test_model_names_the_os_cannot_read_are_bad_input(api, path, name) -> None:
    r = api.client.get(path, params={"model": name, "instance_type": "g6.2xlarge"})
    assert r.status_code == 400, r.text
    assert "Give a preset name" in r.json()["error"]["hint"]


@pytest.mark.parametrize("path", ["/api/v1/recommend", "/api/v1/estimate", "/api/v1/memory-breakdown"])
def test_a_name_too_long_for_a_path_is_an_unknown_model(api, path) -> None:
    # too long for the file system to stat: it cannot be a path, so it is looked up as a name like any other
    r = api.client.get(path, params={"model": "x" * 299, "instance_type": "g6.2xlarge"})
    assert r.status_code == 404, r.text
    assert "Unknown model" in r.json()["error"]["message"]


def test_settings_are_inputs_through_the_api(api) -> None:
    r = api.client.get(
        "/api/v1/recommend",
        params={"model": "llama-3.1-8b-instruct", "instance_type": "p5.48xlarge", "tensor_parallel_size": 8},
    )
    assert r.status_code == 200 and r.json()["settings"]["tensor_parallel_size"] == 8
    assert r.json()["memory"]["units"] == 8
    e = api.client.get(
        "/api/v1/estimate",
        params={
            "model": "llama-3.1-8b-instruct",
            "instance_type": "inf2.48xlarge",
            "concurrency": 4,
            "alternatives": True,
        },
    )
    assert e.status_code == 200
    est = e.json()["estimate"]
    assert est["tensor_parallel_size"] == 24  # every NeuronCore, as Neuron deployments run
    assert {a["tensor_parallel_size"] for a in est["alternatives"]} >= {2, 8, 16, 24}
    bad = api.client.get(
        "/api/v1/estimate", params={"model": "llama-3.1-8b-instruct", "tensor_parallel_size": 0}
    )
    assert bad.status_code in (400, 422) and "tensor_parallel_size" in bad.text
