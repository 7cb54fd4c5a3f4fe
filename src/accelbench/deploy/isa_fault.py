"""An engine killed by an illegal instruction: which instruction, which instruction set, and what to build without.

A compiled engine (llama.cpp above all: llama-cpp-python builds it for the host CPU) can die with SIGILL on a
CPU that advertises an instruction set the engine then cannot use. Seen on an Intel Xeon with AMX under a
hypervisor: ggml's AMX kernels configure the tiles once per thread and the first ``tileloadd`` traps, while
oneDNN, which configures them per call, runs AMX on the same machine. What can be known about such a death:

- the exit status: ``-4`` from ``subprocess`` (killed by SIGILL), ``132`` through a shell;
- the kernel's own line, where the kernel log can be read (``traps: python[4242] trap invalid opcode
  ip:7f2a... sp:7ffd... error:0 in libggml-cpu.so[...]``): the library, and with the ELF program headers and
  ``objdump`` the instruction itself (``tileloadd`` -> AMX);
- what the engine says it was built with: llama.cpp prints ``system_info: ... | AVX512 = 1 | AMX_INT8 = 1 |``
  when it loads a model.

The same AMX build can die the other way on another hypervisor: ggml's ``ldtilecfg`` raises a general
protection fault, so the engine is killed by SIGSEGV (``-11``) and the kernel logs ``traps: python[4242]
general protection fault ip:7f2a... sp:... error:0`` (the `` in libggml-cpu.so[...]`` part is often missing:
the kernel prints it only when it can take the faulting process's memory-map lock). Seen on an Intel Xeon with
AMX whose ``/proc/cpuinfo`` lists ``amx_tile``; under gdb the faulting instruction is ``ldtilecfg`` in
``ggml_backend_amx_mul_mat``. ``find_tile_fault`` tells such a death from an ordinary crash: it counts only for
a build that reports AMX, with a general-protection line of the kernel for it (or, when the kernel log cannot
be read, on a CPU that runs under a hypervisor), and it names AMX as the group to drop.

ISA *groups* are the unit a rebuild turns off, by the names used here: ``amx``, ``avx512_bf16``,
``avx512_vnni``, ``avx512_vbmi``, ``avx512``, ``avx_vnni``, ``avx2``, ``avx``. Turning a group off turns off
every group that needs it (no AMX without AVX-512). When the instruction cannot be named, the newest group the
build has on is the one to drop first (``NEWEST_FIRST``).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from accelbench.deploy.elf import PF_X, PT_LOAD, program_headers

#: Newest (least widely working) first: the order in which a rebuild drops groups when the kernel log
#: cannot name the instruction.
NEWEST_FIRST: tuple[str, ...] = (
    "amx",
    "avx512_bf16",
    "avx512_vnni",
    "avx512_vbmi",
    "avx512",
    "avx_vnni",
    "avx2",
    "avx",
)

#: group -> the groups it needs; dropping a group drops everything that needs it
_NEEDS: dict[str, tuple[str, ...]] = {
    "amx": ("avx512",),
    "avx512_bf16": ("avx512",),
    "avx512_vnni": ("avx512",),
    "avx512_vbmi": ("avx512",),
    "avx512": ("avx2",),
    "avx_vnni": ("avx2",),
    "avx2": ("avx",),
    "avx": (),
}

#: /proc/cpuinfo flags that make a group usable on this CPU (any one of them)
GROUP_CPU_FLAGS: dict[str, tuple[str, ...]] = {
    "amx": ("amx_tile",),
    "avx512_bf16": ("avx512_bf16",),
    "avx512_vnni": ("avx512_vnni",),
    "avx512_vbmi": ("avx512vbmi",),
    "avx512": ("avx512f",),
    "avx_vnni": ("avx_vnni",),
    "avx2": ("avx2",),
    "avx": ("avx",),
}

#: llama.cpp's ``system_info`` feature names -> group
_SYSTEM_INFO_GROUPS: dict[str, str] = {
    "AMX_INT8": "amx",
    "AMX_BF16": "amx",
    "AMX_TILE": "amx",
    "AVX512_BF16": "avx512_bf16",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_VBMI": "avx512_vbmi",
    "AVX512": "avx512",
    "AVX_VNNI": "avx_vnni",
    "AVX2": "avx2",
    "FMA": "avx2",
    "F16C": "avx2",
    "BMI2": "avx2",
    "AVX": "avx",
}

GROUP_LABELS: dict[str, str] = {
    "amx": "AMX",
    "avx512_bf16": "AVX512-BF16",
    "avx512_vnni": "AVX512-VNNI",
    "avx512_vbmi": "AVX512-VBMI",
    "avx512": "AVX-512",
    "avx_vnni": "AVX-VNNI",
    "avx2": "AVX2",
    "avx": "AVX",
}


def dependents(group: str) -> set[str]:
    """``group`` and every group that needs it, directly or not."""
    out = {group}
    changed = True
    while changed:
        changed = False
        for g, needs in _NEEDS.items():
            if g not in out and any(n in out for n in needs):
                out.add(g)
                changed = True
    return out


def host_groups(flags: Iterable[str]) -> set[str]:
    """The groups this CPU advertises (from its /proc/cpuinfo flags)."""
    have = {f.lower() for f in flags}
    return {g for g, names in GROUP_CPU_FLAGS.items() if any(n in have for n in names)}


# ---------------------------------------------------------------------------------------------------------
# The exit status


def killed_by(rc: int | None) -> int | None:
    """The signal that ended a process, from ``subprocess``'s negative codes or a shell's 128+N."""
    if rc is None:
        return None
    if rc < 0:
        return -rc
    if 128 < rc < 128 + 65:
        return rc - 128
    return None


def describe_exit(rc: int | None) -> str:
    """``exited with code -4 (killed by SIGILL: illegal instruction)``, or just the code."""
    sig = killed_by(rc)
    if sig is None:
        return f"exited with code {rc}"
    try:
        name = signal.Signals(sig).name
        what = signal.strsignal(sig) or ""
    except ValueError:
        return f"exited with code {rc} (killed by signal {sig})"
    return f"exited with code {rc} (killed by {name}{': ' + what.lower() if what else ''})"


def died_of_sigill(rc: int | None) -> bool:
    return killed_by(rc) == signal.SIGILL


# ---------------------------------------------------------------------------------------------------------
# The kernel's log line


@dataclass(frozen=True)
class KernelTrap:
    """One ``trap invalid opcode`` line of the kernel log."""

    line: str
    uptime_s: float | None
    comm: str
    tid: int
    ip: int
    library: str | None = None  # base name, as the kernel prints it
    vma_start: int | None = None
    offset_in_vma: int | None = None
    file_offset: int | None = None  # newer kernels print it; older ones only the mapping's start


_TRAP = re.compile(
    r"(?:\[\s*(?P<t>\d+\.\d+)\])?.*?(?P<comm>[^\s\[]+)\[(?P<tid>\d+)\]:?\s+trap invalid opcode\s+"
    r"ip:(?P<ip>[0-9a-f]+)(?P<rest>.*)$",
    re.IGNORECASE,
)
# " in libggml-cpu.so[7f2a1b200000+1a0000]" (older kernels) or, with the file offset of the address first,
# " in libggml-cpu.so[1a004,7f2a1b200000+1a0000]" (newer ones)
_IN_LIB = re.compile(r"\bin (?P<lib>[^\s\[]+)\[(?:(?P<off>[0-9a-f]+),)?(?P<start>[0-9a-f]+)\+[0-9a-f]+\]")


GP_FAULT = re.compile(
    r"(?:\[\s*(?P<t>\d+\.\d+)\])?.*?(?P<comm>[^\s\[]+)\[(?P<tid>\d+)\]:?\s+general protection fault\s+"
    r"ip:(?P<ip>[0-9a-f]+)(?P<rest>.*)$",
    re.IGNORECASE,
)


def parse_kernel_trap(line: str, kind: re.Pattern[str] = _TRAP) -> KernelTrap | None:
    """One trap line of the kernel log: ``trap invalid opcode`` by default, or with ``kind=GP_FAULT`` a
    ``general protection fault``."""
    m = kind.search(line)
    if not m:
        return None
    ip = int(m["ip"], 16)
    lib = start = off = None
    file_off = None
    if lm := _IN_LIB.search(m["rest"]):
        lib = lm["lib"]
        start = int(lm["start"], 16)
        off = ip - start
        file_off = int(lm["off"], 16) if lm["off"] else None
    return KernelTrap(
        line=line.strip(),
        uptime_s=float(m["t"]) if m["t"] else None,
        comm=m["comm"],
        tid=int(m["tid"]),
        ip=ip,
        library=lib,
        vma_start=start,
        offset_in_vma=off,
        file_offset=file_off,
    )


def uptime() -> float | None:
    """Seconds since boot (the clock of the kernel log's timestamps)."""
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def kernel_log() -> list[str] | None:
    """The kernel log's lines, or None when this process may not read it."""
    tool = shutil.which("dmesg")
    if tool is None:
        return None
    try:
        res = subprocess.run(
            [tool], capture_output=True, text=True, errors="replace", timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    return res.stdout.splitlines()


def kernel_traps(
    since_uptime: float | None, lines: Sequence[str] | None = None, kind: re.Pattern[str] = _TRAP
) -> list[KernelTrap] | None:
    """``trap invalid opcode`` lines (or those of ``kind``) logged at or after ``since_uptime``; None when the
    log is unreadable."""
    text = kernel_log() if lines is None else list(lines)
    if text is None:
        return None
    traps = [t for ln in text if (t := parse_kernel_trap(ln, kind))]
    if since_uptime is not None:
        traps = [t for t in traps if t.uptime_s is None or t.uptime_s >= since_uptime - 1.0]
    return traps


# ---------------------------------------------------------------------------------------------------------
# The instruction


def _exec_segment(lib: Path) -> tuple[int, int] | None:
    """(p_offset, p_vaddr) of the executable PT_LOAD segment."""
    for h in program_headers(lib) or []:
        if h.type == PT_LOAD and h.flags & PF_X:
            return h.offset, h.vaddr
    return None


def instruction_at(lib: Path, trap: KernelTrap) -> str | None:
    """The instruction at the trap's address in ``lib`` (objdump's text), when it can be found."""
    objdump = shutil.which("objdump")
    seg = _exec_segment(lib)
    if objdump is None or seg is None or trap.offset_in_vma is None:
        return None
    p_offset, p_vaddr = seg
    # Older kernels give the mapping's start only: the executable segment is mapped from its page-aligned
    # file offset.
    file_off = trap.file_offset if trap.file_offset is not None else (p_offset & ~0xFFF) + trap.offset_in_vma
    vaddr = file_off - p_offset + p_vaddr
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        res = subprocess.run(
            [
                objdump,
                "-d",
                "--no-show-raw-insn",
                f"--start-address={vaddr:#x}",
                f"--stop-address={vaddr + 16:#x}",
                str(lib),
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        for ln in res.stdout.splitlines():
            m = re.match(r"\s*([0-9a-f]+):\s+(.+)$", ln)
            if m and int(m[1], 16) == vaddr:
                return " ".join(m[2].split())
    return None


def isa_of_instruction(text: str) -> str | None:
    """The group an instruction (objdump's text) belongs to; None for a deliberate trap or an unknown one."""
    t = text.lower()
    mnemonic = t.split()[0] if t.split() else ""
    if mnemonic in ("ud2", "ud0", "ud1", "int3"):
        return None
    if re.match(r"(tile|tdp|tcmm|ldtilecfg|sttilecfg)", mnemonic):
        return "amx"
    if "bf16" in mnemonic:
        return "avx512_bf16"
    if re.match(r"\{vex\}\s*vpdp|vpdp(bu|ws)", t):
        return "avx512_vnni" if ("zmm" in t or "%k" in t or "{k" in t) else "avx_vnni"
    if re.match(r"vperm[bt]2?b|vpermb|vpmultishiftqb", mnemonic):
        return "avx512_vbmi"
    if "zmm" in t or re.search(r"%k[0-7]|\{%k", t):
        return "avx512"
    if "ymm" in t or re.match(r"vfmadd|vfmsub|vfnmadd|vcvtph2ps|vcvtps2ph", mnemonic):
        return "avx2"
    if mnemonic.startswith("v") and "xmm" in t:
        return "avx"
    return None


def _find_library(name: str, roots: Sequence[Path]) -> Path | None:
    for root in roots:
        if not root.is_dir():
            continue
        for p in root.rglob(name):
            if p.is_file() and not p.is_symlink():
                return p
    return None


@dataclass(frozen=True)
class IsaFault:
    """What is known about one death by SIGILL, or by a general protection fault in an AMX build."""

    source: str  # "kernel log" or "exit status"
    library: str | None = None
    instruction: str | None = None
    group: str | None = None
    kernel_line: str | None = None
    kernel_log: str = "read"  # "read", "unreadable" or "no trap line"
    kind: str = "illegal instruction"  # or "general protection fault"

    @property
    def what(self) -> str:
        """The death with its article: ``an illegal instruction`` or ``a general protection fault``."""
        return ("an " if self.kind[0] in "aeiou" else "a ") + self.kind

    def describe(self) -> str:
        """One phrase: ``tileloadd, an AMX instruction, in libggml-cpu.so`` or what could be known."""
        if self.kind == "general protection fault" and not self.instruction:
            basis = (
                "the kernel logged a general protection fault"
                if self.kernel_line
                else "the kernel log cannot be read here, and this CPU runs under a hypervisor"
            )
            return (
                f"a general protection fault in a build with AMX ({basis}; ggml's AMX tile configuration, "
                "ldtilecfg, faults this way where the hypervisor does not give the guest AMX tile state)"
            )
        parts = []
        if self.instruction:
            parts.append(self.instruction.split()[0])
        if self.group:
            parts.append(f"an {GROUP_LABELS[self.group]} instruction" if parts else GROUP_LABELS[self.group])
        where = f"in {self.library}" if self.library else ""
        if parts:
            return ", ".join(parts) + (f", {where}" if where else "")
        if where:
            return f"an instruction {where} the kernel log does not name"
        return {
            "unreadable": "which instruction is not known: the kernel log cannot be read here",
            "no trap line": "which instruction is not known: the kernel logged no trap line for it",
        }.get(self.kernel_log, "which instruction is not known")


def find_isa_fault(since_uptime: float | None, search: Sequence[Path] = ()) -> IsaFault:
    """Look in the kernel log for the trap that killed an engine started at ``since_uptime``; the library is
    looked for under ``search`` (the engine's environment) to name the instruction."""
    traps = kernel_traps(since_uptime)
    if traps is None:
        return IsaFault(source="exit status", kernel_log="unreadable")
    if not traps:
        return IsaFault(source="exit status", kernel_log="no trap line")
    trap = traps[-1]
    instr = None
    if trap.library and (lib := _find_library(trap.library, search)):
        instr = instruction_at(lib, trap)
    return IsaFault(
        source="kernel log",
        library=trap.library,
        instruction=instr,
        group=isa_of_instruction(instr) if instr else None,
        kernel_line=trap.line,
    )


def find_tile_fault(
    since_uptime: float | None,
    compiled: Sequence[str] | None,
    search: Sequence[Path] = (),
    *,
    cpu_flags: Iterable[str] = (),
    lines: Sequence[str] | None = None,
) -> IsaFault | None:
    """An engine killed by SIGSEGV: the AMX tile fault it is when it is one, else None (an ordinary crash).

    It is one only for a build that reports AMX (``compiled``, from its ``system_info`` line) and only with
    the kernel's ``general protection fault`` line logged since the engine started; when the kernel log cannot
    be read, on a CPU whose flags say it runs under a hypervisor (where the fault has been seen). A named
    instruction that is not AMX's means it is not one."""
    if not compiled or "amx" not in compiled:
        return None
    traps = kernel_traps(since_uptime, lines, kind=GP_FAULT)
    if traps is None:
        if "hypervisor" not in {f.lower() for f in cpu_flags}:
            return None
        return IsaFault(
            source="exit status", group="amx", kernel_log="unreadable", kind="general protection fault"
        )
    if not traps:
        return None
    trap = traps[-1]
    instr = None
    if trap.library and (lib := _find_library(trap.library, search)):
        instr = instruction_at(lib, trap)
    if instr is not None and isa_of_instruction(instr) != "amx":
        return None
    return IsaFault(
        source="kernel log",
        library=trap.library,
        instruction=instr,
        group="amx",
        kernel_line=trap.line,
        kind="general protection fault",
    )


# ---------------------------------------------------------------------------------------------------------
# What the engine was built with

# llama.cpp's report of its CPU backend, as llama-cpp-python prints it at model load (and llama.cpp's own
# programs after "system_info: n_threads = N |"): "CPU : SSE3 = 1 | AVX = 1 | ... | AMX_INT8 = 1 | REPACK = 1 |"
_SYSTEM_INFO = re.compile(r"\bCPU\s*:\s*(?P<feat>(?:[A-Z0-9_]+\s*=\s*\d+\s*\|?\s*){2,})")


def compiled_groups(lines: Iterable[str]) -> list[str] | None:
    """The groups llama.cpp reports built in (its ``system_info`` line), newest first; None if not reported."""
    for ln in lines:
        m = _SYSTEM_INFO.search(ln)
        if not m:
            continue
        on = {
            _SYSTEM_INFO_GROUPS[name]
            for name, val in re.findall(r"([A-Z0-9_]+)\s*=\s*(\d+)", m["feat"])
            if val != "0" and name in _SYSTEM_INFO_GROUPS
        }
        return [g for g in NEWEST_FIRST if g in on]
    return None


def group_to_drop(fault: IsaFault, enabled: Sequence[str]) -> str | None:
    """The group a rebuild should turn off: the one the fault names when it is on, else the newest on."""
    if fault.group and fault.group in enabled:
        return fault.group
    return next((g for g in NEWEST_FIRST if g in enabled), None)
