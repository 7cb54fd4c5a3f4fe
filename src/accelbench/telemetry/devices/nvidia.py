"""NVIDIA GPUs: a local GPU through NVML (``pynvml`` from ``nvidia-ml-py``), a cluster's through a DCGM exporter.

NVML is read in two steps so a recorded reading can be tested without a GPU: ``nvml_query`` returns a plain
dict (``{"devices": [{"index", "name", "uuid", "util_gpu_pct", "util_memory_pct", "memory_used_bytes",
"memory_total_bytes", "power_mw", "energy_mj", "temperature_c", "sm_clock_mhz", "throttle_reasons"}]}``, a field
None where the device does not support it), and ``parse_nvml`` turns it into samples. The DCGM exporter's
Prometheus text is parsed with ``prometheus_client``'s parser, per ``gpu`` label.

Energy is the device's total-energy counter (mJ since the driver loaded), reported from the collector's first
reading, so ``energy_j`` starts at 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from accelbench.domain.device import DeviceKind, DeviceSample
from accelbench.telemetry.devices.collector import DeviceCollector, ExporterCollector

#: NVML's clocks-event (throttle) reason bits -> names (nvmlClocksThrottleReason*; DCGM uses the same bits)
THROTTLE_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}


def decode_throttle(mask: int | float | None) -> list[str]:
    """The names of the reason bits set in ``mask`` (unknown bits as ``bit_0x...``)."""
    if mask is None:
        return []
    m = int(mask)
    names = [name for bit, name in THROTTLE_REASONS.items() if m & bit]
    rest = m & ~sum(THROTTLE_REASONS)
    if rest:
        names.append(f"bit_{rest:#x}")
    return names


def _call(fn: Any, *args: Any) -> Any:
    """One NVML call; None where the device does not support it (or the call fails)."""
    try:
        return fn(*args)
    except Exception:  # pynvml.NVMLError_NotSupported and friends: the field is unknown, not an error
        return None


def nvml_query(nvml: Any) -> dict[str, Any]:
    """Read every GPU once through ``nvml`` (the ``pynvml`` module, initialised) into a plain dict."""
    devices = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        util = _call(nvml.nvmlDeviceGetUtilizationRates, h)
        mem = _call(nvml.nvmlDeviceGetMemoryInfo, h)
        reasons = _call(nvml.nvmlDeviceGetCurrentClocksEventReasons, h)
        if reasons is None:
            reasons = _call(nvml.nvmlDeviceGetCurrentClocksThrottleReasons, h)
        name = _call(nvml.nvmlDeviceGetName, h)
        uuid = _call(nvml.nvmlDeviceGetUUID, h)
        devices.append(
            {
                "index": i,
                "name": name.decode() if isinstance(name, bytes) else name,
                "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                "util_gpu_pct": util.gpu if util is not None else None,
                "util_memory_pct": util.memory if util is not None else None,
                "memory_used_bytes": mem.used if mem is not None else None,
                "memory_total_bytes": mem.total if mem is not None else None,
                "power_mw": _call(nvml.nvmlDeviceGetPowerUsage, h),
                "energy_mj": _call(nvml.nvmlDeviceGetTotalEnergyConsumption, h),
                "temperature_c": _call(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU),
                "sm_clock_mhz": _call(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM),
                "throttle_reasons": reasons,
            }
        )
    return {"devices": devices}


def _f(v: Any) -> float | None:
    return float(v) if v is not None else None


def parse_nvml(result: Mapping[str, Any], t_s: float, energy0_mj: dict[str, float]) -> list[DeviceSample]:
    """Samples from one ``nvml_query`` result. ``energy0_mj`` holds each device's first energy reading (filled
    here on first sight), so ``energy_j`` counts from the collector's start."""
    out: list[DeviceSample] = []
    for d in result.get("devices", []):
        dev = f"gpu{d['index']}"
        energy: float | None = None
        if d.get("energy_mj") is not None:
            e = float(d["energy_mj"])
            energy = (e - energy0_mj.setdefault(dev, e)) / 1000.0
        extra: dict[str, float] = {}
        if d.get("util_memory_pct") is not None:
            extra["memory_util_pct"] = float(d["util_memory_pct"])
        out.append(
            DeviceSample(
                t_s=t_s,
                device=dev,
                kind=DeviceKind.gpu,
                util_pct=_f(d.get("util_gpu_pct")),
                memory_used_bytes=_f(d.get("memory_used_bytes")),
                memory_total_bytes=_f(d.get("memory_total_bytes")),
                power_w=float(d["power_mw"]) / 1000.0 if d.get("power_mw") is not None else None,
                energy_j=energy,
                temperature_c=_f(d.get("temperature_c")),
                clock_mhz=_f(d.get("sm_clock_mhz")),
                throttle_reasons=decode_throttle(d.get("throttle_reasons")),
                extra=extra,
            )
        )
    return out


class NvmlCollector(DeviceCollector):
    """Local NVIDIA GPUs through NVML."""

    name = "nvml"

    def __init__(self, nvml: Any = None) -> None:
        super().__init__()
        self._energy0: dict[str, float] = {}
        self._nvml = nvml
        if nvml is None:
            try:
                import pynvml  # optional: only on NVIDIA hosts

                nvml = pynvml
            except ImportError:
                self.missing.append("NVML: the nvidia-ml-py package (pynvml) is not installed")
                return
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            self.missing.append(f"NVML: no NVIDIA driver to talk to ({exc})")
            return
        self._nvml = nvml
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            count = 0
            self.missing.append(f"NVML: the GPUs could not be counted ({exc})")
        if count == 0:
            if not self.missing:
                self.missing.append("NVML: the driver is loaded but sees no GPU")
            self.close()
            return
        self.available = True
        self.sources.append("nvml")

    def sample(self, t_s: float | None = None) -> list[DeviceSample]:
        if not self.available:
            return []
        t = self._now(t_s)
        try:
            result = nvml_query(self._nvml)
        except Exception as exc:
            self._note(f"NVML: a reading failed ({exc})")
            return []
        return parse_nvml(result, t, self._energy0)

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):  # already shut down, or never initialised
                self._nvml.nvmlShutdown()
            self._nvml = None
            self.available = False


# ---- DCGM exporter ---------------------------------------------------------------------------------------
#: DCGM field -> (what it fills, factor)
DCGM_FIELDS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("util_pct", 1.0),
    "DCGM_FI_DEV_FB_USED": ("memory_used_bytes", 2.0**20),  # MiB
    "DCGM_FI_DEV_FB_FREE": ("memory_free_bytes", 2.0**20),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_mj", 1.0),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("clock_mhz", 1.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_pct", 100.0),  # a ratio
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active_pct", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active_pct", 100.0),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle", 1.0),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle", 1.0),
}
_EXTRA = ("sm_active_pct", "tensor_active_pct", "dram_active_pct")


def parse_dcgm(text: str, t_s: float, energy0_mj: dict[str, float]) -> list[DeviceSample]:
    """Samples from one DCGM exporter scrape, one per ``gpu`` label (in label order)."""
    wanted = tuple(DCGM_FIELDS)
    lines = [
        ln
        for ln in text.splitlines()
        if ln.startswith(wanted) or ln.startswith(("# HELP DCGM", "# TYPE DCGM"))
    ]
    per: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families("\n".join(lines) + "\n"):
        for s in fam.samples:
            # the parser names a counter's samples <name>_total when the exposition has no suffix
            field = DCGM_FIELDS.get(s.name) or DCGM_FIELDS.get(s.name.removesuffix("_total"))
            gpu = s.labels.get("gpu")
            if field is None or gpu is None:
                continue
            per.setdefault(gpu, {})[field[0]] = float(s.value) * field[1]
    out = []
    for gpu in sorted(per, key=lambda g: int(g) if g.isdigit() else 0):
        v = per[gpu]
        dev = f"gpu{gpu}"
        energy = None
        if "energy_mj" in v:
            energy = (v["energy_mj"] - energy0_mj.setdefault(dev, v["energy_mj"])) / 1000.0
        used = v.get("memory_used_bytes")
        total = used + v["memory_free_bytes"] if used is not None and "memory_free_bytes" in v else None
        out.append(
            DeviceSample(
                t_s=t_s,
                device=dev,
                kind=DeviceKind.gpu,
                util_pct=v.get("util_pct"),
                memory_used_bytes=used,
                memory_total_bytes=total,
                power_w=v.get("power_w"),
                energy_j=energy,
                temperature_c=v.get("temperature_c"),
                clock_mhz=v.get("clock_mhz"),
                throttle_reasons=decode_throttle(v.get("throttle")),
                extra={k: v[k] for k in _EXTRA if k in v},
            )
        )
    return out


class DcgmCollector(ExporterCollector):
    """A DCGM exporter's ``/metrics`` (a cluster's GPUs), read over HTTP."""

    name = "dcgm"
    label = "DCGM"
    markers = ("DCGM_FI_",)
    carries = "DCGM_FI_"

    def __init__(self, url: str, *, timeout_s: float = 2.0, client: httpx.Client | None = None) -> None:
        self._energy0: dict[str, float] = {}
        super().__init__(url, timeout_s=timeout_s, client=client)

    def parse(self, text: str, t_s: float) -> list[DeviceSample]:
        return parse_dcgm(text, t_s, self._energy0)


__all__ = [
    "DcgmCollector",
    "NvmlCollector",
    "decode_throttle",
    "nvml_query",
    "parse_dcgm",
    "parse_nvml",
]
