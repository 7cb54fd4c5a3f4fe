"""One set of checks before anything is stored or started, on the CLI path (`accelbench run`) and the API
path (`POST /api/v1/runs`): the cases where the two used to disagree get the same answer from both, and no run
is stored; and the dry runs of both agree on the runtime, the exact argv and the environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.store import get_store
from tests.support.api_app import api_for

SMALL = "smollm2-135m-instruct"
KV1 = {"kv_cache_space_gib": 1}
runner = CliRunner(env={"COLUMNS": "200"})


def _cli(tmp_path: Path, spec: dict[str, Any], *args: str) -> Any:
    f = tmp_path / "spec.yaml"
    f.write_text(yaml.safe_dump(spec))
    return runner.invoke(app, ["run", str(f), *args])


REFUSED = {
    "fp8 KV cache on CPU": (
        {"model": SMALL, "engine": {"name": "vllm-cpu", "settings": {**KV1, "kv_cache_dtype": "fp8"}}},
        "kv_cache_dtype=fp8 is not supported on CPU",
    ),
    "a request longer than the context": (
        {
            "model": SMALL,
            "engine": {"name": "vllm-cpu", "settings": {**KV1, "max_model_len": 2048}},
            "sweep": {"input_lens": [4096], "concurrency": [1], "output_len": 32},
        },
        "= 4128 tokens at most, which is more than 2048",
    ),
    "longer than llama.cpp's default context": (
        {"model": SMALL, "engine": {"name": "llamacpp"}, "sweep": {"input_lens": [4000], "concurrency": [1]}},
        "llamacpp's default",
    ),
    "tensor parallel above the NUMA nodes": (
        {"model": SMALL, "engine": {"name": "vllm-cpu", "settings": {**KV1, "tensor_parallel_size": 8}}},
        "exceeds the",
    ),
    "a dense 32B BF16 model on CPU": (
        {"model": "qwen2.5-32b-instruct", "engine": {"name": "vllm-cpu", "settings": KV1}},
        "above the CPU ceiling",
    ),
    "a misspelled model": (
        {"model": "smollm2-135m-instrct", "engine": {"settings": KV1}},
        "smollm2-135m-instruct",
    ),
    "a misspelled runtime": ({"model": SMALL, "engine": {"name": "vllm-cpuu"}}, "vllm-cpu"),
    "a planning preset with no weights here": (
        {"model": "qwen2.5-0.5b-instruct", "engine": {"settings": KV1}},
        "is a planning preset",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_cli_and_api_refuse_the_same_specs_and_store_nothing(case: str, tmp_path: Path) -> None:
    spec, expected = REFUSED[case]
    res = _cli(tmp_path, spec)
    assert res.exit_code != 0, res.output
    assert expected in res.output, res.output
    assert "Traceback" not in res.output
    store = get_store()
    with api_for(store) as api:
        r = api.client.post("/api/v1/runs", json=spec, headers=api.auth)
        assert r.status_code == 400, r.text
        assert expected in r.text
        message = r.json()["error"]["message"] if "error" in r.json() else r.json()["detail"]
        assert str(message).splitlines()[0][:60] in " ".join(res.output.split()), (message, res.output)
    assert store.list_runs()[1] == 0  # neither path stored a run (nor started anything)


DRY = {
    "local CPU": {"model": SMALL, "engine": {"name": "vllm-cpu", "settings": KV1}},
    "EC2 GPU without an engine name": {
        "model": "qwen2.5-7b-instruct",
        "instance_type": "g6.2xlarge",
        "target": {"kind": "ec2"},
    },
    "Kubernetes Neuron": {
        "model": "llama-3.1-8b-instruct",
        "instance_type": "inf2.8xlarge",
        "target": {"kind": "kubernetes"},
    },
}


@pytest.mark.parametrize("case", list(DRY))
def test_cli_and_api_dry_runs_agree(case: str, tmp_path: Path) -> None:
    spec = DRY[case]
    res = _cli(tmp_path, spec, "--dry-run", "--format", "json")
    assert res.exit_code == 0, res.output
    cli = json.loads(res.stdout)
    store = get_store()
    with api_for(store) as api:
        r = api.client.post("/api/v1/runs", params={"dry_run": "true"}, json=spec, headers=api.auth)
        assert r.status_code == 200, r.text
        got = r.json()
    assert got == cli
    assert cli["dry_run"] is True and cli["argv"] and cli["cells"]
    expected_runtime = {
        "local CPU": "vllm-cpu",
        "EC2 GPU without an engine name": "vllm",
        "Kubernetes Neuron": "vllm-neuron",
    }
    assert cli["runtime"] == expected_runtime[case]
    # the planner's prediction of the load: every cell, the whole (warm-ups in), its cost where priced
    assert all(c["predicted_s"] > 0 for c in cli["cells"])
    per_cell = sum(c["predicted_s"] * c["repeats"] for c in cli["cells"])
    assert cli["predicted_duration_s"] >= per_cell
    if case == "local CPU":
        assert cli["predicted_cost_usd"] is None and "no price" in " ".join(cli["prediction_notes"])
    else:
        expected_cost = cli["hourly_usd"] * cli["predicted_duration_s"] / 3600
        assert cli["predicted_cost_usd"] == pytest.approx(expected_cost, abs=1e-4)
    assert store.list_runs()[1] == 0
    table = _cli(tmp_path, spec, "--dry-run")
    assert table.exit_code == 0 and "nothing stored or started" in table.output
    assert "min of load" in table.output


def test_a_duplicated_key_is_refused_by_run_and_by_export(tmp_path: Path) -> None:
    f = tmp_path / "dup.yaml"
    f.write_text(f"model: {SMALL}\nmodel: qwen2.5-7b-instruct\n")
    for args in (
        ["run", str(f)],
        ["export", "--spec", str(f), "--instance", "g6.2xlarge", "--out", str(tmp_path / "m")],
    ):
        res = runner.invoke(app, args)
        assert res.exit_code != 0 and "duplicated key 'model'" in res.output, (args, res.output)


def test_one_quantization_vocabulary_w8a8_is_int8_everywhere(tmp_path: Path) -> None:
    """w8a8 was int8 to the planner and unknown to the guards, whose own hint said "use int8 (W8A8)"."""
    base = {
        "model": "qwen2.5-32b-instruct",
        "instance_type": "r8g.16xlarge",
        "target": {"kind": "kubernetes"},
    }
    plans = {}
    for q in ("int8", "w8a8"):
        spec = {**base, "engine": {"settings": {"quantization": q}}}
        res = _cli(tmp_path, spec, "--dry-run", "--format", "json")
        assert res.exit_code == 0, res.output
        with api_for(get_store()) as api:
            r = api.client.post("/api/v1/runs", params={"dry_run": "true"}, json=spec, headers=api.auth)
        assert r.status_code == 200, r.text
        assert r.json() == json.loads(res.stdout)
        plans[q] = r.json()
    assert plans["w8a8"]["argv"] == plans["int8"]["argv"]
    assert "compressed-tensors" in plans["w8a8"]["argv"]
    bad = _cli(tmp_path, {**base, "engine": {"settings": {"quantization": "w9a9"}}}, "--dry-run")
    assert bad.exit_code != 0 and "unknown quantization 'w9a9'" in bad.output and "w8a8" in bad.output


def test_recommend_and_estimate_refuse_a_request_longer_than_the_models_context() -> None:
    """qwen2.5-7b-instruct has a 32,768-token context; 40,000 input tokens used to "fit"."""
    model, inst = "qwen2.5-7b-instruct", "g6.2xlarge"
    res = runner.invoke(
        app, ["recommend", "--model", model, "--instance", inst, "--input-len", "40000", "--format", "json"]
    )
    assert res.exit_code == 3, res.output  # refused
    cli = json.loads(res.stdout)
    assert not cli["fits"] and cli["refusal"]["code"] == "context_does_not_fit"
    with api_for(get_store()) as api:
        r = api.client.get(
            "/api/v1/recommend", params={"model": model, "instance_type": inst, "input_len": 40000}
        )
        assert r.status_code == 200 and r.json()["refusal"] == cli["refusal"]
        est = api.client.get("/api/v1/estimate", params={"model": model, "input_len": 40000})
        assert est.status_code == 400 and "longer than qwen2.5-7b-instruct's context" in est.text
    res = runner.invoke(app, ["estimate", "--model", model, "--input-len", "40000", "--output-len", "128"])
    assert res.exit_code != 0 and "longer than qwen2.5-7b-instruct's context of 32,768" in res.output


def test_estimate_has_one_set_of_defaults_in_the_cli_the_api_and_the_page() -> None:
    """The CLI needed --input-len and --output-len, the API defaulted them to 512 / 128, and the row limits were
    25, 100 and 200; now every shell reads EstimateQuery."""
    import inspect

    from accelbench.cli.plan import estimate_cmd
    from accelbench.domain.plan_query import EstimateQuery

    fields = EstimateQuery.model_fields
    cli = inspect.signature(estimate_cmd).parameters
    with api_for(get_store()) as api:
        spec = api.client.get("/openapi.json").json()
        params = {p["name"]: p for p in spec["paths"]["/api/v1/estimate"]["get"]["parameters"]}
        for name in ("input_len", "output_len", "concurrency", "limit", "arrivals"):
            assert cli[name].default.default == fields[name].default, name
            assert params[name]["schema"].get("default") == fields[name].default, name
        model = "qwen2.5-7b-instruct"
        r = api.client.get("/api/v1/estimate", params={"model": model, "instance_type": "g6.2xlarge"})
        api_est = r.json()["estimate"]
    res = runner.invoke(app, ["estimate", "--model", model, "--instance", "g6.2xlarge", "--format", "json"])
    assert res.exit_code == 0, res.output
    cli_est = json.loads(res.stdout)
    for key in ("input_len", "output_len", "concurrency", "feasible", "ttft_ms", "tpot_ms"):
        assert cli_est[key] == api_est[key], key


EXPORT_REFUSED = {
    "fp8 KV cache on a CPU node": (
        {"model": "qwen2.5-7b-instruct", "engine": {"settings": {"kv_cache_dtype": "fp8"}}},
        "kv_cache_dtype=fp8 is not supported on CPU",
    ),
    "a request longer than the context": (
        {
            "model": "qwen2.5-7b-instruct",
            "engine": {"settings": {"max_model_len": 2048}},
            "sweep": {"input_lens": [4096], "concurrency": [1], "output_len": 32},
        },
        "which is more than 2048",
    ),
}


@pytest.mark.parametrize("case", list(EXPORT_REFUSED))
def test_export_refuses_what_a_kubernetes_run_would_be_refused(case: str, tmp_path: Path) -> None:
    """`export` runs the same preflight: the manifests it writes describe a run the API would accept."""
    spec, expected = EXPORT_REFUSED[case]
    f = tmp_path / "spec.yaml"
    f.write_text(yaml.safe_dump(spec))
    out = tmp_path / "m"
    res = runner.invoke(app, ["export", "--spec", str(f), "--instance", "r8g.4xlarge", "--out", str(out)])
    assert res.exit_code != 0 and expected in " ".join(res.output.split()), res.output
    assert not out.exists() or not list(out.iterdir())  # nothing written
    forced = runner.invoke(
        app, ["export", "--spec", str(f), "--instance", "r8g.4xlarge", "--out", str(out), "--force"]
    )
    assert forced.exit_code != 0 and expected in " ".join(
        forced.output.split()
    )  # --force overrides a misfit only
    body = {**spec, "instance_type": "r8g.4xlarge", "target": {"kind": "kubernetes"}}
    with api_for(get_store()) as api:
        r = api.client.post("/api/v1/runs", json=body, headers=api.auth)
    assert r.status_code == 400 and expected in r.text
