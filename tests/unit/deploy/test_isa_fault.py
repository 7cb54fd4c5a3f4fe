"""Deaths by illegal instruction: the exit status, the kernel's trap line, the instruction it names and the
instruction-set group a rebuild turns off; and a real trap, from a library compiled here, found in the real
kernel log where this machine lets it be read."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from accelbench.deploy import isa_fault as isa
from accelbench.deploy.engines import ggml_build_env

NEW_KERNEL = (
    "[ 2293.955454] traps: python3[5254] trap invalid opcode ip:7f4c01815004 sp:7ffc6f343ab8 error:0 "
    "in libggml-cpu.so[1a004,7f4c01815000+1a0000]"
)
OLD_KERNEL = "traps: python[77] trap invalid opcode ip:7f00000010f0 sp:7ffc00000000 error:0 in libx.so[7f0000001000+2000]"


def test_exit_status_names_the_signal() -> None:
    assert isa.killed_by(-4) == 4 and isa.killed_by(132) == 4 and isa.killed_by(1) is None
    assert isa.died_of_sigill(-4) and isa.died_of_sigill(132) and not isa.died_of_sigill(-9)
    assert "SIGILL" in isa.describe_exit(-4) and "illegal instruction" in isa.describe_exit(-4).lower()
    assert isa.describe_exit(3) == "exited with code 3"


def test_kernel_trap_lines_old_and_new_layouts() -> None:
    t = isa.parse_kernel_trap(NEW_KERNEL)
    assert t is not None
    assert (t.comm, t.tid, t.library, t.offset_in_vma, t.file_offset, t.uptime_s) == (
        "python3",
        5254,
        "libggml-cpu.so",
        0x4,
        0x1A004,
        2293.955454,
    )
    o = isa.parse_kernel_trap(OLD_KERNEL)
    assert o is not None and o.library == "libx.so" and o.offset_in_vma == 0xF0 and o.file_offset is None
    assert isa.parse_kernel_trap("[ 1.0] EXT4-fs (vda): mounted filesystem") is None
    # only lines logged since the engine started count
    assert isa.kernel_traps(2300.0, [NEW_KERNEL]) == []
    assert len(isa.kernel_traps(2293.5, [NEW_KERNEL]) or []) == 1


@pytest.mark.parametrize(
    ("text", "group"),
    [
        ("tileloadd (%rsi,%rdx,1),%tmm0", "amx"),
        ("tdpbssd %tmm2,%tmm1,%tmm0", "amx"),
        ("ldtilecfg (%rax)", "amx"),
        ("vdpbf16ps %zmm1,%zmm2,%zmm3", "avx512_bf16"),
        ("vpdpbusd %zmm1,%zmm2,%zmm3", "avx512_vnni"),
        ("{vex} vpdpbusd %ymm1,%ymm2,%ymm3", "avx_vnni"),
        ("vpermb %zmm1,%zmm2,%zmm3", "avx512_vbmi"),
        ("vaddps %zmm1,%zmm2,%zmm3{%k1}", "avx512"),
        ("vfmadd231ps %ymm1,%ymm2,%ymm3", "avx2"),
        ("ud2", None),
        ("mov %rax,%rbx", None),
    ],
)
def test_instruction_to_group(text: str, group: str | None) -> None:
    assert isa.isa_of_instruction(text) == group


def test_groups_that_need_a_group_go_with_it() -> None:
    assert isa.dependents("avx512") == {"avx512", "avx512_bf16", "avx512_vnni", "avx512_vbmi", "amx"}
    assert isa.dependents("amx") == {"amx"}
    assert isa.host_groups(["avx", "avx2", "avx512f", "amx_tile", "amx_int8"]) == {
        "avx",
        "avx2",
        "avx512",
        "amx",
    }


def test_what_llama_cpp_says_it_was_built_with() -> None:
    line = (
        "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
        "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
    )
    got = isa.compiled_groups(["llama_model_loader: loaded meta data", line])
    assert got == ["amx", "avx512_bf16", "avx512_vnni", "avx512_vbmi", "avx512", "avx2", "avx"]
    assert isa.compiled_groups(
        ["system_info: n_threads = 2 | CPU : AVX = 1 | AVX2 = 1 | AMX_INT8 = 0 |"]
    ) == ["avx2", "avx"]
    assert isa.compiled_groups(["nothing here"]) is None


def test_which_group_a_rebuild_drops() -> None:
    named = isa.IsaFault(source="kernel log", instruction="tileloadd", group="amx")
    unnamed = isa.IsaFault(source="exit status", kernel_log="unreadable")
    assert isa.group_to_drop(named, ["amx", "avx512", "avx2"]) == "amx"
    assert isa.group_to_drop(named, ["avx512", "avx2"]) == "avx512"  # named but already off: the newest on
    assert isa.group_to_drop(unnamed, ["avx512_bf16", "avx512", "avx2"]) == "avx512_bf16"
    assert isa.group_to_drop(unnamed, []) is None
    assert "tileloadd, an AMX instruction" in named.describe()
    assert "cannot be read" in unnamed.describe()


def test_llama_cpp_build_flags_without_amx_on_an_amx_xeon(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flags verified by hand on the AMX Xeon: native detection off, AVX-512 family on, AMX off."""
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    monkeypatch.setattr("accelbench.deploy.engine_store._machine", lambda: "x86_64")
    xeon = frozenset(
        [
            "avx",
            "avx2",
            "bmi2",
            "fma",
            "f16c",
            "avx512f",
            "avx512vbmi",
            "avx512_vnni",
            "avx512_bf16",
            "amx_tile",
            "amx_int8",
            "amx_bf16",
        ]
    )
    args = ggml_build_env(frozenset({"amx"}), xeon)["CMAKE_ARGS"].split()
    assert args[0] == "-DGGML_NATIVE=OFF"
    for on in ("AVX", "AVX2", "FMA", "F16C", "AVX512", "AVX512_VNNI", "AVX512_BF16"):
        assert f"-DGGML_{on}=ON" in args
    for off in ("AMX_TILE", "AMX_INT8", "AMX_BF16", "AVX_VNNI"):  # AVX_VNNI: this CPU has no such flag
        assert f"-DGGML_{off}=OFF" in args
    assert ggml_build_env(frozenset(), xeon) == {}  # nothing off: the native build
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_BLAS=ON")
    assert ggml_build_env(frozenset({"amx"}), xeon)["CMAKE_ARGS"].startswith(
        "-DGGML_BLAS=ON -DGGML_NATIVE=OFF"
    )


TOY_KERNEL = Path(__file__).resolve().parents[2] / "support" / "toy_isa_pkg" / "kernel.c"


def test_a_real_trap_found_in_the_kernel_log(tmp_path: Path, cpu_path: Callable[[str], None]) -> None:
    """A library compiled here runs an AMX tile load on unconfigured tiles: SIGILL on every machine of this
    project (#UD without AMX or without tile configuration; SIGILL from the kernel without AMX permission)."""
    lib = tmp_path / "libtoy_kernel.so"
    subprocess.run(
        ["gcc", "-O1", "-shared", "-fPIC", "-DTOY_AMX", "-o", str(lib), str(TOY_KERNEL)], check=True
    )
    since = isa.uptime()
    code = textwrap.dedent(f"import ctypes; ctypes.CDLL({str(lib)!r}).toy_kernel()")
    rc = subprocess.run([sys.executable, "-c", code], capture_output=True).returncode
    assert isa.died_of_sigill(rc), rc
    fault = isa.find_isa_fault(since, [tmp_path])
    if fault.source == "kernel log":
        assert fault.library == "libtoy_kernel.so"
        assert fault.instruction and fault.instruction.startswith("tileloadd"), fault
        assert fault.group == "amx"
        cpu_path(f"kernel log read: {fault.describe()}")
    else:
        # the kernel log is not readable here, or the kernel delivered SIGILL without a trap line (AMX
        # present but not permitted for this process): only the exit status is known
        assert fault.kernel_log in ("unreadable", "no trap line")
        assert fault.group is None
        cpu_path(f"exit status only ({fault.kernel_log}): {fault.describe()}")


# ---- the other way an AMX build dies: a general protection fault in ggml's ldtilecfg (SIGSEGV)

# Recorded on an Intel Xeon with AMX under a hypervisor: llama.cpp 0.3.36's first request. The kernel printed
# the library on one fault and not on the next (it prints it only when it can take the memory-map lock).
GP_WITH_LIB = (
    "[ 4122.838459] traps: python[21797] general protection fault ip:7f2dbfc7c193 sp:7f2d853c0980 error:0 "
    "in libggml-cpu.so.0[7c193,7f2dbfc14000+156000]"
)
GP_NO_LIB = (
    "[  494.030496] traps: python[10017] general protection fault ip:7fd21f87c193 sp:7fd1e4fc0980 error:0"
)


def test_general_protection_lines_parse_with_and_without_the_library() -> None:
    t = isa.parse_kernel_trap(GP_WITH_LIB, isa.GP_FAULT)
    assert t is not None and t.library == "libggml-cpu.so.0" and t.uptime_s == 4122.838459
    assert t.file_offset == 0x7C193 and t.offset_in_vma == 0x7F2DBFC7C193 - 0x7F2DBFC14000
    bare = isa.parse_kernel_trap(GP_NO_LIB, isa.GP_FAULT)
    assert bare is not None and bare.library is None and bare.tid == 10017
    # a trap line is not a general protection fault, and the other way round
    assert isa.parse_kernel_trap(NEW_KERNEL, isa.GP_FAULT) is None
    assert isa.parse_kernel_trap(GP_NO_LIB) is None


def test_a_segfault_is_an_amx_tile_fault_only_for_an_amx_build_with_the_kernel_line() -> None:
    amx_build = ["amx", "avx512", "avx2", "avx"]
    fault = isa.find_tile_fault(400.0, amx_build, lines=[GP_NO_LIB])
    assert fault is not None and fault.group == "amx" and fault.kind == "general protection fault"
    assert fault.what == "a general protection fault" and fault.kernel_line == GP_NO_LIB.strip()
    assert "general protection fault in a build with AMX" in fault.describe()
    assert isa.group_to_drop(fault, amx_build) == "amx"
    # the same line, but the build has no AMX: an ordinary crash
    assert isa.find_tile_fault(400.0, ["avx512", "avx2", "avx"], lines=[GP_NO_LIB]) is None
    assert isa.find_tile_fault(400.0, None, lines=[GP_NO_LIB]) is None  # the build did not say
    # no general protection fault logged since the engine started: an ordinary crash
    assert isa.find_tile_fault(600.0, amx_build, lines=[GP_NO_LIB]) is None
    assert isa.find_tile_fault(400.0, amx_build, lines=[NEW_KERNEL.replace("2293", "0493")]) is None


def test_an_unreadable_kernel_log_counts_only_under_a_hypervisor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isa, "kernel_log", lambda: None)
    amx_build = ["amx", "avx512"]
    assert isa.find_tile_fault(None, amx_build, cpu_flags=["avx512f", "amx_tile"]) is None
    fault = isa.find_tile_fault(None, amx_build, cpu_flags=["avx512f", "amx_tile", "hypervisor"])
    assert fault is not None and fault.kernel_log == "unreadable" and fault.group == "amx"
    assert "kernel log cannot be read here" in fault.describe()


def test_a_named_instruction_that_is_not_amx_is_not_a_tile_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isa, "_find_library", lambda name, roots: Path("/lib") / name)
    monkeypatch.setattr(isa, "instruction_at", lambda lib, trap: "vmovaps (%rax),%zmm0")
    assert isa.find_tile_fault(900.0, ["amx", "avx512"], lines=[GP_WITH_LIB]) is None
    monkeypatch.setattr(isa, "instruction_at", lambda lib, trap: "ldtilecfg 0xc0(%rsp)")
    fault = isa.find_tile_fault(900.0, ["amx", "avx512"], lines=[GP_WITH_LIB])
    assert fault is not None and fault.describe() == "ldtilecfg, an AMX instruction, in libggml-cpu.so.0"
