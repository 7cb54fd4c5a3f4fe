"""Which CPU kernels actually ran: oneDNN's verbose trace, read from the engine's log.

CPUID flags say what a processor *could* run; they don't prove AMX (or AVX-512 BF16) was used. With
``ONEDNN_VERBOSE=1`` in its environment, vLLM CPU logs one line per oneDNN primitive executed, e.g.

    onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_bf16,undef,src:bf16::blocked:ab::f0 ...,0.02

The implementation field names the ISA the kernel was generated for. ``parse_trace`` counts executions per
primitive and implementation within a window of the log (the benchmark, not the start-up), classifies each
implementation (AMX, AVX-512 BF16, AVX-512 VNNI, AVX-512, AVX2, SSE4.1, Arm SVE/NEON, reference, other) and
writes a verdict a person can act on. On a CPU without AMX it says so plainly.

Caveats the report carries: the trace covers oneDNN primitives only (vLLM's own attention kernels do not
appear), and tracing slows the engine, so the timings of a traced run are not comparable with untraced ones.
"""

from __future__ import annotations

import contextlib
import enum
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from pydantic import Field

from accelbench.domain.strict import StrictModel

TRACE_ENV = {"ONEDNN_VERBOSE": "1"}
TIMING_NOTE = (
    "The engine ran with oneDNN's verbose trace, which slows it down: the timings of this run are not "
    "comparable with untraced runs."
)
SCOPE_NOTE = (
    "The trace covers oneDNN primitives (matmuls, reorders...); vLLM's own CPU kernels (attention, "
    "activation) do not appear in it."
)
_MARK = "onednn_verbose,"
_DNNL_MARK = "dnnl_verbose,"  # the older name of the same trace


class IsaClass(enum.StrEnum):
    amx = "AMX"
    avx512_bf16 = "AVX-512 BF16"
    avx512_vnni = "AVX-512 VNNI"
    avx512 = "AVX-512"
    avx2 = "AVX2"
    sse41 = "SSE4.1"
    sve = "Arm SVE"
    neon = "Arm NEON/ACL"
    reference = "reference"
    unreported = "ISA not reported (oneDNN ukernel)"
    other = "other"


def classify_impl(impl: str) -> IsaClass:
    """The ISA class of a oneDNN implementation name (``brg_matmul:avx512_core_amx`` -> AMX)."""
    s = impl.lower().strip()
    if not s:  # oneDNN's ukernels (brgemm called by vLLM's own kernels) leave the implementation empty
        return IsaClass.unreported
    if "amx" in s:
        return IsaClass.amx
    if re.search(r"avx512_core_(bf16|fp16)|avx10_\d+_512_(bf16|fp16)", s):
        return IsaClass.avx512_bf16
    if "avx512_core_vnni" in s:
        return IsaClass.avx512_vnni
    if "avx512" in s or "avx10" in s:
        return IsaClass.avx512
    if "avx2" in s or re.search(r"(?<![\w])avx(?![\w])", s):
        return IsaClass.avx2
    if "sse41" in s:
        return IsaClass.sse41
    if "sve" in s:
        return IsaClass.sve
    if "acl" in s or "asimd" in s or "neon" in s:
        return IsaClass.neon
    if (
        s.startswith(("ref", "simple"))
        or ":ref" in s
        or "ref_" in s
        or (s.endswith(":any") and "jit" not in s)
    ):
        return IsaClass.reference
    return IsaClass.other


class KernelCount(StrictModel):
    primitive: str = Field(description="oneDNN primitive kind, e.g. matmul, reorder, inner_product.")
    implementation: str = Field(description="Implementation name, e.g. brg_matmul:avx512_core_bf16.")
    isa: IsaClass = Field(description="ISA class of the implementation.")
    count: int = Field(description="Executions in the window.")
    total_ms: float = Field(default=0.0, description="Sum of the traced execution times, ms.")


class IsaTraceReport(StrictModel):
    """Which oneDNN kernels executed in a window of an engine's log, and what that says about the ISA."""

    available: bool = Field(description="True when trace lines were found in the window.")
    window: str = Field(default="", description="What part of the log was read (e.g. the benchmark).")
    onednn_version: str | None = Field(default=None, description="oneDNN version from the trace header.")
    cpu_isa: str | None = Field(default=None, description="The ISA oneDNN detected (trace header).")
    cpu_has_amx: bool | None = Field(default=None, description="Whether the CPU reports AMX (CPUID flags).")
    total_executions: int = Field(default=0, description="oneDNN primitive executions in the window.")
    by_isa: dict[str, int] = Field(default_factory=dict, description="Executions per ISA class.")
    by_primitive: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="primitive -> implementation -> executions."
    )
    kernels: list[KernelCount] = Field(
        default_factory=list, description="Every (primitive, impl), most first."
    )
    amx_executions: int = Field(default=0, description="Executions of AMX kernels.")
    fallback_executions: int = Field(default=0, description="Executions of reference (non-JIT) kernels.")
    fallbacks: dict[str, int] = Field(
        default_factory=dict,
        description="Executions that ran below AMX, by kind: 'AVX-512 without AMX' (AVX-512, VNNI, BF16), "
        "'AVX2' (AVX2, SSE4.1) and 'reference' (non-JIT); each stated, zeros included.",
    )
    unreported_executions: int = Field(
        default=0,
        description="oneDNN ukernel executions whose implementation field is empty: oneDNN does not say "
        "which ISA they ran on.",
    )
    verdict: str = Field(default="", description="One sentence: which kernels ran, AMX or not.")
    notes: list[str] = Field(default_factory=list, description="Caveats (tracing slows the engine, scope).")


def _fields(line: str) -> list[str] | None:
    i = line.find(_MARK)
    if i < 0:
        i = line.find(_DNNL_MARK)
        if i < 0:
            return None
    return line[i:].rstrip("\r\n").split(",")


def iter_window(path: Path, start: int = 0, end: int | None = None) -> Iterable[str]:
    """Lines of ``path`` between byte offsets ``start`` and ``end`` (a line straddling ``start`` is skipped)."""
    with open(path, "rb") as fh:
        if start > 0:
            fh.seek(start - 1)
            if fh.read(1) != b"\n":
                fh.readline()  # the rest of a line that began before the window
        while True:
            pos = fh.tell()
            if end is not None and pos >= end:
                break
            raw = fh.readline()
            if not raw:
                break
            yield raw.decode("utf-8", errors="replace")


def parse_trace(
    lines: Iterable[str], *, cpu_has_amx: bool | None = None, window: str = "", headers: Iterable[str] = ()
) -> IsaTraceReport:
    """Count and classify the ``exec`` lines among ``lines``; ``headers`` may hold the trace's info lines
    (printed once at start-up, usually before the window)."""
    counts: Counter[tuple[str, str]] = Counter()
    times: defaultdict[tuple[str, str], float] = defaultdict(float)
    onednn_version = cpu_isa = None

    def header(parts: list[str]) -> tuple[str | None, str | None]:
        text = ",".join(parts)
        v = re.search(r"oneDNN v(\d[\w.]*)", text)
        isa = re.search(r"isa:([^,]+)", text)
        return (v.group(1) if v else None, isa.group(1).strip() if isa else None)

    for line in headers:
        parts = _fields(line)
        if parts and "info" in parts[:4]:
            v, isa = header(parts)
            onednn_version = onednn_version or v
            cpu_isa = cpu_isa or isa
    for line in lines:
        parts = _fields(line)
        if parts is None:
            continue
        if "exec" in parts[:6]:
            i = parts.index("exec")
            if len(parts) < i + 4 or parts[i + 1] != "cpu":
                continue
            key = (parts[i + 2], parts[i + 3])
            counts[key] += 1
            with contextlib.suppress(ValueError):
                times[key] += float(parts[-1])
        elif "info" in parts[:4]:
            v, isa = header(parts)
            onednn_version = onednn_version or v
            cpu_isa = cpu_isa or isa

    kernels = sorted(
        (
            KernelCount(
                primitive=p,
                implementation=impl,
                isa=classify_impl(impl),
                count=n,
                total_ms=round(times[(p, impl)], 3),
            )
            for (p, impl), n in counts.items()
        ),
        key=lambda k: (-k.count, k.primitive, k.implementation),
    )
    by_isa: Counter[str] = Counter()
    by_prim: dict[str, dict[str, int]] = defaultdict(dict)
    for k in kernels:
        by_isa[k.isa.value] += k.count
        by_prim[k.primitive][k.implementation] = k.count
    total = sum(counts.values())
    amx = by_isa.get(IsaClass.amx.value, 0)
    fallback = by_isa.get(IsaClass.reference.value, 0)
    below = {
        "AVX-512 without AMX": sum(by_isa.get(c.value, 0) for c in FALLBACK_512),
        "AVX2": by_isa.get(IsaClass.avx2.value, 0) + by_isa.get(IsaClass.sse41.value, 0),
        "reference": fallback,
    }
    report = IsaTraceReport(
        available=total > 0,
        window=window,
        onednn_version=onednn_version,
        cpu_isa=cpu_isa,
        cpu_has_amx=cpu_has_amx,
        total_executions=total,
        by_isa=dict(by_isa.most_common()),
        by_primitive=dict(by_prim),
        kernels=kernels,
        amx_executions=amx,
        fallback_executions=fallback,
        fallbacks=below,
        unreported_executions=by_isa.get(IsaClass.unreported.value, 0),
        notes=[TIMING_NOTE, SCOPE_NOTE],
    )
    report.verdict = verdict(report)
    return report


#: the AVX-512 classes that are a fallback where AMX exists
FALLBACK_512 = (IsaClass.avx512_bf16, IsaClass.avx512_vnni, IsaClass.avx512)


def _n(x: int) -> str:
    return f"{x:,}"


def verdict(r: IsaTraceReport) -> str:
    """One honest sentence about which kernels ran."""
    if not r.available:
        return (
            "No oneDNN kernel executions were traced in this window: either the trace was not enabled "
            "(ONEDNN_VERBOSE=1) or the engine ran no oneDNN primitives (not a vLLM CPU engine?)."
        )
    compute = [k for k in r.kernels if k.primitive in ("matmul", "inner_product", "convolution")] or r.kernels
    top = compute[0]
    top_txt = f"{_n(top.count)} {top.implementation} ({top.isa.value}) {top.primitive}"
    if r.amx_executions:
        amx_top = next(k for k in r.kernels if k.isa == IsaClass.amx)
        s = (
            f"AMX kernels ran: {_n(r.amx_executions)} of {_n(r.total_executions)} oneDNN executions, "
            f"most of all {_n(amx_top.count)} {amx_top.implementation} {amx_top.primitive}"
        )
    else:
        if r.cpu_has_amx is False:
            why = " (this CPU has no AMX)"
        elif r.cpu_has_amx:
            why = (
                " although this CPU reports AMX: check that the model runs in BF16 and that ONEDNN_MAX_CPU_ISA "
                "does not cap the ISA"
            )
        else:
            why = ""
        s = f"No AMX kernels ran{why}; {top_txt} of {_n(r.total_executions)} oneDNN executions"
    if r.fallbacks:
        kinds = ", ".join(f"{_n(v)} {k}" for k, v in r.fallbacks.items()) + " (non-JIT)"
        if r.cpu_has_amx is False:  # nothing fell back: there is no AMX to fall back from
            s += "; the kernels by kind: " + kinds.replace(" without AMX", "")
        else:
            s += "; fallbacks below AMX: " + kinds
    if r.unreported_executions:
        s += (
            f"; {_n(r.unreported_executions)} oneDNN ukernel executions whose ISA oneDNN does not report (their "
            "implementation field is empty)"
        )
    return s + "."


def cpu_reports_amx() -> bool | None:
    """Whether /proc/cpuinfo lists AMX (None when it cannot be read, e.g. not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return "amx_tile" in line.split()
    return False


def parse_log(
    path: Path, start: int = 0, end: int | None = None, *, window: str = "", cpu_has_amx: bool | None = None
) -> IsaTraceReport:
    """Parse the trace of an engine log between two byte offsets (e.g. sizes before and after a benchmark).

    The trace's info header (oneDNN version, detected ISA) is read from the whole log's beginning."""
    headers: list[str] = []
    if start > 0:
        for line in iter_window(path, 0, start):
            if _MARK in line and ",info," in line:
                headers.append(line)
            if len(headers) > 20:
                break
    amx = cpu_reports_amx() if cpu_has_amx is None else cpu_has_amx
    return parse_trace(iter_window(path, start, end), cpu_has_amx=amx, window=window, headers=headers)


def format_report(r: IsaTraceReport, top: int = 8) -> str:
    """A short text block for the terminal and the report files."""
    lines = [f"ISA trace ({r.window or 'whole log'}): {r.verdict}"]
    if r.cpu_isa:
        lines.append(f"  oneDNN {r.onednn_version or '?'} detected: {r.cpu_isa}")
    if r.available:
        lines.append("  by ISA: " + ", ".join(f"{k} {_n(v)}" for k, v in r.by_isa.items()))
        for k in r.kernels[:top]:
            lines.append(f"  {_n(k.count):>9}  {k.primitive:<14} {k.implementation:<32} {k.isa.value}")
    lines += [f"  note: {n}" for n in r.notes]
    return "\n".join(lines)
