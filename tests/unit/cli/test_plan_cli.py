"""`accelbench recommend | memory-breakdown | estimate | plan calibrate`: JSON on stdout, tables, exit codes."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.store.repo import Store
from tests.support.plan_data import add_sweep

runner = CliRunner(env={"COLUMNS": "220"})


def run_json(*args: str, code: int = 0) -> Any:
    res = runner.invoke(app, [*args, "--format", "json"])
    assert res.exit_code == code, res.output
    return json.loads(res.stdout)


def test_recommend_json_and_table() -> None:
    data = run_json("recommend", "--model", "qwen2.5-7b-instruct", "--instance", "g6.xlarge")
    assert data["fits"] is True and data["settings"]["tensor_parallel_size"] == 1
    assert data["settings"]["kv_cache_dtype"] == "auto" and data["reasons"]  # vLLM's default: the model dtype
    res = runner.invoke(app, ["recommend", "-m", "qwen2.5-7b-instruct", "-i", "r8g.4xlarge"])
    assert res.exit_code == 0
    assert "VLLM_CPU_KVCACHE_SPACE" in res.stdout and "41" in res.stdout
    assert "memory-bandwidth-bound" in res.stdout


def test_recommend_refusal_exits_non_zero_and_still_prints_json() -> None:
    data = run_json("recommend", "-m", "qwen2.5-32b-instruct", "-i", "r8g.16xlarge", code=3)
    assert data["fits"] is False
    assert data["refusal"]["code"] == "dense_too_large_for_cpu"
    assert data["refusal"]["way_forward"] and data["bandwidth"]["tpot_floor_ms"] > 0
    res = runner.invoke(app, ["recommend", "-m", "llama-3.1-70b-instruct", "-i", "g5.xlarge"])
    assert res.exit_code == 3 and "Refused" in res.stdout and "Cheapest instances that fit" in res.stdout


def test_recommend_unknown_names_are_errors() -> None:
    res = runner.invoke(app, ["recommend", "-m", "qwen2.5-7b-instrct", "-i", "g6.xlarge"])
    assert res.exit_code == 2 and "Did you mean" in res.output
    res = runner.invoke(app, ["recommend", "-m", "qwen2.5-7b-instruct", "-i", "g6.xlarg"])
    assert res.exit_code == 2 and "g6.xlarge" in res.output


def test_memory_breakdown() -> None:
    data = run_json("memory-breakdown", "-m", "llama-3.1-8b-instruct", "-i", "g6e.xlarge")
    assert data["verdict"] in ("fits", "clamps") and {i["name"] for i in data["items"]} >= {
        "weights",
        "kv_cache",
        "activations_and_overhead",
        "block_table",
        "quantization_metadata",
    }
    res = runner.invoke(app, ["memory-breakdown", "-m", "llama-3.1-8b-instruct", "-i", "r8g.4xlarge"])
    assert res.exit_code == 2
    assert "CPU instance" in res.output and "accelbench recommend" in res.output


def test_estimate_one_instance_and_catalog() -> None:
    one = run_json(
        "estimate",
        "-m",
        "llama-3.1-8b-instruct",
        "-i",
        "p5.4xlarge",
        "--input-len",
        "512",
        "--output-len",
        "128",
        "-c",
        "4",
    )
    assert one["feasible"] and one["tpot_ms"] > 0 and one["usd_per_million_output_tokens"] > 0
    tab = run_json(
        "estimate",
        "-m",
        "llama-3.1-8b-instruct",
        "--input-len",
        "512",
        "--output-len",
        "128",
        "-c",
        "8",
        "--slo",
        "ttft:1000,tpot:50",
    )
    assert len(tab["rows"]) > 100 and tab["summary"]["slo_choice"]
    assert tab["elapsed_ms"] > 0
    gpu = run_json(
        "estimate",
        "-m",
        "qwen2.5-7b-instruct",
        "-a",
        "gpu",
        "--max-cost",
        "2",
        "--input-len",
        "256",
        "--output-len",
        "64",
    )
    assert all(r["accelerator_type"] == "gpu" for r in gpu["rows"])
    res = runner.invoke(
        app,
        [
            "estimate",
            "-m",
            "qwen2.5-7b-instruct",
            "-a",
            "cpu",
            "--input-len",
            "256",
            "--output-len",
            "64",
            "--limit",
            "5",
        ],
    )
    assert res.exit_code == 0 and "$/1M out" in res.stdout and "more feasible rows" in res.stdout
    steady = run_json(
        "estimate",
        "-m",
        "qwen2.5-7b-instruct",
        "-i",
        "g6.xlarge",
        "--input-len",
        "256",
        "--output-len",
        "64",
        "-c",
        "4",
        "--arrivals",
        "steady",
    )
    assert steady["arrivals"] == "steady"
    local = runner.invoke(
        app,
        [
            "estimate",
            "-m",
            "smollm2-135m-instruct",
            "-i",
            "local",
            "--input-len",
            "128",
            "--output-len",
            "32",
        ],
    )
    assert local.exit_code == 0 and "local" in local.stdout
    bad = runner.invoke(
        app,
        ["estimate", "-m", "qwen2.5-7b-instruct", "--input-len", "1", "--output-len", "1", "--slo", "fast"],
    )
    assert bad.exit_code == 2 and "Bad SLO" in bad.output
    infeasible = runner.invoke(
        app,
        [
            "estimate",
            "-m",
            "llama-3.1-70b-instruct",
            "-i",
            "g5.xlarge",
            "-q",
            "none",
            "--input-len",
            "1",
            "--output-len",
            "1",
        ],
    )
    assert infeasible.exit_code == 3 and "Not feasible" in infeasible.stdout


def test_plan_calibrate_and_estimates_say_calibrated(store: Store) -> None:
    add_sweep(store, model="smollm2-135m-instruct", instance_type="r8g.xlarge", environment={})
    data = run_json("plan", "calibrate")
    g = data["groups"][0]
    assert g["accelerator"] == "Graviton4" and g["engine"] == "vllm-cpu" and g["saved_id"]
    assert g["error_after"]["tpot_mape_pct"] < g["error_before"]["tpot_mape_pct"]
    res = runner.invoke(app, ["plan", "calibrate", "--dry-run"])
    assert res.exit_code == 0 and "Mean absolute error: TPOT" in res.stdout and "dry run" in res.stdout
    est = run_json(
        "estimate",
        "-m",
        "smollm2-135m-instruct",
        "-i",
        "r8g.xlarge",
        "--input-len",
        "128",
        "--output-len",
        "32",
    )
    assert est["calibrated"] is True and est["calibration"]["id"] == g["saved_id"]
    table = runner.invoke(
        app,
        [
            "estimate",
            "-m",
            "smollm2-135m-instruct",
            "-a",
            "cpu",
            "--input-len",
            "128",
            "--output-len",
            "32",
            "--limit",
            "200",
        ],
    )
    assert "calibrated from measured runs: Graviton4/vllm-cpu" in table.stdout
    off = run_json(
        "estimate",
        "-m",
        "smollm2-135m-instruct",
        "-i",
        "r8g.xlarge",
        "--input-len",
        "128",
        "--output-len",
        "32",
        "--no-calibration",
    )
    assert off["calibrated"] is False


def test_plan_calibrate_without_runs(store: Store) -> None:
    res = runner.invoke(app, ["plan", "calibrate"])
    assert res.exit_code == 2 and "No measured run" in res.output


def test_settings_flags_on_recommend_and_estimate() -> None:
    rec = run_json(
        "recommend", "-m", "llama-3.1-8b-instruct", "-i", "p5.48xlarge", "--tp", "8", "--max-num-seqs", "64"
    )
    assert rec["settings"]["tensor_parallel_size"] == 8 and rec["settings"]["max_num_seqs"] == 64
    assert rec["memory"]["units"] == 8
    refused = run_json("recommend", "-m", "llama-3.1-8b-instruct", "-i", "p5.48xlarge", "--tp", "3", code=3)
    assert refused["refusal"]["code"] == "no_valid_tensor_parallel"
    cpu = run_json(
        "recommend",
        "-m",
        "qwen2.5-7b-instruct",
        "-i",
        "r8g.4xlarge",
        "--kv-cache-space-gib",
        "8",
        "--threads",
        "8",
    )
    assert cpu["settings"]["kv_cache_space_gib"] == 8 and cpu["settings"]["threads"] == 8
    est = run_json(
        "estimate",
        "-m",
        "llama-3.1-8b-instruct",
        "-i",
        "p5.48xlarge",
        "-c",
        "16",
        "--goal",
        "latency",
        "--alternatives",
        "--kv-cache-dtype",
        "fp8",
        "--engine",
        "sglang",
    )
    assert est["goal"] == "latency" and est["engine"] == "sglang"
    assert {a["tensor_parallel_size"] for a in est["alternatives"]} == {1, 2, 4, 8}
    assert sum(a["chosen"] for a in est["alternatives"]) == 1
    assert est["recommendation"]["settings"]["kv_cache_dtype"] == "fp8"
    table = runner.invoke(
        app, ["estimate", "-m", "llama-3.1-8b-instruct", "-i", "p5.48xlarge", "--tp", "2", "--alternatives"]
    )
    assert table.exit_code == 0 and "Settings weighed" in table.stdout
    bad = runner.invoke(
        app, ["estimate", "-m", "llama-3.1-8b-instruct", "-i", "g6.xlarge", "--engine", "llamacpp"]
    )
    assert bad.exit_code != 0 and "does not serve gpu" in bad.output


def test_estimate_text_says_which_figure_each_range_basis_is_for() -> None:
    args = ["estimate", "-m", "qwen2.5-7b-instruct", "-i", "m8i.2xlarge", "--engine", "vllm-cpu"]
    args += [
        "--kv-cache-space-gib",
        "4",
        "--no-calibration",
        "-c",
        "8",
        "--input-len",
        "512",
        "--output-len",
        "128",
    ]
    data = run_json(*args)
    bases = {data["ranges"][k]["basis"] for k in ("tpot_ms", "ttft_ms")}
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    if len(bases) == 1:
        assert text.count("80% ranges from") == 1
    else:  # TPOT and TTFT rest on different rows: each line names its figure
        assert "TPOT range from" in text and "TTFT range from" in text and "80% ranges from" not in text
