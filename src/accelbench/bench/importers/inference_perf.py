"""inference-perf's lifecycle reports (``stage_N_lifecycle_metrics.json``, one per load stage; the reports of
0.2-0.3 and later): one stage is one cell, at the stage's requested rate.

How inference-perf defines its figures (``inference_perf/reportgen/base.py``), all in seconds:

- TTFT: request start -> the first output token's time, a token's time being the arrival of the chunk whose
  ``text``/``delta.content`` it came in: accelbench's, except that reasoning text does not count.
- TPOT: (last token time - first token time) / (output tokens - 1): accelbench's TPOT.
- ITL: the gaps between consecutive output tokens, every token of a chunk given the chunk's time, so the gaps
  inside a chunk are 0; accelbench's ITL has one gap per chunk. Kept under inference-perf's name.
- request latency: start -> response end (after the last chunk and ``[DONE]``); accelbench's E2EL ends at the
  last text-carrying chunk.
- normalized time per output token: request latency / output tokens, the first token's wait included.
- Percentiles: numpy's linear interpolation, as accelbench's.

The stage file holds statistics only (per-request records are in ``per_request_lifecycle_metrics.json`` for the
whole run, not per stage, and are not read).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelbench.bench.importers import IMPORTERS, ImportedCell, ImportedFile, ToolMetric
from accelbench.bench.importers.common import Fields, as_obj, config_for, describe, load_json, metric_stats
from accelbench.domain.bench import BenchmarkSummary

EXPECTED = (
    "an inference-perf stage report (stage_N_lifecycle_metrics.json: 'load_summary', 'successes', 'failures')"
)
STATS = {
    "mean": "mean",
    "min": "min",
    "max": "max",
    "median": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
}
DIFFERENCES = {
    "inter_token_latency": "inference-perf gives every token of a chunk the chunk's arrival time, so its ITL "
    "pools per-token gaps (0 inside a chunk); accelbench's ITL is one gap per chunk.",
    "normalized_time_per_output_token": "Request latency / output tokens, the first token's wait included; no "
    "accelbench figure means that.",
}
NOTE = (
    "inference-perf's TTFT ignores reasoning text and its request latency runs to the response's end (accelbench's "
    "E2EL ends at the last text-carrying chunk); its TPOT is accelbench's. Figures are inference-perf's statistics "
    "(no per-request records per stage)."
)


class InferencePerfImporter:
    tool = "inference-perf"
    description = "inference-perf stage_N_lifecycle_metrics.json (one per load stage)"
    companions: tuple[str, ...] = ()

    def read(self, path: Path) -> ImportedFile:
        f = Fields(path, EXPECTED)
        data = load_json(path, EXPECTED)
        if not isinstance(data, dict) or not {"load_summary", "successes", "failures"} <= set(data):
            raise f.refuse(describe(data))
        load = f.obj(data, "load_summary", "(top level)")
        if "requested_rate" not in load:
            raise f.refuse(
                "the summary of all stages together (no load_summary.requested_rate); import the "
                "stage_N_lifecycle_metrics.json files, one cell each"
            )
        summary, metrics = _summary(f, data, load)
        return ImportedFile(
            path=path,
            tool=self.tool,
            tool_version="",  # not recorded in its files
            cells=[ImportedCell(where=path.name, summary=summary, concurrency=None, tool_metrics=metrics)],
        )


def _dist(f: Fields, block: Any, where: str, scale: float = 1.0) -> dict[str, float]:
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise f.refuse(f"{where} is {describe(block)}, not an object")
    out = {}
    for theirs, ours in STATS.items():
        v = f.number(block, theirs, where, required=False)
        if v is not None:
            out[ours] = v * scale
    return out


def _summary(
    f: Fields, data: dict[str, Any], load: dict[str, Any]
) -> tuple[BenchmarkSummary, list[ToolMetric]]:
    ok_block = f.obj(data, "successes", "(top level)")
    fail_block = f.obj(data, "failures", "(top level)")
    ok = int(f.number(ok_block, "count", "successes") or 0)
    failed = int(f.number(fail_block, "count", "failures") or 0)
    rate = f.number(load, "requested_rate", "load_summary")
    latency = as_obj(ok_block.get("latency"))
    thr = as_obj(ok_block.get("throughput"))
    rps = f.number(thr, "requests_per_sec", "successes.throughput", required=False) or 0.0
    out_rate = f.number(thr, "output_tokens_per_sec", "successes.throughput", required=False) or 0.0
    in_rate = f.number(thr, "input_tokens_per_sec", "successes.throughput", required=False) or 0.0
    duration = ok / rps if rps > 0 else float(load.get("send_duration") or 0.0)
    prompt = _dist(f, ok_block.get("prompt_len"), "successes.prompt_len")
    output = _dist(f, ok_block.get("output_len"), "successes.output_len")
    config = config_for(
        input_len=prompt.get("mean", 1.0),
        output_len=output.get("max", output.get("mean", 1.0)),
        num_prompts=ok + failed,
        concurrency=None,
        rate=rate,
    )
    errors = fail_block.get("error_messages") if isinstance(fail_block.get("error_messages"), dict) else None

    def ms(name: str) -> Any:
        return metric_stats(_dist(f, latency.get(name), f"successes.latency.{name}", 1000.0), count=ok)

    summary = BenchmarkSummary(
        date="",
        config=config,
        duration_s=duration,
        num_prompts=ok + failed,
        completed=ok,
        failed=failed,
        errors={str(k): int(v) for k, v in errors.items()}
        if errors
        else ({"failed": failed} if failed else {}),
        total_input_tokens=round(in_rate * duration),
        total_output_tokens=round(out_rate * duration),
        request_throughput=rps,
        output_throughput=out_rate,
        total_token_throughput=in_rate + out_rate,
        ttft_ms=ms("time_to_first_token"),
        tpot_ms=ms("time_per_output_token"),
        e2el_ms=ms("request_latency"),
        output_tokens_source="usage",
        itl_counting="inference-perf: per token, a chunk's tokens given its arrival time (kept under its name)",
        notes=[f"Imported from inference-perf ({f.path.name}, requested rate {rate:g}/s).", NOTE],
    )
    metrics = [
        ToolMetric(name=name, unit="ms", values=vals, comparable=False, difference=words)
        for name, words in DIFFERENCES.items()
        if (vals := _dist(f, latency.get(name), f"successes.latency.{name}", 1000.0))
    ]
    return summary, metrics


IMPORTERS.add("inference-perf", InferencePerfImporter())
