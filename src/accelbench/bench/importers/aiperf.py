"""AIPerf's exports (``aiperf profile``'s artifact directory): ``profile_export.jsonl`` (one record per request)
and ``profile_export_aiperf.json`` (statistics and the input config). Either file may be named; the other is
read from beside it when present. One AIPerf run is one cell.

How AIPerf defines its figures (``aiperf/metrics/types/*``): TTFT runs from the request's start to its first
parsed response and request latency to its last; ``inter_chunk_latency`` is the list of gaps between consecutive
responses (accelbench's ITL); ``inter_token_latency`` is (request latency - TTFT) / (output sequence length - 1),
which is accelbench's TPOT; the output sequence length counts reasoning tokens too (as accelbench's output tokens
do); percentiles are numpy's linear interpolation, as accelbench's. With the records, every figure is recomputed
under accelbench's definitions; from the statistics alone TTFT, TPOT (AIPerf's ITL), ITL (AIPerf's inter-chunk
latency) and E2EL are taken over.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from accelbench.bench.importers import IMPORTERS, ImportedCell, ImportedFile, ToolMetric
from accelbench.bench.importers.reading import (
    Fields,
    as_obj,
    config_for,
    describe,
    load_json,
    load_jsonl,
    metric_stats,
    summary_from_records,
)
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.request_record import RequestRecord

RECORDS = "profile_export.jsonl"
SUMMARY = "profile_export_aiperf.json"
EXPECTED_RECORDS = "AIPerf per-request records (profile_export.jsonl: objects with 'metadata' and 'metrics')"
EXPECTED_SUMMARY = (
    "AIPerf statistics (profile_export_aiperf.json: an object with 'records' and 'input_config')"
)
#: AIPerf statistic -> accelbench's
STATS = {
    "avg": "mean",
    "min": "min",
    "max": "max",
    "std": "std",
    "p50": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
}
ITL_NOTE = (
    "AIPerf's inter_token_latency (request latency minus TTFT over output tokens minus one) is accelbench's TPOT; "
    "its inter_chunk_latency is accelbench's ITL."
)
INPUT_NOTE = (
    "AIPerf's input sequence length is its own tokenizer's count of the prompt; accelbench counts the server's "
    "usage.prompt_tokens (chat template included) where the server sent it, as here."
)
TTFT_NOTE = (
    "AIPerf's TTFT and request latency run to its first and last parsed response; accelbench's to the first and "
    "last text-carrying chunk."
)


class AIPerfImporter:
    tool = "aiperf"
    description = "AIPerf profile_export.jsonl or profile_export_aiperf.json (the other read from beside it)"
    companions: tuple[str, ...] = (SUMMARY,)

    def read(self, path: Path) -> ImportedFile:
        if path.name.endswith(".jsonl"):
            records_path: Path | None = path
            summary_path = path.with_name(SUMMARY)
        else:
            summary_path = path
            records_path = path.with_name(RECORDS)
        summary_data = self._summary(summary_path) if summary_path.is_file() or summary_path == path else None
        rows = self._records(records_path) if records_path is not None and records_path.is_file() else None
        if summary_data is None and rows is None:
            raise Fields(path, EXPECTED_SUMMARY).refuse("neither file")
        config = dict((summary_data or {}).get("input_config") or {})
        config["start_time"] = _iso((summary_data or {}).get("start_time"))  # read back by the cell builders
        model, url, concurrency, rate, asked_out = _load(config)
        config["asked_output_tokens"] = asked_out
        stats = _statistics(summary_data or {})
        cell = self._cell(path, rows, stats, config, concurrency, rate, model or "")
        return ImportedFile(
            path=path,
            tool=self.tool,
            tool_version=str((summary_data or {}).get("aiperf_version") or ""),  # 0.13 and later record it
            cells=[cell],
            model=model,
            base_url=url,
        )

    def _summary(self, path: Path) -> dict[str, Any]:
        data = load_json(path, EXPECTED_SUMMARY)
        if not isinstance(data, dict) or not (
            isinstance(data.get("records"), dict) or ("aiperf_version" in data and "input_config" in data)
        ):
            raise Fields(path, EXPECTED_SUMMARY).refuse(describe(data))
        return data

    def _records(self, path: Path) -> list[dict[str, Any]]:
        rows = load_jsonl(path, EXPECTED_RECORDS)
        f = Fields(path, EXPECTED_RECORDS)
        if not rows:
            raise f.refuse("an empty file")
        for i, r in enumerate(rows):
            if not isinstance(r, dict) or not isinstance(r.get("metadata"), dict) or "metrics" not in r:
                raise f.refuse(f"line {i + 1}: {describe(r)}")
        phase = [
            r["metadata"].get("benchmark_phase", r["metadata"].get("credit_phase", "profiling")) for r in rows
        ]
        return [r for r, ph in zip(rows, phase, strict=True) if ph == "profiling"]  # warmup left out

    def _cell(
        self,
        path: Path,
        rows: list[dict[str, Any]] | None,
        stats: dict[str, Any],
        config: dict[str, Any],
        concurrency: int | None,
        rate: Any,
        model: str,
    ) -> ImportedCell:
        """The file's one cell: from the per-request records when there are some, else from the statistics."""
        f = Fields(path, EXPECTED_SUMMARY)
        isl = _stat(f, stats, "input_sequence_length")
        asked_out = config.get("asked_output_tokens")
        start = config.get("start_time") or ""
        tool_metrics = [
            ToolMetric(name=name, unit=str(stats[name].get("unit", "")), values=_stat(f, stats, name),
                       comparable=False, difference=words)
            for name, words in (
                ("time_to_second_token", "Time to second token: no accelbench figure means that."),
                ("output_token_throughput_per_user", "Per-request output tokens per second: no accelbench figure."),
            )
            if isinstance(stats.get(name), dict)
        ]  # fmt: skip
        if rows is None:
            summary = _from_statistics(f, stats, config, concurrency, rate, model, asked_out)
        else:
            records = _to_records(
                Fields(
                    path.with_name(RECORDS) if not path.name.endswith(".jsonl") else path, EXPECTED_RECORDS
                ),
                rows,
            )
            ok = [r for r in records if r.success]
            notes = [f"Imported from AIPerf ({path.name}); figures recomputed from its per-request records.",
                     ITL_NOTE, TTFT_NOTE]  # fmt: skip
            in_len = sum(r.prompt_len for r in ok) / len(ok) if ok else isl.get("mean", 1.0)
            cfg = config_for(
                input_len=in_len,
                output_len=asked_out or max((r.output_tokens for r in ok), default=1),
                num_prompts=len(records),
                concurrency=concurrency,
                rate=float(rate) if isinstance(rate, (int, float)) else None,
            )
            duration = max((r.start_s + r.latency_s for r in records), default=0.0)
            dur = _stat(f, stats, "benchmark_duration").get("mean") or duration
            if any(r.server_prompt_tokens not in (None, r.prompt_len) for r in ok):
                notes.append(INPUT_NOTE)
            summary = summary_from_records(
                records, config=cfg, duration_s=dur, date=str(start), model_id=model,
                notes=notes,
                itl_counting="AIPerf: one gap per parsed response (inter_chunk_latency)",
            )  # fmt: skip
        return ImportedCell(
            where=path.name,
            summary=summary,
            concurrency=concurrency,
            tool_metrics=tool_metrics,
            from_records=rows is not None,
        )


#: metric names of AIPerf before 0.13 -> today's
OLD_NAMES = {"time_to_first_token": "ttft", "time_to_second_token": "ttst"}


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _statistics(data: dict[str, Any]) -> dict[str, Any]:
    """Metric -> its statistics block under today's names: under ``records`` before 0.13, at the top level since."""
    blocks = as_obj(data.get("records")) or data
    out = {k: v for k, v in blocks.items() if isinstance(v, dict) and "unit" in v}
    for new, old in OLD_NAMES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def _load(config: dict[str, Any]) -> tuple[str | None, str | None, int | None, Any, Any]:
    """(model, url, concurrency, rate, output tokens asked) from the input config, as written before 0.13
    (``endpoint.model_names``, ``loadgen``, ``input.prompt``) or since (``models.items``, ``phases``,
    ``datasets[].prompts``)."""
    endpoint = as_obj(config.get("endpoint"))
    names = endpoint.get("model_names") or [m.get("name") for m in as_obj(config.get("models")).get("items") or []
                                            if isinstance(m, dict)]  # fmt: skip
    model = names[0] if isinstance(names, list) and names and isinstance(names[0], str) else None
    urls = endpoint.get("urls") or [endpoint.get("url")]
    url = urls[0] if isinstance(urls, list) and urls and isinstance(urls[0], str) else None
    if url and "://" not in url:
        url = f"http://{url}"
    load = as_obj(config.get("loadgen"))
    for phase in config.get("phases") or []:
        if isinstance(phase, dict) and phase.get("kind", phase.get("name")) == "profiling":
            load = phase
    conc = load.get("concurrency")
    concurrency = int(conc) if isinstance(conc, int) and conc >= 1 else None
    asked = as_obj(as_obj(as_obj(config.get("input")).get("prompt")).get("output_tokens")).get("mean")
    for ds in config.get("datasets") or []:
        asked = asked or as_obj(as_obj(as_obj(ds).get("prompts")).get("osl")).get("mean")
    return model, url, concurrency, load.get("request_rate"), asked


def _stat(f: Fields, stats: dict[str, Any], name: str) -> dict[str, float]:
    """An AIPerf statistic under accelbench's names (absent: empty)."""
    block = stats.get(name)
    out = f.stats(block, STATS, f"records.{name}")
    if isinstance(block, dict) and "count" in block:
        out["count"] = float(f.number(block, "count", f"records.{name}") or 0)
    return out


def _to_records(f: Fields, rows: list[dict[str, Any]]) -> list[RequestRecord]:
    starts = [
        f.number(r["metadata"], "request_start_ns" if "request_start_ns" in r["metadata"] else "timestamp_ns",
                 f"line {i + 1}.metadata")
        for i, r in enumerate(rows)
    ]  # fmt: skip
    t0 = min(s for s in starts if s is not None)
    out = []
    for i, (r, start) in enumerate(zip(rows, starts, strict=True)):
        m = r["metrics"] if isinstance(r["metrics"], dict) else {}
        where = f"line {i + 1}.metrics"

        def value(name: str, m: dict[str, Any] = m, where: str = where) -> Any:
            block = m.get(name, m.get(OLD_NAMES.get(name, "")))
            if block is None:
                return None
            if not isinstance(block, dict) or "value" not in block:
                raise f.refuse(f"{where}.{name} is {describe(block)}, not {{value, unit}}")
            return block["value"]

        error = r.get("error")
        if error is None and r["metadata"].get("was_cancelled"):
            error = {"type": "cancelled", "message": "AIPerf cancelled the request"}
        ok = error is None
        rel = ((start or t0) - t0) / 1e9
        if not ok:
            e = error if isinstance(error, dict) else {}
            out.append(RequestRecord(index=i, prompt_len=int(value("input_sequence_length") or 0), start_s=rel,
                                     planned_send_s=rel, success=False,
                                     error=f"{e.get('type') or 'error'}: {e.get('message') or describe(error)}"))  # fmt: skip
            continue
        ttft, latency, osl = (
            value("time_to_first_token"),
            value("request_latency"),
            value("output_sequence_length"),
        )
        if not all(isinstance(x, (int, float)) for x in (ttft, latency, osl)):
            raise f.refuse(
                f"{where}: a request without error lacking time_to_first_token, request_latency or "
                "output_sequence_length"
            )
        gaps = value("inter_chunk_latency") or []
        if not isinstance(gaps, list) or not all(isinstance(g, (int, float)) for g in gaps):
            raise f.refuse(f"{where}.inter_chunk_latency is {describe(gaps)}, not a list of numbers")
        reasoning = int(value("reasoning_token_count") or 0)
        out.append(
            RequestRecord(
                index=i,
                prompt_len=int(value("input_sequence_length") or 0),
                server_prompt_tokens=_int_or_none(value("usage_prompt_tokens")),
                output_tokens=int(osl),
                output_tokens_source="usage",
                planned_send_s=rel,
                start_s=rel,
                ttft_s=float(ttft) / 1000.0,
                itl_s=[float(g) / 1000.0 for g in gaps],
                latency_s=float(latency) / 1000.0,
                success=True,
                reasoning_tokens=reasoning,
                answer_tokens=int(value("output_token_count") or (int(osl) - reasoning)),
                token_split_source="usage",
            )
        )
    return out


def _from_statistics(
    f: Fields,
    stats: dict[str, Any],
    config: dict[str, Any],
    concurrency: int | None,
    rate: Any,
    model: str,
    asked_out: Any,
) -> BenchmarkSummary:
    completed = int(_stat(f, stats, "request_count").get("mean", 0))
    failed = int(_stat(f, stats, "error_request_count").get("mean", 0))
    duration = _stat(f, stats, "benchmark_duration").get("mean", 0.0)
    isl = _stat(f, stats, "input_sequence_length")
    osl = _stat(f, stats, "output_sequence_length")
    total_in = _stat(f, stats, "total_isl").get("mean", isl.get("mean", 0.0) * completed)
    total_out = _stat(f, stats, "total_osl").get("mean", osl.get("mean", 0.0) * completed)
    cfg = config_for(input_len=isl.get("mean", 1.0), output_len=float(asked_out or osl.get("max", 1.0)),
                     num_prompts=completed + failed, concurrency=concurrency,
                     rate=float(rate) if isinstance(rate, (int, float)) else None)  # fmt: skip

    def ms(name: str) -> Any:
        vals = _stat(f, stats, name)
        return metric_stats(vals, count=int(vals.get("count", completed)))

    return BenchmarkSummary(
        date=str(config.get("start_time") or ""),
        model_id=model,
        tokenizer_id=model,
        config=cfg,
        duration_s=duration,
        num_prompts=completed + failed,
        completed=completed,
        failed=failed,
        total_input_tokens=round(total_in),
        total_output_tokens=round(total_out),
        request_throughput=_stat(f, stats, "request_throughput").get("mean", 0.0),
        output_throughput=total_out / duration if duration > 0 else 0.0,
        total_token_throughput=(total_in + total_out) / duration if duration > 0 else 0.0,
        ttft_ms=ms("time_to_first_token"),
        tpot_ms=ms("inter_token_latency"),
        itl_ms=ms("inter_chunk_latency"),
        e2el_ms=ms("request_latency"),
        output_tokens_source="usage",
        itl_counting="AIPerf: one gap per parsed response (inter_chunk_latency)",
        notes=[f"Imported from AIPerf's statistics ({f.path.name}); no per-request records beside it.", ITL_NOTE,
               TTFT_NOTE],
    )  # fmt: skip


def _iso(text: Any) -> str:
    try:
        return datetime.fromisoformat(str(text)).isoformat()
    except ValueError:
        return ""


IMPORTERS.add("aiperf", AIPerfImporter())
