"""The service under concurrent requests: latency of the estimate and run-list endpoints, and no errors.

Starts ``accelbench serve --no-worker`` as its own process on a free port, over a fresh store (SQLite in a
temporary data dir, or ``--database-url`` for PostgreSQL) seeded with ``--runs`` stored runs (each with
cells and per-request records, like real sweeps), then drives it with an asyncio HTTP client at each
concurrency level and prints, per endpoint and level: requests, errors, throughput and p50 / p90 / p99 /
max latency, plus the p99/p50 ratio and how p50 grows from the lowest to the highest level.

Usage (from the repository root):
    python benchmarks/api_load.py                          # 300 runs; concurrency 1,8,32; 200 requests each
    python benchmarks/api_load.py --concurrency 1,16,64 --requests 400 --runs 2000
    python benchmarks/api_load.py --database-url postgresql+psycopg://user@host:5432/db --json out.json

Exit status 1 when any request failed (a non-2xx status or a transport error). The server and the client
share this machine: compare figures within one invocation, not across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]

ENDPOINTS: dict[str, tuple[str, dict[str, Any]]] = {
    "estimate (whole catalog)": (
        "/api/v1/estimate",
        {"model": "qwen2.5-7b-instruct", "input_len": 512, "output_len": 128, "concurrency": 8},
    ),
    "estimate (one instance)": (
        "/api/v1/estimate",
        {"model": "qwen2.5-7b-instruct", "instance_type": "g6.2xlarge", "concurrency": 8},
    ),
    "runs (page of 50)": ("/api/v1/runs", {"limit": 50}),
    "runs (filtered, offset)": (
        "/api/v1/runs",
        {"limit": 25, "offset": 50, "status": "completed", "accelerator_type": "cpu"},
    ),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed(database_url: str, runs: int) -> None:
    """Store ``runs`` runs with 4 cells each (records included), a quarter of them on a GPU instance."""
    sys.path.insert(0, str(ROOT / "src"))
    from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats
    from accelbench.domain.load import BenchConfig
    from accelbench.domain.request_record import RequestRecord
    from accelbench.domain.run import RunStatus
    from accelbench.store import Store

    store = Store(database_url)
    t0 = time.perf_counter()
    for i in range(runs):
        gpu = i % 4 == 0
        run = store.create_run(
            kind="run", label=f"load-{i}", model="smollm2-135m-instruct", engine="vllm" if gpu else "vllm-cpu",
            instance_type="g6.2xlarge" if gpu else "m8i.2xlarge", accelerator_type="gpu" if gpu else "cpu",
            spec={"engine": {"settings": {"max_model_len": 2048}}, "sweep": {"input_lens": [128, 512]}},
        )  # fmt: skip
        for il in (128, 512):
            for c in (1, 4):
                recs = [RequestRecord(index=k, prompt_len=il, output_tokens=32, ttft_s=0.2, latency_s=1.0,
                                      itl_s=[0.025] * 31, success=True) for k in range(4)]  # fmt: skip
                stats = MetricStats(count=4, mean=25.0, median=25.0, p50=25.0, p90=26.0, p95=27.0, p99=28.0)
                summary = BenchmarkSummary(
                    date="2026-01-01T00:00:00", config=BenchConfig(input_len=il, output_len=32, num_prompts=4),
                    num_prompts=4, completed=4, tpot_ms=stats, ttft_ms=stats, output_throughput=100.0 + c,
                    total_token_throughput=400.0 + c, requests=recs,
                )  # fmt: skip
                store.save_result(run.id, input_len=il, concurrency=c, repeat=0, summary=summary)
        store.set_status(run.id, RunStatus.completed if i % 10 else RunStatus.failed)
    store.dispose()
    print(
        f"seeded {runs} runs ({runs * 4} cells, {runs * 16} request records) in {time.perf_counter() - t0:.1f} s"
    )


def start_server(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "accelbench.cli.main", "serve", "--no-worker", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited: " + (proc.stderr.read().decode() if proc.stderr else ""))
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not answer /api/v1/health within 60 s")


async def load(base: str, path: str, params: dict[str, Any], concurrency: int, total: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    queue = iter(range(total))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as client:
        # one warm-up request: imports, catalog and model presets load on first use
        await client.get(path, params=params)

        async def worker() -> None:
            for _ in queue:
                t = time.perf_counter()
                try:
                    r = await client.get(path, params=params)
                    if r.status_code != 200:
                        errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
                    else:
                        r.json()
                except httpx.HTTPError as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                latencies.append((time.perf_counter() - t) * 1000)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "first_errors": errors[:3],
        "rps": len(latencies) / wall,
        "p50_ms": statistics.median(latencies),
        "p90_ms": q[89],
        "p99_ms": q[98],
        "max_ms": max(latencies),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", default="1,8,32", help="Comma-separated levels (default 1,8,32).")
    ap.add_argument("--requests", type=int, default=200, help="Requests per endpoint and level.")
    ap.add_argument("--runs", type=int, default=300, help="Runs stored before the load starts.")
    ap.add_argument("--database-url", default=None, help="PostgreSQL URL; default a temporary SQLite file.")
    ap.add_argument("--json", type=Path, default=None, help="Also write the figures as JSON here.")
    a = ap.parse_args()
    levels = [int(x) for x in a.concurrency.split(",") if x.strip()]
    with tempfile.TemporaryDirectory(prefix="accelbench-load-") as tmp:
        db = a.database_url or f"sqlite:///{Path(tmp) / 'load.db'}"
        seed(db, a.runs)
        port = free_port()
        env = {**os.environ, "ACCELBENCH_DATA_DIR": tmp, "ACCELBENCH_DATABASE_URL": db,
               "ACCELBENCH_API_TOKEN": secrets.token_urlsafe(16), "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
        server = start_server(env, port)
        results: dict[str, dict[int, dict[str, Any]]] = {}
        try:
            for name, (path, params) in ENDPOINTS.items():
                results[name] = {}
                for c in levels:
                    results[name][c] = asyncio.run(
                        load(f"http://127.0.0.1:{port}", path, params, c, a.requests)
                    )
        finally:
            server.terminate()
            server.wait(30)
    store = "PostgreSQL" if a.database_url else "SQLite"
    print(
        f"\naccelbench API under load: one server process, {store}, {a.runs} stored runs, {os.cpu_count()} CPUs"
    )
    head = f"{'endpoint':<26}{'conc':>5}{'reqs':>6}{'errors':>7}{'req/s':>9}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}{'p99/p50':>8}"
    print(head)
    print("-" * len(head))
    failed = 0
    for name, by_level in results.items():
        for c, r in by_level.items():
            failed += r["errors"]
            print(f"{name:<26}{c:>5}{r['requests']:>6}{r['errors']:>7}{r['rps']:>9.1f}{r['p50_ms']:>9.1f}"
                  f"{r['p90_ms']:>9.1f}{r['p99_ms']:>9.1f}{r['max_ms']:>9.1f}{r['p99_ms'] / r['p50_ms']:>8.2f}")  # fmt: skip
        lo, hi = by_level[levels[0]], by_level[levels[-1]]
        print(f"{'':<26}p50 at concurrency {levels[-1]} / at {levels[0]}: {hi['p50_ms'] / lo['p50_ms']:.2f}x; "
              f"throughput {hi['rps'] / lo['rps']:.2f}x")  # fmt: skip
        for r in by_level.values():
            for e in r["first_errors"]:
                print(f"{'':<26}error: {e}")
    print(f"\n{'no errors' if not failed else f'{failed} FAILED REQUESTS'}")
    if a.json:
        a.json.write_text(json.dumps({"runs": a.runs, "store": store, "results": results}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
