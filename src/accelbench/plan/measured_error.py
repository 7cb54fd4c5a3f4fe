"""The planner's own measured error, as estimates quote it: the per-kind figures that
``benchmarks/estimate_accuracy.py --write`` records in ``plan/data/accuracy.yaml`` from the public data set
(each source graded with factors fitted without it; ``plan/accuracy.py`` computes them)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

THROUGHPUT_MIN_BATCH = 32  # output tokens/s is graded at batch >= 32, where throughput is what people buy
MIN_POINTS = 8  # fewer published points of a kind than this, held out by source, state no typical error


@lru_cache(maxsize=1)
def shipped_accuracy() -> dict[str, Any]:
    """The per-kind error figures ``benchmarks/estimate_accuracy.py --write`` recorded (empty if none)."""
    try:
        text = (resources.files("accelbench.plan") / "data" / "accuracy.yaml").read_text()
    except FileNotFoundError:
        return {}
    doc = yaml.safe_load(text) or {}
    return doc if isinstance(doc, dict) else {}


def typical_error(kind: str) -> dict[str, Any] | None:
    """The planner's measured error on published measurements of this accelerator kind (held-out sources),
    or None when the data set has too little for the kind."""
    kinds = shipped_accuracy().get("kinds") or {}
    entry = kinds.get(kind)
    if not entry:
        return None
    lo = entry.get("leave_one_source_out")
    if not lo or int(lo.get("n_points") or 0) < MIN_POINTS or int(lo.get("n_sources") or 0) < 2:
        return None
    return dict(lo)


def error_sentence(kind: str) -> str | None:
    """e.g. "typically within 12% on TPOT (41 published GPU measurements, 6 sources, held out by source)"."""
    e = typical_error(kind)
    label = {"gpu": "GPU", "neuron": "Neuron", "cpu": "CPU"}.get(kind, kind)
    if not e or e.get("tpot_mape_pct") is None:
        entry = (shipped_accuracy().get("kinds") or {}).get(kind) or {}
        n = int((entry.get("all_sources") or entry.get("leave_one_source_out") or {}).get("n_points") or 0)
        return (
            f"No measured error to quote for {label}: the public data set has {n} usable {label} "
            f"measurement(s), fewer than the {MIN_POINTS} from two or more sources it takes."
        )
    parts = [f"TPOT typically within {e['tpot_mape_pct']:.0f}%"]
    if e.get("ttft_median_error_pct") is not None:
        parts.append(f"TTFT median error {e['ttft_median_error_pct']:.0f}%")
    if e.get("tps_mape_pct") is not None:
        parts.append(f"tokens/s at batch >= {THROUGHPUT_MIN_BATCH} within {e['tps_mape_pct']:.0f}%")
    points, sources = e.get("n_points"), e.get("n_sources")
    return (
        f"Measured error of this model on published {label} "
        f"measurements ({points} points, {sources} sources, each source graded with factors fitted without it): "
        + ", ".join(parts)
        + "."
    )
