"""What the 95% intervals cost: every interval of a 64-cell sweep of 3 repeats x 1,000 requests.

Simulates per-request records (lognormal TTFT, normal TPOT, ``--output-len`` ITL gaps per request), then times
(1) the request-level bootstrap of every repeat (``bench.intervals.benchmark_intervals``: TTFT, TPOT, E2EL, ITL
at mean/median/p90/p95/p99 and the throughputs and goodput) and (2) the cells' two-stage intervals over their
repeats (``cell_interval``) for every aggregated metric, and prints each time against the one-second target as a
ratio (under 1.00 is within it). The ratio uses this process's CPU time, which a busy machine inflates far less
than wall time; both are printed.

Usage (from the repository root):
    python benchmarks/interval_cost.py                        # 64 cells x 3 repeats x 1000 requests
    python benchmarks/interval_cost.py --cells 16 --repeats 5 --requests 500 --output-len 256
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from accelbench.bench.intervals import RequestColumns, benchmark_intervals, cell_interval

TARGET_S = 1.0


def simulated_repeat(rng: np.random.Generator, requests: int, output_len: int) -> RequestColumns:
    ttft = rng.lognormal(np.log(0.2), 0.3, requests)
    tpot = rng.normal(0.02, 0.002, requests).clip(0.001)
    itl = [rng.normal(t, t * 0.2, output_len - 1).clip(0.0) for t in tpot]
    return RequestColumns(
        ttft_s=ttft,
        e2el_s=ttft + tpot * (output_len - 1),
        tpot_s=tpot,
        has_tpot=np.ones(requests, dtype=bool),
        itl_s=np.concatenate(itl),
        itl_counts=np.full(requests, output_len - 1),
        input_tokens=np.full(requests, 512.0),
        output_tokens=np.full(requests, float(output_len)),
        good=(ttft < 0.25).astype(np.float64),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--output-len", type=int, default=128)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    data = [
        [simulated_repeat(rng, args.requests, args.output_len) for _ in range(args.repeats)]
        for _ in range(args.cells)
    ]
    c0, t0 = time.process_time(), time.perf_counter()
    per_repeat = [[benchmark_intervals(rep, 60.0) for rep in cell] for cell in data]
    c1, t1 = time.process_time(), time.perf_counter()
    figures = 0
    for cell_data, cell in zip(data, per_repeat, strict=True):
        for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
            for stat in ("p50", "p90", "p95", "p99"):
                values = [float(np.median(rep.ttft_s)) * 1000 for rep in cell_data]
                cell_interval(values, [rep[metric][stat] for rep in cell])
                figures += 1
        for key in ("output_throughput", "total_token_throughput", "request_throughput", "request_goodput"):
            cell_interval([1.0] * len(cell), [rep["throughput"][key] for rep in cell])
            figures += 1
    c2, t2 = time.process_time(), time.perf_counter()
    n = args.cells * args.repeats
    print(
        f"{args.cells} cells x {args.repeats} repeats x {args.requests} requests, {args.output_len} tokens each"
    )
    print(
        f"request-level intervals of {n} repeats: {c1 - c0:.3f} s CPU, {t1 - t0:.3f} s wall "
        f"({(c1 - c0) / n * 1000:.2f} ms CPU per repeat)"
    )
    print(f"cell intervals over repeats ({figures} figures): {c2 - c1:.3f} s CPU, {t2 - t1:.3f} s wall")
    cpu, wall = c2 - c0, t2 - t0
    print(
        f"total {cpu:.3f} s CPU ({wall:.3f} s wall); ratio to the {TARGET_S:g} s target: {cpu / TARGET_S:.2f}"
    )


if __name__ == "__main__":
    main()
