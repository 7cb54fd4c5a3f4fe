"""The matrix-multiply half of ``accelbench machine probe``, as a script another Python can run.

It imports only the standard library and then torch (BF16) or numpy (float32), never accelbench, so an
installed engine's own interpreter (which has torch) can run it: ``telemetry/probe.py`` passes this file's
text to ``python -I -c`` with one JSON argument, and reads one JSON line back from stdout. One process per
thread count for numpy (BLAS thread pools read their size from the environment when they load); torch
measures every count in one process (``torch.set_num_threads``).

Argument: ``{"library": "torch"|"numpy"|"auto", "threads": [int, ...], "shapes": [{"shape", "m", "k", "n"}],
"min_seconds": float, "min_calls": int, "max_call_seconds": float}``. Answer: ``{"library", "version",
"dtype", "python", "results": [{"shape", "m", "k", "n", "threads", "gflops", "calls"}], "notes": [...]}``
or ``{"error": "..."}`` with a non-zero exit.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

MAX_CALLS = 50
PILOT_ROWS = 64


def _best_time(fn: Callable[[], object], min_seconds: float, min_calls: int) -> tuple[float, int]:
    """Best wall time of ``fn`` over at least ``min_calls`` calls and ``min_seconds`` seconds."""
    best = float("inf")
    calls = 0
    started = time.perf_counter()
    while calls < min_calls or (time.perf_counter() - started < min_seconds and calls < MAX_CALLS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        calls += 1
    return best, calls


Backend = tuple[str, str, Callable[[int], None], Callable[[int, int, int], Callable[[], object]]]


def _torch_backend() -> Backend:
    import torch  # heavy, and only in the engine's own environment

    torch.manual_seed(0)

    def make(m: int, k: int, n: int) -> Callable[[], object]:
        a = torch.randn(m, k).to(torch.bfloat16)
        b = torch.randn(k, n).to(torch.bfloat16)
        out = torch.empty(m, n, dtype=torch.bfloat16)

        def call() -> object:
            with torch.inference_mode():
                return torch.matmul(a, b, out=out)

        return call

    return str(torch.__version__), "bfloat16", torch.set_num_threads, make


def _numpy_backend() -> Backend:
    import numpy as np  # heavy, only in the GEMM probe's own process

    rng = np.random.default_rng(0)

    def make(m: int, k: int, n: int) -> Callable[[], object]:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        out = np.empty((m, n), dtype=np.float32)
        return lambda: np.matmul(a, b, out=out)

    def threads(count: int) -> None:
        pass  # BLAS pools are sized by the environment the parent sets (one process per count)

    return str(np.__version__), "float32", threads, make


def _one(
    make: Callable[[int, int, int], Callable[[], object]],
    item: dict[str, Any],
    threads: int,
    cfg: dict[str, Any],
) -> tuple[dict[str, Any], str | None]:
    m, k, n = int(item["m"]), int(item["k"]), int(item["n"])
    max_call = float(cfg.get("max_call_seconds", 3.0))
    note = None
    if m > PILOT_ROWS:
        # a path without fast BF16 kernels can take minutes on a prompt-sized GEMM: time a few rows first and
        # shrink M (recorded) so that one call stays within max_call_seconds
        pilot = make(PILOT_ROWS, k, n)
        pilot()
        t_pilot, _ = _best_time(pilot, 0.0, 1)
        predicted = t_pilot * m / PILOT_ROWS
        if predicted > max_call:
            fitted = max(PILOT_ROWS, int(m * max_call / predicted) // 16 * 16)
            note = (
                f"{item['shape']} GEMM on {threads} thread(s): M reduced from {m} to {fitted} "
                f"(one call at M={m} would take about {predicted:.1f} s)"
            )
            m = fitted
    call = make(m, k, n)
    call()  # warm-up: allocation, kernel selection, JIT
    best, calls = _best_time(call, float(cfg.get("min_seconds", 0.5)), int(cfg.get("min_calls", 3)))
    result = {
        "shape": item["shape"],
        "m": m,
        "k": k,
        "n": n,
        "threads": threads,
        "gflops": round(2.0 * m * k * n / best / 1e9, 3),
        "calls": calls,
    }
    return result, note


def measure(cfg: dict[str, Any]) -> dict[str, Any]:
    counts = [int(t) for t in cfg["threads"]]
    library = str(cfg.get("library", "auto"))
    notes: list[str] = []
    backend: tuple[str, Backend] | None = None
    if library in ("torch", "auto"):
        try:
            backend = ("torch", _torch_backend())
        except ImportError as exc:
            if library == "torch":
                raise
            notes.append(f"torch not importable ({exc}); numpy float32 instead")
    if backend is None:
        if len(counts) != 1:
            raise ValueError("numpy measures one thread count per process")
        backend = ("numpy", _numpy_backend())
    name, (version, dtype, set_threads, make) = backend
    results = []
    for threads in counts:
        set_threads(threads)
        for item in cfg["shapes"]:
            result, note = _one(make, item, threads, cfg)
            results.append(result)
            if note:
                notes.append(note)
    return {
        "library": name,
        "version": version,
        "dtype": dtype,
        "python": platform.python_version(),
        "results": results,
        "notes": notes,
    }


def main(argv: list[str]) -> int:
    try:
        out = measure(json.loads(argv[1]))
    except Exception as exc:  # the parent records the reason and falls back; never a traceback only
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
