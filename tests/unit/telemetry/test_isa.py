"""The oneDNN trace parser: lines as vLLM CPU prints them, classification, the window, honest verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.telemetry.isa import IsaClass, classify_impl, format_report, parse_log, parse_trace

HEADER = [
    "onednn_verbose,v1,info,oneDNN v3.9.1 (commit abc)\n",
    "onednn_verbose,v1,info,cpu,runtime:OpenMP,nthr:2\n",
    "onednn_verbose,v1,info,cpu,isa:Intel AVX-512 with Intel DL Boost and bfloat16 support\n",
    "onednn_verbose,v1,primitive,info,template:operation,engine,primitive,implementation,prop_kind,...\n",
]


def exec_line(prim: str, impl: str, ms: float = 0.02) -> str:
    return (
        f"onednn_verbose,v1,primitive,exec,cpu,{prim},{impl},undef,"
        f"src:bf16::blocked:ab::f0 wei:bf16::blocked:ab::f0 dst:bf16::blocked:ab::f0,,,32x576:576x576,{ms}\n"
    )


@pytest.mark.parametrize(
    ("impl", "cls"),
    [
        ("brg_matmul:avx512_core_amx", IsaClass.amx),
        ("brg_matmul:avx10_1_512_amx_fp16", IsaClass.amx),
        ("brgemm:avx512_core_amx_fp16", IsaClass.amx),
        ("brg_matmul:avx512_core_bf16", IsaClass.avx512_bf16),
        ("gemm:jit:avx512_core_bf16", IsaClass.avx512_bf16),
        ("brg_matmul:avx512_core_vnni", IsaClass.avx512_vnni),
        ("jit:avx512_core", IsaClass.avx512),
        ("brg_matmul:avx2_vnni_2", IsaClass.avx2),
        ("jit:avx2", IsaClass.avx2),
        ("jit:sse41", IsaClass.sse41),
        ("brg_matmul:sve_512", IsaClass.sve),
        ("gemm:acl", IsaClass.neon),
        ("ref:any", IsaClass.reference),
        ("simple:any", IsaClass.reference),
        ("ref_int8:any", IsaClass.reference),
        ("jit:uni", IsaClass.other),
    ],
)
def test_classification(impl: str, cls: IsaClass) -> None:
    assert classify_impl(impl) == cls


def test_no_amx_on_this_kind_of_machine_is_said_plainly() -> None:
    lines = HEADER + [exec_line("matmul", "brg_matmul:avx512_core_bf16")] * 2000
    lines += [exec_line("reorder", "jit:uni")] * 40 + [exec_line("reorder", "simple:any")] * 3
    lines += ["(EngineCore pid=12) INFO some log line\n"]
    r = parse_trace(lines, cpu_has_amx=False, window="benchmark")
    assert r.available and r.total_executions == 2043
    assert r.by_primitive["matmul"] == {"brg_matmul:avx512_core_bf16": 2000}
    assert r.by_isa["AVX-512 BF16"] == 2000 and r.amx_executions == 0 and r.fallback_executions == 3
    assert r.cpu_isa == "Intel AVX-512 with Intel DL Boost and bfloat16 support"
    assert r.onednn_version == "3.9.1"
    assert r.verdict.startswith("No AMX kernels ran (this CPU has no AMX); 2,000 brg_matmul:avx512_core_bf16")
    assert "the kernels by kind: 2,000 AVX-512, 0 AVX2, 3 reference (non-JIT)" in r.verdict
    assert r.kernels[0].total_ms == pytest.approx(40.0)
    text = format_report(r)
    assert "not comparable" in text and "brg_matmul:avx512_core_bf16" in text


def test_amx_used() -> None:
    lines = [exec_line("matmul", "brg_matmul:avx512_core_amx")] * 700 + [exec_line("reorder", "jit:uni")] * 7
    r = parse_trace(lines, cpu_has_amx=True)
    assert r.amx_executions == 700
    assert r.verdict.startswith("AMX kernels ran: 700 of 707 oneDNN executions")


def test_amx_cpu_but_no_amx_kernels_is_flagged() -> None:
    r = parse_trace([exec_line("matmul", "brg_matmul:avx512_core_bf16")] * 5, cpu_has_amx=True)
    assert "No AMX kernels ran although this CPU reports AMX" in r.verdict


def test_no_trace_lines() -> None:
    r = parse_trace(["INFO nothing traced\n"], cpu_has_amx=False)
    assert not r.available and "not enabled" in r.verdict


def test_prefixed_and_older_lines_are_read() -> None:
    lines = [
        "(EngineCore_DP0 pid=7) " + exec_line("matmul", "brg_matmul:avx512_core_bf16"),
        "dnnl_verbose,exec,cpu,inner_product,brgemm:avx512_core_amx,forward_inference,...,1.5\n",
        "onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,brg_matmul:avx512_core_bf16,...,0.1\n",
    ]
    r = parse_trace(lines, cpu_has_amx=None)
    assert r.total_executions == 2  # creation lines are not executions
    assert r.by_primitive == {
        "matmul": {"brg_matmul:avx512_core_bf16": 1},
        "inner_product": {"brgemm:avx512_core_amx": 1},
    }


def test_window_of_a_log_file(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    startup = HEADER + [exec_line("matmul", "brg_matmul:avx512_core_bf16")] * 100  # warm-up, not measured
    log.write_text("".join(startup))
    start = log.stat().st_size
    with open(log, "a") as fh:
        fh.write("".join([exec_line("matmul", "brg_matmul:avx512_core_bf16")] * 30))
    end = log.stat().st_size
    with open(log, "a") as fh:
        fh.write("".join([exec_line("reorder", "jit:uni")] * 9))  # after the benchmark
    r = parse_log(log, start, end, window="benchmark", cpu_has_amx=False)
    assert r.total_executions == 30 and r.window == "benchmark"
    assert r.cpu_isa is not None  # the header before the window is still read
    assert parse_log(log, cpu_has_amx=False).total_executions == 139


def test_the_verdict_states_every_fallback_as_a_number_and_names_unreported_ukernels() -> None:
    """An AMX host: AMX matmuls, a few AVX-512 and AVX2 kernels below AMX, and oneDNN ukernel brgemm executions
    (called by vLLM's own kernels) whose implementation field is empty, so oneDNN does not say their ISA."""
    lines = [exec_line("matmul", "brg_matmul:avx10_1_512_amx")] * 500
    lines += [exec_line("matmul", "brg_matmul:avx512_core_bf16")] * 7 + [exec_line("reorder", "jit:avx2")] * 4
    lines += [exec_line("brgemm", "")] * 1200
    r = parse_trace(lines, cpu_has_amx=True)
    assert r.fallbacks == {"AVX-512 without AMX": 7, "AVX2": 4, "reference": 0}
    assert r.unreported_executions == 1200 and r.by_isa["ISA not reported (oneDNN ukernel)"] == 1200
    assert "other" not in r.by_isa
    assert "fallbacks below AMX: 7 AVX-512 without AMX, 4 AVX2, 0 reference (non-JIT)" in r.verdict
    assert "1,200 oneDNN ukernel executions whose ISA oneDNN does not report" in r.verdict
