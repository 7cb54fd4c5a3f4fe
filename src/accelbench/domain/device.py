"""What the hardware did during a benchmark: one sample schema for GPUs, Neuron devices and CPUs.

A collector (``telemetry/devices/``) turns its source (NVML, a DCGM exporter, neuron-monitor, /proc and /sys)
into ``DeviceSample`` rows; ``DeviceTelemetry`` keeps the rows of one benchmark, the sources read, the sources
absent (one sentence each: which and why) and a summary per device. A figure a source cannot give is None,
never zero.
"""

from __future__ import annotations

import enum
import itertools
from collections import defaultdict
from collections.abc import Sequence

from pydantic import Field

from accelbench.domain.strict import StrictModel


class DeviceKind(enum.StrEnum):
    gpu = "gpu"
    neuron = "neuron"
    cpu = "cpu"


class DeviceSample(StrictModel):
    """One reading of one device."""

    t_s: float = Field(description="Seconds since the benchmark's start, on its perf-counter clock.")
    device: str = Field(description="Device id: gpu0, neuron, cpu ...")
    kind: DeviceKind = Field(description="gpu, neuron or cpu.")
    util_pct: float | None = Field(default=None, description="Utilisation, percent (0-100).")
    memory_used_bytes: float | None = Field(
        default=None, description="Device memory in use (host memory for a CPU)."
    )
    memory_total_bytes: float | None = Field(default=None, description="Device memory in all.")
    power_w: float | None = Field(default=None, description="Power draw, watts.")
    energy_j: float | None = Field(
        default=None, description="Energy used since the collector started, joules (cumulative)."
    )
    temperature_c: float | None = Field(default=None, description="Temperature, degrees Celsius.")
    clock_mhz: float | None = Field(
        default=None, description="Core clock (GPU SM clock, CPU mean frequency), MHz."
    )
    throttle_reasons: list[str] = Field(
        default_factory=list, description="Why the clocks were held down at this reading (decoded names)."
    )
    memory_read_gbps: float | None = Field(
        default=None,
        description="Memory read bandwidth since the previous reading, GB/s (1e9 bytes): a CPU's memory "
        "controllers' CAS reads, where uncore counters are readable.",
    )
    memory_write_gbps: float | None = Field(
        default=None, description="Memory write bandwidth since the previous reading, GB/s (1e9 bytes)."
    )
    extra: dict[str, float] = Field(
        default_factory=dict,
        description="Tier-specific figures: sm_active_pct, tensor_active_pct (GPU); neuroncore<N>_util_pct (Neuron); "
        "cpu<N>_util_pct, cgroup_cpu_s, cgroup_cpu_cores, cgroup_memory_bytes (CPU).",
    )


class DeviceSummary(StrictModel):
    """One device over the benchmark window."""

    device: str
    kind: DeviceKind
    samples: int = 0
    window_s: float = Field(default=0.0, description="Seconds from the first sample to the last.")
    util_mean_pct: float | None = None
    util_peak_pct: float | None = None
    memory_used_mean_bytes: float | None = None
    memory_used_peak_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_mean_w: float | None = None
    memory_read_mean_gbps: float | None = None
    memory_read_peak_gbps: float | None = None
    memory_write_mean_gbps: float | None = None
    energy_j: float | None = Field(
        default=None,
        description="Energy over the window: the energy counter's increase, else the power readings integrated "
        "(trapezoids); None when neither is known.",
    )


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarise_device(samples: Sequence[DeviceSample]) -> DeviceSummary:
    """The summary of one device's samples (in time order)."""
    rows = sorted(samples, key=lambda s: s.t_s)
    first = rows[0]
    util = [s.util_pct for s in rows if s.util_pct is not None]
    mem = [s.memory_used_bytes for s in rows if s.memory_used_bytes is not None]
    total = [s.memory_total_bytes for s in rows if s.memory_total_bytes is not None]
    power = [s.power_w for s in rows if s.power_w is not None]
    reads = [s.memory_read_gbps for s in rows if s.memory_read_gbps is not None]
    writes = [s.memory_write_gbps for s in rows if s.memory_write_gbps is not None]
    window = rows[-1].t_s - first.t_s
    energy: float | None = None
    with_e = [s for s in rows if s.energy_j is not None]
    if len(with_e) >= 2:
        energy = float(with_e[-1].energy_j or 0.0) - float(with_e[0].energy_j or 0.0)
    else:
        with_p = [s for s in rows if s.power_w is not None]
        if len(with_p) >= 2:
            energy = sum(
                (b.t_s - a.t_s) * (float(a.power_w or 0.0) + float(b.power_w or 0.0)) / 2
                for a, b in itertools.pairwise(with_p)
            )
    power_mean = _mean(power)
    if power_mean is None and energy is not None and window > 0:
        power_mean = energy / window
    return DeviceSummary(
        device=first.device,
        kind=first.kind,
        samples=len(rows),
        window_s=window,
        util_mean_pct=_mean(util),
        util_peak_pct=max(util) if util else None,
        memory_used_mean_bytes=_mean(mem),
        memory_used_peak_bytes=max(mem) if mem else None,
        memory_total_bytes=max(total) if total else None,
        power_mean_w=power_mean,
        memory_read_mean_gbps=_mean(reads),
        memory_read_peak_gbps=max(reads) if reads else None,
        memory_write_mean_gbps=_mean(writes),
        energy_j=energy,
    )


class DeviceTelemetry(StrictModel):
    """The devices during one benchmark: samples, the sources read and the ones absent, a summary per device."""

    available: bool = Field(default=False, description="At least one source gave samples.")
    sources: list[str] = Field(default_factory=list, description="The sources read, e.g. cpu:/proc, nvml.")
    missing: list[str] = Field(
        default_factory=list, description="One sentence per absent source: which, and why it is absent."
    )
    interval_s: float | None = Field(default=None, description="Seconds between samples asked for.")
    zero_wall: float | None = Field(
        default=None,
        description="Unix time of t_s = 0 (the benchmark's start), to put the samples on a wall clock; None in "
        "results stored before it was recorded.",
    )
    samples: list[DeviceSample] = Field(default_factory=list)
    devices: list[DeviceSummary] = Field(default_factory=list, description="One summary per device.")

    @classmethod
    def build(
        cls,
        samples: Sequence[DeviceSample],
        *,
        sources: Sequence[str] = (),
        missing: Sequence[str] = (),
        interval_s: float | None = None,
        zero_wall: float | None = None,
    ) -> DeviceTelemetry:
        """Samples plus their per-device summaries (devices in order of first appearance)."""
        by_device: dict[str, list[DeviceSample]] = defaultdict(list)
        for s in samples:
            by_device[s.device].append(s)
        return cls(
            available=bool(samples),
            sources=list(sources),
            missing=list(missing),
            interval_s=interval_s,
            zero_wall=zero_wall,
            samples=list(samples),
            devices=[summarise_device(rows) for rows in by_device.values()],
        )

    def primary(self) -> list[DeviceSummary]:
        """The devices that served the model: the accelerators when there are some, else the CPU."""
        accel = [d for d in self.devices if d.kind != DeviceKind.cpu]
        return accel or [d for d in self.devices if d.kind == DeviceKind.cpu]

    def device(self, name: str) -> DeviceSummary | None:
        return next((d for d in self.devices if d.device == name), None)

    @property
    def energy_j(self) -> float | None:
        """Energy of the primary devices over the window; None unless every one of them knows its energy."""
        rows = self.primary()
        if not rows or any(d.energy_j is None for d in rows):
            return None
        return sum(float(d.energy_j or 0.0) for d in rows)

    def tokens_per_joule(self, output_tokens: int) -> float | None:
        """Output tokens per joule of the primary devices; None when the energy is unknown or zero."""
        e = self.energy_j
        return output_tokens / e if e and e > 0 else None

    def joules_per_output_token(self, output_tokens: int) -> float | None:
        """Joules of the primary devices per output token; None when the energy or the tokens are unknown."""
        e = self.energy_j
        return e / output_tokens if e is not None and output_tokens > 0 else None


__all__ = [
    "DeviceKind",
    "DeviceSample",
    "DeviceSummary",
    "DeviceTelemetry",
    "device_notes",
    "summarise_device",
]


def device_notes(tel: DeviceTelemetry, output_tokens: int) -> list[str]:
    """What the devices did, in one line per device, and the energy per token where it is known."""
    out: list[str] = []
    for d in tel.devices:
        parts = []
        if d.util_mean_pct is not None:
            parts.append(f"utilisation mean {d.util_mean_pct:.0f}% (peak {d.util_peak_pct:.0f}%)")
        if d.memory_used_peak_bytes is not None:
            parts.append(f"memory peak {d.memory_used_peak_bytes / 2**30:.1f} GiB")
        if d.power_mean_w is not None:
            parts.append(f"power mean {d.power_mean_w:.0f} W")
        if d.energy_j is not None:
            parts.append(f"{d.energy_j:.0f} J")
        if parts:
            out.append(f"Device {d.device}: " + ", ".join(parts) + f" over {d.samples} samples.")
    tpj = tel.tokens_per_joule(output_tokens)
    jpt = tel.joules_per_output_token(output_tokens)
    if tpj is not None and jpt is not None:
        out.append(
            f"Energy: {tel.energy_j:.0f} J, {tpj:.3g} output tokens per joule ({jpt:.3g} J per output token)."
        )
    elif tel.available:
        out.append("Energy per token: unknown (no power or energy source for the devices that served).")
    if tel.missing:
        out.append("Device telemetry lacks: " + "; ".join(tel.missing) + ".")
    return out
