"""Host environment capture: /proc/cpuinfo parsing for x86 and Arm, ISA detection, GPU probe, engine version,
redaction of secrets in the stored command line."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from accelbench import __version__
from accelbench.telemetry import host

SPR_CPUINFO = """processor	: 0
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Platinum 8488C
physical id	: 0
core id		: 0
flags		: fpu sse2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8 avx_vnni

processor	: 1
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Platinum 8488C
physical id	: 0
core id		: 0
flags		: fpu sse2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8 avx_vnni

processor	: 2
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Platinum 8488C
physical id	: 1
core id		: 0
flags		: fpu sse2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8 avx_vnni

processor	: 3
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Platinum 8488C
physical id	: 1
core id		: 1
flags		: fpu sse2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8 avx_vnni
"""

GRAVITON3_CPUINFO = """processor	: 0
BogoMIPS	: 2100.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x1
CPU part	: 0xd40
CPU revision	: 1

processor	: 1
BogoMIPS	: 2100.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x1
CPU part	: 0xd40
CPU revision	: 1
"""


def test_parse_cpuinfo_intel_two_sockets_with_amx() -> None:
    info = host.parse_cpuinfo(SPR_CPUINFO)
    assert info["model"] == "Intel(R) Xeon(R) Platinum 8488C"
    assert info["vendor"] == "GenuineIntel"
    assert info["sockets"] == 2
    assert info["logical_cpus"] == 4
    assert info["physical_cores"] == 3  # (0,0) shared by two hyperthreads, (1,0), (1,1)
    isa = host.isa_summary(info["flags"], "x86_64")
    assert isa["family"] == "x86"
    assert isa["has"]["AMX-BF16"] and isa["has"]["AMX-TILE"] and isa["has"]["AMX-INT8"]
    assert isa["has"]["AVX512-BF16"] and isa["has"]["AVX512-VNNI"] and isa["has"]["AVX-512F"]
    assert not isa["has"]["AMX-FP16"]
    assert isa["matrix_engine"] == "AMX"


def test_parse_cpuinfo_graviton3_sve_bf16() -> None:
    info = host.parse_cpuinfo(GRAVITON3_CPUINFO)
    assert info["model"] == "Arm Neoverse-V1 (e.g. AWS Graviton3)"
    assert info["vendor"] == "ARM"
    assert info["sockets"] is None  # Arm kernels do not print physical id
    assert info["logical_cpus"] == 2
    isa = host.isa_summary(info["flags"], "aarch64")
    assert isa["family"] == "arm"
    assert isa["has"]["SVE"] and isa["has"]["BF16"] and isa["has"]["I8MM"] and isa["has"]["NEON"]
    assert not isa["has"]["SVE2"]  # Graviton3 has SVE, not SVE2
    assert isa["matrix_engine"] == "SVE"
    assert "AMX-BF16" not in isa["has"]  # x86 names are not checked on Arm


def test_avx512_bf16_without_amx_is_stated() -> None:
    isa = host.isa_summary(["avx2", "avx512f", "avx512_bf16", "avx512_vnni"], "x86_64")
    assert isa["matrix_engine"] == "AVX512-BF16"
    assert isa["has"]["AMX-BF16"] is False


def test_cpu_info_of_this_machine_matches_proc_cpuinfo() -> None:
    cpu = host.cpu_info()
    text = Path("/proc/cpuinfo").read_text()
    parsed = host.parse_cpuinfo(text)
    assert cpu["model"] == parsed["model"]
    assert cpu["flags"] == parsed["flags"]
    assert cpu["logical_cpus"] == os.cpu_count()
    assert cpu["usable_cpus"] == len(os.sched_getaffinity(0))
    assert cpu["physical_cores"] >= 1
    assert cpu["numa_nodes"] >= 1
    for flag, name in host.X86_ISA_FLAGS.items() if parsed["flags"] and "sse2" in parsed["flags"] else []:
        assert cpu["isa"]["has"][name] == (flag in parsed["flags"])


def _fake_tool(dir_: Path, name: str, output: str) -> None:
    path = dir_ / name
    path.write_text(f"#!/bin/sh\ncat <<'OUT'\n{output}\nOUT\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_gpus_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_tool(
        tmp_path,
        "nvidia-smi",
        "0, NVIDIA L4, 23034, 550.54.15, 8.9, 00000000:31:00.0\n1, NVIDIA L4, 23034, 550.54.15, 8.9, 00000000:32:00.0",
    )
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    acc = host.accelerator_info()
    assert [g["name"] for g in acc["gpus"]] == ["NVIDIA L4", "NVIDIA L4"]
    assert acc["gpus"][0]["memory_gib"] == pytest.approx(22.49, abs=0.01)
    assert acc["gpus"][1]["index"] == 1
    assert acc["gpus"][0]["compute_capability"] == "8.9"


def test_failing_gpu_probe_is_recorded_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    acc = host.accelerator_info()
    assert acc["gpus"] == []
    assert any("exited 9" in e and "NVIDIA-SMI has failed" in e for e in acc["errors"])


class _Handler(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, object]] = {}

    def do_GET(self) -> None:
        body = self.routes.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def version_server() -> Iterator[str]:
    _Handler.routes = {
        "/version": {"version": "0.32.0"},
        "/v1/models": {"object": "list", "data": [{"id": "smol", "owned_by": "vllm"}]},
    }
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_engine_version_from_vllm_version_route(version_server: str) -> None:
    assert host.engine_info(version_server) == {"name": "vllm", "version": "0.32.0", "source": "/version"}
    # a base URL given with /v1 is the same server
    assert host.engine_info(version_server + "/v1/")["version"] == "0.32.0"


def test_engine_unreachable_is_an_error_field() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    info = host.engine_info(f"http://127.0.0.1:{port}", timeout=1.0)
    assert info["version"] is None and info["name"] is None
    assert "ConnectError" in info["error"]


def test_command_redacts_secrets() -> None:
    cmd = host.redact_command(
        [
            "accelbench",
            "sweep",
            "--api-key",
            "sk-123",
            "--header",
            "Authorization: Bearer abc",
            "--header=X-Trace: yes",
            "--api-key=sk-456",
            "--label",
            "my run",
        ]
    )
    assert "sk-123" not in cmd and "sk-456" not in cmd and "abc" not in cmd
    assert cmd == (
        "accelbench sweep --api-key '***' --header 'Authorization:***' '--header=X-Trace: yes' "
        "'--api-key=***' --label 'my run'"
    )


def test_capture_environment_is_json_safe_and_complete(version_server: str) -> None:
    env = host.capture_environment(base_url=version_server, command=["accelbench", "sweep", "--repeats", "2"])
    json.dumps(env, allow_nan=False)
    assert env["accelbench_version"] == __version__
    assert env["command"] == "accelbench sweep --repeats 2"
    assert env["engine"]["version"] == "0.32.0"
    assert env["memory"]["total_gib"] > 0
    assert env["cpu"]["logical_cpus"] >= 1
    assert env["os"]["system"] == "Linux"
    labels = dict(host.describe_environment(env))
    assert labels["Engine"] == "vllm 0.32.0"
    assert "ISA" in labels and "CPU" in labels
    # a command given as a string is stored as is
    assert host.capture_environment(command="x y")["command"] == "x y"
