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

A stage file holds statistics only. ``per_request_lifecycle_metrics.json`` (``report.request_lifecycle.
per_request``) holds every request of the run with its chunks and their arrival times, but not the stage it was
sent in: it is read as one cell, recomputed exactly under accelbench's definitions (TTFT to the first chunk
carrying text, one ITL gap per such chunk, E2EL to the last), when the run had one stage (one stage file, or
none, beside it); a run of several stages is refused with the reason.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import yaml

from accelbench.bench.importers import IMPORTERS, ImportedCell, ImportedFile, ToolMetric
from accelbench.bench.importers.reading import (
    Fields,
    as_obj,
    config_for,
    describe,
    load_json,
    metric_stats,
    summary_from_records,
)
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.request_record import RequestRecord

PER_REQUEST = "per_request_lifecycle_metrics.json"
CONFIG = "config.yaml"  # the run's configuration, written beside its reports
EXPECTED_RECORDS = (
    "inference-perf per-request records (a list of objects with start_time, end_time, info, error)"
)
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
    description = (
        "inference-perf stage_N_lifecycle_metrics.json (one per load stage), or per_request_lifecycle_metrics.json "
        "of a one-stage run"
    )
    companions: tuple[str, ...] = (CONFIG,)

    def read(self, path: Path) -> ImportedFile:
        if path.name == PER_REQUEST:
            return _per_request(path)
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
        return _with_server(
            ImportedFile(
                path=path,
                tool=self.tool,
                tool_version="",  # not recorded in its files
                cells=[
                    ImportedCell(where=path.name, summary=summary, concurrency=None, tool_metrics=metrics)
                ],
            )
        )


def _with_server(got: ImportedFile) -> ImportedFile:
    """What the ``config.yaml`` inference-perf writes beside its reports says of the server: model, engine type
    and base URL (absent or unreadable: nothing)."""
    config_path = got.path.with_name(CONFIG)
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8")) if config_path.is_file() else None
    except (yaml.YAMLError, UnicodeDecodeError):
        return got
    server = as_obj(as_obj(config).get("server"))
    model, engine, url = server.get("model_name"), server.get("type"), server.get("base_url")
    got.model = model if isinstance(model, str) and model else got.model
    got.engine = engine if isinstance(engine, str) and engine else got.engine
    got.base_url = url if isinstance(url, str) and url else got.base_url
    for cell in got.cells:
        cell.summary.model_id = cell.summary.tokenizer_id = got.model or ""
        cell.summary.base_url = got.base_url or ""
    return got


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
    duration = f.number(data, "benchmark_time_seconds", "(top level)", required=False)  # 0.7 and later
    if not duration:
        duration = ok / rps if rps > 0 else float(load.get("send_duration") or 0.0)
    prompt = f.stats(ok_block.get("prompt_len"), STATS, "successes.prompt_len")
    output = f.stats(ok_block.get("output_len"), STATS, "successes.output_len")
    config = config_for(
        input_len=prompt.get("mean", 1.0),
        output_len=output.get("max", output.get("mean", 1.0)),
        num_prompts=ok + failed,
        concurrency=None,
        rate=rate,
    )
    errors = fail_block.get("error_messages") if isinstance(fail_block.get("error_messages"), dict) else None

    def ms(name: str) -> Any:
        return metric_stats(
            f.stats(latency.get(name), STATS, f"successes.latency.{name}", scale=1000.0), count=ok
        )

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
        if (vals := f.stats(latency.get(name), STATS, f"successes.latency.{name}", scale=1000.0))
    ]
    return summary, metrics


def _per_request(path: Path) -> ImportedFile:
    """One single-stage run from its per-request records."""
    f = Fields(path, EXPECTED_RECORDS)
    stages = sorted(path.parent.glob("stage_*_lifecycle_metrics.json"))
    if len(stages) > 1:
        raise f.refuse(
            f"the records of {len(stages)} stages together (inference-perf does not record each request's stage); "
            "import the stage_N_lifecycle_metrics.json files instead"
        )
    rate = None
    if stages:
        stage = load_json(stages[0], EXPECTED)
        rate = Fields(stages[0], EXPECTED).number(as_obj(as_obj(stage).get("load_summary")), "requested_rate",
                                                  "load_summary", required=False)  # fmt: skip
    rows = load_json(path, EXPECTED_RECORDS)
    if not isinstance(rows, list) or not rows:
        raise f.refuse(describe(rows))
    records = [_record(f, i, r) for i, r in enumerate(rows)]
    t0 = min(r.start_s for r in records)
    for r in records:
        r.start_s -= t0
        r.planned_send_s -= t0
    ok = [r for r in records if r.success]
    duration = max((r.start_s + r.latency_s for r in ok), default=0.0)
    config = config_for(
        input_len=sum(r.prompt_len for r in ok) / len(ok) if ok else 1.0,
        output_len=max((r.output_tokens for r in ok), default=1),
        num_prompts=len(records),
        concurrency=None,
        rate=rate,
    )
    summary = summary_from_records(
        records,
        config=config,
        duration_s=duration,
        date="",
        model_id="",
        notes=[f"Imported from inference-perf's per-request records ({path.name}); figures recomputed from its "
               "chunk times under accelbench's definitions."],
        itl_counting="one gap per chunk carrying text (recomputed from inference-perf's chunk times)",
    )  # fmt: skip
    return _with_server(
        ImportedFile(
            path=path,
            tool="inference-perf",
            tool_version="",
            cells=[ImportedCell(where=path.name, summary=summary, concurrency=None, from_records=True)],
        )
    )


def _chunk_text(chunk: Any) -> bool:
    """Whether a raw SSE chunk carries generated text (content, reasoning, completion text)."""
    try:
        data = json.loads(chunk) if isinstance(chunk, str) else None
    except ValueError:
        return False
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    c, delta = choices[0], as_obj(choices[0].get("delta"))
    return any(bool(x) for x in (c.get("text"), delta.get("content"), delta.get("reasoning_content"),
                                 delta.get("reasoning"), delta.get("tool_calls")))  # fmt: skip


def _record(f: Fields, i: int, r: Any) -> RequestRecord:
    where = f"[{i}]"
    if not isinstance(r, dict):
        raise f.refuse(f"{where} is {describe(r)}")
    start = f.number(r, "start_time", where) or 0.0
    end = f.number(r, "end_time", where) or start
    info = as_obj(r.get("info"))
    prompt = as_obj(as_obj(info.get("request_metrics")).get("text")).get("input_tokens") or info.get(
        "input_tokens"
    )
    prompt_len = int(prompt) if isinstance(prompt, (int, float)) else 0
    err = r.get("error")
    if err:
        e = as_obj(err)
        return RequestRecord(index=i, prompt_len=prompt_len, start_s=start, planned_send_s=start, success=False,
                             error=f"{e.get('error_type') or 'error'}: {e.get('error_msg') or describe(err)}")  # fmt: skip
    resp = as_obj(info.get("response_metrics"))
    chunks, times = resp.get("response_chunks") or [], resp.get("chunk_times") or []
    if not isinstance(chunks, list) or not isinstance(times, list) or len(chunks) != len(times):
        raise f.refuse(f"{where}.info.response_metrics: response_chunks and chunk_times of different lengths")
    text_times = [float(t) for c, t in zip(chunks, times, strict=True) if _chunk_text(c)]
    usage = as_obj(resp.get("server_usage"))
    out = usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) else None
    source = "usage" if out is not None else "tokenizer"
    out_tokens = out if out is not None else int(resp.get("output_tokens") or 0)
    if not text_times:  # not streamed: the whole answer at the end
        text_times = [end]
    return RequestRecord(
        index=i,
        prompt_len=prompt_len,
        server_prompt_tokens=usage.get("prompt_tokens")
        if isinstance(usage.get("prompt_tokens"), int)
        else None,
        output_tokens=out_tokens,
        output_tokens_source=source,
        planned_send_s=start,
        start_s=start,
        ttft_s=text_times[0] - start,
        itl_s=[b - a for a, b in itertools.pairwise(text_times)],
        latency_s=text_times[-1] - start,
        success=True,
        answer_tokens=out_tokens,
        token_split_source=source,
    )


IMPORTERS.add("inference-perf", InferencePerfImporter())
