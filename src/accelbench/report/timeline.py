"""A run on one clock: each cell's window and every device sample of every cell, for the device telemetry
chart (and the cell bands the engine's /metrics chart gets), and each cell's device figures for the tables.

The clocks (see ``bench/runner.py``): a cell's device samples are seconds from its benchmark's start
(``DeviceTelemetry.zero_wall`` is that start in Unix time; results stored before it existed use
``started_at``, the first send, which is the start for a closed loop); its window is ``started_at`` to
``finished_at`` (first send to last completion, Unix time); the /metrics scrapes carry their Unix time. The
run's axis is seconds from ``origin_wall``: the run's first scrape when there are scrapes (the engine chart's
zero), else its earliest device sample or cell start. A figure no sample gives is None, never zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from accelbench.domain.device import DeviceKind, DeviceSummary, DeviceTelemetry
from accelbench.domain.results import ResultInfo
from accelbench.report.formatting import fmt_num, fmt_pct

GIB = 2**30


def cell_label(input_len: int, concurrency: int, repeat: int) -> str:
    """How a chart and a table name one cell's repeat: "in 256 / c 4 / r1" (stored repeats count from 0; people
    count the first repeat as 1, as every other view does)."""
    return f"in {input_len} / c {concurrency} / r{repeat + 1}"


@dataclass(frozen=True)
class CellWindow:
    """One stored (cell, repeat) on the run's axis: first send to last completion."""

    input_len: int
    concurrency: int
    repeat: int
    start_s: float
    end_s: float
    status: str = "completed"

    @property
    def label(self) -> str:
        return cell_label(self.input_len, self.concurrency, self.repeat)


#: the series a device trace carries: (name, title with unit)
DEVICE_SERIES: tuple[tuple[str, str], ...] = (
    ("util_pct", "Utilisation (%)"),
    ("memory_gib", "Memory used (GiB)"),
    ("power_w", "Power (W)"),
    ("memory_bw_gbps", "Memory bandwidth, read + write (GB/s)"),
)


@dataclass
class DeviceTrace:
    """One device over the whole run, every cell's samples on the run's axis in time order."""

    device: str
    kind: str
    t_s: list[float] = field(default_factory=list)
    util_pct: list[float | None] = field(default_factory=list)
    memory_gib: list[float | None] = field(default_factory=list)
    power_w: list[float | None] = field(default_factory=list)
    memory_bw_gbps: list[float | None] = field(default_factory=list)

    def values(self, name: str) -> list[float | None]:
        out: list[float | None] = getattr(self, name)
        return out

    def has(self, name: str) -> bool:
        """Whether any sample gave this series (a series no sample gave is left out of the chart)."""
        return any(v is not None for v in self.values(name))

    def points(self, name: str) -> tuple[list[float], list[float]]:
        """(t, value) of the samples that gave ``name``."""
        pairs = [(t, v) for t, v in zip(self.t_s, self.values(name), strict=True) if v is not None]
        return [round(t, 3) for t, _ in pairs], [v for _, v in pairs]


@dataclass(frozen=True)
class DeviceRow:
    """One device during one cell's repeat: its summary, and the cell's energy figures on the devices that
    served (the accelerators, else the CPU) when their energy is known."""

    window: CellWindow
    device: DeviceSummary
    serving: bool
    tokens_per_joule: float | None
    joules_per_output_token: float | None


@dataclass
class RunTimeline:
    """One run's cells and device traces on one axis, the device rows of its cells, and what was not measured."""

    run_id: str
    origin_wall: float | None = None
    cells: list[CellWindow] = field(default_factory=list)
    devices: list[DeviceTrace] = field(default_factory=list)
    rows: list[DeviceRow] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def has_devices(self) -> bool:
        return any(d.t_s for d in self.devices)

    def has(self, name: str) -> bool:
        return any(d.has(name) for d in self.devices)

    def row(self, concurrency: int, repeat: int, *, serving: bool = True) -> list[DeviceRow]:
        """The device rows of the stored cell (concurrency, repeat) (the serving devices only by default)."""
        return [
            r
            for r in self.rows
            if r.window.concurrency == concurrency
            and r.window.repeat == repeat
            and (r.serving or not serving)
        ]


def _telemetry(r: ResultInfo) -> DeviceTelemetry | None:
    data = (r.summary or {}).get("device_telemetry")
    return DeviceTelemetry.model_validate(data) if data else None


def run_timeline(
    run_id: str, results: Iterable[ResultInfo], *, origin_wall: float | None = None
) -> RunTimeline:
    """The run's cells (in the order they ran) and device traces on one axis from ``origin_wall`` (default:
    the earliest device sample or cell start); see the module docstring for the clocks."""
    timed: list[tuple[ResultInfo, float, float, DeviceTelemetry | None, float]] = []
    for r in results:
        s = r.summary or {}
        start, end = float(s.get("started_at") or 0.0), float(s.get("finished_at") or 0.0)
        if start <= 0:
            continue  # a cell cut off before any request was sent has no window
        tel = _telemetry(r)
        zero = tel.zero_wall if tel is not None and tel.zero_wall is not None else start
        timed.append((r, start, max(end, start), tel, zero))
    timed.sort(key=lambda x: x[1])
    if origin_wall is None:
        firsts = [start for _, start, *_ in timed]
        firsts += [
            zero + tel.samples[0].t_s for _, _, _, tel, zero in timed if tel is not None and tel.samples
        ]
        origin_wall = min(firsts) if firsts else None
    out = RunTimeline(run_id=run_id, origin_wall=origin_wall)
    if origin_wall is None:
        return out
    traces: dict[str, DeviceTrace] = {}
    for r, start, end, tel, zero in timed:
        w = CellWindow(
            input_len=r.input_len,
            concurrency=r.concurrency,
            repeat=r.repeat,
            start_s=start - origin_wall,
            end_s=end - origin_wall,
            status=r.status.value,
        )
        out.cells.append(w)
        if tel is None:
            continue
        out.sources.extend(x for x in tel.sources if x not in out.sources)
        out.missing.extend(m for m in tel.missing if m not in out.missing)
        shift = zero - origin_wall
        for sample in sorted(tel.samples, key=lambda x: x.t_s):
            tr = traces.setdefault(sample.device, DeviceTrace(sample.device, sample.kind.value))
            tr.t_s.append(sample.t_s + shift)
            tr.util_pct.append(sample.util_pct)
            tr.memory_gib.append(None if sample.memory_used_bytes is None else sample.memory_used_bytes / GIB)
            tr.power_w.append(sample.power_w)
            bw = [x for x in (sample.memory_read_gbps, sample.memory_write_gbps) if x is not None]
            tr.memory_bw_gbps.append(sum(bw) if bw else None)
        tokens = int((r.summary or {}).get("total_output_tokens") or 0)
        serving = {d.device for d in tel.primary()}
        tpj, jpt = tel.tokens_per_joule(tokens), tel.joules_per_output_token(tokens)
        for d in tel.devices:
            here = d.device in serving
            out.rows.append(DeviceRow(w, d, here, tpj if here else None, jpt if here else None))
    kinds = [DeviceKind.gpu.value, DeviceKind.neuron.value, DeviceKind.cpu.value]
    out.devices = sorted(traces.values(), key=lambda t: (kinds.index(t.kind), t.device))
    return out


# ------------------------------------------------------------------------------------------ tables
DEVICE_COLUMNS: tuple[str, ...] = (
    "cell",
    "device",
    "util mean",
    "util peak",
    "mem peak (GiB)",
    "power mean (W)",
    "energy (J)",
    "mem bw (GB/s)",
    "out tok/J",
    "J/out tok",
)


def device_table(timeline: RunTimeline) -> list[list[str]]:
    """``DEVICE_COLUMNS`` rows: one per device and cell repeat, in the order the cells ran; energy per token
    on the devices that served (blank, "-", where their energy is unknown)."""
    rows = []
    for r in timeline.rows:
        d = r.device
        bw = [x for x in (d.memory_read_mean_gbps, d.memory_write_mean_gbps) if x is not None]
        rows.append(
            [
                r.window.label,
                d.device,
                fmt_pct(d.util_mean_pct),
                fmt_pct(d.util_peak_pct),
                fmt_num(None if d.memory_used_peak_bytes is None else d.memory_used_peak_bytes / GIB, 2),
                fmt_num(d.power_mean_w, 1),
                fmt_num(d.energy_j, 1),
                fmt_num(sum(bw) if bw else None, 2),
                fmt_num(r.tokens_per_joule, 2),
                fmt_num(r.joules_per_output_token, 3),
            ]
        )
    return rows


def chart_payload(timeline: RunTimeline) -> dict[str, Any]:
    """The chart's data as plain JSON (the result page draws it): cells and, per device, each series that
    some sample gave (x: seconds on the run's axis)."""
    return {
        "cells": [
            {"label": c.label, "start": round(c.start_s, 3), "end": round(c.end_s, 3)} for c in timeline.cells
        ],
        "series": [{"name": name, "title": title} for name, title in DEVICE_SERIES if timeline.has(name)],
        "devices": [
            {
                "device": d.device,
                "kind": d.kind,
                **{
                    name: dict(zip(("x", "y"), d.points(name), strict=True))
                    for name, _ in DEVICE_SERIES
                    if d.has(name)
                },
            }
            for d in timeline.devices
        ],
    }


__all__ = [
    "DEVICE_COLUMNS",
    "DEVICE_SERIES",
    "CellWindow",
    "DeviceRow",
    "DeviceTrace",
    "RunTimeline",
    "cell_label",
    "chart_payload",
    "device_table",
    "run_timeline",
]
