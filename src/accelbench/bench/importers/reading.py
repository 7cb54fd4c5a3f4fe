"""What every importer needs: reading a file with refusals that name the file, what was expected and what was
found; typed access to nested fields; and building a ``BenchmarkSummary`` from per-request records (recomputed
under accelbench's definitions) or from a tool's own statistics."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from accelbench.bench.metrics import compute_metrics, peak_rates
from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.errors import UserInputError

#: the statistics accelbench keeps per metric
STAT_KEYS = ("mean", "median", "std", "min", "max", "p50", "p90", "p95", "p99")


def refusal(path: Path, expected: str, found: str) -> UserInputError:
    """The one form of every importer's refusal."""
    return UserInputError(
        f"{path}: expected {expected}, found {found}.", hint="Nothing was imported from any of the files."
    )


def describe(value: Any) -> str:
    """A few words on what a JSON value is, for a refusal."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        keys = sorted(str(k) for k in value)
        shown = ", ".join(keys[:8]) + (", ..." if len(keys) > 8 else "")
        return f"an object with keys {shown}" if keys else "an empty object"
    return type(value).__name__


def as_obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (for optional blocks)."""
    return value if isinstance(value, dict) else {}


def read_text(path: Path, expected: str) -> str:
    if not path.is_file():
        raise refusal(path, expected, "no such file" if not path.exists() else "a directory")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise refusal(path, expected, "a binary file (not UTF-8 text)") from None


def load_json(path: Path, expected: str) -> Any:
    """The JSON document in ``path``; a file that is not JSON is refused with the parser's reason."""
    text = read_text(path, expected)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise refusal(path, expected, f"text that is not JSON ({exc.msg} at line {exc.lineno})") from None


def load_jsonl(path: Path, expected: str) -> list[Any]:
    """One JSON document per non-empty line."""
    out = []
    for n, line in enumerate(read_text(path, expected).splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise refusal(path, expected, f"line {n} that is not JSON ({exc.msg})") from None
    return out


class Fields:
    """Typed access to a file's nested fields; a missing or mistyped field is refused with its dotted path."""

    def __init__(self, path: Path, expected: str) -> None:
        self.path = path
        self.expected = expected

    def refuse(self, found: str) -> UserInputError:
        return refusal(self.path, self.expected, found)

    def obj(self, data: Any, key: str, where: str) -> dict[str, Any]:
        value = data.get(key) if isinstance(data, dict) else None
        if not isinstance(value, dict):
            raise self.refuse(f"{where}.{key} is {describe(value)}, not an object")
        return value

    def items(self, data: Any, key: str, where: str) -> list[Any]:
        value = data.get(key) if isinstance(data, dict) else None
        if not isinstance(value, list):
            raise self.refuse(f"{where}.{key} is {describe(value)}, not a list")
        return value

    def number(self, data: Any, key: str, where: str, *, required: bool = True) -> float | None:
        value = data.get(key) if isinstance(data, dict) else None
        if value is None and not required:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise self.refuse(f"{where}.{key} is {describe(value)}, not a number")
        return float(value)

    def stats(
        self, block: Any, names: Mapping[str, str], where: str, *, scale: float = 1.0
    ) -> dict[str, float]:
        """A tool's block of statistics under accelbench's names (``names``: the tool's -> accelbench's), each
        times ``scale``; an absent block gives none, one that is not an object is refused."""
        if block is None:
            return {}
        if not isinstance(block, dict):
            raise self.refuse(f"{where} is {describe(block)}, not an object")
        out: dict[str, float] = {}
        for theirs, ours in names.items():
            v = self.number(block, theirs, where, required=False)
            if v is not None:
                out[ours] = v * scale
        return out

    def text(self, data: Any, key: str, default: str = "") -> str:
        value = data.get(key) if isinstance(data, dict) else None
        return value if isinstance(value, str) else default


def metric_stats(values: Mapping[str, float | None], *, count: int, scale: float = 1.0) -> MetricStats:
    """``MetricStats`` (ms) from a tool's statistics already under accelbench's keys; ``scale`` converts units
    (1000 for seconds). A missing median falls back to p50 and the reverse."""
    vals = {k: float(v) * scale for k, v in values.items() if v is not None and k in STAT_KEYS}
    if "median" not in vals and "p50" in vals:
        vals["median"] = vals["p50"]
    if "p50" not in vals and "median" in vals:
        vals["p50"] = vals["median"]
    return MetricStats(count=count if vals else 0, **vals)


def summary_from_records(
    records: Sequence[RequestRecord],
    *,
    config: BenchConfig,
    duration_s: float,
    date: str,
    model_id: str,
    notes: list[str],
    itl_counting: str,
) -> BenchmarkSummary:
    """A summary recomputed from per-request records by ``bench.metrics`` (accelbench's definitions)."""
    m = compute_metrics(records, duration_s)
    return BenchmarkSummary(
        **m.model_dump(),
        label=config.label,
        date=date,
        model_id=model_id,
        tokenizer_id=model_id,
        config=config,
        duration_s=duration_s,
        num_prompts=len(records),
        itl_counting=itl_counting,
        requests=list(records),
        notes=notes,
    )


def peak_from_records(records: Sequence[RequestRecord]) -> tuple[float, int]:
    return peak_rates(records)


def config_for(
    *,
    input_len: float,
    output_len: float,
    num_prompts: int,
    concurrency: int | None,
    rate: float | None,
    chat: bool = True,
    label: str | None = None,
) -> BenchConfig:
    """The ``BenchConfig`` a tool's load corresponds to (lengths rounded, at least 1)."""
    return BenchConfig(
        endpoint="chat" if chat else "completions",
        input_len=max(1, round(input_len)),
        output_len=max(1, round(output_len)),
        num_prompts=max(1, num_prompts),
        max_concurrency=concurrency,
        request_rate=rate if rate is not None and rate > 0 else math.inf,
        label=label,
    )


def rel_times(starts: Sequence[float]) -> float:
    """The earliest of absolute send times (the benchmark's zero); 0 for none."""
    return min(starts) if starts else 0.0
