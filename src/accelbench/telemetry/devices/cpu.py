"""The host CPU from ``/proc`` and ``/sys``: utilisation (overall and per core), frequency, RAPL energy, host
memory, and the CPU time and memory of the engine's cgroup(s).

Every path hangs off ``root`` (``/`` on a live machine), so tests run against recorded trees.

- Utilisation: the change of ``/proc/stat``'s jiffies between two samples, busy = total - idle - iowait over
  the first eight fields (guest time is already inside user). The first sample has none (no interval yet).
- Frequency: the mean of ``cpu*/cpufreq/scaling_cur_freq`` (kHz); without cpufreq (most VMs) the mean of
  ``/proc/cpuinfo``'s ``cpu MHz``.
- Energy: ``/sys/class/powercap/intel-rapl:N/energy_uj`` of every package zone (sub-zones are inside their
  package and are not added), accumulated from the first sample with the wrap at ``max_energy_range_uj``;
  power is the energy over the interval.
- Memory: ``MemTotal - MemAvailable`` of ``/proc/meminfo``.
- Engine cgroups: from ``/proc/PID/cgroup`` of each engine pid; cgroup v2 ``cpu.stat`` ``usage_usec`` and
  ``memory.current`` (under ``/sys/fs/cgroup`` or, on a hybrid host, ``/sys/fs/cgroup/unified``), else v1
  ``cpuacct.usage`` and ``memory.usage_in_bytes``. Distinct cgroups are added once.
- Memory bandwidth needs system-wide uncore counters (an IMC PMU and ``perf_event_paranoid`` <= 0); what is
  lacking is said in ``missing``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from accelbench.domain.device import DeviceKind, DeviceSample
from accelbench.telemetry.devices.base import DeviceCollector

_RAPL_ZONE = re.compile(r"^intel-rapl:\d+$")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def parse_proc_stat(text: str) -> dict[str, tuple[int, int]]:
    """``cpu`` and ``cpuN`` lines -> (busy, total) jiffies."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        parts = line.split()
        vals = [int(x) for x in parts[1:9]]
        vals += [0] * (8 - len(vals))
        total = sum(vals)
        idle = vals[3] + vals[4]
        out[parts[0]] = (total - idle, total)
    return out


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` -> bytes by field (the kB figures times 1024)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            out[key.strip()] = int(fields[0]) * (1024 if len(fields) > 1 and fields[1] == "kB" else 1)
    return out


@dataclass
class _Zone:
    path: Path
    name: str
    max_uj: int | None
    last_uj: int | None = None
    acc_uj: int = 0


@dataclass
class _Cgroup:
    label: str  # the cgroup's path, e.g. /system.slice/vllm.service
    cpu_file: Path | None  # cpu.stat (v2) or cpuacct.usage (v1)
    cpu_v2: bool
    mem_file: Path | None
    first_cpu_us: int | None = None
    last_cpu_us: int | None = None


class CpuCollector(DeviceCollector):
    """The host CPU as one device, ``cpu``."""

    name = "cpu"

    def __init__(
        self, root: Path = Path("/"), *, pids: list[int] | None = None, self_pid: int | None = None
    ) -> None:
        super().__init__()
        self.root = root
        self.proc = root / "proc"
        self.sys = root / "sys"
        self._prev_stat: dict[str, tuple[int, int]] | None = None
        self._prev_t: float | None = None
        stat = _read(self.proc / "stat")
        if stat is None or "cpu" not in parse_proc_stat(stat):
            self.missing.append(f"CPU: {self.proc / 'stat'} is not readable (not a Linux host)")
            return
        self.available = True
        self.sources.append("cpu:/proc/stat")
        self._freq_files = sorted(
            (self.sys / "devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq"),
            key=lambda p: int(p.parent.parent.name[3:]),
        )
        if not self._freq_files:
            if _read(self.proc / "cpuinfo") and "cpu MHz" in (_read(self.proc / "cpuinfo") or ""):
                self.missing.append(
                    "CPU frequency: /sys/devices/system/cpu/cpu*/cpufreq is absent (no cpufreq driver, as in most "
                    "VMs); clocks are /proc/cpuinfo's 'cpu MHz', which a VM may report as the nominal figure"
                )
            else:
                self.missing.append("CPU frequency: neither cpufreq nor /proc/cpuinfo's 'cpu MHz' is there")
        self._zones = self._find_rapl()
        self._cgroups = self._find_cgroups(pids or [], self_pid)
        self._memory_bandwidth()

    # ---- discovery -------------------------------------------------------------------------------------
    def _find_rapl(self) -> list[_Zone]:
        base = self.sys / "class/powercap"
        if not base.is_dir():
            self.missing.append(
                "RAPL: /sys/class/powercap is absent (no powercap driver: a VM, or a CPU whose energy counters "
                "the kernel does not expose), so CPU power and energy are unknown"
            )
            return []
        zones: list[_Zone] = []
        unreadable = False
        for d in sorted(base.iterdir()):
            if not _RAPL_ZONE.match(d.name):
                continue
            if _int(d / "energy_uj") is None:
                unreadable = True
                continue
            zones.append(_Zone(d, (_read(d / "name") or d.name).strip(), _int(d / "max_energy_range_uj")))
        if not zones:
            self.missing.append(
                "RAPL: /sys/class/powercap/intel-rapl:*/energy_uj is not readable (root only since Linux 5.10)"
                if unreadable
                else "RAPL: /sys/class/powercap has no intel-rapl zone (an AMD EPYC VM exposes none)"
            )
        else:
            self.sources.append("cpu:rapl")
        return zones

    def _cgroup_lines(self, pid: str) -> list[tuple[str, str, str]]:
        text = _read(self.proc / pid / "cgroup") or ""
        out = []
        for line in text.splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3:
                out.append((parts[0], parts[1], parts[2]))
        return out

    def _cgroup_of(self, pid: str) -> _Cgroup | None:
        lines = self._cgroup_lines(pid)
        if not lines:
            return None
        fs = self.sys / "fs/cgroup"
        v2 = next((p for h, c, p in lines if h == "0" and c == ""), None)
        cpu_file: Path | None = None
        mem_file: Path | None = None
        cpu_v2 = False
        label = v2 or "/"
        if v2 is not None:
            for base in (fs, fs / "unified"):
                d = base / v2.lstrip("/")
                if (d / "cpu.stat").is_file():
                    cpu_file, cpu_v2 = d / "cpu.stat", True
                    if (d / "memory.current").is_file():
                        mem_file = d / "memory.current"
                    break
        v1 = {c: p for _, cs, p in lines for c in cs.split(",") if cs}
        if cpu_file is None and "cpuacct" in v1:
            for name in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu"):
                f = fs / name / v1["cpuacct"].lstrip("/") / "cpuacct.usage"
                if f.is_file():
                    cpu_file, label = f, v1["cpuacct"]
                    break
        if mem_file is None and "memory" in v1:
            f = fs / "memory" / v1["memory"].lstrip("/") / "memory.usage_in_bytes"
            if f.is_file():
                mem_file = f
                if cpu_file is None:
                    label = v1["memory"]
        if cpu_file is None and mem_file is None:
            return None
        return _Cgroup(label, cpu_file, cpu_v2, mem_file)

    def _find_cgroups(self, pids: list[int], self_pid: int | None) -> list[_Cgroup]:
        if not pids:
            return []
        found: dict[tuple[Path | None, Path | None], _Cgroup] = {}
        for pid in pids:
            cg = self._cgroup_of(str(pid))
            if cg is None:
                self.missing.append(
                    f"cgroup: no cgroup accounting for engine pid {pid} (/proc/{pid}/cgroup absent or its cgroup "
                    "has no cpu.stat, cpuacct.usage or memory file)"
                )
                continue
            found.setdefault((cg.cpu_file, cg.mem_file), cg)
        groups = list(found.values())
        if groups:
            self.sources.append("cpu:cgroup")
            if any(not g.cpu_file for g in groups):
                self.missing.append("cgroup CPU: the engine's cgroup has no cpu.stat or cpuacct.usage")
            if any(not g.mem_file for g in groups):
                self.missing.append(
                    "cgroup memory: the engine's cgroup has no memory.current or memory.usage_in_bytes"
                )
            if any(g.label == "/" and g.cpu_file is not None for g in groups):
                self.missing.append(
                    "cgroup CPU: the engine runs in the root cgroup, so its CPU figure is the whole machine's"
                )
            if self_pid is not None:
                mine = self._cgroup_of(str(self_pid))
                if mine is not None and any(
                    (g.cpu_file, g.mem_file) == (mine.cpu_file, mine.mem_file) for g in groups
                ):
                    self.missing.append(
                        "cgroup: the load generator shares the engine's cgroup, so the cgroup figures include the client"
                    )
        return groups

    def _memory_bandwidth(self) -> None:
        pmus = self.sys / "bus/event_source/devices"
        imc = sorted(p.name for p in pmus.glob("uncore_imc*")) if pmus.is_dir() else []
        paranoid = _int(self.proc / "sys/kernel/perf_event_paranoid")
        if not imc:
            self.missing.append(
                "memory bandwidth: no uncore IMC PMU under /sys/bus/event_source/devices (a VM exposes none, and "
                "AMD hosts have no uncore_imc), so the bandwidth the engine pulls is not measured"
            )
        elif paranoid is None or paranoid > 0:
            self.missing.append(
                f"memory bandwidth: perf_event_paranoid is {paranoid}; system-wide uncore counters need 0 or less "
                "(or CAP_PERFMON)"
            )
        else:
            self.missing.append(
                f"memory bandwidth: the IMC PMUs are there ({', '.join(imc)}) but accelbench does not read them yet"
            )

    # ---- sampling --------------------------------------------------------------------------------------
    def _freq_mhz(self) -> float | None:
        if self._freq_files:
            khz = [v for v in (_int(f) for f in self._freq_files) if v is not None]
            return sum(khz) / len(khz) / 1000.0 if khz else None
        text = _read(self.proc / "cpuinfo") or ""
        mhz = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", text, flags=re.M)]
        return sum(mhz) / len(mhz) if mhz else None

    def _rapl(self) -> tuple[float | None, dict[str, float]]:
        if not self._zones:
            return None, {}
        per: dict[str, float] = {}
        for z in self._zones:
            cur = _int(z.path / "energy_uj")
            if cur is None:
                self._note(f"RAPL: {z.path / 'energy_uj'} could not be read during the run")
                continue
            if z.last_uj is not None:
                if cur >= z.last_uj:
                    z.acc_uj += cur - z.last_uj
                elif z.max_uj:
                    z.acc_uj += z.max_uj - z.last_uj + cur  # the counter wrapped at max_energy_range_uj
            z.last_uj = cur
            per[f"rapl_{z.name.replace('-', '_')}_j"] = z.acc_uj / 1e6
        return sum(z.acc_uj for z in self._zones) / 1e6, per

    def _cgroup_figures(self, dt: float | None) -> dict[str, float]:
        if not self._cgroups:
            return {}
        cpu_us = 0
        delta_us = 0
        have_cpu = have_mem = False
        mem = 0
        for g in self._cgroups:
            if g.cpu_file is not None:
                us: int | None
                if g.cpu_v2:
                    text = _read(g.cpu_file) or ""
                    m = re.search(r"^usage_usec (\d+)", text, flags=re.M)
                    us = int(m.group(1)) if m else None
                else:
                    ns = _int(g.cpu_file)
                    us = ns // 1000 if ns is not None else None
                if us is not None:
                    have_cpu = True
                    if g.first_cpu_us is None:
                        g.first_cpu_us = us
                    delta_us += us - (g.last_cpu_us if g.last_cpu_us is not None else us)
                    g.last_cpu_us = us
                    cpu_us += us - g.first_cpu_us
            if g.mem_file is not None:
                b = _int(g.mem_file)
                if b is not None:
                    have_mem = True
                    mem += b
        out: dict[str, float] = {}
        if have_cpu:
            out["cgroup_cpu_s"] = cpu_us / 1e6
            if dt:
                out["cgroup_cpu_cores"] = delta_us / 1e6 / dt
        if have_mem:
            out["cgroup_memory_bytes"] = float(mem)
        return out

    def sample(self, t_s: float | None = None) -> list[DeviceSample]:
        if not self.available:
            return []
        t = self._now(t_s)
        text = _read(self.proc / "stat")
        if text is None:
            self._note(f"CPU: {self.proc / 'stat'} could not be read during the run")
            return []
        stat = parse_proc_stat(text)
        dt = t - self._prev_t if self._prev_t is not None else None
        extra: dict[str, float] = {}
        util: float | None = None
        if self._prev_stat is not None:
            for key, (busy, total) in stat.items():
                pb, pt = self._prev_stat.get(key, (busy, total))
                d = total - pt
                pct = 100.0 * (busy - pb) / d if d > 0 else 0.0
                if key == "cpu":
                    util = pct
                else:
                    extra[f"{key}_util_pct"] = pct
        self._prev_stat, self._prev_t = stat, t
        mem = parse_meminfo(_read(self.proc / "meminfo") or "")
        total_b = mem.get("MemTotal")
        used_b = total_b - mem["MemAvailable"] if total_b is not None and "MemAvailable" in mem else None
        energy, per_zone = self._rapl()
        extra.update(per_zone)
        extra.update(self._cgroup_figures(dt))
        power: float | None = None
        if energy is not None and dt and self._prev_energy is not None:
            power = (energy - self._prev_energy) / dt
        self._prev_energy = energy
        return [
            DeviceSample(
                t_s=t,
                device="cpu",
                kind=DeviceKind.cpu,
                util_pct=util,
                memory_used_bytes=float(used_b) if used_b is not None else None,
                memory_total_bytes=float(total_b) if total_b is not None else None,
                power_w=power,
                energy_j=energy,
                clock_mhz=self._freq_mhz(),
                extra=extra,
            )
        ]

    _prev_energy: float | None = None


__all__ = ["CpuCollector", "parse_meminfo", "parse_proc_stat"]
