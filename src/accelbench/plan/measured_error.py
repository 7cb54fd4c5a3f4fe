"""The planner's own measured error, as a report quotes it next to an uncalibrated estimate: the 80% range of
measured / predicted over every published measurement of the accelerator kind, each predicted with factors
fitted without its source (the records ``benchmarks/estimate_accuracy.py --write`` ships in
``plan/data/accuracy.yaml``; ``plan/ranges.py`` reads the deciles the same way for every range)."""

from __future__ import annotations

from accelbench.plan.error_records import shipped_records
from accelbench.plan.ranges import KIND_LABEL, MIN_ROWS, pooled_interval

THROUGHPUT_MIN_BATCH = 32  # output tokens/s is graded at batch >= 32, where throughput is what people buy
_NAMES = {"tpot": "TPOT", "ttft": "TTFT", "tps": "output tokens/s"}


def error_sentence(kind: str) -> str:
    """e.g. "Measured error of this model on published GPU measurements (45 rows, 4 sources, each predicted
    with factors fitted without its source): 80% of measured TPOT within x0.85-x1.30 of the prediction, ..."."""
    records = shipped_records()
    label = KIND_LABEL.get(kind, kind)
    parts = []
    for metric, name in _NAMES.items():
        iv = pooled_interval(records, metric, kind)
        if iv is not None:
            parts.append(f"{name} x{iv.lo:.2f}-x{iv.hi:.2f} ({iv.basis})")
    if not parts:
        rows = [r for r in records if r.kind == kind]
        return (
            f"No measured error to quote for {label}: the public data set has {len(rows)} usable {label} "
            f"measurement(s) from {len({r.source for r in rows})} source(s), fewer than the {MIN_ROWS} from two "
            "or more sources it takes."
        )
    return (
        f"Measured error of this model on published {label} measurements, each predicted with factors fitted "
        "without its source: 80% of measured / predicted within " + ", ".join(parts) + "."
    )
