"""Why cells failed and what their figures should be read with, from stored results: the one reading that
``runs show``, ``bench``/``sweep``'s console, the result page and the HTML report share.

A cell's failures are summed over its repeats (the request counts and the ``errors`` reason -> count of each
stored summary); its warnings are the notes its summaries carry (prompt-token mismatch, client lag and the
client certificate, scrape cost, ...) once each, the failure note left out (the failure line says it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from accelbench.bench.sweep import failure_text
from accelbench.domain.results import ResultInfo

#: the runner's own note on failed requests (bench/runner.py ``_summarize``), which the failure line replaces
_FAILURE_NOTE = "failed; most common reason ("


@dataclass(frozen=True)
class CellFailures:
    """One cell's failed requests over its repeats, with the most common reason."""

    input_len: int
    concurrency: int
    failed: int
    ended: int
    reason: str | None
    reason_count: int

    @property
    def share(self) -> float:
        return self.failed / self.ended if self.ended else 0.0

    @property
    def cell(self) -> str:
        return f"input {self.input_len}, concurrency {self.concurrency}"

    def text(self) -> str:
        """``3 of 9 requests failed (33%); most common reason (3x): HTTP 400: ...``"""
        return failure_text(self.failed, self.ended, {self.reason: self.reason_count} if self.reason else {})


@dataclass(frozen=True)
class CellWarning:
    input_len: int
    concurrency: int
    text: str

    @property
    def cell(self) -> str:
        return f"input {self.input_len}, concurrency {self.concurrency}"


def _key(r: ResultInfo) -> tuple[int, int]:
    return (r.input_len, r.concurrency)


def cell_failures(results: Iterable[ResultInfo]) -> list[CellFailures]:
    """The cells with at least one failed request, in input-length then concurrency order."""
    failed: Counter[tuple[int, int]] = Counter()
    ended: Counter[tuple[int, int]] = Counter()
    reasons: dict[tuple[int, int], Counter[str]] = {}
    for r in results:
        k = _key(r)
        failed[k] += r.failed
        ended[k] += r.completed + r.failed
        errors: Any = (r.summary or {}).get("errors") or {}
        if isinstance(errors, Mapping):
            reasons.setdefault(k, Counter()).update({str(m): int(n) for m, n in errors.items()})
    out = []
    for k in sorted(failed):
        if not failed[k]:
            continue
        top = reasons.get(k, Counter()).most_common(1)
        reason, count = top[0] if top else (None, 0)
        out.append(CellFailures(k[0], k[1], failed[k], ended[k], reason, count))
    return out


def cell_warnings(results: Iterable[ResultInfo]) -> list[CellWarning]:
    """Each cell's notes, once each (repeats repeat them), the failure note left out; then the latency metrics
    with two modes (``mode_warnings``)."""
    results = list(results)
    seen: set[tuple[int, int, str]] = set()
    out = []
    for r in sorted(results, key=lambda r: (r.input_len, r.concurrency, r.repeat)):
        for note in (r.summary or {}).get("notes") or []:
            text = str(note)
            k = (r.input_len, r.concurrency, text)
            if _FAILURE_NOTE in text or k in seen:
                continue
            seen.add(k)
            out.append(CellWarning(r.input_len, r.concurrency, text))
    return out + mode_warnings(results)


_MODE_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "e2el": "E2E latency"}


def mode_warnings(results: Iterable[ResultInfo]) -> list[CellWarning]:
    """A cell's latency metrics with two modes (``bench.modes``), once per cell and metric: the first repeat
    that shows them, with each mode's share and median."""
    from accelbench.bench.modes import modes_sentence

    seen: set[tuple[int, int, str]] = set()
    out = []
    for r in sorted(results, key=lambda r: (r.input_len, r.concurrency, r.repeat)):
        modes = (r.summary or {}).get("modes") or {}
        for metric, found in modes.items() if isinstance(modes, dict) else ():
            k = (r.input_len, r.concurrency, metric)
            if k in seen or not isinstance(found, dict):
                continue
            seen.add(k)
            where = f" (repeat {r.repeat + 1})"
            out.append(
                CellWarning(
                    r.input_len,
                    r.concurrency,
                    modes_sentence(_MODE_NAMES.get(metric) or str(metric), found, where),
                )
            )
    return out


def any_completed(results: Iterable[ResultInfo]) -> bool:
    """Whether any request of any cell completed (else there is nothing to chart)."""
    return any(r.completed for r in results)


@dataclass(frozen=True)
class CellDevices:
    """What one cell's devices did (the first repeat that has device telemetry), read from its stored summary."""

    input_len: int
    concurrency: int
    repeat: int
    telemetry: Any  # DeviceTelemetry
    output_tokens: int

    @property
    def cell(self) -> str:
        return f"input {self.input_len}, concurrency {self.concurrency}"


def cell_devices(results: Iterable[ResultInfo]) -> list[CellDevices]:
    """Each cell's device telemetry (its first repeat with some), in input-length then concurrency order."""
    from accelbench.domain.device import DeviceTelemetry

    out: dict[tuple[int, int], CellDevices] = {}
    for r in sorted(results, key=lambda r: (r.input_len, r.concurrency, r.repeat)):
        data = (r.summary or {}).get("device_telemetry")
        if not data or _key(r) in out:
            continue
        tel = DeviceTelemetry.model_validate(data)
        out[_key(r)] = CellDevices(
            r.input_len, r.concurrency, r.repeat, tel, int((r.summary or {}).get("total_output_tokens") or 0)
        )
    return list(out.values())
