"""llm-d-benchmark's benchmark report (version 0.2 or 0.2.1, JSON or YAML; one report, or a list of them as
``accelbench runs export --format llm-d-report`` prints), validated against the vendored JSON Schema.

A report accelbench wrote carries the cell in ``results.profiling.accelbench`` (vLLM's result layout with
accelbench's key), which is read back exactly, per-request records included. Any other report holds statistics
only: TTFT and request latency are taken as accelbench's TTFT and E2EL with the producing tool's definitions
noted; TPOT and ITL, which harnesses define differently (with or without the first token, per chunk or per
token), stay under the report's names, not directly comparable.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from accelbench.bench.importers import IMPORTERS, ImportedCell, ImportedFile, ToolMetric
from accelbench.bench.importers.llm_d_schema import report_errors
from accelbench.bench.importers.reading import (
    Fields,
    as_obj,
    config_for,
    describe,
    metric_stats,
    read_text,
    refusal,
)
from accelbench.bench.results_io import from_dict
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.errors import UserInputError

EXPECTED = "an llm-d-benchmark benchmark report (version 0.2 or 0.2.1, JSON or YAML) or a list of them"
UNITS_MS = {"ms": 1.0, "s": 1000.0, "ms/token": 1.0, "s/token": 1000.0}
OTHER_TOOLS_NOTE = (
    "Figures as {tool} defines them (from an llm-d-benchmark report): TTFT and request latency are stored as "
    "accelbench's TTFT and E2EL; TPOT and ITL are kept under the report's names."
)


class LlmDReportImporter:
    tool = "llm-d-report"
    description = "llm-d-benchmark benchmark report v0.2/v0.2.1 (JSON or YAML, one report or a list)"
    companions: tuple[str, ...] = ()

    def read(self, path: Path) -> ImportedFile:
        f = Fields(path, EXPECTED)
        text = read_text(path, EXPECTED)
        try:
            data = yaml.safe_load(text)  # YAML is a superset of JSON
        except yaml.YAMLError as exc:
            raise refusal(
                path, EXPECTED, f"text that is neither JSON nor YAML ({str(exc).splitlines()[0]})"
            ) from None
        reports = data if isinstance(data, list) else [data]
        if not reports:
            raise f.refuse("an empty list")
        for i, rep in enumerate(reports):
            if not isinstance(rep, dict) or "results" not in rep or "run" not in rep:
                raise f.refuse(f"report {i} is {describe(rep)} (a report has 'run' and 'results')")
            if str(rep.get("version", "")) not in ("0.2", "0.2.1"):
                raise f.refuse(f"report {i} of version {describe(rep.get('version'))} (read: 0.2, 0.2.1)")
            errors = report_errors(rep)
            if errors:
                raise f.refuse(f"report {i} breaking the schema: " + "; ".join(errors))
        cells = [_cell(f, rep, i) for i, rep in enumerate(reports)]
        first = reports[0]
        engine = _engine(first)
        load = (
            first.get("scenario", {}).get("load", {}).get("standardized", {}) if first.get("scenario") else {}
        )
        return ImportedFile(
            path=path,
            tool=str(load.get("tool") or "llm-d-report"),
            tool_version=str(load.get("tool_version") or ""),
            cells=cells,
            model=engine.get("model")
            or next((c.summary.model_id for c in cells if c.summary.model_id), None),
            engine=engine.get("tool"),
            engine_version=engine.get("tool_version"),
            accelerator=engine.get("accelerator"),
            accelerator_count=engine.get("accelerator_count"),
            base_url=next((c.summary.base_url for c in cells if c.summary.base_url), None),
        )


def _engine(rep: dict[str, Any]) -> dict[str, Any]:
    """The first inference engine (or generic component) of the stack: tool, version, model, accelerator."""
    stack = (rep.get("scenario") or {}).get("stack") or []
    for comp in stack:
        std = comp.get("standardized") or {}
        if std.get("kind") in ("inference_engine", "generic"):
            acc = as_obj(std.get("accelerator"))
            model = std.get("model")
            name = model.get("name") if isinstance(model, dict) else model
            version = std.get("tool_version")
            return {
                "tool": std.get("tool") if std.get("tool") != "unknown" else None,
                "tool_version": version if version != "unknown" else None,
                "model": name if isinstance(name, str) and name != "unknown" else None,
                "accelerator": acc.get("model") if acc.get("model") != "unknown" else None,
                "accelerator_count": acc.get("count") or None,
            }
    return {}


def _cell(f: Fields, rep: dict[str, Any], i: int) -> ImportedCell:
    where = f"report {i}"
    load = ((rep.get("scenario") or {}).get("load") or {}).get("standardized") or {}
    conc = load.get("concurrency")
    concurrency = int(conc) if isinstance(conc, (int, float)) and not math.isinf(conc) and conc >= 1 else None
    in_len = (load.get("input_seq_len") or {}).get("value")
    profiling = (rep.get("results") or {}).get("profiling")
    own = profiling.get("accelbench") if isinstance(profiling, dict) else None
    if isinstance(own, dict):
        try:
            summary = from_dict(own, source=f"{f.path} ({where}, results.profiling.accelbench)")
        except UserInputError as exc:
            raise f.refuse(
                f"{where}: results.profiling.accelbench that does not read back ({exc.message})"
            ) from None
        except ValueError as exc:  # pydantic's ValidationError
            raise f.refuse(f"{where}: results.profiling.accelbench with invalid fields ({exc})") from None
        return ImportedCell(
            where=where,
            summary=summary,
            concurrency=concurrency if concurrency is not None else summary.config.max_concurrency,
            input_len=int(in_len) if isinstance(in_len, (int, float)) else None,
            from_records=bool(summary.requests),
        )
    return _from_statistics(f, rep, where, load, concurrency)


def _stats(block: Any) -> tuple[dict[str, float], float]:
    """A report ``Statistics`` under accelbench's names, and the factor to milliseconds of its units."""
    if not isinstance(block, dict):
        return {}, 1.0
    vals = {
        k: float(block[k])
        for k in ("mean", "min", "max", "p50", "p90", "p95", "p99")
        if block.get(k) is not None
    }
    if block.get("stddev") is not None:
        vals["std"] = float(block["stddev"])
    return vals, UNITS_MS.get(str(block.get("units")), 1.0)


def _from_statistics(
    f: Fields, rep: dict[str, Any], where: str, load: dict[str, Any], concurrency: int | None
) -> ImportedCell:
    agg = f.obj(
        f.obj(f.obj(rep, "results", where), "request_performance", f"{where}.results"),
        "aggregate",
        f"{where}.results.request_performance",
    )
    reqs = f.obj(agg, "requests", f"{where}.aggregate")
    total = int(reqs.get("total") or 0)
    failed = int(reqs.get("failures") or 0)
    ok = max(0, total - failed)
    lat = agg.get("latency") or {}
    thr = agg.get("throughput") or {}
    tool = str(load.get("tool") or "the producing tool")
    in_stats, _ = _stats(reqs.get("input_length"))
    out_stats, _ = _stats(reqs.get("output_length"))
    in_len = (load.get("input_seq_len") or {}).get("value") or in_stats.get("mean") or 1
    out_len = (
        (load.get("output_seq_len") or {}).get("value") or out_stats.get("max") or out_stats.get("mean") or 1
    )
    rate = load.get("rate_qps")
    config = config_for(
        input_len=float(in_len),
        output_len=float(out_len),
        num_prompts=total or 1,
        concurrency=concurrency,
        rate=float(rate) if rate else None,
    )
    ttft, ttft_k = _stats(lat.get("time_to_first_token"))
    e2el, e2el_k = _stats(lat.get("request_latency"))
    duration = _duration(rep)
    out_rate = float((thr.get("output_token_rate") or {}).get("mean") or 0.0)
    in_rate = float((thr.get("input_token_rate") or {}).get("mean") or 0.0)
    req_rate = float((thr.get("request_rate") or {}).get("mean") or 0.0)
    summary = BenchmarkSummary(
        date=str(((rep.get("run") or {}).get("time") or {}).get("start") or ""),
        model_id=_engine(rep).get("model") or "",
        config=config,
        duration_s=duration,
        num_prompts=total,
        completed=ok,
        failed=failed,
        errors={"failed (the report records no reason)": failed} if failed else {},
        total_input_tokens=round(in_stats.get("mean", 0.0) * ok),
        total_output_tokens=round(out_stats.get("mean", 0.0) * ok),
        request_throughput=req_rate,
        output_throughput=out_rate,
        total_token_throughput=float((thr.get("total_token_rate") or {}).get("mean") or in_rate + out_rate),
        ttft_ms=metric_stats(ttft, count=ok, scale=ttft_k),
        e2el_ms=metric_stats(e2el, count=ok, scale=e2el_k),
        output_tokens_source="usage",
        itl_counting=f"as {tool} counts it (kept under the report's name)",
        notes=[
            f"Imported from an llm-d-benchmark report ({f.path.name}, {where}).",
            OTHER_TOOLS_NOTE.format(tool=tool),
        ],
    )
    metrics = []
    for name, words in (
        ("time_per_output_token", "harnesses differ on whether TPOT includes the first token"),
        ("inter_token_latency", "harnesses count ITL per chunk or per token"),
        ("normalized_time_per_output_token", "request latency over output tokens, the first token included"),
    ):
        vals, k = _stats(lat.get(name))
        if vals:
            metrics.append(
                ToolMetric(
                    name=name,
                    unit="ms" if k else "",
                    values={s: v * k for s, v in vals.items()},
                    comparable=False,
                    difference=f"As {tool} defines it: {words}.",
                )
            )
    return ImportedCell(
        where=where,
        summary=summary,
        concurrency=concurrency,
        input_len=round(float(in_len)),
        tool_metrics=metrics,
    )


def _duration(rep: dict[str, Any]) -> float:
    """Seconds of the report's ISO-8601 ``run.time.duration`` (``PT12.5S``, ``PT1M2S``), else 0."""
    text = str(((rep.get("run") or {}).get("time") or {}).get("duration") or "")
    m = re.fullmatch(r"PT(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?", text)
    if not m:
        return 0.0
    h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return h * 3600 + mi * 60 + s


IMPORTERS.add("llm-d-report", LlmDReportImporter())
