"""A refusal from `recommend` and `estimate` gives a way forward: the reason once, the cheapest instances that
fit with their predicted speed and cost (the kind asked for first), and the changes of the user's own settings
that would make the instance work, offered as the user's choice (the shipped catalog and presets)."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from accelbench.cli.main import app

runner = CliRunner(env={"COLUMNS": "200"})


def test_an_infeasible_estimate_lists_the_instances_that_fit_with_their_predictions() -> None:
    res = runner.invoke(app, ["estimate", "-m", "llama-3.1-70b-instruct", "-i", "g6.xlarge"])
    assert res.exit_code == 3, res.output
    out = res.stdout
    assert "candidates are listed below" not in out
    assert "Cheapest instances that fit (predicted at 512 in / 128 out tokens, 1 in flight)" in out
    assert out.count("does not fit g6.xlarge") == 1  # the reason, said once
    assert "No change of your own settings makes g6.xlarge serve it." in out
    data = json.loads(
        runner.invoke(
            app, ["estimate", "-m", "llama-3.1-70b-instruct", "-i", "g6.xlarge", "-f", "json"]
        ).stdout
    )
    alts = data["recommendation"]["alternatives"]
    assert alts and alts[0]["accelerator_type"] == "gpu"
    for a in alts:
        assert a["tpot_ms"] > 0 and a["output_tokens_per_s"] > 0 and a["usd_per_million_output_tokens"] > 0
        assert a["instance"] in out
    prices = [a["hourly_usd"] for a in alts if a["accelerator_type"] == "gpu"]
    assert prices == sorted(prices)


def test_a_setting_change_that_makes_the_instance_work_is_offered_as_a_choice() -> None:
    args = [
        "estimate",
        "-m",
        "llama-3.1-8b-instruct",
        "-i",
        "g6.xlarge",
        "-q",
        "none",
        "--min-context",
        "131072",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 3, res.output
    assert "your choice, not applied" in res.stdout and "--max-model-len 16384: fits with bf16" in res.stdout
    data = json.loads(runner.invoke(app, [*args, "-f", "json"]).stdout)
    (change,) = [c for c in data["recommendation"]["refusal"]["changes"] if c["setting"] == "max_model_len"]
    assert (
        change["value"] == "16384" and change["tpot_ms"] > 0 and change["usd_per_million_output_tokens"] > 0
    )


def test_recommend_prices_its_alternatives_and_says_its_reason_once() -> None:
    res = runner.invoke(app, ["recommend", "-m", "qwen2.5-7b-instruct", "-i", "g6.xlarge", "--tp", "3"])
    assert res.exit_code == 3, res.output
    out = res.stdout
    assert out.count("Tensor parallel 3 needs 3 GPUs") == 1
    assert "--tensor-parallel-size 1:" in out and "or less" not in out
    data = json.loads(
        runner.invoke(
            app, ["recommend", "-m", "qwen2.5-7b-instruct", "-i", "g6.xlarge", "--tp", "3", "-f", "json"]
        ).stdout
    )
    assert data["alternatives"][0]["accelerator_type"] == "gpu" and data["alternatives"][0]["tpot_ms"] > 0
    (change,) = data["refusal"]["changes"]
    assert change["flag"] == "--tensor-parallel-size 1" and change["tpot_ms"] > 0


def test_recommend_does_not_say_the_full_context_fits_when_it_shortens_it() -> None:
    res = runner.invoke(app, ["recommend", "-m", "qwen2.5-7b-instruct", "-i", "g6.xlarge"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "FITS only with a shorter context" in out
    assert "full context fits" not in out and "too little memory" not in out
    flat = " ".join(out.split())
    (kv,) = re.findall(r"the KV cache holds ([\d,]+) tokens", flat)
    assert f"the KV budget holds {kv} tokens" in flat  # the verdict and the reason quote the same KV budget
