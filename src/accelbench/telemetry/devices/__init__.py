"""Device telemetry: what the GPUs, Neuron devices and CPUs did while a benchmark ran.

One collector per source (``base.DeviceCollector``: ``sample(t_s) -> list[DeviceSample]``, ``close()``; built
without raising, an absent source says why in ``missing``): ``cpu.CpuCollector`` (/proc, /sys, RAPL, cgroups),
``nvidia.NvmlCollector`` (local GPUs), ``nvidia.DcgmCollector`` (a DCGM exporter), ``neuron.NeuronMonitorCollector``
(neuron-monitor's JSON stream) and ``neuron.NeuronExporterCollector`` (its Prometheus exporter).
``collectors_for`` picks them by tier and presence from the registered sources (``sources.DEVICE_SOURCES``);
``DeviceMonitor`` samples them on its own thread (the reads block, and the benchmark's event loop must keep
timestamping tokens) and gives a ``DeviceTelemetry``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from accelbench.domain.device import DeviceSample, DeviceTelemetry
from accelbench.telemetry.devices.collector import DeviceCollector
from accelbench.telemetry.devices.cpu import CpuCollector
from accelbench.telemetry.devices.neuron import NeuronExporterCollector, NeuronMonitorCollector
from accelbench.telemetry.devices.nvidia import DcgmCollector, NvmlCollector
from accelbench.telemetry.devices.sources import DEVICE_SOURCES, SourcePlace, source_names

#: Readings (one sample per device each) kept per benchmark at most; beyond it every other reading is dropped,
#: so a long run keeps its shape and a stored result stays small (the summaries use every reading kept).
MAX_READINGS = 600


def collectors_for(
    tier: str | None = None,
    *,
    root: Path = Path("/"),
    pids: Sequence[int] = (),
    dcgm_url: str | None = None,
    neuron_url: str | None = None,
) -> tuple[list[DeviceCollector], list[str]]:
    """The collectors that can run here for ``tier`` (gpu, neuron, cpu; None: whatever this machine has), and
    one sentence per source that is absent: each registered source (``sources.DEVICE_SOURCES``) in turn. The
    CPU is always collected (the host of the engine); NVML when the tier is gpu (or None and a GPU answers);
    neuron-monitor when the tier is neuron (or None and it is installed); a DCGM or Neuron exporter when its URL
    is given; a source of your own when it says it applies."""
    place = SourcePlace(tier=tier, root=root, pids=tuple(pids), dcgm_url=dcgm_url, neuron_url=neuron_url)
    chosen: list[DeviceCollector] = []
    missing: list[str] = []
    for name in source_names():
        pick = DEVICE_SOURCES.get(name)(place)
        if pick is None:
            continue
        if pick.collector.available:
            chosen.append(pick.collector)
            missing.extend(pick.collector.missing)
        else:
            pick.collector.close()
            if not pick.quiet:
                missing.extend(pick.collector.missing)
    return chosen, missing


def _wall_of(t_perf: float) -> float:
    """The Unix time of a perf-counter reading (the two clocks read back to back)."""
    return time.time() - (time.perf_counter() - t_perf)


def exporter_collectors(
    *, dcgm_url: str | None = None, neuron_url: str | None = None
) -> tuple[list[DeviceCollector], list[str]]:
    """The collectors of a remote node's exporters only (no CPU: this machine is not the engine's), as an
    in-cluster load generator reads them; one sentence per exporter that does not answer."""
    chosen: list[DeviceCollector] = []
    missing: list[str] = []
    candidates: list[DeviceCollector] = []
    if dcgm_url:
        candidates.append(DcgmCollector(dcgm_url))
    if neuron_url:
        candidates.append(NeuronExporterCollector(neuron_url))
    for c in candidates:
        missing.extend(c.missing)
        if c.available:
            chosen.append(c)
        else:
            c.close()
    return chosen, missing


class DeviceMonitor:
    """Samples ``collectors`` every ``interval_s`` on a background thread between ``start`` and ``stop``."""

    def __init__(
        self, collectors: Sequence[DeviceCollector], *, interval_s: float = 1.0, missing: Sequence[str] = ()
    ) -> None:
        self.collectors = list(collectors)
        self.interval_s = interval_s
        self.missing = list(missing)
        self._readings: list[list[DeviceSample]] = []
        self._t0 = 0.0
        self._zero_wall: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _sample_all(self) -> None:
        t0 = self._t0
        t = time.perf_counter() - t0
        rows: list[DeviceSample] = []
        for c in self.collectors:
            try:
                rows.extend(c.sample(t))
            except Exception as exc:  # a collector bug must not end the benchmark
                c.errors.append(f"{c.name}: a reading failed ({type(exc).__name__}: {exc})")
        with self._lock:
            if self._t0 != t0:  # the clock moved while this reading was taken
                rows = [r.model_copy(update={"t_s": r.t_s - (self._t0 - t0)}) for r in rows]
            self._readings.append(rows)
            if len(self._readings) > MAX_READINGS:
                self._readings = self._readings[::2]

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_all()

    def start(self, t0: float) -> None:
        """Take the baseline sample now and keep sampling; times are seconds after ``t0`` (perf counter)."""
        self._t0 = t0
        self._zero_wall = _wall_of(t0)
        if not self.collectors:
            return
        self._sample_all()
        self._thread = threading.Thread(target=self._run, name="accelbench-devices", daemon=True)
        self._thread.start()

    def restart_clock(self, t0: float) -> None:
        """Move the zero of the sample times (the benchmark starts its clock after the baseline sample)."""
        with self._lock:
            shift = t0 - self._t0
            self._t0 = t0
            self._zero_wall = _wall_of(t0)
            self._readings = [
                [s.model_copy(update={"t_s": s.t_s - shift}) for s in r] for r in self._readings
            ]

    @property
    def samples(self) -> list[DeviceSample]:
        with self._lock:
            return [s for r in self._readings for s in r]

    def stop(self) -> DeviceTelemetry:
        """A last sample, the thread joined, the collectors closed; what they saw."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._sample_all()
        sources: list[str] = []
        missing = list(self.missing)
        for c in self.collectors:
            sources.extend(c.sources)
            missing.extend(e for e in c.errors if e not in missing)
            c.close()
        samples = self.samples
        return DeviceTelemetry.build(
            samples, sources=sources, missing=missing, interval_s=self.interval_s, zero_wall=self._zero_wall
        )


__all__ = [
    "CpuCollector",
    "DcgmCollector",
    "DeviceCollector",
    "DeviceMonitor",
    "NeuronExporterCollector",
    "NeuronMonitorCollector",
    "NvmlCollector",
    "collectors_for",
    "exporter_collectors",
]
