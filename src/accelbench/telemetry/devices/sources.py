"""Device telemetry sources by name: which collectors a benchmark reads (``collectors_for`` picks from here).

A source is a function ``(SourcePlace) -> Pick | None``: given the tier and what was asked for (the engine's
processes, exporter URLs), it builds its collector (``Pick``), or returns None when it does not apply here.
``collectors_for`` keeps the collectors that are ``available`` and reports, one sentence each, the absent ones
(unless the pick is ``quiet``: looked for on the off chance, never asked for). A source of your own is one
module that registers with ``@DEVICE_SOURCES.register("<name>")``, listed with
``DEVICE_SOURCES.add_module("pkg.module")``; the built-in sources come first, in ``BUILT_IN`` order, then the
others by name.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.registry import Registry
from accelbench.telemetry.devices.collector import DeviceCollector
from accelbench.telemetry.devices.cpu import CpuCollector
from accelbench.telemetry.devices.neuron import NeuronExporterCollector, NeuronMonitorCollector
from accelbench.telemetry.devices.nvidia import DcgmCollector, NvmlCollector


@dataclass(frozen=True)
class SourcePlace:
    """Where the benchmark runs and what it asked for: the tier (gpu, neuron, cpu; None: whatever this
    machine has), the filesystem root, the engine's processes and the exporters' URLs."""

    tier: str | None = None
    root: Path = Path("/")
    pids: Sequence[int] = field(default_factory=tuple)
    dcgm_url: str | None = None
    neuron_url: str | None = None


@dataclass
class Pick:
    """A source's collector for this place; ``quiet``: say nothing when it is absent."""

    collector: DeviceCollector
    quiet: bool = False


DeviceSource = Callable[[SourcePlace], Pick | None]
DEVICE_SOURCES: Registry[DeviceSource] = Registry("device telemetry source")
#: the shipped sources, read in this order (the CPU, the engine's host, always first)
BUILT_IN = ("cpu", "nvidia", "neuron")


@DEVICE_SOURCES.register("cpu")
def cpu_source(place: SourcePlace) -> Pick:
    """The CPU is always collected (the host of the engine)."""
    own = os.getpid() if place.root == Path("/") else None
    return Pick(CpuCollector(place.root, pids=list(place.pids), self_pid=own))


@DEVICE_SOURCES.register("nvidia")
def nvidia_source(place: SourcePlace) -> Pick | None:
    """A DCGM exporter when its URL is given, else NVML when the tier is gpu (or None and a GPU answers)."""
    if place.dcgm_url:
        return Pick(DcgmCollector(place.dcgm_url))
    if place.tier == "gpu" or place.tier is None:
        return Pick(NvmlCollector(), quiet=place.tier is None)
    return None


@DEVICE_SOURCES.register("neuron")
def neuron_source(place: SourcePlace) -> Pick | None:
    """A Neuron exporter when its URL is given, else neuron-monitor when the tier is neuron (or None and it
    is installed with a device)."""
    if place.neuron_url:
        return Pick(NeuronExporterCollector(place.neuron_url))
    if place.tier == "neuron" or (
        place.tier is None and shutil.which("neuron-monitor") and Path("/dev/neuron0").exists()
    ):
        return Pick(NeuronMonitorCollector())
    return None


def source_names() -> list[str]:
    """Every source's name, in the order they are read: the built-in ones, then the others by name."""
    names = DEVICE_SOURCES.names()
    return [n for n in BUILT_IN if n in names] + [n for n in names if n not in BUILT_IN]
