"""Why cells failed and what their figures should be read with, from stored results: the one reading that
``runs show``, ``bench``/``sweep``'s console, the demo, the result page and the HTML and Markdown report share.

A cell's failures are summed over its repeats (the request counts and the ``errors`` reason -> count of each
stored summary); its warnings are the notes its summaries carry (prompt-token mismatch, client lag and the
client certificate, scrape cost, ...) once each, the failure note left out (the failure line says it).

``run_warnings`` is what every view shows: the failed cells first and apart, then each distinct note once with
the cells it applies to ("in 6 of 6 cells"), so a note every cell carries is one line, not one per cell, and a
real failure is not lost in them; notes that differ only in their figures are one, the figures as ranges. The device notes the Devices section draws from the telemetry itself (each
device's figures, the energy line, the sources this machine lacks) are left to that section."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.bench.sweep import failure_text
from accelbench.domain.device import DeviceTelemetry, device_notes
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


#: how many cells a grouped note names when it applies to some but not all of them
NAMED_CELLS = 3


@dataclass(frozen=True)
class GroupedNote:
    """One distinct note of a run, once, with the cells that carry it (in input-length then concurrency order)."""

    text: str
    cells: tuple[str, ...]
    #: the cells of the run, the count's denominator
    of: int

    @property
    def count(self) -> int:
        return len(self.cells)

    def where(self) -> str:
        """``in 6 of 6 cells``; when only some carry it, the first few of them: ``in 2 of 6 cells: input 128,
        concurrency 1; input 128, concurrency 2``."""
        text = f"in {self.count} of {self.of} cell{'' if self.of == 1 else 's'}"
        if self.count == self.of:
            return text
        named = "; ".join(self.cells[:NAMED_CELLS])
        more = self.count - NAMED_CELLS
        return f"{text}: {named}{f' and {more} more' if more > 0 else ''}"

    def line(self) -> str:
        """``<note> (in 6 of 6 cells)``: how every view writes it."""
        return f"{self.text} ({self.where()})"


@dataclass(frozen=True)
class RunWarnings:
    """A run's warnings collected once: its failed cells (real failures, first and apart), then its notes, each
    distinct note once with the cells it applies to."""

    failures: list[CellFailures]
    notes: list[GroupedNote]
    #: the cells of the run
    cells: int

    def __bool__(self) -> bool:
        return bool(self.failures or self.notes)


def _device_section_notes(summary: Mapping[str, Any]) -> set[str]:
    """The notes of a summary that its Devices section shows from the telemetry itself (each device's figures,
    the energy line, the sources not measured): left out of the warnings, where they would repeat per cell. The
    sentence that energy per token is unknown stays a note: the Devices table only shows a blank for it."""
    data = summary.get("device_telemetry")
    if not data:
        return set()
    try:
        tel = DeviceTelemetry.model_validate(data)
    except ValueError:  # a layout this version does not read: its notes stay notes
        return set()
    notes = device_notes(tel, int(summary.get("total_output_tokens") or 0))
    return {n for n in notes if not n.startswith("Energy per token: unknown")}


#: a figure in a note: digits with thousands commas and decimals, not part of a word ("qwen2.5", "7b")
_FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?!\w)")


def _value(figure: str) -> float:
    return float(figure.replace(",", ""))


def merged_text(texts: Sequence[str]) -> str:
    """Notes that differ only in their figures, as one: each figure that differs written as its range over the
    notes (``75-151 ms``), each one that does not as it is. ``texts`` share one template (``_FIGURE`` masked)."""
    if len(set(texts)) == 1:
        return texts[0]
    parts = _FIGURE.split(texts[0])
    slots = list(zip(*(_FIGURE.findall(t) for t in texts), strict=True))
    out = [parts[0]]
    for figures, after in zip(slots, parts[1:], strict=True):
        low, high = min(figures, key=_value), max(figures, key=_value)
        out.append(low if _value(low) == _value(high) else f"{low}-{high}")
        out.append(after)
    return "".join(out)


def run_warnings(results: Iterable[ResultInfo]) -> RunWarnings:
    """One run's warnings, grouped: ``cell_failures``, then each distinct note of ``cell_warnings`` once with
    the cells that carry it, in the order the first cell that carries it comes (cells in input-length then
    concurrency order). Notes that differ only in their figures (each cell's scrape cost) are one note, each
    differing figure written as its range over the cells."""
    results = list(results)
    device: set[str] = set()
    for r in results:
        device |= _device_section_notes(r.summary or {})
    cells = sorted({_key(r) for r in results})
    texts: dict[str, list[str]] = {}
    grouped: dict[str, list[str]] = {}
    for w in cell_warnings(results):
        if w.text in device:
            continue
        template = _FIGURE.sub("#", w.text)
        texts.setdefault(template, []).append(w.text)
        where = grouped.setdefault(template, [])
        if w.cell not in where:
            where.append(w.cell)
    return RunWarnings(
        failures=cell_failures(results),
        notes=[GroupedNote(merged_text(texts[t]), tuple(where), len(cells)) for t, where in grouped.items()],
        cells=len(cells),
    )


def modes_sentence(metric: str, modes: dict[str, float], where: str = "") -> str:
    """``"TTFT has two modes: 48% of requests around 120.0 ms, 52% around 410.0 ms; its median can land on either,
    so a median that moves between runs may be a change of mode, not of speed."``"""
    return (
        f"{metric}{where} has two modes: {modes['low_share']:.0%} of requests around {modes['low_median_ms']:,.1f} ms, "
        f"{modes['high_share']:.0%} around {modes['high_median_ms']:,.1f} ms; its median can land on either, so a "
        "median that moves between runs may be a change of mode, not of speed."
    )
