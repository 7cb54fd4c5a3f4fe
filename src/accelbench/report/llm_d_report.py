"""A stored run in llm-d-benchmark's benchmark report format (version 0.2.1): one report per cell and repeat,
as llm-d-benchmark writes one per stage, each valid against the vendored JSON Schema.

What goes where: ``run`` (a uid per cell, the run id as the experiment id, the label as description, start, end
and duration), ``scenario.stack`` (the engine: an inference_engine component when the hardware is known, a
generic one otherwise), ``scenario.load`` (accelbench as the tool, input and output lengths, rate and
concurrency, the benchmark config natively), ``results.request_performance.aggregate`` (request counts, input
and output lengths, TTFT, TPOT, ITL and E2E latency in ms with their statistics, throughputs). The schema's
free-form ``results.profiling`` carries ``accelbench``: the cell in vLLM's result layout with accelbench's own
key (``bench.results_io``), per-request records included, so an import gives back exactly what was exported.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any

import numpy as np

from accelbench import __version__
from accelbench.bench.importers.llm_d_schema import REPORT_VERSION
from accelbench.bench.metrics import input_tokens
from accelbench.bench.results_io import to_vllm_dict
from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.redact import redact

#: accelbench metric -> (report field, units)
LATENCIES = (
    ("ttft_ms", "time_to_first_token", "ms"),
    ("tpot_ms", "time_per_output_token", "ms/token"),
    ("itl_ms", "inter_token_latency", "ms/token"),
    ("e2el_ms", "request_latency", "ms"),
)
TOOL = "accelbench"


def _cfg_id(obj: Any) -> str:
    return hashlib.md5(
        json.dumps(obj, sort_keys=True, default=str).encode(), usedforsecurity=False
    ).hexdigest()


def statistics(st: MetricStats, units: str) -> dict[str, Any] | None:
    """A schema ``Statistics`` from accelbench's (None for a metric with no values)."""
    if st.count == 0:
        return None
    return {
        "units": units,
        "mean": st.mean,
        "stddev": st.std,
        "min": st.min,
        "p50": st.p50,
        "p90": st.p90,
        "p95": st.p95,
        "p99": st.p99,
        "max": st.max,
    }


def _lengths(values: list[int]) -> dict[str, Any] | None:
    """Statistics of token counts (numpy linear-interpolation percentiles, as every accelbench figure)."""
    if not values:
        return None
    a = np.asarray(values, dtype=np.float64)
    p50, p90, p95, p99 = (float(x) for x in np.percentile(a, (50, 90, 95, 99)))
    return {
        "units": "count",
        "mean": float(a.mean()),
        "stddev": float(a.std()),
        "min": float(a.min()),
        "p50": p50,
        "p90": p90,
        "p95": p95,
        "p99": p99,
        "max": float(a.max()),
    }


def _time(run: RunInfo, s: BenchmarkSummary) -> dict[str, Any]:
    out: dict[str, Any] = {"duration": f"PT{s.duration_s:.6f}S"}
    if s.started_at > 0:
        out["start"] = datetime.fromtimestamp(s.started_at, UTC).isoformat()
    elif s.date:
        out["start"] = s.date if "T" in s.date else None
    if s.finished_at > 0:
        out["end"] = datetime.fromtimestamp(s.finished_at, UTC).isoformat()
    return {k: v for k, v in out.items() if v}


def _stack(run: RunInfo, s: BenchmarkSummary) -> list[dict[str, Any]]:
    engine = run.engine or "unknown"
    native: dict[str, Any] = {}
    if run.spec:
        native["config"] = redact(run.spec)  # a report is handed to others: no tokens or keys
    standardized: dict[str, Any]
    if run.accelerator_name or run.instance_type:
        standardized = {
            "kind": "inference_engine",
            "tool": engine,
            "tool_version": run.engine_version or "unknown",
            "role": "replica",
            "replicas": 1,
            "model": {"name": run.model or s.model_id or "unknown"},
            "accelerator": {
                "model": run.accelerator_name or run.instance_type or "unknown",
                "count": run.accelerator_count or 0,
                "parallelism": {"tp": run.tp_degree or 1},
            },
        }
    else:
        standardized = {
            "kind": "generic",
            "tool": engine,
            "tool_version": run.engine_version or "unknown",
            "model": run.model or s.model_id or "unknown",
        }
    meta = {"schema_version": "0.0.1", "label": engine, "cfg_id": _cfg_id([standardized, native])}
    return [{"metadata": meta, "standardized": standardized, "native": native}]


def _load(s: BenchmarkSummary, result: ResultInfo, stage: int) -> dict[str, Any]:
    cfg = s.config
    native = json.loads(cfg.model_dump_json())
    standardized: dict[str, Any] = {
        "tool": TOOL,
        "tool_version": __version__,
        "source": "random" if cfg.dataset == "random" else "sampled",
        "stage": stage,
        "input_seq_len": {"distribution": "fixed", "value": result.input_len},
        "output_seq_len": {"distribution": "fixed", "value": cfg.output_len},
        "concurrency": result.concurrency,
    }
    if not math.isinf(cfg.request_rate):
        standardized["rate_qps"] = cfg.request_rate
    return {
        "metadata": {"schema_version": "0.0.1", "cfg_id": _cfg_id(native)},
        "standardized": standardized,
        "native": {"config": native},
    }


def _aggregate(s: BenchmarkSummary) -> dict[str, Any]:
    ok = [r for r in s.requests if r.success]
    requests: dict[str, Any] = {"total": s.completed + s.failed, "failures": s.failed}
    for key, values in (
        ("input_length", [input_tokens(r) for r in ok]),
        ("output_length", [r.output_tokens for r in ok]),
    ):
        st = _lengths(values)
        if st is not None:
            requests[key] = st
    latency = {
        field: st
        for attr, field, units in LATENCIES
        if (st := statistics(getattr(s, attr), units)) is not None
    }
    throughput = {
        "input_token_rate": {
            "units": "tokens/s",
            "mean": s.total_input_tokens / s.duration_s if s.duration_s else 0.0,
        },
        "output_token_rate": {"units": "tokens/s", "mean": s.output_throughput},
        "total_token_rate": {"units": "tokens/s", "mean": s.total_token_throughput},
        "request_rate": {"units": "queries/s", "mean": s.request_throughput},
    }
    return {"requests": requests, "latency": latency, "throughput": throughput}


def cell_report(run: RunInfo, result: ResultInfo, summary: BenchmarkSummary, stage: int) -> dict[str, Any]:
    """One cell and repeat as a benchmark report (a JSON-ready dict)."""
    cell = f"in{result.input_len}-c{result.concurrency}-r{result.repeat + 1}"
    run_block: dict[str, Any] = {"uid": f"{run.id}-{cell}", "eid": run.id, "time": _time(run, summary)}
    if run.label:
        run_block["description"] = run.label
    return {
        "version": REPORT_VERSION,
        "run": run_block,
        "scenario": {"stack": _stack(run, summary), "load": _load(summary, result, stage)},
        "results": {
            "request_performance": {"aggregate": _aggregate(summary)},
            "profiling": {"accelbench": to_vllm_dict(summary)},
        },
    }


def run_reports(run: RunInfo, cells: list[tuple[ResultInfo, BenchmarkSummary]]) -> list[dict[str, Any]]:
    """Every cell and repeat of a run as a benchmark report, in cell order (the stage is the position)."""
    return [cell_report(run, r, s, stage) for stage, (r, s) in enumerate(cells)]
