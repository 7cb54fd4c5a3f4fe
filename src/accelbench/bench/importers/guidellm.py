"""GuideLLM's ``benchmarks.json`` (``guidellm benchmark --output-path``, report layout version 2 of the 0.4-0.8
releases): one benchmark per strategy (synchronous, concurrent, throughput, constant, poisson, a sweep's points).

How GuideLLM defines its figures (``guidellm/schemas/request_stats.py``, ``backends/openai/http.py``):

- TTFT: request start -> first SSE line that carries tokens (a role-only chunk carries none): accelbench's.
- ``inter_token_latency_ms``: (last token - first token) / (output tokens - 1) per request, which is
  accelbench's TPOT, not its ITL (accelbench's ITL is the gap between consecutive chunks).
- ``time_per_output_token_ms``: (last token - request start) / output tokens: the first token's wait included;
  no accelbench figure means that, so it stays under GuideLLM's name.
- ``request_latency``: request start -> response end (after the usage chunk and ``[DONE]``), seconds;
  accelbench's E2EL ends at the last text-carrying chunk.
- Percentiles by nearest rank on the sorted values; accelbench interpolates linearly (numpy's default).
- Per-request records (``requests.successful/errored/incomplete``, sampled when ``--sample-requests`` was
  given) hold the timestamps; accelbench recomputes TTFT, TPOT and E2EL from them. They hold no per-chunk
  times, so accelbench's ITL cannot be recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord

EXPECTED = "a GuideLLM benchmarks.json report (an object with 'benchmarks', each with 'config.strategy' and 'metrics')"
ITL_NOTE = (
    "GuideLLM records no per-chunk times: accelbench's ITL (gap between consecutive chunks) is not known; "
    "GuideLLM's inter_token_latency_ms is a per-request token average, stored as accelbench's TPOT."
)
DIFFERENCES = {
    "time_per_output_token_ms": (
        "ms",
        "GuideLLM's TPOT is (last token - request start) / output tokens, the first token's wait included; "
        "accelbench's TPOT excludes the first token: (E2EL - TTFT) / (output tokens - 1).",
    ),
    "request_latency": (
        "s",
        "GuideLLM's request latency runs to the response's end (usage chunk and [DONE] included); accelbench's "
        "E2EL ends at the last text-carrying chunk.",
    ),
    "time_to_first_output_token_ms": (
        "ms",
        "GuideLLM's time to the first non-reasoning token; accelbench calls it TTFO.",
    ),
}
#: GuideLLM's statistic names of a distribution -> accelbench's, and those of its percentiles
STATS = {"mean": "mean", "median": "median", "std_dev": "std", "min": "min", "max": "max", "count": "count",
         "total_sum": "total"}  # fmt: skip
PERCENTILES = {p: p for p in ("p50", "p90", "p95", "p99")}
PERCENTILE_NOTE = (
    "GuideLLM's percentiles are nearest-rank; accelbench interpolates (numpy linear), so p90/p99 of few requests "
    "differ."
)


class GuideLLMImporter:
    tool = "guidellm"
    description = "GuideLLM benchmarks.json (guidellm benchmark --output-path FILE.json)"
    companions: tuple[str, ...] = ()

    def read(self, path: Path) -> ImportedFile:
        f = Fields(path, EXPECTED)
        data = load_json(path, EXPECTED)
        if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
            raise f.refuse(describe(data))
        benchmarks = data["benchmarks"]
        if not benchmarks:
            raise f.refuse("an empty 'benchmarks' list")
        meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        backend = _backend(data)
        model = f.text(backend, "model") or None
        chat = "/v1/completions" not in f.text(backend, "request_format")
        cells = [self._cell(f, b, i, model or "", chat) for i, b in enumerate(benchmarks)]
        return ImportedFile(
            path=path,
            tool=self.tool,
            tool_version=f.text(meta, "guidellm_version"),
            cells=cells,
            model=model,
            base_url=f.text(backend, "target") or None,
        )

    def _cell(self, f: Fields, bench: Any, i: int, model: str, chat: bool) -> ImportedCell:
        where = f"benchmarks[{i}]"
        if not isinstance(bench, dict):
            raise f.refuse(f"{where} is {describe(bench)}")
        strategy = f.obj(f.obj(bench, "config", where), "strategy", f"{where}.config")
        metrics = f.obj(bench, "metrics", where)
        concurrency, rate = _load(f, strategy, f"{where}.config.strategy")
        duration = f.number(bench, "duration", where) or 0.0
        counts = f.obj(metrics, "request_totals", f"{where}.metrics")
        totals = _Totals(
            ok=int(f.number(counts, "successful", f"{where}.metrics.request_totals") or 0),
            errored=int(f.number(counts, "errored", f"{where}.metrics.request_totals") or 0),
            incomplete=int(
                f.number(counts, "incomplete", f"{where}.metrics.request_totals", required=False) or 0
            ),
            in_len=_dist(f, metrics, "prompt_token_count", where),
            out_len=_dist(f, metrics, "output_token_count", where),
            duration=duration,
        )
        config = config_for(
            input_len=totals.in_len.get("mean", 1.0),
            output_len=totals.out_len.get("max", totals.out_len.get("mean", 1.0)),
            num_prompts=totals.sent,
            concurrency=concurrency,
            rate=rate,
            chat=chat,
        )
        notes = [f"Imported from GuideLLM ({f.path.name}, {where}, strategy {strategy.get('type_')})."]
        tool_metrics = _tool_metrics(f, metrics, where)
        records = _records(f, bench, where)
        if records:
            summary = summary_from_records(
                records,
                config=config,
                duration_s=totals.duration,
                date=_iso(bench.get("start_time")),
                model_id=model,
                notes=[*notes, ITL_NOTE],
                itl_counting="not recorded by GuideLLM",
            )
            if len(records) < totals.sent:
                totals.apply(summary)
                summary.notes.append(
                    f"GuideLLM kept a sample of {len(records)} of {totals.sent} requests: latency "
                    "figures are recomputed from the sample, counts and throughputs are GuideLLM's totals."
                )
        else:
            summary = _from_statistics(f, metrics, config, totals, where)
            summary.model_id = summary.tokenizer_id = model
            summary.date = _iso(bench.get("start_time"))
            summary.notes = [*notes, ITL_NOTE, PERCENTILE_NOTE, DIFFERENCES["request_latency"][1]]
        if totals.incomplete:
            summary.notes.append(
                f"{totals.incomplete} requests were cut off at the benchmark's end (GuideLLM: incomplete)."
            )
        return ImportedCell(
            where=where,
            summary=summary,
            concurrency=concurrency,
            tool_metrics=tool_metrics,
            from_records=bool(records),
        )


def _backend(data: dict[str, Any]) -> dict[str, Any]:
    """The backend block: ``config.spec.backend`` (0.8), ``config.backend`` or ``args`` (earlier layouts)."""
    config = as_obj(data.get("config"))
    for candidate in (
        as_obj(config.get("spec")).get("backend"),
        config.get("backend"),
        data.get("args"),
    ):
        if isinstance(candidate, dict):
            return candidate
    return {}


def _load(f: Fields, strategy: dict[str, Any], where: str) -> tuple[int | None, float | None]:
    """(concurrency, rate) of a GuideLLM strategy; a rate-driven one has no fixed concurrency."""
    kind = strategy.get("type_")
    if kind == "synchronous":
        return 1, None
    if kind == "concurrent":
        return int(f.number(strategy, "streams", where) or 1), None
    if kind == "throughput":
        cap = f.number(strategy, "max_concurrency", where, required=False)
        return (int(cap) if cap else None), None
    if kind in ("constant", "poisson", "async"):
        return None, f.number(strategy, "rate", where)
    raise f.refuse(
        f"{where}.type_ {describe(kind)} (known: synchronous, concurrent, throughput, constant, poisson)"
    )


def _dist(f: Fields, metrics: dict[str, Any], name: str, where: str) -> dict[str, float]:
    """A GuideLLM distribution of successful requests under accelbench's statistic names."""
    block = metrics.get(name)
    if block is None:
        return {}
    d = f.obj(f.obj(metrics, name, f"{where}.metrics"), "successful", f"{where}.metrics.{name}")
    at = f"{where}.metrics.{name}.successful"
    pct = d.get("percentiles") if isinstance(d.get("percentiles"), dict) else {}
    return {**f.stats(d, STATS, at), **f.stats(pct, PERCENTILES, f"{at}.percentiles")}


def _tool_metrics(f: Fields, metrics: dict[str, Any], where: str) -> list[ToolMetric]:
    out = []
    for name, (unit, difference) in DIFFERENCES.items():
        values = _dist(f, metrics, name, where)
        if values:
            out.append(
                ToolMetric(name=name, unit=unit, values=values, comparable=False, difference=difference)
            )
    itl = _dist(f, metrics, "inter_token_latency_ms", where)
    if itl:
        out.append(
            ToolMetric(
                name="inter_token_latency_ms",
                unit="ms",
                values=itl,
                comparable=False,
                difference="GuideLLM's ITL is (last token - first token) / (output tokens - 1) per request: "
                "accelbench's TPOT, not its ITL (the gap between consecutive chunks).",
            )
        )
    return out


@dataclass(frozen=True)
class _Totals:
    """GuideLLM's request totals of one benchmark: the successful, errored and cut-off requests, the token
    distributions of prompts and outputs, and the benchmark's duration (s)."""

    ok: int
    errored: int
    incomplete: int
    in_len: dict[str, float]
    out_len: dict[str, float]
    duration: float

    @property
    def sent(self) -> int:
        return self.ok + self.errored + self.incomplete

    def tokens(self) -> tuple[float, float]:
        """Input and output tokens of the successful requests: GuideLLM's sums, else its means times ``ok``."""
        in_len, out_len, ok = self.in_len, self.out_len, self.ok
        return in_len.get("total", in_len.get("mean", 0.0) * ok), out_len.get(
            "total", out_len.get("mean", 0.0) * ok
        )

    def apply(self, summary: BenchmarkSummary) -> None:
        """Set the summary's request counts, token totals and throughputs to GuideLLM's totals."""
        in_total, out_total = self.tokens()
        summary.completed, summary.failed = self.ok, self.errored
        summary.total_input_tokens, summary.total_output_tokens = round(in_total), round(out_total)
        if self.duration > 0:
            summary.request_throughput = self.ok / self.duration
            summary.output_throughput = out_total / self.duration
            summary.total_token_throughput = (in_total + out_total) / self.duration


def _from_statistics(
    f: Fields, metrics: dict[str, Any], config: BenchConfig, totals: _Totals, where: str
) -> BenchmarkSummary:
    """A summary from GuideLLM's statistics alone (the file kept no request records)."""
    ttft = _dist(f, metrics, "time_to_first_token_ms", where)
    tpot = _dist(f, metrics, "inter_token_latency_ms", where)  # per-request token average = accelbench TPOT
    e2el = _dist(f, metrics, "request_latency", where)
    ok, errored = totals.ok, totals.errored
    summary = BenchmarkSummary(
        date="",
        config=config,
        duration_s=totals.duration,
        num_prompts=config.num_prompts,
        errors={"errored (GuideLLM records no reason in its statistics)": errored} if errored else {},
        ttft_ms=metric_stats(ttft, count=int(ttft.get("count", ok))),
        tpot_ms=metric_stats(tpot, count=int(tpot.get("count", ok))),
        e2el_ms=metric_stats(e2el, count=int(e2el.get("count", ok)), scale=1000.0),
        output_tokens_source="usage",
        itl_counting="not recorded by GuideLLM",
    )
    totals.apply(summary)
    return summary


def _records(f: Fields, bench: dict[str, Any], where: str) -> list[RequestRecord]:
    """Per-request records under accelbench's definitions (times relative to the first send)."""
    reqs = bench.get("requests")
    if not isinstance(reqs, dict):
        return []
    rows: list[tuple[str, dict[str, Any], str]] = []
    for status in ("successful", "errored", "incomplete"):
        items = reqs.get(status) or []
        if not isinstance(items, list):
            raise f.refuse(f"{where}.requests.{status} is {describe(items)}, not a list")
        for j, r in enumerate(items):
            if not isinstance(r, dict):
                raise f.refuse(f"{where}.requests.{status}[{j}] is {describe(r)}")
            rows.append((status, r, f"{where}.requests.{status}[{j}]"))
    if not rows:
        return []
    timed = []
    for status, r, at in rows:
        timings = f.obj(f.obj(r, "info", at), "timings", f"{at}.info")
        start = f.number(timings, "request_start", f"{at}.info.timings", required=False)
        if start is None:
            start = f.number(timings, "resolve_start", f"{at}.info.timings", required=status != "incomplete")
        timed.append((status, r, at, timings, start))
    t0 = min(s for *_, s in timed if s is not None)
    return [
        _record(f, i, status, r, at, timings, start, t0)
        for i, (status, r, at, timings, start) in enumerate(timed)
    ]


def _tokens(metrics: Any) -> int | None:
    if not isinstance(metrics, dict):
        return None
    for key in ("total_tokens", "text_tokens"):
        v = metrics.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(v)
    return None


def _record(
    f: Fields,
    index: int,
    status: str,
    r: dict[str, Any],
    at: str,
    timings: dict[str, Any],
    start: float | None,
    t0: float,
) -> RequestRecord:
    first = f.number(timings, "first_token_iteration", f"{at}.info.timings", required=False)
    last = f.number(timings, "last_token_iteration", f"{at}.info.timings", required=False)
    target = f.number(timings, "targeted_start", f"{at}.info.timings", required=False)
    ok = status == "successful"
    if ok and (start is None or first is None or last is None):
        raise f.refuse(
            f"{at}: a successful request without request_start/first_token_iteration/last_token_iteration"
        )
    begin = start if start is not None else t0
    out_tokens = _tokens(r.get("output_metrics"))
    if out_tokens is None:
        out_tokens = int(timings.get("token_iterations") or 0)
    prompt = _tokens(r.get("input_metrics")) or 0
    error = "" if ok else str((r.get("info") or {}).get("error") or f"GuideLLM: {status}")
    first_out = f.number(timings, "first_output_token_iteration", f"{at}.info.timings", required=False)
    return RequestRecord(
        index=index,
        prompt_len=prompt,
        server_prompt_tokens=prompt if ok else None,
        output_tokens=out_tokens if ok else 0,
        output_tokens_source="usage" if ok else "none",
        planned_send_s=(target - t0) if target is not None else begin - t0,
        start_s=begin - t0,
        ttft_s=(first - begin) if ok and first is not None else 0.0,
        latency_s=(last - begin) if ok and last is not None else 0.0,
        ttfo_s=(first_out - begin) if ok and first_out is not None else None,
        success=ok,
        error=error,
        generated_text=str(r.get("output") or "") if ok else "",
        answer_tokens=out_tokens if ok else 0,
    )


def _iso(t: Any) -> str:
    if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0:
        return datetime.fromtimestamp(t, UTC).isoformat()
    return ""


IMPORTERS.add("guidellm", GuideLLMImporter())
