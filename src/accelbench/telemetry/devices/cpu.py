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
- Memory bandwidth: the DRAM read and write counts of the memory-controller PMUs (``uncore_imc*``'s
  ``cas_count_read``/``cas_count_write``, or ``data_read``/``data_write`` of the free-running ones; an AMD
  ``amd_df``/``amd_umc`` PMU whose ``events/`` names them), counted system-wide by ``perf stat -a -I`` on its
  own process and turned into GB/s per sample. It needs such a PMU, ``perf_event_paranoid`` <= 0 (or
  CAP_PERFMON) and the perf binary; one sentence in ``missing`` says which of these is lacking.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.domain.device import DeviceKind, DeviceSample
from accelbench.telemetry.devices.collector import DeviceCollector

_RAPL_ZONE = re.compile(r"^intel-rapl:\d+$")
#: the memory-controller PMUs whose DRAM traffic counters give the memory bandwidth: Intel's per-channel IMC
#: (and its free-running counters), AMD's data fabric and (Linux 6.4+) unified memory controllers
BANDWIDTH_PMUS = ("uncore_imc*", "amd_df*", "amd_umc*")
#: event names (files under a PMU's events/) counting DRAM reads and writes, in the order they are preferred
READ_EVENTS = ("cas_count_read", "data_read", "umc_cas_cmd.rd", "dram_read")
WRITE_EVENTS = ("cas_count_write", "data_write", "umc_cas_cmd.wr", "dram_write")
#: how often perf prints its counts (ms); a sample adds up the intervals printed since the one before
PERF_INTERVAL_MS = 250
_UNITS = {
    "": 1.0,
    "B": 1.0,
    "Bytes": 1.0,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
}


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


def _may_perfmon(proc: Path) -> bool:
    """Whether this process holds CAP_PERFMON (bit 38) or CAP_SYS_ADMIN (bit 21), which lift
    perf_event_paranoid for system-wide counters (``CapEff`` of ``/proc/self/status``)."""
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", _read(proc / "self/status") or "", flags=re.M)
    if not m:
        return False
    caps = int(m.group(1), 16)
    return bool(caps & (1 << 38) or caps & (1 << 21))


def imc_events(pmu: Path) -> list[tuple[str, str]]:
    """A memory-controller PMU's DRAM read and write events as ``(perf event, "read"|"write")``: the first of
    ``READ_EVENTS`` and of ``WRITE_EVENTS`` its ``events/`` directory names; empty without both. perf scales
    the counts by the event's ``.scale`` file and prints them in its ``.unit`` (MiB for the IMC's)."""
    out: list[tuple[str, str]] = []
    for kind, names in (("read", READ_EVENTS), ("write", WRITE_EVENTS)):
        name = next((n for n in names if (pmu / "events" / n).is_file()), None)
        if name is None:
            return []
        out.append((f"{pmu.name}/{name}/", kind))
    return out


def parse_perf_interval(line: str) -> tuple[float, str, float | None] | None:
    """One line of ``perf stat -x , -I MS`` (``time,count,unit,event,...``) -> (time s, event, bytes); the
    bytes are None for ``<not counted>`` or ``<not supported>``; None for a line that is no count."""
    parts = line.strip().split(",")
    if len(parts) < 4 or not parts[0].strip() or parts[0].lstrip().startswith("#"):
        return None
    try:
        t = float(parts[0])
    except ValueError:
        return None
    count, unit, event = parts[1].strip(), parts[2].strip(), parts[3].strip()
    if count.startswith("<"):
        return t, event, None
    try:
        value = float(count)
    except ValueError:
        return None
    return t, event, value * _UNITS.get(unit, 1.0)


@dataclass
class PerfStat:
    """``perf stat -a -x , -I PERF_INTERVAL_MS`` counting the DRAM events, read on a thread. ``take`` gives the
    read and write GB/s over the intervals printed since the last ``take``; an interval in which one of a
    kind's events was not counted is left out of that kind (a partial sum would understate it)."""

    perf: str
    events: list[tuple[str, str]]
    interval_ms: int = PERF_INTERVAL_MS
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _last_t: float = 0.0  # perf's clock: seconds since it started
    _pending_t: float | None = None
    _pending_rows: int = 0
    _cur: dict[str, float] = field(default_factory=dict)  # the open interval's bytes by kind
    _cur_bad: set[str] = field(default_factory=set)  # kinds with an uncounted event in the open interval
    _acc_bytes: dict[str, float] = field(default_factory=dict)  # completed intervals since the last take
    _acc_s: dict[str, float] = field(default_factory=dict)
    intervals: int = 0  # intervals read so far
    _tail: list[str] = field(default_factory=list)
    _proc: subprocess.Popen[str] | None = None
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self._kind = dict(self.events)
        argv = [self.perf, "stat", "-a", "-x", ",", "-I", str(self.interval_ms)]
        argv += ["-e", ",".join(e for e, _ in self.events)]
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
            )
        except OSError as exc:
            self._tail.append(f"{self.perf} could not be started ({exc})")
            return
        self._thread = threading.Thread(target=self._read, name="accelbench-perf", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            row = parse_perf_interval(line)
            if row is None:
                if line.strip() and not line.lstrip().startswith("#"):
                    with self._lock:
                        self._tail = [*self._tail[-4:], line.strip()]
                continue
            t, event, b = row
            kind = self._kind.get(event)
            with self._lock:
                if self._pending_t is not None and t != self._pending_t:
                    self._close_interval()
                self._pending_t = t
                self._pending_rows += 1
                if kind is not None:
                    if b is None:
                        self._cur_bad.add(kind)
                    else:
                        self._cur[kind] = self._cur.get(kind, 0.0) + b
                if self._pending_rows >= len(self.events):  # every event of this interval is in
                    self._close_interval()

    def _close_interval(self) -> None:
        # the counts printed at _pending_t cover (_last_t, _pending_t]
        assert self._pending_t is not None
        dt = self._pending_t - self._last_t
        for kind in set(self._kind.values()) - self._cur_bad:
            if kind in self._cur and dt > 0:
                self._acc_bytes[kind] = self._acc_bytes.get(kind, 0.0) + self._cur[kind]
                self._acc_s[kind] = self._acc_s.get(kind, 0.0) + dt
        self._last_t, self._pending_t, self._pending_rows = self._pending_t, None, 0
        self._cur, self._cur_bad = {}, set()
        self.intervals += 1

    def take(self) -> tuple[float | None, float | None]:
        """(read GB/s, write GB/s) over the intervals completed since the last call; None for a kind without
        one."""
        with self._lock:
            acc, secs = self._acc_bytes, self._acc_s
            self._acc_bytes, self._acc_s = {}, {}
        read, write = (acc[k] / secs[k] / 1e9 if secs.get(k) else None for k in ("read", "write"))
        return read, write

    def failure(self) -> str | None:
        """Why perf stopped, when it did (its last lines)."""
        if self._proc is None:
            return "; ".join(self._tail) or "perf did not start"
        code = self._proc.poll()
        if code is None:
            return None
        with self._lock:
            tail = "; ".join(self._tail[-2:])
        return f"perf stat exited with status {code}" + (f" ({tail})" if tail else "")

    def close(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=2.0)


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
        self,
        root: Path = Path("/"),
        *,
        pids: list[int] | None = None,
        self_pid: int | None = None,
        perf: str | None = "auto",
    ) -> None:
        """``perf``: the perf binary that reads the uncore counters ("auto": the one on PATH when ``root`` is
        this machine's, none for a recorded tree)."""
        super().__init__()
        self.root = root
        self._perf: PerfStat | None = None
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
        if perf == "auto":
            perf = shutil.which("perf") if root == Path("/") else None
        self._memory_bandwidth(perf)

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

    def _memory_bandwidth(self, perf: str | None) -> None:
        pmus = self.sys / "bus/event_source/devices"
        present = sorted(
            (d for pattern in BANDWIDTH_PMUS for d in (pmus.glob(pattern) if pmus.is_dir() else [])),
            key=lambda d: d.name,
        )
        counted: list[tuple[str, str]] = []  # (event as perf names it, "read"/"write")
        unnamed: list[str] = []
        for d in present:
            found = imc_events(d)
            if found:
                counted.extend(found)
            else:
                unnamed.append(d.name)
        why: list[str] = []
        if not present:
            why.append(
                "no uncore memory-controller PMU is exposed to this machine (/sys/bus/event_source/devices has no "
                "uncore_imc*, amd_df or amd_umc*: a VM hides them)"
            )
        elif not counted:
            why.append(
                f"{', '.join(unnamed)} name no DRAM read/write events in sysfs (cas_count_read/write, "
                "data_read/write), and accelbench reads only events the kernel names"
            )
        paranoid = _int(self.proc / "sys/kernel/perf_event_paranoid")
        if (paranoid is None or paranoid > 0) and not _may_perfmon(self.proc):
            why.append(
                f"perf_event_paranoid={paranoid if paranoid is not None else 'unreadable'} (system-wide uncore "
                "counters need 0 or less, or CAP_PERFMON)"
            )
        if perf is None:
            why.append("no perf binary (install linux-perf / linux-tools)")
        if why:
            self.missing.append("memory bandwidth: not measured: " + "; ".join(why))
            return
        assert perf is not None
        self._perf = PerfStat(perf, counted)
        self.sources.append("cpu:perf-uncore")

    def close(self) -> None:
        if self._perf is not None:
            self._perf.close()
            self._perf = None

    def _bandwidth(self) -> tuple[float | None, float | None]:
        if self._perf is None:
            return None, None
        failed = self._perf.failure()
        if failed:
            self._note(f"memory bandwidth: {failed}")
        return self._perf.take()

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
        read_gbps, write_gbps = self._bandwidth()
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
                memory_read_gbps=read_gbps,
                memory_write_gbps=write_gbps,
                extra=extra,
            )
        ]

    _prev_energy: float | None = None


__all__ = [
    "CpuCollector",
    "PerfStat",
    "imc_events",
    "parse_meminfo",
    "parse_perf_interval",
    "parse_proc_stat",
]
