"""genai-bench's per-run result file (``{scenario}_{task}_{iteration}_{N}_time_{T}s.json`` in an experiment
folder: ``aggregated_metrics`` and ``individual_request_metrics``), with ``experiment_metadata.json`` from beside
it when present (model, engine and version, GPU type and count). One file is one cell: its traffic scenario's
input length and its concurrency.

How genai-bench defines its figures (``docs/getting-started/metrics-definition.md``, ``user/openai_user.py``):
TTFT runs to the first chunk carrying content or reasoning (accelbench's); E2E latency to the end of the stream
(accelbench's E2EL ends at the last text-carrying chunk); TPOT is (E2E latency - TTFT) / (output tokens - 1);
percentiles are numpy's linear interpolation; output tokens are the server's completion tokens. Its records have
no send times and no per-chunk times, so accelbench's ITL and the peak rates cannot be recomputed; TTFT, TPOT
and E2EL are recomputed from the records.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from accelbench.bench.importers import IMPORTERS, ImportedCell, ImportedFile, ToolMetric
from accelbench.bench.importers.reading import (
    Fields,
    as_obj,
    config_for,
    describe,
    load_json,
    summary_from_records,
)
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.request_record import RequestRecord

EXPECTED = "a genai-bench run result (an object with 'aggregated_metrics' and 'individual_request_metrics')"
METADATA = "experiment_metadata.json"
NOTE = (
    "genai-bench's E2E latency runs to the end of the stream (accelbench's to the last text-carrying chunk) and "
    "its TPOT divides that by the output tokens after the first; its records hold no send or chunk times, so ITL "
    "and peak rates are not known and throughputs are genai-bench's."
)
#: genai-bench's statistic names -> accelbench's
TPOT_STATS = {"mean": "mean", "min": "min", "max": "max", "stddev": "std", "p50": "p50", "p90": "p90",
              "p95": "p95", "p99": "p99"}  # fmt: skip
SCENARIO = re.compile(r"^[A-Z]\((\d+(?:\.\d+)?),(\d+(?:\.\d+)?)\)(?:/\((\d+(?:\.\d+)?),(\d+(?:\.\d+)?)\))?$")


class GenAIBenchImporter:
    tool = "genai-bench"
    description = "genai-bench run result JSON (one per scenario and concurrency) of an experiment folder"
    companions: tuple[str, ...] = (METADATA,)

    def read(self, path: Path) -> ImportedFile:
        f = Fields(path, EXPECTED)
        data = load_json(path, EXPECTED)
        if not isinstance(data, dict) or "aggregated_metrics" not in data:
            raise f.refuse(describe(data))
        agg = f.obj(data, "aggregated_metrics", "(top level)")
        rows = f.items(data, "individual_request_metrics", "(top level)")
        meta = _metadata(path)
        scenario, in_mean, out_mean = _scenario(f, agg)
        conc = agg.get("num_concurrency") or agg.get("batch_size")
        concurrency = int(conc) if isinstance(conc, int) and conc >= 1 else None
        records = _records(f, rows)
        completed = int(f.number(agg, "num_completed_requests", "aggregated_metrics") or 0)
        rps, duration = _rate_and_duration(f, agg, completed)
        model = f.text(meta, "api_model_name") or f.text(meta, "model") or None
        config = config_for(
            input_len=in_mean,
            output_len=out_mean,
            num_prompts=len(records) or 1,
            concurrency=concurrency,
            rate=None,
        )
        summary = summary_from_records(
            records,
            config=config,
            duration_s=duration,
            date="",
            model_id=model or "",
            notes=[f"Imported from genai-bench ({path.name}, scenario {scenario}).", NOTE],
            itl_counting="not recorded by genai-bench",
        )
        summary.max_concurrent_requests = 0  # no send times: peaks unknown
        _their_counts(f, agg, summary, kept=len(records), completed=completed, rps=rps)
        summary.max_output_tokens_per_s = 0.0
        _their_throughputs(f, agg, summary, duration)
        gpu_count = meta.get("server_gpu_count")
        return ImportedFile(
            path=path,
            tool=self.tool,
            tool_version=f.text(meta, "benchmark_version"),
            cells=[ImportedCell(where=path.name, summary=summary, concurrency=concurrency,
                                tool_metrics=_tool_metrics(f, agg), input_len=round(in_mean), from_records=True)],
            model=model,
            engine=(f.text(meta, "server_engine").lower() or None),
            engine_version=f.text(meta, "server_version") or None,
            accelerator=f.text(meta, "server_gpu_type") or None,
            accelerator_count=int(str(gpu_count)) if str(gpu_count or "").isdigit() else None,
            base_url=f.text(meta.get("auth_config"), "api_base") or None,
        )  # fmt: skip


def _metadata(path: Path) -> dict[str, Any]:
    """``experiment_metadata.json`` from beside the result file; empty when there is none."""
    meta_path = path.with_name(METADATA)
    meta = load_json(meta_path, "genai-bench experiment metadata") if meta_path.is_file() else {}
    return meta if isinstance(meta, dict) else {}


def _scenario(f: Fields, agg: dict[str, Any]) -> tuple[str, float, float]:
    """The traffic scenario as written, and its mean input and output lengths."""
    scenario = f.text(agg, "scenario")
    m = SCENARIO.match(scenario.replace(" ", ""))
    if m is None:
        raise f.refuse(
            f"aggregated_metrics.scenario {describe(scenario)} (expected e.g. D(100,100) or N(480,240)/(300,150))"
        )
    in_mean = float(m.group(1))
    out_mean = float(m.group(3)) if m.group(3) else float(m.group(2))
    return scenario, in_mean, out_mean


def _rate_and_duration(f: Fields, agg: dict[str, Any], completed: int) -> tuple[float, float]:
    """Requests per second and the run's duration: written by 0.0.5 and later, else from requests per minute
    and the completed requests."""
    rps = f.number(agg, "requests_per_second", "aggregated_metrics", required=False)  # 0.0.5 and later
    if rps is None:
        rps = (f.number(agg, "requests_per_minute", "aggregated_metrics", required=False) or 0.0) / 60.0
    duration = f.number(agg, "run_duration", "aggregated_metrics", required=False)  # 0.0.5 and later
    if not duration:
        duration = completed / rps if rps > 0 else 0.0
    return rps, duration


def _their_counts(
    f: Fields, agg: dict[str, Any], summary: BenchmarkSummary, *, kept: int, completed: int, rps: float
) -> None:
    """When the file kept only ``kept`` of the requests' records, the counts and request rate are genai-bench's."""
    total = int(f.number(agg, "num_requests", "aggregated_metrics", required=False) or kept)
    if kept == total:
        return
    summary.completed = completed
    summary.failed = int(f.number(agg, "num_error_requests", "aggregated_metrics", required=False) or 0)
    summary.num_prompts = total
    summary.request_throughput = rps
    summary.notes.append(
        f"The file holds {kept} of {total} requests' records: latency figures are recomputed from "
        "them, counts and throughputs are genai-bench's."
    )


def _their_throughputs(f: Fields, agg: dict[str, Any], summary: BenchmarkSummary, duration: float) -> None:
    """genai-bench's output and total token rates, and the token totals they imply over ``duration``."""
    out_rate = f.number(agg, "mean_output_throughput_tokens_per_s", "aggregated_metrics", required=False)
    total_rate = f.number(
        agg, "mean_total_tokens_throughput_tokens_per_s", "aggregated_metrics", required=False
    )
    if out_rate is not None:
        summary.output_throughput = out_rate
        summary.total_output_tokens = round(out_rate * duration)
    if out_rate is not None and total_rate is not None:
        summary.total_token_throughput = total_rate
        summary.total_input_tokens = round((total_rate - out_rate) * duration)


def _tool_metrics(f: Fields, agg: dict[str, Any]) -> list[ToolMetric]:
    """What genai-bench reports under definitions of its own: its input rate and its TPOT statistics."""
    in_rate = f.number(agg, "mean_input_throughput_tokens_per_s", "aggregated_metrics", required=False)
    metrics = [
        ToolMetric(
            name="mean_input_throughput_tokens_per_s",
            unit="tokens/s",
            values={"mean": in_rate},
            comparable=False,
            difference="As genai-bench reports it; accelbench's input rate is the input tokens of the "
            "completed requests over the run's duration (here: total minus output throughput).",
        )
    ] if in_rate is not None else []  # fmt: skip
    tpot = as_obj(as_obj(agg.get("stats")).get("tpot"))
    theirs = {k: float(v) * 1000 for k, v in tpot.items() if k in TPOT_STATS and isinstance(v, (int, float))}
    if theirs:
        metrics.append(
            ToolMetric(
                name="tpot",
                unit="ms",
                values={TPOT_STATS[k]: v for k, v in theirs.items()},
                comparable=False,
                difference="genai-bench leaves a request out of TPOT when its output latency (E2E latency - "
                "TTFT) is under 1 ms, and its E2E latency runs to the end of the stream; accelbench's TPOT "
                "keeps every request with more than one output token.",
            )
        )
    return metrics


def _records(f: Fields, rows: list[Any]) -> list[RequestRecord]:
    out = []
    for i, r in enumerate(rows):
        where = f"individual_request_metrics[{i}]"
        if not isinstance(r, dict):
            raise f.refuse(f"{where} is {describe(r)}")
        code = r.get("error_code")
        ok = code in (None, 200)
        if not ok:
            out.append(
                RequestRecord(
                    index=i,
                    prompt_len=int(r.get("num_input_tokens") or 0),
                    success=False,
                    error=f"HTTP {code}: {r.get('error_message') or 'no message'}",
                )
            )
            continue
        ttft = f.number(r, "ttft", where) or 0.0
        e2e = f.number(r, "e2e_latency", where) or 0.0
        out.append(
            RequestRecord(
                index=i,
                prompt_len=int(f.number(r, "num_input_tokens", where) or 0),
                output_tokens=int(f.number(r, "num_output_tokens", where) or 0),
                output_tokens_source="usage",
                ttft_s=ttft,
                latency_s=e2e,
                success=True,
                reasoning_tokens=int(r.get("num_reasoning_tokens") or 0),
                answer_tokens=int(f.number(r, "num_output_tokens", where) or 0)
                - int(r.get("num_reasoning_tokens") or 0),
            )
        )
    return out


IMPORTERS.add("genai-bench", GenAIBenchImporter())
