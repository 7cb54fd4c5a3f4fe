"""Traffic in: a day (or week) of requests as arrival rates per interval, their burstiness and the length mix.

Three inputs, told apart by the file (``read_traffic``):

- a **trace** in a format ``bench`` replays (``bench/trace.py``: Mooncake JSONL, BurstGPT CSV): its rows are
  counted per interval (``interval_s``, default one hour); the burstiness of each interval is the index of
  dispersion (variance / mean) of its arrivals counted per ``window_s`` window (1 for Poisson arrivals);
- a **profile** in YAML (``.yaml``/``.yml``): ``intervals:`` a list of ``{requests_per_s, seconds?,
  input_tokens?, output_tokens?, burstiness?}``, with defaults for the same keys at the top (``interval_s``,
  ``input_tokens``, ``output_tokens``, ``burstiness``); a length is a number of tokens or a distribution
  written as ``{tokens: share}`` (e.g. ``{256: 0.7, 2048: 0.3}``), of which the mean is used;
- a **profile** in CSV: a header with ``requests_per_s`` and any of ``start_s``, ``seconds``,
  ``input_tokens``, ``output_tokens``, ``burstiness`` (a CSV whose header has BurstGPT's ``Timestamp`` is a
  trace).

Every refusal names the file, the line and the field. Nothing here touches a store.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field

from accelbench.bench.trace import read_trace, trace_format
from accelbench.domain.limits import MAX_TOKENS
from accelbench.domain.strict import StrictModel
from accelbench.errors import UserInputError

TrafficFormat = Literal["mooncake", "burstgpt", "profile"]

MAX_INTERVALS = 10_080  # a week of minutes
MAX_TRACE_ROWS = 5_000_000
MAX_RATE = 1_000_000.0  # requests/s of one interval
PROFILE_KEYS = ("requests_per_s", "seconds", "input_tokens", "output_tokens", "burstiness")
PROFILE_TOP_KEYS = ("interval_s", "input_tokens", "output_tokens", "burstiness", "intervals")
CSV_KEYS = ("start_s", *PROFILE_KEYS)


class Interval(StrictModel):
    """One stretch of the traffic at one mean arrival rate."""

    start_s: float = Field(description="Seconds from the traffic's start.")
    seconds: float = Field(gt=0, description="Length of the interval.")
    requests: float = Field(ge=0, description="Requests arriving in the interval.")
    requests_per_s: float = Field(ge=0, description="Mean arrival rate.")
    input_tokens: float = Field(ge=0, description="Mean prompt tokens of its requests.")
    output_tokens: float = Field(ge=0, description="Mean output tokens of its requests.")
    burstiness: float = Field(
        default=1.0, gt=0, description="Variance / mean of arrivals per window (1: Poisson)."
    )


class Traffic(StrictModel):
    """The traffic a fleet must serve."""

    source: str = Field(description="The file's name.")
    path: str | None = Field(default=None, description="The file read (a trace is read again to replay it).")
    format: TrafficFormat
    interval_s: float = Field(description="The interval length asked for (the last may be shorter).")
    window_s: float = Field(
        description="The window the within-interval peak (and a trace's burstiness) is read over."
    )
    intervals: list[Interval]
    notes: list[str] = Field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(i.seconds for i in self.intervals)

    @property
    def requests(self) -> float:
        return sum(i.requests for i in self.intervals)

    def mean_tokens(self) -> tuple[float, float]:
        """(input, output) tokens per request, weighted by requests (by time when there are none)."""
        weights = [i.requests for i in self.intervals]
        if sum(weights) <= 0:
            weights = [i.seconds for i in self.intervals]
        total = sum(weights)
        inp = sum(w * i.input_tokens for w, i in zip(weights, self.intervals, strict=True)) / total
        out = sum(w * i.output_tokens for w, i in zip(weights, self.intervals, strict=True)) / total
        return inp, out

    def peak_rate(self) -> float:
        return max(i.requests_per_s for i in self.intervals)


# --------------------------------------------------------------------------------------------- values
def _number(value: Any, where: str, name: str, *, positive: bool = False, most: float | None = None) -> float:
    if isinstance(value, bool) or value is None:
        raise UserInputError(f"{where}: {name} must be a number, not {value!r}.")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise UserInputError(f"{where}: {name} must be a number, not {value!r}.") from None
    if not isinstance(value, int | float) or not math.isfinite(float(value)):
        raise UserInputError(f"{where}: {name} must be a finite number, not {value!r}.")
    x = float(value)
    if x < 0 or (positive and x == 0):
        raise UserInputError(
            f"{where}: {name} must be {'above' if positive else 'at least'} 0, not {value!r}."
        )
    if most is not None and x > most:
        raise UserInputError(f"{where}: {name} {x:g} is more than the {most:g} allowed.")
    return x


def _tokens(value: Any, where: str, name: str) -> float:
    """A length: a number of tokens, or ``{tokens: share}`` (the shares need not add to 1): its mean."""
    if not isinstance(value, Mapping):
        return _number(value, where, name, most=MAX_TOKENS)
    value = {k: v for k, v in value.items() if k != "__line__"}
    if not value:
        raise UserInputError(f"{where}: {name} is an empty distribution; write e.g. {{256: 0.7, 2048: 0.3}}.")
    total = weighted = 0.0
    for k, w in value.items():
        tokens = _number(k, where, f"{name} length {k!r}", most=MAX_TOKENS)
        share = _number(w, where, f"{name} share of {k!r}")
        total += share
        weighted += tokens * share
    if total <= 0:
        raise UserInputError(f"{where}: {name}'s shares add to 0; give each length a share above 0.")
    return weighted / total


# --------------------------------------------------------------------------------------------- profiles
class _Lines(yaml.SafeLoader):
    """Safe YAML that records each mapping's line under the key ``__line__``."""


def _mapping_with_line(loader: _Lines, node: yaml.MappingNode) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise UserInputError(f"{key_node.start_mark.line + 1}: {key!r} is given twice.")
        out[key] = loader.construct_object(value_node, deep=True)
    out["__line__"] = node.start_mark.line + 1
    return out


_Lines.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_with_line)


def _unknown(keys: Iterable[Any], allowed: tuple[str, ...], where: str) -> None:
    for k in keys:
        if k != "__line__" and k not in allowed:
            raise UserInputError(
                f"{where}: unknown field {k!r}.", hint=f"Known fields: {', '.join(allowed)}."
            )


def _interval(
    row: Mapping[str, Any], where: str, start: float, defaults: Mapping[str, Any], interval_s: float
) -> Interval:
    """One profile interval from its fields (``defaults`` fill those it leaves out)."""
    if row.get("requests_per_s") in (None, ""):
        raise UserInputError(
            f"{where}: requests_per_s is missing.", hint="Each interval needs requests_per_s."
        )

    def get(name: str) -> Any:
        v = row.get(name)
        return defaults.get(name) if v in (None, "") else v

    rate = _number(row["requests_per_s"], where, "requests_per_s", most=MAX_RATE)
    seconds = _number(get("seconds") or interval_s, where, "seconds", positive=True)
    for name in ("input_tokens", "output_tokens"):
        if get(name) is None:
            raise UserInputError(
                f"{where}: {name} is missing.", hint=f"Give {name} in the interval or once at the top."
            )
    out = _tokens(get("output_tokens"), where, "output_tokens")
    if out < 1:
        raise UserInputError(f"{where}: output_tokens must be at least 1.")
    burst = get("burstiness")
    return Interval(
        start_s=start,
        seconds=seconds,
        requests=rate * seconds,
        requests_per_s=rate,
        input_tokens=_tokens(get("input_tokens"), where, "input_tokens"),
        output_tokens=out,
        burstiness=1.0 if burst is None else _number(burst, where, "burstiness", positive=True, most=1000),
    )


def read_yaml_profile(path: Path, interval_s: float) -> list[Interval]:
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=_Lines)  # _Lines derives from SafeLoader
    except yaml.YAMLError as exc:
        raise UserInputError(f"{path}: not valid YAML: {exc}") from None
    except UserInputError as exc:
        raise UserInputError(f"{path}:{exc.message}") from None
    except (
        TypeError,
        RecursionError,
    ):  # a key YAML allows but no profile has (a list, a mapping), or nesting
        raise UserInputError(
            f"{path}: not a profile: keys must be names and values numbers or {{tokens: share}}."
        ) from None
    if not isinstance(doc, dict):
        raise UserInputError(f"{path}: a profile is a mapping with an 'intervals:' list.")
    top = f"{path}:{doc['__line__']}"
    _unknown(doc, PROFILE_TOP_KEYS, top)
    items = doc.get("intervals")
    if not isinstance(items, list) or not items:
        raise UserInputError(f"{top}: intervals must be a non-empty list of {{requests_per_s: ...}} entries.")
    step = _number(doc.get("interval_s", interval_s), top, "interval_s", positive=True)
    out: list[Interval] = []
    start = 0.0
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise UserInputError(f"{top}: intervals entry {n} must be a mapping, not {item!r}.")
        where = f"{path}:{item['__line__']}"
        _unknown(item, PROFILE_KEYS, where)
        out.append(_interval(item, where, start, doc, step))
        start += out[-1].seconds
    return out


def read_csv_profile(path: Path, interval_s: float) -> list[Interval]:
    out: list[Interval] = []
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        cols: list[str] | None = None
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            where = f"{path}:{reader.line_num}"
            if cols is None:
                cols = [c.strip() for c in cells]
                _unknown(cols, CSV_KEYS, where)
                continue
            if len(cells) > len(cols):
                raise UserInputError(f"{where}: {len(cells)} values for {len(cols)} columns.")
            row = {c: v.strip() for c, v in zip(cols, cells, strict=False)}
            start = out[-1].start_s + out[-1].seconds if out else 0.0
            if row.get("start_s"):
                given = _number(row["start_s"], where, "start_s")
                if given < start - 1e-9:
                    raise UserInputError(
                        f"{where}: start_s {given:g} is before the previous interval ends ({start:g}).",
                        hint="Sort the rows by start_s; intervals must not overlap.",
                    )
                start = given
            out.append(_interval(row, where, start, {}, interval_s))
    if not out:
        raise UserInputError(f"{path} has a header but no intervals.")
    return out


# --------------------------------------------------------------------------------------------- traces
def _dispersion(times: list[float], start: float, seconds: float, window_s: float) -> float | None:
    """Variance / mean of the arrivals counted per window within one interval (None: too few windows)."""
    k = int(seconds // window_s)
    if k < 2 or not times:
        return None
    counts = [0] * k
    for t in times:
        j = int((t - start) // window_s)
        if j < k:
            counts[j] += 1
    mean = sum(counts) / k
    if mean <= 0:
        return None
    var = sum((c - mean) ** 2 for c in counts) / (k - 1)
    return var / mean


def trace_intervals(
    path: Path, fmt: Literal["mooncake", "burstgpt"], interval_s: float, window_s: float
) -> tuple[list[Interval], list[str]]:
    """A trace's rows counted per interval (the last interval ends at the last request)."""
    trace = read_trace(path, fmt, MAX_TRACE_ROWS)
    rows = trace.rows
    notes: list[str] = []
    if trace.more:
        notes.append(f"Only the first {len(rows):,} requests of the trace were read.")
    if trace.skipped_failures:
        notes.append(f"{trace.skipped_failures} failed requests (0 response tokens) were left out.")
    t0, t_last = rows[0].timestamp_s, rows[-1].timestamp_s
    span = t_last - t0
    if span <= 0:
        raise UserInputError(
            f"{path}: every request has the same timestamp, so the trace has no arrival rate.",
            hint="A fleet is sized from requests spread over time; give a longer trace or a profile.",
        )
    count = max(1, math.ceil(span / interval_s))
    if count > MAX_INTERVALS:
        raise UserInputError(
            f"{path}: {span:g} s of trace in {interval_s:g} s intervals is {count:,} intervals, more than "
            f"{MAX_INTERVALS:,}.",
            hint="Give a longer --interval.",
        )
    buckets: list[list[Any]] = [[] for _ in range(count)]
    for r in rows:
        buckets[min(count - 1, int((r.timestamp_s - t0) // interval_s))].append(r)
    out: list[Interval] = []
    for j, bucket in enumerate(buckets):
        start = j * interval_s
        seconds = min(interval_s, span - start)
        if seconds <= 0:
            continue
        n = len(bucket)
        times = [r.timestamp_s - t0 for r in bucket]
        disp = _dispersion(times, start, seconds, window_s)
        prev = out[-1] if out else None
        out.append(
            Interval(
                start_s=start,
                seconds=seconds,
                requests=float(n),
                requests_per_s=n / seconds,
                input_tokens=sum(r.input_length for r in bucket) / n
                if n
                else (prev.input_tokens if prev else 0.0),
                output_tokens=sum(r.output_length for r in bucket) / n
                if n
                else (prev.output_tokens if prev else 1.0),
                burstiness=max(1.0, disp) if disp is not None else 1.0,
            )
        )
    notes.append(
        f"{len(rows):,} requests over {span:,.0f} s counted in {len(out)} intervals of {interval_s:g} s; "
        f"burstiness is the variance / mean of arrivals per {window_s:g} s window in each interval (at least 1, "
        "the Poisson value)."
    )
    return out, notes


# --------------------------------------------------------------------------------------------- entry point
def _csv_header(path: Path) -> list[str]:
    with path.open(encoding="utf-8", newline="") as f:
        for cells in csv.reader(f):
            if any(c.strip() for c in cells):
                return [c.strip() for c in cells]
    raise UserInputError(f"{path} is empty: no header and no intervals.")


def read_traffic(path: Path, *, interval_s: float = 3600.0, window_s: float = 60.0) -> Traffic:
    """The traffic in ``path`` (a trace or a profile; see the module docstring), checked."""
    if not interval_s > 0 or not window_s > 0:
        raise UserInputError("The interval and the peak window must be above 0 seconds.")
    if window_s > interval_s:
        raise UserInputError(
            f"The peak window {window_s:g} s is longer than the interval {interval_s:g} s.",
            hint="Give a --peak-window no longer than --interval.",
        )
    if not path.is_file():
        raise UserInputError(f"Traffic file {path} does not exist (or is not a file).")
    suffix = path.suffix.lower()
    notes: list[str] = []
    fmt: TrafficFormat
    try:
        if suffix in (".yaml", ".yml"):
            fmt, intervals = "profile", read_yaml_profile(path, interval_s)
        elif suffix == ".csv" and "requests_per_s" in _csv_header(path):
            fmt, intervals = "profile", read_csv_profile(path, interval_s)
        else:
            fmt = trace_format(path, "auto")
            intervals, notes = trace_intervals(path, fmt, interval_s, window_s)
    except UnicodeDecodeError:
        raise UserInputError(f"{path} is not UTF-8 text.") from None
    if len(intervals) > MAX_INTERVALS:
        raise UserInputError(
            f"{path}: {len(intervals):,} intervals, more than the {MAX_INTERVALS:,} allowed."
        )
    if sum(i.requests for i in intervals) <= 0:
        raise UserInputError(f"{path}: the traffic has no requests (every rate is 0).")
    step = intervals[0].seconds if fmt == "profile" else interval_s
    return Traffic(
        source=path.name,
        path=str(path),
        format=fmt,
        interval_s=step,
        window_s=window_s,
        intervals=intervals,
        notes=notes,
    )
