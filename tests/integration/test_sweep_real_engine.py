"""The sweep against the real vLLM CPU engine serving the real small model (the session's shared server).

2 input lengths x 2 concurrency levels x 2 repeats through the product's own command: zero failures, the
server's usage.prompt_tokens equal to the requested input length for every request, the server's own prompt
token counter (scraped from /metrics) moving by exactly what was sent, and the sweep's files written.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.store import get_store

pytestmark = pytest.mark.engine

INPUT_LENS = (128, 512)
CONCURRENCY = (1, 4)
REPEATS = 2
OUTPUT_LEN = 32
PROMPTS_PER_CONCURRENCY = 4


def test_sweep_on_real_vllm_cpu(vllm_endpoint: Endpoint, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    args = [
        "sweep",
        "--base-url",
        vllm_endpoint.base_url,
        "--model",
        vllm_endpoint.served_model,
        "--input-lens",
        ",".join(map(str, INPUT_LENS)),
        "--concurrency",
        ",".join(map(str, CONCURRENCY)),
        "--repeats",
        str(REPEATS),
        "--output-len",
        str(OUTPUT_LEN),
        "--prompts-per-concurrency",
        str(PROMPTS_PER_CONCURRENCY),
        "--label",
        "real-vllm-cpu",
        "--out",
        str(out),
        "--format",
        "json",
    ]
    if vllm_endpoint.tokenizer:
        args += ["--tokenizer", vllm_endpoint.tokenizer]
    res = CliRunner(env={"COLUMNS": "200"}).invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["status"] == "completed" and data["cells_done"] == data["cells_total"] == 8

    store = get_store()
    run = store.get_run(data["run_id"])
    assert run.status == RunStatus.completed
    assert run.engine == "vllm" and run.engine_version  # from the server's /version
    assert run.environment["engine"]["version"] == run.engine_version
    results = store.get_results(run.id)
    assert len(results) == len(INPUT_LENS) * len(CONCURRENCY) * REPEATS
    for r in results:
        assert r.status == CellStatus.completed
        assert r.failed == 0, r.summary.get("errors")
        assert r.completed == r.num_prompts == r.concurrency * PROMPTS_PER_CONCURRENCY
        summary = store.get_summary(r.id)
        assert summary.output_tokens_source == "usage"
        for req in summary.requests:
            assert req.success, req.error
            assert req.server_prompt_tokens == r.input_len, (r.input_len, req.index, req.server_prompt_tokens)
            assert req.output_tokens == OUTPUT_LEN  # ignore_eos: every request makes output_len tokens
        assert summary.prompt_token_check.mismatched == 0
        # the server's own counter moved by exactly the prompt tokens of this cell (warmup excluded)
        assert summary.telemetry.available
        assert summary.telemetry.deltas["prompt_tokens"] == r.num_prompts * r.input_len
        assert summary.telemetry.deltas["generation_tokens"] == r.num_prompts * OUTPUT_LEN
        assert r.ttft_p50_ms and r.tpot_p50_ms and r.itl_p50_ms and r.e2el_p50_ms and r.output_throughput
        assert 1.0 < r.tpot_p50_ms < 1000.0

    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(int(x["input_len"]), int(x["concurrency"])) for x in rows] == [
        (i, c) for i in INPUT_LENS for c in CONCURRENCY
    ]
    assert all(x["failed"] == "0" and x["repeats"] == "2" for x in rows)
    assert len(list((out / "repeats").glob("*.json"))) == 8
    assert (out / "tpot_vs_concurrency.png").stat().st_size > 5000
    md = (out / "results.md").read_text()
    assert "vllm" in md and "| 512 | 4 |" in md
    # the table people read, in the test log
    print("\n" + md)
