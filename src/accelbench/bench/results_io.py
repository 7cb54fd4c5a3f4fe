"""Result files in the layout of ``vllm bench serve --save-result --save-detailed``, both ways.

``write_result`` writes vLLM's top-level keys with vLLM's units (per-request times in seconds, statistics in
milliseconds, ``request_rate`` ``"inf"`` when unlimited), the per-request arrays included, and adds one key,
``accelbench``, holding what vLLM's layout has no room for (the full summary: config, scheduling lag, prompt-token
check, telemetry, notes; and per-request fields such as planned send times and where output counts came from).
Tools that read vLLM's files read these; ``read_result`` reads both these and vLLM's own files back into a
``BenchmarkSummary``.

Two differences from a file vLLM writes: ``start_times`` are seconds from the benchmark start (vLLM writes raw
``perf_counter`` values, meaningless outside the process), and percentiles p50/p90/p95/p99 are all present
(vLLM writes those asked with ``--metric-percentiles``, p99 by default).
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from accelbench import __version__
from accelbench.bench.metrics import compute_metrics, error_kind, peak_in_flight
from accelbench.domain.answers import MalformedAnswer, decode_text, load_json
from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats
from accelbench.domain.load import BenchConfig, EndpointKind
from accelbench.domain.request_record import RequestRecord
from accelbench.errors import UserInputError

FORMAT = 1
METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILE_KEYS = ("p50", "p90", "p95", "p99")
#: Per-request fields kept under ``accelbench.requests`` (vLLM's arrays carry the rest).
EXTRA_REQUEST_FIELDS = (
    "index",
    "prompt_len",
    "server_prompt_tokens",
    "max_tokens",
    "output_tokens_source",
    "planned_send_s",
    "queue_s",
    "success",
    # the workload shapes' fields: absent from older files (the record's defaults then apply)
    "session",
    "turn",
    "prefix_group",
    "ttfo_s",
    "reasoning_tokens",
    "answer_tokens",
    "reasoning_chunks",
    "answer_chunks",
    "token_split_source",
    # absent from files written before the staggered start (False then)
    "ramp",
)
#: the fields every file of this format has
REQUIRED_REQUEST_FIELDS = EXTRA_REQUEST_FIELDS[: EXTRA_REQUEST_FIELDS.index("success") + 1]
_BACKENDS = {EndpointKind.chat: "openai-chat", EndpointKind.completions: "openai"}


def _vllm_date(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%Y%m%d-%H%M%S")
    except ValueError:
        return iso


def to_vllm_dict(summary: BenchmarkSummary) -> dict[str, Any]:
    """The summary as a ``vllm bench serve`` result dict, plus the ``accelbench`` key."""
    cfg = summary.config
    reqs = summary.requests
    rate = cfg.request_rate
    backend = _BACKENDS[EndpointKind(cfg.endpoint)]
    out: dict[str, Any] = {
        "date": _vllm_date(summary.date),
        "endpoint_type": backend,
        "backend": backend,
        "label": summary.label,
        "model_id": summary.model_id,
        "tokenizer_id": summary.tokenizer_id,
        "num_prompts": summary.num_prompts,
        "request_rate": "inf" if math.isinf(rate) else rate,
        "burstiness": cfg.burstiness,
        "max_concurrency": cfg.max_concurrency,
        "duration": summary.duration_s,
        "completed": summary.completed,
        "failed": summary.failed,
        "total_input_tokens": summary.total_input_tokens,
        "total_output_tokens": summary.total_output_tokens,
        "request_throughput": summary.request_throughput,
        "request_goodput": summary.request_goodput,
        "output_throughput": summary.output_throughput,
        "total_token_throughput": summary.total_token_throughput,
        "input_lens": [
            r.server_prompt_tokens if r.server_prompt_tokens is not None else r.prompt_len for r in reqs
        ],
        "output_lens": [r.output_tokens if r.success else 0 for r in reqs],
        "ttfts": [r.ttft_s for r in reqs],
        "itls": [list(r.itl_s) for r in reqs],
        "latencies": [r.latency_s for r in reqs],
        "start_times": [r.start_s for r in reqs],
        "queue_times": [r.queue_s for r in reqs],
        "generated_texts": [r.generated_text for r in reqs],
        "errors": [r.error for r in reqs],
        "max_output_tokens_per_s": summary.max_output_tokens_per_s,
        "max_concurrent_requests": summary.max_concurrent_requests,
        "rtfx": 0.0,
    }
    for metric in METRICS:
        st: MetricStats = getattr(summary, f"{metric}_ms")
        out[f"mean_{metric}_ms"] = st.mean
        out[f"median_{metric}_ms"] = st.median
        out[f"std_{metric}_ms"] = st.std
        for p in PERCENTILE_KEYS:
            out[f"{p}_{metric}_ms"] = getattr(st, p)
        for k in ("mean", "median", *PERCENTILE_KEYS):
            if (ci := getattr(st, f"{k}_ci95")) is not None:
                out[f"{k}_{metric}_ms_ci95"] = ci
    for key in ("request_throughput", "output_throughput", "total_token_throughput", "request_goodput"):
        if (ci := getattr(summary, f"{key}_ci95")) is not None:
            out[f"{key}_ci95"] = ci
    body = json.loads(summary.model_dump_json(exclude={"requests"}))
    out["accelbench"] = {
        "format": FORMAT,
        "version": __version__,
        "summary": body,
        "requests": {f: [getattr(r, f) for r in reqs] for f in EXTRA_REQUEST_FIELDS},
    }
    return out


def write_result(summary: BenchmarkSummary, path: str | Path) -> Path:
    """Write ``summary`` as a vLLM-layout JSON file (parent directories are created)."""
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    data = to_vllm_dict(summary)
    p.write_text(json.dumps(data, allow_nan=False, default=_json_default) + "\n", encoding="utf-8")
    return p


def _json_default(obj: Any) -> Any:
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_result(path: str | Path) -> BenchmarkSummary:
    """Read a result file written by accelbench or by ``vllm bench serve --save-result`` (the first object of an
    ``--append-result`` file)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserInputError(f"Result file {p} does not exist.")
    raw = decode_text(p.read_bytes(), str(p))
    try:
        data = load_json(raw, str(p))
    except MalformedAnswer:
        lines = raw.strip().splitlines()
        if len(lines) < 2:
            raise
        data = load_json(lines[0], str(p))  # vLLM's --append-result: one JSON object per line
    if not isinstance(data, dict):
        raise MalformedAnswer(f"{p} is not a benchmark result (expected a JSON object).")
    try:
        return from_dict(data, source=str(p))
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, ValidationError) as exc:
        # a field of the right JSON type but the wrong shape (a missing key, a short list, a bad value)
        raise MalformedAnswer(f"{p} is not a readable benchmark result: {_why(exc)}.") from None


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors(include_url=False)[0]
        return f"field '{'.'.join(str(x) for x in err['loc'])}': {err['msg'].lower()}"
    if isinstance(exc, KeyError):
        return f"field {exc.args[0]!r} is missing"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def from_dict(data: dict[str, Any], *, source: str = "result") -> BenchmarkSummary:
    if isinstance(data.get("accelbench"), dict):
        return _from_accelbench(data, source)
    if "completed" not in data or "duration" not in data:
        raise MalformedAnswer(
            f"{source} is neither an accelbench nor a vllm bench serve result (no 'completed'/'duration')."
        )
    return _from_vllm(data, source)


def _from_accelbench(data: dict[str, Any], source: str) -> BenchmarkSummary:
    ab = data["accelbench"]
    if ab.get("format", 1) > FORMAT:
        raise UserInputError(
            f"{source} was written by a newer accelbench (format {ab.get('format')}).",
            hint="Upgrade accelbench to read it.",
        )
    body = dict(ab["summary"])
    extra = ab.get("requests") or {}
    n = len(extra.get("index", []))
    arrays = {k: data.get(k) or [] for k in ("ttfts", "itls", "latencies", "start_times", "errors")}
    texts = data.get("generated_texts") or [""] * n
    outs = data.get("output_lens") or [0] * n
    if any(len(v) != n for v in arrays.values()):
        raise MalformedAnswer(f"{source}: per-request arrays have different lengths; the file is damaged.")
    records = []
    for i in range(n):
        server_pt = extra["server_prompt_tokens"][i]
        records.append(
            RequestRecord(
                index=extra["index"][i],
                prompt_len=extra["prompt_len"][i],
                server_prompt_tokens=server_pt,
                max_tokens=extra["max_tokens"][i],
                output_tokens=outs[i],
                output_tokens_source=extra["output_tokens_source"][i],
                planned_send_s=extra["planned_send_s"][i],
                queue_s=extra["queue_s"][i],
                start_s=arrays["start_times"][i],
                ttft_s=arrays["ttfts"][i],
                itl_s=arrays["itls"][i],
                latency_s=arrays["latencies"][i],
                success=extra["success"][i],
                error=arrays["errors"][i] or "",
                generated_text=texts[i] or "",
                **{
                    f: extra[f][i]
                    for f in EXTRA_REQUEST_FIELDS
                    if f not in REQUIRED_REQUEST_FIELDS and f in extra
                },
            )
        )
    body["requests"] = records
    return BenchmarkSummary.model_validate(body)


def _num(v: Any, default: float = 0.0) -> float:
    if v is None:
        return default
    if isinstance(v, str):
        return math.inf if v.lower() in ("inf", "infinity") else float(v)
    return float(v)


#: the per-request arrays of a vLLM result that hold numbers (``itls``: a list of numbers per request)
_VLLM_ARRAYS = ("ttfts", "latencies", "start_times", "input_lens", "output_lens", "queue_times", "itls")
_VLLM_COUNTS = (
    "completed",
    "failed",
    "num_prompts",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrency",
)
_VLLM_NUMBERS = ("duration", "request_rate", "burstiness")


def _is_number(v: Any, *, integer: bool = False) -> bool:
    if v is None:
        return True
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return not integer or float(v).is_integer()
    if isinstance(v, str):
        try:
            int(v) if integer else float(v)
        except ValueError:
            return False
        return True
    return False


def _check_vllm_numbers(data: dict[str, Any], source: str) -> None:
    """Refuse a field (or one request's entry) that should be a number and is not, naming the field and the
    request, before anything is converted."""
    stat_keys = [f"{k}_{m}_ms" for m in METRICS for k in ("mean", "median", "std", *PERCENTILE_KEYS)]
    for key in (*_VLLM_COUNTS, *_VLLM_NUMBERS, *stat_keys):
        if not _is_number(data.get(key), integer=key in _VLLM_COUNTS):
            what = "a whole number" if key in _VLLM_COUNTS else "a number"
            raise MalformedAnswer(f"{source}: field {key!r} is {data[key]!r}, not {what}.")
    for key in _VLLM_ARRAYS:
        values = data.get(key)
        if values is None:
            continue
        if not isinstance(values, list):
            raise MalformedAnswer(
                f"{source}: field {key!r} is {values!r}, not a list (one entry per request)."
            )
        for i, v in enumerate(values):
            for x in v if key == "itls" and isinstance(v, list) else [v]:
                if not _is_number(x):
                    raise MalformedAnswer(f"{source}: field {key!r}, request {i}: {x!r} is not a number.")


def _from_vllm(data: dict[str, Any], source: str) -> BenchmarkSummary:
    _check_vllm_numbers(data, source)
    backend = str(data.get("backend") or data.get("endpoint_type") or "")
    kind = EndpointKind.chat if "chat" in backend else EndpointKind.completions
    notes = [f"Imported from a vllm bench serve result ({source}); its dataset and seed are not recorded."]
    records = _vllm_records(data)
    detailed = bool(records)
    if detailed:
        notes.append(
            "vLLM's client starts TTFT at its first chunk with choices (a role-only chunk counts) and records "
            "no output-token source; counts are taken as the server's usage."
        )
    else:
        notes.append(
            "The file has no per-request arrays (saved without --save-detailed): statistics are vLLM's own."
        )
    completed = int(data.get("completed") or 0)
    config = _vllm_config(data, kind, records, completed)
    stats = _vllm_stats(data, records, completed)
    return BenchmarkSummary(
        label=data.get("label"),
        date=_vllm_file_date(data),
        model_id=str(data.get("model_id") or ""),
        tokenizer_id=str(data.get("tokenizer_id") or ""),
        config=config,
        duration_s=_num(data.get("duration")),
        num_prompts=config.num_prompts,
        completed=completed,
        failed=int(data.get("failed") or (len(records) - completed if records else 0)),
        errors=_vllm_errors(data),
        total_input_tokens=int(data.get("total_input_tokens") or 0),
        total_output_tokens=int(data.get("total_output_tokens") or 0),
        request_throughput=_num(data.get("request_throughput")),
        request_goodput=None if data.get("request_goodput") is None else _num(data.get("request_goodput")),
        output_throughput=_num(data.get("output_throughput")),
        total_token_throughput=_num(data.get("total_token_throughput")),
        max_output_tokens_per_s=_num(data.get("max_output_tokens_per_s")),
        max_concurrent_requests=int(data.get("max_concurrent_requests") or 0),
        # vLLM does not write it: from its send times
        peak_in_flight=peak_in_flight(records) if records else 0,
        ttft_ms=stats["ttft"],
        tpot_ms=stats["tpot"],
        itl_ms=stats["itl"],
        e2el_ms=stats["e2el"],
        scheduling_lag_ms=MetricStats(),  # vLLM does not record planned send times
        output_tokens_source="usage" if detailed else "none",
        itl_counting="vLLM client: one gap per SSE chunk with choices (a role-only first chunk counts)",
        requests=records,
        notes=notes,
    )


def _vllm_records(data: dict[str, Any]) -> list[RequestRecord]:
    """The per-request records of a file saved with ``--save-detailed`` (none without its arrays): times from
    the first send, a request with an error failed."""
    raw_ttfts = data.get("ttfts")
    ttfts: list[Any] = raw_ttfts if isinstance(raw_ttfts, list) else []
    n = len(ttfts)
    if not n:
        return []
    starts = data.get("start_times") or [0.0] * n
    t_min = min(starts) if starts else 0.0
    errs = data.get("errors") or [""] * n
    itls = data.get("itls") or [[] for _ in range(n)]
    lats = data.get("latencies") or [0.0] * n
    ins = data.get("input_lens") or [0] * n
    outs = data.get("output_lens") or [0] * n
    texts = data.get("generated_texts") or [""] * n
    queues = data.get("queue_times") or [0.0] * n
    records: list[RequestRecord] = []
    for i in range(n):
        ok = not errs[i]
        records.append(
            RequestRecord(
                index=i,
                prompt_len=int(ins[i] or 0),
                output_tokens=int(outs[i] or 0),
                output_tokens_source="usage" if ok else "none",
                planned_send_s=starts[i] - t_min,
                queue_s=float(queues[i] or 0.0),
                start_s=starts[i] - t_min,
                ttft_s=float(ttfts[i] or 0.0),
                itl_s=[float(x) for x in itls[i] or []],
                latency_s=float(lats[i] or 0.0),
                success=ok,
                error=str(errs[i] or ""),
                generated_text=str(texts[i] or ""),
            )
        )
    return records


def _vllm_config(
    data: dict[str, Any], kind: EndpointKind, records: list[RequestRecord], completed: int
) -> BenchConfig:
    """The config a vLLM result was measured with, as far as the file says: the asked length is the completed
    requests' (or, when none completed, every request's), else the totals per completed request."""
    ok_in = [r.prompt_len for r in records if r.success] or [r.prompt_len for r in records if r.prompt_len]
    ok_out = [r.output_tokens for r in records if r.success]
    if ok_in:
        input_len = int(statistics.median(ok_in))
    else:
        input_len = int(_num(data.get("total_input_tokens")) / max(1, completed))
    output_len = max(ok_out) if ok_out else int(_num(data.get("total_output_tokens")) / max(1, completed))
    rate = _num(data.get("request_rate"), math.inf)
    return BenchConfig(
        endpoint=kind,
        input_len=max(1, input_len),
        output_len=max(1, output_len),
        num_prompts=max(1, int(data.get("num_prompts") or len(records) or completed or 1)),
        max_concurrency=data.get("max_concurrency"),
        request_rate=rate if rate > 0 else math.inf,
        burstiness=_num(data.get("burstiness"), 1.0) or 1.0,
        label=data.get("label"),
    )


def _vllm_stats(data: dict[str, Any], records: list[RequestRecord], completed: int) -> dict[str, MetricStats]:
    """Per metric: vLLM's own statistics where the file has them, over those recomputed from the records."""
    stats: dict[str, MetricStats] = {}
    recomputed = compute_metrics(records, _num(data.get("duration"))) if records else None
    for metric in METRICS:
        base = getattr(recomputed, f"{metric}_ms") if recomputed is not None else MetricStats()
        vals = base.model_dump()
        for key, field_name in (("mean", "mean"), ("median", "median"), ("std", "std")):
            v = data.get(f"{key}_{metric}_ms")
            if v is not None:
                vals[field_name] = float(v)
        for p in PERCENTILE_KEYS:
            v = data.get(f"{p}_{metric}_ms")
            if v is not None:
                vals[p] = float(v)
        if recomputed is None and vals["median"] and not vals["p50"]:
            vals["p50"] = vals["median"]
        if recomputed is None and data.get(f"mean_{metric}_ms") is not None and metric in ("ttft", "e2el"):
            vals["count"] = completed
        stats[metric] = MetricStats.model_validate(vals)
    return stats


def _vllm_errors(data: dict[str, Any]) -> dict[str, int]:
    """How many requests failed of each kind, from the file's error texts (their last lines)."""
    errors: dict[str, int] = {}
    for e in (str(e) for e in (data.get("errors") or []) if e):
        k = error_kind(e.strip().splitlines()[-1] if e.strip() else e)
        errors[k] = errors.get(k, 0) + 1
    return errors


def _vllm_file_date(data: dict[str, Any]) -> str:
    """The file's ``date`` (vLLM's ``%Y%m%d-%H%M%S``) in ISO form; as written when it is not that."""
    date = str(data.get("date") or "")
    with contextlib.suppress(ValueError):
        date = datetime.strptime(date, "%Y%m%d-%H%M%S").isoformat()
    return date
