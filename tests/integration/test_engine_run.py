"""Whole runs with the real vLLM CPU engine and the real model: ``execute_run`` as ``accelbench run`` and the
API worker use it, ``accelbench rerun``, and ``accelbench demo`` exactly as the README says.

Engine start-ups are the expensive part (about 95 s each on 2 cores): the rerun test uses the session's
shared server through the ``endpoint`` target; only the tests that must start (ISA trace: the engine needs
oneDNN's trace in its environment), kill (the engine killed mid-sweep) or own the engine (the demo) start one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.deploy.orchestrator import create_run, execute_run
from accelbench.deploy.proctree import processes_in_group
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.run import CellStatus, EndpointTarget, RunStatus, SweepSpec
from accelbench.store import get_store
from accelbench.telemetry.isa import cpu_reports_amx, format_report
from tests.integration.conftest import SMOLLM2, vllm_spec

pytestmark = pytest.mark.engine


def _engine_processes_left(pgid: int, pids: list[int]) -> list[str]:
    """Anything of the engine still running: members of its process group, or any pid it ever had."""
    left = []
    for pid in set(processes_in_group(pgid)) | {p for p in pids if psutil.pid_exists(p)}:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{pid} {' '.join(proc.cmdline())[:120]}")
        except psutil.NoSuchProcess:
            continue
    return left


def test_run_with_isa_trace_on_the_real_engine(vllm_engine: object, smollm2_model: object) -> None:
    store = get_store()
    spec = vllm_spec(
        SMOLLM2,
        label="isa trace",
        isa_trace=True,
        sweep=SweepSpec(
            input_lens=[128], concurrency=[1, 2], repeats=1, output_len=16, prompts_per_concurrency=2
        ),
    )
    run = create_run(store, spec)
    final = execute_run(store, run.id)
    assert final.status == RunStatus.completed, final.error
    results = store.get_results(run.id)
    assert len(results) == 2 and all(r.failed == 0 and r.status == CellStatus.completed for r in results)
    assert final.extra["answer_check"]["passed"], final.extra["answer_check"]
    assert final.engine == "vllm-cpu" and final.engine_version == "0.32.0"
    assert final.environment["engine_env"]["ONEDNN_VERBOSE"] == "1"
    isa = final.extra["isa_trace"]
    print("\n" + format_report(__import__("accelbench.telemetry.isa", fromlist=["x"]).IsaTraceReport(**isa)))
    assert isa["available"] and isa["total_executions"] > 0
    assert sum(isa["by_primitive"].get("matmul", {}).values()) > 0
    if cpu_reports_amx():
        assert isa["amx_executions"] > 0, isa["verdict"]
    else:
        assert isa["amx_executions"] == 0
        assert isa["verdict"].startswith("No AMX kernels ran (this CPU has no AMX)")
    assert any("not comparable" in n for n in isa["notes"])
    assert Path(final.extra["run_dir"], "isa_trace.txt").exists()
    assert processes_in_group(final.extra["deployment"]["pid"]) == []


def test_engine_killed_mid_sweep(vllm_engine: object, smollm2_model: object) -> None:
    store = get_store()
    spec = vllm_spec(
        SMOLLM2,
        label="killed",
        sweep=SweepSpec(
            input_lens=[128], concurrency=[1], repeats=8, output_len=32, prompts_per_concurrency=3
        ),
    )
    run = create_run(store, spec)
    seen: dict[str, list[int]] = {}

    def killer() -> None:
        deadline = time.monotonic() + 1200
        while time.monotonic() < deadline:
            r = store.get_run(run.id)
            if r.status.finished:
                return
            if store.get_results(run.id) and "deployment" in r.extra:
                pid = r.extra["deployment"]["pid"]
                seen["pids"] = [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
                os.kill(pid, signal.SIGKILL)  # the server process only: its engine-core workers are orphaned
                return
            time.sleep(0.2)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    final = execute_run(store, run.id)
    t.join(30)
    assert "pids" in seen, "the engine was never killed"
    assert final.status == RunStatus.failed
    assert final.error and "exited with code -9" in final.error and "Last lines of its log" in final.error
    kept = store.get_results(run.id)
    assert kept and all(
        r.status in (CellStatus.completed, CellStatus.partial, CellStatus.failed) for r in kept
    )
    assert any(r.status == CellStatus.completed and r.failed == 0 for r in kept)
    assert len(seen["pids"]) > 1  # vLLM had worker processes: they must be gone too
    assert _engine_processes_left(seen["pids"][0], seen["pids"]) == []


def test_rerun_shows_new_figures_beside_the_old(vllm_endpoint: Endpoint) -> None:
    store = get_store()
    spec = vllm_spec(
        SMOLLM2,
        label="rerun me",
        sweep=SweepSpec(
            input_lens=[128], concurrency=[1, 2], repeats=1, output_len=16, prompts_per_concurrency=2
        ),
    ).model_copy(
        update={
            "target": EndpointTarget(
                base_url=vllm_endpoint.base_url,
                served_model=vllm_endpoint.served_model,
                tokenizer=vllm_endpoint.tokenizer,
            )
        }
    )
    first = execute_run(store, create_run(store, spec).id)
    assert first.status == RunStatus.completed, first.error
    assert all(r.failed == 0 for r in store.get_results(first.id))
    res = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["rerun", first.id, "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["rerun_of"] == first.id and data["run"]["id"] != first.id
    assert data["run"]["extra"]["rerun_of"] == first.id
    rows = {(r["input_len"], r["concurrency"]): r for r in data["comparison"]}
    assert set(rows) == {(128, 1), (128, 2)}
    for row in rows.values():
        tpot = row["tpot_p50_ms"]
        assert tpot["old"] > 0 and tpot["new"] > 0 and tpot["change_pct"] is not None
    assert store.get_run(data["run"]["id"]).spec == first.spec


def test_demo_the_readme_main_job(tmp_path: Path) -> None:
    """`accelbench demo` as a user runs it (a real process; engine installed and model prepared if missing)."""
    env = {**os.environ, "ACCELBENCH_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200"}
    exe = Path(sys.executable).parent / "accelbench"
    t0 = time.monotonic()
    proc = subprocess.run([str(exe), "demo"], capture_output=True, text=True, env=env, timeout=1700)
    wall = time.monotonic() - t0
    print(proc.stdout[-6000:], proc.stderr[-6000:], f"wall {wall:.0f} s", sep="\n")
    assert proc.returncode == 0, proc.stderr[-5000:]
    out = proc.stdout + proc.stderr
    assert "TTFT p50" in out and "Output tok/s" in out and "Demo wall time" in out
    assert "Answer check:" in out and "real words" in out
    assert "quality (probe): " in out  # the probe ran before the sweep
    report_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert (report_dir / "results.md").exists() and (report_dir / "results.csv").exists()
    import csv

    rows = list(csv.DictReader((report_dir / "results.csv").open()))
    assert len(rows) == 6  # 2 input lengths x 3 concurrency levels
