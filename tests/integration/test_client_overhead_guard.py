"""The guard on the load generator's own speed: a short form of benchmarks/client_overhead.py measures
accelbench's client and vLLM's own (from the real engine the other tests use) side by side on the in-repo
zero-delay server, random prompts made with the real model's tokenizer, and fails when accelbench completes fewer
than three times vLLM's requests/s. It prints the ratios, never a time: a slowdown on the measuring path (work in
the measured window, as prompt making once was) cannot land unnoticed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from accelbench.deploy.engine_store import EngineInstall
from accelbench.deploy.model_store import PreparedModel

ROOT = Path(__file__).resolve().parents[2]
FLOOR = 3.0


def test_accelbench_completes_at_least_three_times_vllm_clients_requests_per_second(
    vllm_engine: EngineInstall, smollm2_model: PreparedModel
) -> None:
    assert smollm2_model.hf_dir, "the prepared model has a tokenizer directory"
    cmd = [
        sys.executable, str(ROOT / "benchmarks" / "client_overhead.py"), "--concurrency", "64", "--requests", "3000",
        "--repeats", "3", "--no-inline", "--dataset", "random", "--input-len", "128", "--tokens", "64",
        "--tokenizer", smollm2_model.hf_dir, "--vllm-python", vllm_engine.python, "--check-ratio", str(FLOOR),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=900)
    print(proc.stdout)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-3000:]}"
    assert "PASS: lowest ratio" in proc.stdout
