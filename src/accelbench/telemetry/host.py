"""The environment a run was measured in, captured once per run and stored with it.

A benchmark number means little without the machine behind it: which CPU and which of its matrix
instructions (AVX-512, AVX512-BF16/VNNI, AMX, SVE), how many cores the process could actually use, how much
memory, which GPUs or Neuron devices, which OS, Python, accelbench and engine versions, and the exact
command. ``capture_environment`` collects all of that into a JSON-safe dict; every probe is best effort and
bounded in time, and a probe that fails leaves its reason in the dict instead of failing the run.

Sources, in order of preference: ``/proc/cpuinfo`` and ``/sys`` on Linux (exact flag names, sockets and
NUMA nodes), ``py-cpuinfo`` elsewhere, ``psutil`` for core counts and memory, ``nvidia-smi`` and ``neuron-ls``
when installed, the server's ``/version`` (vLLM, SGLang) or ``/info`` (TGI) for the engine version.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil

from accelbench import __version__
from accelbench.domain.answers import ModelsAnswer, parse_answer
from accelbench.errors import UserInputError
from accelbench.redact import redact_argv, redact_text

# Flags worth knowing for LLM serving on CPUs, by the names Linux uses in /proc/cpuinfo ("flags" on x86,
# "Features" on Arm). The value is the name people write in docs and tables.
X86_ISA_FLAGS: dict[str, str] = {
    "avx2": "AVX2",
    "fma": "FMA",
    "avx_vnni": "AVX-VNNI",
    "avx512f": "AVX-512F",
    "avx512bw": "AVX-512BW",
    "avx512vl": "AVX-512VL",
    "avx512_vnni": "AVX512-VNNI",
    "avx512_bf16": "AVX512-BF16",
    "avx512_fp16": "AVX512-FP16",
    "amx_tile": "AMX-TILE",
    "amx_bf16": "AMX-BF16",
    "amx_int8": "AMX-INT8",
    "amx_fp16": "AMX-FP16",
}
ARM_ISA_FLAGS: dict[str, str] = {
    "asimd": "NEON",
    "asimddp": "DOTPROD",
    "sve": "SVE",
    "sve2": "SVE2",
    "bf16": "BF16",
    "svebf16": "SVE-BF16",
    "i8mm": "I8MM",
    "svei8mm": "SVE-I8MM",
    "sme": "SME",
}

# Arm cores by (implementer, part) as /proc/cpuinfo gives them; Arm Linux has no "model name" line.
ARM_PARTS: dict[tuple[str, str], str] = {
    ("0x41", "0xd0c"): "Arm Neoverse-N1 (e.g. AWS Graviton2)",
    ("0x41", "0xd40"): "Arm Neoverse-V1 (e.g. AWS Graviton3)",
    ("0x41", "0xd4f"): "Arm Neoverse-V2 (e.g. AWS Graviton4)",
    ("0x41", "0xd49"): "Arm Neoverse-N2",
    ("0x41", "0xd8e"): "Arm Neoverse-N3",
    ("0x41", "0xd84"): "Arm Neoverse-V3",
    ("0x41", "0xd0b"): "Arm Cortex-A76",
    ("0x41", "0xd08"): "Arm Cortex-A72",
    ("0x61", "0x039"): "Apple",
}

# Options whose value is a secret; the stored command line shows them as "***".

PROBE_TIMEOUT_S = 5.0


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


# ----------------------------------------------------------------------------------------------- CPU
def parse_cpuinfo(text: str) -> dict[str, Any]:
    """Parse ``/proc/cpuinfo`` text (x86 or Arm) into model, vendor, flags, sockets and logical CPUs.

    Returns ``{"model", "vendor", "flags" (sorted list), "sockets", "logical_cpus", "physical_cores"}``; a
    field the text does not give is None (Arm kernels print neither "physical id" nor "core id").
    """
    blocks = [b for b in re.split(r"\n\s*\n", text.strip()) if b.strip()]
    processors: list[dict[str, str]] = []
    header: dict[str, str] = {}
    for block in blocks:
        entry: dict[str, str] = {}
        for line in block.splitlines():
            if ":" not in line:
                continue
            key, _, value = line.partition(":")
            entry[key.strip().lower()] = value.strip()
        if "processor" in entry and entry["processor"].isdigit():
            processors.append(entry)
        else:
            header.update(entry)  # Arm kernels put "Hardware"/"Serial" in a trailing block
    first = processors[0] if processors else header
    flags_line = first.get("flags") or first.get("features") or ""
    flags = sorted(set(flags_line.split()))
    model = first.get("model name") or header.get("model name")
    vendor = first.get("vendor_id")
    if model is None:
        implementer, part = first.get("cpu implementer"), first.get("cpu part")
        if implementer and part:
            model = ARM_PARTS.get(
                (implementer.lower(), part.lower()), f"Arm implementer {implementer} part {part}"
            )
            vendor = vendor or ("ARM" if implementer.lower() == "0x41" else f"implementer {implementer}")
        elif header.get("hardware"):
            model = header["hardware"]
    physical_ids = {p["physical id"] for p in processors if "physical id" in p}
    core_ids = {(p.get("physical id"), p["core id"]) for p in processors if "core id" in p}
    return {
        "model": model,
        "vendor": vendor,
        "flags": flags,
        "sockets": len(physical_ids) or None,
        "logical_cpus": len(processors) or None,
        "physical_cores": len(core_ids) or None,
    }


def isa_summary(flags: Sequence[str], arch: str) -> dict[str, Any]:
    """Which serving-relevant instruction sets ``flags`` contain.

    ``present`` lists the display names found (e.g. ``["AVX2", "AVX-512F", "AVX512-BF16"]``);
    ``has`` maps every checked display name to True/False, so "no AMX" is stated, not implied;
    ``matrix_engine`` names the best matrix path: "AMX", "AVX512-BF16", "AVX512-VNNI", "SVE2", "SVE", "NEON"
    or None.
    """
    fset = {f.lower() for f in flags}
    is_arm = arch.lower() in {"aarch64", "arm64"} or ("asimd" in fset and "sse2" not in fset)
    table = ARM_ISA_FLAGS if is_arm else X86_ISA_FLAGS
    has = {name: flag in fset for flag, name in table.items()}
    present = [name for name, ok in has.items() if ok]
    matrix: str | None = None
    for name in ("AMX-BF16", "AVX512-BF16", "AVX512-VNNI", "AVX-512F", "AVX2", "SVE2", "SVE", "NEON"):
        if has.get(name):
            matrix = "AMX" if name.startswith("AMX") else name
            break
    return {"family": "arm" if is_arm else "x86", "present": present, "has": has, "matrix_engine": matrix}


def _numa_nodes() -> int | None:
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return len(nodes) or None


def numa_node_count() -> int:
    """NUMA nodes of this machine (1 where the kernel does not say)."""
    return _numa_nodes() or 1


def _cgroup_cpu_limit() -> float | None:
    """CPUs the container may use per cgroup v2 ``cpu.max`` (None when unlimited or unknown)."""
    text = _read("/sys/fs/cgroup/cpu.max")
    if text:
        quota, _, period = text.strip().partition(" ")
        if quota != "max" and period.isdigit() and quota.isdigit() and int(period) > 0:
            return round(int(quota) / int(period), 2)
    return None


def cpu_info() -> dict[str, Any]:
    """The CPU of this machine: model, vendor, arch, ISA, sockets, cores, NUMA nodes, usable CPUs."""
    arch = platform.machine()
    text = _read("/proc/cpuinfo")
    source = "/proc/cpuinfo"
    parsed: dict[str, Any]
    if text:
        parsed = parse_cpuinfo(text)
    else:
        source = "py-cpuinfo"
        try:
            import cpuinfo  # slow (probes the CPU), only when asked

            raw = cpuinfo.get_cpu_info()
            parsed = {
                "model": raw.get("brand_raw"),
                "vendor": raw.get("vendor_id_raw"),
                "flags": sorted(raw.get("flags", [])),
                "sockets": None,
                "logical_cpus": raw.get("count"),
                "physical_cores": None,
            }
        except Exception as exc:  # py-cpuinfo shells out on some systems; never fail a run over it
            source = f"unavailable ({exc})"
            parsed = {"model": platform.processor() or None, "vendor": None, "flags": []}
    logical = psutil.cpu_count(logical=True) or parsed.get("logical_cpus")
    physical = psutil.cpu_count(logical=False) or parsed.get("physical_cores")
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = logical
    freq = None
    with contextlib.suppress(Exception):
        f = psutil.cpu_freq()
        freq = round(f.max or f.current, 1) if f else None
    return {
        "model": parsed.get("model"),
        "vendor": parsed.get("vendor"),
        "arch": arch,
        "isa": isa_summary(parsed.get("flags", []), arch),
        "flags": parsed.get("flags", []),
        "sockets": parsed.get("sockets"),
        "numa_nodes": _numa_nodes(),
        "physical_cores": physical,
        "logical_cpus": logical,
        "usable_cpus": usable,
        "cgroup_cpu_limit": _cgroup_cpu_limit(),
        "max_mhz": freq,
        "source": source,
    }


def memory_info() -> dict[str, Any]:
    vm = psutil.virtual_memory()
    swap = psutil.swap_memory()
    return {
        "total_gib": round(vm.total / 2**30, 2),
        "available_gib": round(vm.available / 2**30, 2),
        "swap_gib": round(swap.total / 2**30, 2),
    }


# ------------------------------------------------------------------------------------------ devices
def _run_tool(argv: list[str]) -> tuple[str | None, str | None]:
    """(stdout, error) of a short external probe."""
    if shutil.which(argv[0]) is None:
        return None, None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{argv[0]}: {exc}"
    if proc.returncode != 0:
        return None, f"{argv[0]} exited {proc.returncode}: {proc.stderr.strip()[:200]}"
    return proc.stdout, None


NVIDIA_FIELDS = ["index", "name", "memory.total", "driver_version", "compute_cap", "pci.bus_id"]


def parse_nvidia_smi_csv(text: str) -> list[dict[str, Any]]:
    """Parse ``nvidia-smi --query-gpu=<NVIDIA_FIELDS> --format=csv,noheader,nounits`` output."""
    gpus = []
    for row in csv.reader(io.StringIO(text)):
        cells = [c.strip() for c in row]
        if len(cells) < len(NVIDIA_FIELDS):
            continue
        item = dict(zip(NVIDIA_FIELDS, cells, strict=False))
        mem: float | None
        try:
            mem = round(float(item["memory.total"]) / 1024, 2)
        except ValueError:
            mem = None
        gpus.append(
            {
                "index": int(item["index"]) if item["index"].isdigit() else item["index"],
                "vendor": "NVIDIA",
                "name": item["name"],
                "memory_gib": mem,
                "driver": item["driver_version"],
                "compute_capability": item["compute_cap"],
                "pci_bus_id": item["pci.bus_id"],
            }
        )
    return gpus


def accelerator_info() -> dict[str, Any]:
    """GPUs (nvidia-smi) and Neuron devices (neuron-ls) when their tools are installed."""
    out: dict[str, Any] = {"gpus": [], "neuron_devices": []}
    errors: list[str] = []
    text, err = _run_tool(
        ["nvidia-smi", f"--query-gpu={','.join(NVIDIA_FIELDS)}", "--format=csv,noheader,nounits"]
    )
    if text:
        out["gpus"] = parse_nvidia_smi_csv(text)
    if err:
        errors.append(err)
    text, err = _run_tool(["neuron-ls", "--json-output"])
    if text:
        try:
            devices = json.loads(text)
            out["neuron_devices"] = [
                {
                    "index": d.get("neuron_device"),
                    "neuron_cores": d.get("nc_count"),
                    "memory_gib": round(d["memory_size"] / 2**30, 2) if d.get("memory_size") else None,
                }
                for d in devices
                if isinstance(d, dict)
            ]
        except (ValueError, TypeError) as exc:
            errors.append(f"neuron-ls: unreadable output ({exc})")
    if err:
        errors.append(err)
    if errors:
        out["errors"] = errors
    return out


# ------------------------------------------------------------------------------------------ machine
def os_info() -> dict[str, Any]:
    distro = None
    text = _read("/etc/os-release")
    if text:
        m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.MULTILINE)
        distro = m.group(1) if m else None
    info: dict[str, Any] = {
        "system": platform.system(),
        "release": platform.release(),
        "version": platform.version(),
        "distro": distro,
        "hostname": platform.node(),
    }
    # Cloud VMs name themselves in DMI (EC2: product_name "m7i.2xlarge", sys_vendor "Amazon EC2").
    vendor = (_read("/sys/devices/virtual/dmi/id/sys_vendor") or "").strip() or None
    product = (_read("/sys/devices/virtual/dmi/id/product_name") or "").strip() or None
    if vendor or product:
        info["machine_vendor"] = vendor
        info["machine_product"] = product
    return info


def python_info() -> dict[str, Any]:
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
    }


# ----------------------------------------------------------------------------------------- engine
def engine_info(
    base_url: str, *, headers: Mapping[str, str] | None = None, timeout: float = PROBE_TIMEOUT_S
) -> dict[str, Any]:
    """Ask an OpenAI-compatible server which engine and version it is.

    vLLM and SGLang answer ``GET /version`` with ``{"version": ...}``; TGI answers ``GET /info``; the
    ``owned_by`` of ``/v1/models`` names vLLM ("vllm") and SGLang ("sglang"). Returns
    ``{"name", "version", "source"}`` with None where the server does not say.
    """
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    name: str | None = None
    version: str | None = None
    source: str | None = None
    errors: list[str] = []
    with httpx.Client(timeout=timeout, headers=dict(headers or {}), follow_redirects=True) as client:
        for path in ("/version", "/info"):
            try:
                resp = client.get(root + path)
            except httpx.HTTPError as exc:
                errors.append(f"{path}: {type(exc).__name__}: {redact_text(str(exc))}")
                break  # the server is not reachable at all; the other probes would fail the same way
            if resp.status_code != 200:
                continue
            try:
                body = resp.json()
            except ValueError:
                continue
            if isinstance(body, dict) and isinstance(body.get("version"), str):
                version, source = body["version"], path
                if path == "/info":
                    name = "tgi" if "model_id" in body else None
                break
        if not errors:
            try:
                resp = client.get(root + "/v1/models")
                if resp.status_code == 200:
                    owner = (
                        parse_answer(ModelsAnswer, resp.content, root + "/v1/models").data[0].owned_by or ""
                    )
                    if owner.lower() in {"vllm", "sglang"}:
                        name = owner.lower()
            except (httpx.HTTPError, UserInputError):
                pass  # the engine's name is a courtesy: a server that does not say is not an error
    out: dict[str, Any] = {"name": name, "version": version, "source": source}
    if errors:
        out["error"] = "; ".join(errors)
    return out


# ---------------------------------------------------------------------------------------- command
def redact_command(argv: Sequence[str]) -> str:
    """The command line as a shell would accept it, with secrets masked by the one rule (``accelbench/redact.py``:
    secret options' values, secret headers, URL passwords)."""

    return shlex.join(redact_argv(list(argv)))


# -------------------------------------------------------------------------------------------- all
def capture_environment(
    base_url: str | None = None,
    command: str | Sequence[str] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Everything worth storing about where a run happened, as a JSON-safe dict.

    ``base_url`` (a server root) adds the engine's name and version; ``command`` is the exact command (a
    string is stored as given, a list is joined shell-style with secrets redacted; default: this process's
    ``sys.argv``); ``headers`` are sent with the engine probe (e.g. an auth header). Keys: ``captured_at``,
    ``accelbench_version``, ``command``, ``python``, ``os``, ``cpu``, ``memory``, ``accelerators``, and
    ``engine`` when ``base_url`` is given.
    """
    if command is None:
        command = [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv and sys.argv[0] else []
    cmd = command if isinstance(command, str) else redact_command(command)
    env: dict[str, Any] = {
        "captured_at": datetime.now(UTC).isoformat(),
        "accelbench_version": __version__,
        "command": cmd,
        "python": python_info(),
        "os": os_info(),
        "cpu": cpu_info(),
        "memory": memory_info(),
        "accelerators": accelerator_info(),
    }
    if base_url:
        env["engine"] = engine_info(base_url, headers=headers)
    return env


def remote_environment(
    base_url: str | None,
    command: Sequence[str] | None,
    *,
    instance: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Where a run happened when the engine is on another machine (a cloud instance, a cluster node): the
    instance it ran on as the catalog describes it, the engine (probed when ``base_url`` is reachable from
    here), and this machine, which ran the load generator, under ``load_generator``. There is no top-level
    ``cpu``/``memory``: this machine's hardware is not the engine's."""
    here = capture_environment(None, command=[])
    env: dict[str, Any] = {
        "captured_at": here["captured_at"],
        "accelbench_version": here["accelbench_version"],
        "command": redact_command(list(command)) if command else "",
        "engine_host": "remote",
        "instance": dict(instance) if instance else None,
        "load_generator": {k: here[k] for k in ("python", "os", "cpu", "memory")},
    }
    if base_url:
        env["engine"] = engine_info(base_url, headers=headers)
    return env


def describe_environment(env: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Short (label, value) lines of a captured environment for tables and reports."""
    lines: list[tuple[str, str]] = []
    inst = env.get("instance") or {}
    if inst:
        text = f"{inst.get('name')}: {inst.get('vcpus')} vCPUs, {inst.get('memory_gib')} GiB"
        if inst.get("accelerator_count"):
            text += f", {inst['accelerator_count']} x {inst.get('accelerator_name')}"
        elif inst.get("accelerator_name"):
            text += f", {inst['accelerator_name']}"
        lines.append(("Instance", text + " (the catalog's description; the engine ran there)"))
    lg = (env.get("load_generator") or {}).get("cpu") or {}
    if lg:
        lines.append(("Load generator", f"this machine: {lg.get('model') or 'unknown CPU'}"))
    cpu = env.get("cpu") or {}
    if cpu:
        isa = cpu.get("isa") or {}
        parts = []
        if cpu.get("physical_cores"):
            parts.append(f"{cpu['physical_cores']} cores")
        if cpu.get("logical_cpus"):
            parts.append(f"{cpu['logical_cpus']} threads")
        if cpu.get("usable_cpus") and cpu.get("usable_cpus") != cpu.get("logical_cpus"):
            parts.append(f"{cpu['usable_cpus']} usable")
        text = str(cpu.get("model") or "unknown CPU")
        if cpu.get("arch"):
            text += f" ({cpu['arch']})"
        if parts:
            text += ", " + " / ".join(parts)
        lines.append(("CPU", text))
        topo = []
        if cpu.get("sockets"):
            topo.append(f"{cpu['sockets']} socket(s)")
        if cpu.get("numa_nodes"):
            topo.append(f"{cpu['numa_nodes']} NUMA node(s)")
        if topo:
            lines.append(("Topology", ", ".join(topo)))
        has = isa.get("has") or {}
        if has or isa.get("present"):
            missing = [k for k, v in has.items() if not v]
            text = ", ".join(isa.get("present") or []) or "none of the checked"
            if missing:
                text += "; not: " + ", ".join(missing)
            lines.append(("ISA", text))
    mem = env.get("memory") or {}
    if mem:
        lines.append(("Memory", f"{mem.get('total_gib')} GiB"))
    acc = env.get("accelerators") or {}
    for gpu in acc.get("gpus") or []:
        lines.append((f"GPU {gpu.get('index')}", f"{gpu.get('name')} {gpu.get('memory_gib')} GiB"))
    if acc.get("neuron_devices"):
        lines.append(("Neuron", f"{len(acc['neuron_devices'])} device(s)"))
    os_ = env.get("os") or {}
    if os_:
        lines.append(("OS", f"{os_.get('distro') or os_.get('system')} (kernel {os_.get('release')})"))
        if os_.get("machine_product"):
            lines.append(("Machine", f"{os_.get('machine_vendor') or ''} {os_['machine_product']}".strip()))
    py = env.get("python") or {}
    if py:
        lines.append(("Python", str(py.get("version"))))
    if env.get("accelbench_version"):
        lines.append(("accelbench", str(env["accelbench_version"])))
    eng = env.get("engine") or {}
    if eng:
        text = " ".join(x for x in (eng.get("name"), eng.get("version")) if x) or "unknown"
        if eng.get("error"):
            text += f" ({eng['error']})"
        lines.append(("Engine", text))
    build = env.get("engine_build") or {}
    if isinstance(build, Mapping) and build.get("summary"):
        lines.append(("Engine build", str(build["summary"])))
    if env.get("command"):
        lines.append(("Command", str(env["command"])))
    return lines
