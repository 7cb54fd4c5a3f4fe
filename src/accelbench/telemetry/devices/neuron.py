"""AWS Neuron (Inferentia, Trainium): ``neuron-monitor``'s JSON report (local) or its Prometheus exporter.

neuron-monitor writes one JSON report per line on stdout. Of each report this reads
``neuron_runtime_data[].report.neuroncore_counters.neuroncores_in_use{"<core>": {"neuroncore_utilization"}}``
(percent), ``memory_used.neuron_runtime_used_bytes`` (``host`` and ``neuron_device`` bytes),
``system_data.memory_info`` (host memory) and ``system_data.neuron_hw_counters`` / the runtime's
``hw_counters`` (ECC events). The exporter (``neuron-monitor-prometheus.py`` and the Kubernetes DaemonSet)
publishes ``neuroncore_utilization_ratio{neuroncore=...}`` (0-1) and
``neuron_runtime_memory_used_bytes{memory_location="neuron_device"|"host"}``.

The Neuron devices are one device here, ``neuron``: utilisation is the mean over the NeuronCores in use (each
core's figure in ``extra`` as ``neuroncore<N>_util_pct``), memory the device memory every runtime holds.
neuron-monitor gives no power or energy.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Mapping
from typing import IO, Any

from prometheus_client.parser import text_string_to_metric_families

from accelbench.domain.device import DeviceKind, DeviceSample
from accelbench.telemetry.devices.collector import DeviceCollector, ExporterCollector


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _neuron_sample(
    t_s: float, cores: dict[int, float], device_mem: float | None, extra: dict[str, float]
) -> DeviceSample:
    """The one sample both sources give: device ``neuron``, the mean NeuronCore utilisation, device memory."""
    return DeviceSample(
        t_s=t_s,
        device="neuron",
        kind=DeviceKind.neuron,
        util_pct=sum(cores.values()) / len(cores) if cores else None,
        memory_used_bytes=device_mem,
        extra=extra,
    )


def parse_neuron_report(report: Mapping[str, Any], t_s: float) -> list[DeviceSample]:
    """One sample (device ``neuron``) from one neuron-monitor JSON report; none when no runtime is running."""
    cores: dict[int, float] = {}
    device_mem = host_mem = 0.0
    have_mem = False
    ecc = 0.0
    for rt in report.get("neuron_runtime_data") or []:
        rep = rt.get("report") or {}
        in_use = (rep.get("neuroncore_counters") or {}).get("neuroncores_in_use") or {}
        for idx, data in in_use.items():
            u = _num((data or {}).get("neuroncore_utilization"))
            if u is not None and str(idx).isdigit():
                cores[int(idx)] = u
        used = (rep.get("memory_used") or {}).get("neuron_runtime_used_bytes") or {}
        if _num(used.get("neuron_device")) is not None:
            device_mem += float(used["neuron_device"])
            have_mem = True
        if _num(used.get("host")) is not None:
            host_mem += float(used["host"])
        for d in (rep.get("hw_counters") or {}).get("neuron_devices") or []:
            ecc += sum(float(v) for k, v in d.items() if "ecc" in k and _num(v) is not None)
    system = report.get("system_data") or {}
    for d in (system.get("neuron_hw_counters") or {}).get("neuron_devices") or []:
        ecc += sum(float(v) for k, v in d.items() if "ecc" in k and _num(v) is not None)
    if not cores and not have_mem:
        return []
    extra: dict[str, float] = {f"neuroncore{i}_util_pct": cores[i] for i in sorted(cores)}
    if have_mem:
        extra["runtime_host_memory_bytes"] = host_mem
    mi = system.get("memory_info") or {}
    if _num(mi.get("memory_used_bytes")) is not None:
        extra["host_memory_used_bytes"] = float(mi["memory_used_bytes"])
    extra["ecc_events"] = ecc
    return [_neuron_sample(t_s, cores, device_mem if have_mem else None, extra)]


def parse_neuron_exporter(text: str, t_s: float) -> list[DeviceSample]:
    """One sample (device ``neuron``) from one scrape of the neuron-monitor Prometheus exporter."""
    cores: dict[int, float] = {}
    device_mem: float | None = None
    host_mem: float | None = None
    host_total: float | None = None
    keep = (
        "neuroncore_utilization_ratio",
        "neuron_runtime_memory_used_bytes",
        "neurondevice_runtime_memory_used_bytes",
        "system_memory_total_bytes",
    )
    lines = [
        ln
        for ln in text.splitlines()
        if ln.startswith(keep) or (ln.startswith("#") and any(k in ln for k in keep))
    ]
    for fam in text_string_to_metric_families("\n".join(lines) + "\n"):
        for s in fam.samples:
            if s.name == "neuroncore_utilization_ratio" and s.labels.get("neuroncore", "").isdigit():
                i = int(s.labels["neuroncore"])
                cores[i] = cores.get(i, 0.0) + float(s.value) * 100.0
            elif s.name in ("neuron_runtime_memory_used_bytes", "neurondevice_runtime_memory_used_bytes"):
                where = s.labels.get("memory_location", "neuron_device")
                if where == "host":
                    host_mem = (host_mem or 0.0) + float(s.value)
                else:
                    device_mem = (device_mem or 0.0) + float(s.value)
            elif s.name == "system_memory_total_bytes":
                host_total = float(s.value)
    if not cores and device_mem is None:
        return []
    extra: dict[str, float] = {f"neuroncore{i}_util_pct": cores[i] for i in sorted(cores)}
    if host_mem is not None:
        extra["runtime_host_memory_bytes"] = host_mem
    if host_total is not None:
        extra["host_memory_total_bytes"] = host_total
    return [_neuron_sample(t_s, cores, device_mem, extra)]


class NeuronMonitorCollector(DeviceCollector):
    """``neuron-monitor`` run as a child process (or any stream of its JSON lines): the latest report counts."""

    name = "neuron-monitor"

    def __init__(self, stream: IO[str] | None = None, *, command: list[str] | None = None) -> None:
        super().__init__()
        self._proc: subprocess.Popen[str] | None = None
        self._latest: dict[str, Any] | None = None
        self._lock = threading.Lock()
        if stream is None:
            argv = command or ["neuron-monitor"]
            if shutil.which(argv[0]) is None:
                self.missing.append(
                    f"Neuron: {argv[0]} is not on PATH (the aws-neuronx-tools package is not installed)"
                )
                return
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    stdin=subprocess.DEVNULL,
                    text=True,
                )
            except OSError as exc:
                self.missing.append(f"Neuron: {argv[0]} could not be started ({exc})")
                return
            assert self._proc.stdout is not None
            stream = self._proc.stdout
        self._reader = threading.Thread(
            target=self._read, args=(stream,), name="accelbench-neuron", daemon=True
        )
        self._reader.start()
        self.available = True
        self.sources.append("neuron-monitor")

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                report = json.loads(line)
            except ValueError:
                self._note("Neuron: neuron-monitor wrote a line that is not JSON")
                continue
            with self._lock:
                self._latest = report

    def sample(self, t_s: float | None = None) -> list[DeviceSample]:
        if not self.available:
            return []
        t = self._now(t_s)
        with self._lock:
            report = self._latest
        return parse_neuron_report(report, t) if report is not None else []

    def close(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None


class NeuronExporterCollector(ExporterCollector):
    """The neuron-monitor Prometheus exporter (a cluster's Neuron nodes), read over HTTP."""

    name = "neuron-exporter"
    label = "Neuron"
    markers = ("neuroncore_utilization_ratio", "runtime_memory_used_bytes")
    carries = "neuron-monitor"

    def parse(self, text: str, t_s: float) -> list[DeviceSample]:
        return parse_neuron_exporter(text, t_s)


__all__ = [
    "NeuronExporterCollector",
    "NeuronMonitorCollector",
    "parse_neuron_exporter",
    "parse_neuron_report",
]
