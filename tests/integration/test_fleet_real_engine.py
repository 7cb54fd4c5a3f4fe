"""`fleet --validate` on the real vLLM CPU engine with SmolLM2-135M (the session's shared server): this machine's
plan (the planner's capacity for `local`, from its probe) replayed at its per-server load through the trace
dataset, the measured SLO attainment beside the promised one, stored as a bench run with its cell."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.run import RunStatus
from accelbench.store import get_store

pytestmark = pytest.mark.engine

runner = CliRunner(env={"COLUMNS": "200"})
PROFILE = "interval_s: 600\ninput_tokens: 128\noutput_tokens: 16\nintervals:\n" + "".join(
    f"  - requests_per_s: {r}\n" for r in (0.2, 0.5, 1.0, 0.3)
)


def test_replay_on_the_real_engine_reports_measured_and_promised(
    vllm_endpoint: Endpoint, tmp_path: Path, cpu_path: Callable[[str], None]
) -> None:
    traffic = tmp_path / "day.yaml"
    traffic.write_text(PROFILE)
    res = runner.invoke(app, ["fleet", "--traffic", str(traffic), "--model", "smollm2-135m-instruct",
                              "--slo", "ttft:3000,tpot:300", "--instances", "local", "--validate",
                              "--base-url", vllm_endpoint.base_url, "--served-model", vllm_endpoint.served_model,
                              "--validate-requests", "24", "--format", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    local = data["candidates"][0]
    assert local["instance"] == "local" and local["capacity_source"] == "predicted"
    v = data["validation"]
    assert v["requests"] == 24 and v["promised_attainment"] == 0.95
    assert v["measured_attainment"] is not None and 0.0 <= v["measured_attainment"] <= 1.0
    assert {"ttft", "tpot"} <= set(v["percentiles"])
    run = get_store().get_run(v["run_id"])
    assert run.kind == "bench" and run.status == RunStatus.completed
    (result,) = get_store().get_results(run.id)
    assert result.summary["completed"] == 24
    cpu_path(
        f"fleet replay on vLLM CPU: {v['requests_per_s']:.3g} req/s per server (capacity "
        f"{v['capacity_requests_per_s']:.3g} predicted), measured {v['measured_attainment']:.0%} within "
        f"{v['slo']}, promised >= {v['promised_attainment']:.0%}: {v['why']}"
    )
