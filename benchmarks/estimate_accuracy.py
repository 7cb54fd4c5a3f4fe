"""Predicted vs measured for every stored run, and how long a whole-catalog estimate takes.

Usage (from the repository root):

    python benchmarks/estimate_accuracy.py                 # the default store (ACCELBENCH_DATABASE_URL / data dir)
    python benchmarks/estimate_accuracy.py --db sqlite:///path/to/accelbench.db
    python benchmarks/estimate_accuracy.py --uncalibrated  # the cited starting factors only
    python benchmarks/estimate_accuracy.py --timing-only   # just the catalog timing

For each measured cell it prints the measured median TPOT / TTFT and output throughput, the prediction the
estimator makes now (active calibrations applied unless --uncalibrated) and the ratio predicted/measured,
then per (accelerator, engine) the mean absolute error against the issue's targets (TPOT within 15% on GPUs
and 30% on CPUs, throughput within 35%). Timing: the whole catalog estimated N times in one process (the
model spec and catalog loaded once, as in a server), best and median wall time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from accelbench.domain.plan import CellComparison

TARGETS = {"gpu": 15.0, "neuron": 15.0, "cpu": 30.0}
THROUGHPUT_TARGET = 35.0


def _ratio(p: float | None, m: float | None) -> str:
    return f"{p / m:5.2f}" if p is not None and m else "    -"


def _f(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def accuracy(db: str | None, calibrated: bool) -> int:
    from accelbench.plan.calibrate import predicted_vs_measured
    from accelbench.store import get_store

    store = get_store(db) if db else get_store()
    cells, skipped = predicted_vs_measured(store, use_calibrations=calibrated)
    if not cells:
        print("No stored run with measured cells the planner can describe.")
        for s in skipped:
            print(f"  skipped {s}")
        return 1
    header = (
        f"{'run':<18} {'accelerator':<20} {'engine':<10} {'model':<24} {'in':>6} {'out':>5} {'C':>4} "
        f"{'TPOT meas':>9} {'pred':>8} {'ratio':>6} {'TTFT meas':>9} {'pred':>8} {'ratio':>6} "
        f"{'tok/s meas':>10} {'pred':>8} {'ratio':>6}"
    )
    print(
        f"Predicted vs measured ({'active calibrations' if calibrated else 'uncalibrated starting factors'})"
    )
    print(header)
    print("-" * len(header))
    groups: dict[tuple[str, str], list[CellComparison]] = defaultdict(list)
    for c in cells:
        groups[(c.accelerator, c.engine)].append(c)
        print(
            f"{c.run_id:<18} {c.accelerator[:20]:<20} {c.engine[:10]:<10} {c.model[:24]:<24} {c.input_len:>6} "
            f"{c.output_len:>5} {c.concurrency:>4} {_f(c.measured_tpot_ms, 2):>9} {_f(c.predicted_tpot_ms, 2):>8} "
            f"{_ratio(c.predicted_tpot_ms, c.measured_tpot_ms):>6} {_f(c.measured_ttft_ms, 0):>9} "
            f"{_f(c.predicted_ttft_ms, 0):>8} {_ratio(c.predicted_ttft_ms, c.measured_ttft_ms):>6} "
            f"{_f(c.measured_output_tps):>10} {_f(c.predicted_output_tps):>8} "
            f"{_ratio(c.predicted_output_tps, c.measured_output_tps):>6}"
        )
    print()
    print(
        f"{'accelerator / engine':<36} {'points':>6} {'TPOT MAE':>9} {'target':>7} {'worst':>7} {'TTFT MAE':>9} {'tok/s MAE':>10}"
    )
    for (accel, engine), cs in sorted(groups.items()):
        tp = [abs(c.predicted_tpot_ms - c.measured_tpot_ms) / c.measured_tpot_ms * 100 for c in cs]
        tt = [
            abs(c.predicted_ttft_ms - c.measured_ttft_ms) / c.measured_ttft_ms * 100
            for c in cs
            if c.measured_ttft_ms
        ]
        th = [
            abs(c.predicted_output_tps - c.measured_output_tps) / c.measured_output_tps * 100
            for c in cs
            if c.measured_output_tps
        ]
        kind = "cpu" if engine in ("vllm-cpu", "llamacpp") else ("neuron" if "neuron" in engine else "gpu")
        target = TARGETS[kind]
        print(
            f"{accel + ' / ' + engine:<36} {len(cs):>6} {statistics.mean(tp):>8.1f}% {target:>6.0f}% "
            f"{max(tp):>6.1f}% {(statistics.mean(tt) if tt else float('nan')):>8.1f}% "
            f"{(statistics.mean(th) if th else float('nan')):>9.1f}%  (throughput target {THROUGHPUT_TARGET:.0f}%)"
        )
    for s in skipped:
        print(f"  skipped {s}")
    return 0


def timing(repeats: int) -> None:
    fresh = "accelbench.plan" not in sys.modules
    t0 = time.perf_counter()
    from accelbench.catalog import get_catalog
    from accelbench.modelspec import load_model_spec
    from accelbench.plan import estimate_catalog

    t1 = time.perf_counter()
    model = load_model_spec("llama-3.1-8b-instruct")
    catalog = get_catalog()
    t2 = time.perf_counter()
    times = []
    rows = 0
    for _ in range(repeats):
        start = time.perf_counter()
        tab = estimate_catalog(model, input_len=512, output_len=128, concurrency=8, catalog=catalog, slo=None)
        times.append(time.perf_counter() - start)
        rows = len(tab.rows)
    slo_start = time.perf_counter()
    from accelbench.domain.plan import SLO

    estimate_catalog(
        model,
        input_len=512,
        output_len=128,
        concurrency=8,
        catalog=catalog,
        slo=SLO(ttft_ms=1000, tpot_ms=50),
    )
    slo_s = time.perf_counter() - slo_start
    if not fresh:
        t1 = t0
    print(
        f"Whole-catalog estimate ({rows} instances, llama-3.1-8b-instruct, 512/128 tokens, C=8): "
        f"best {min(times) * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms over {repeats} runs; "
        f"with an SLO search {slo_s * 1000:.0f} ms; target < 1000 ms (ratio {statistics.median(times):.2f})"
    )
    print(
        f"One-off costs in a fresh process: imports {(t1 - t0) * 1000:.0f} ms, model + catalog load {(t2 - t1) * 1000:.0f} ms"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", help="Store URL (default: the configured store).")
    ap.add_argument("--uncalibrated", action="store_true", help="Ignore stored calibrations.")
    ap.add_argument("--timing-only", action="store_true", help="Only time the whole-catalog estimate.")
    ap.add_argument("--repeats", type=int, default=5, help="Timing repetitions.")
    args = ap.parse_args()
    rc = 0
    if not args.timing_only:
        rc = accuracy(args.db, calibrated=not args.uncalibrated)
        print()
    timing(args.repeats)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
