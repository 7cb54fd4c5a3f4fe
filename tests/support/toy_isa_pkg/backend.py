"""PEP 517 backend of the toy compiled engine: compiles kernel.c into the wheel, AMX on unless the build
environment's TOY_BUILD_OFF (comma-separated groups, what accelbench's rebuild sets) lists amx."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAME, VERSION = "toy_isa_engine", "1.0"

INIT = '''"""Toy compiled engine (tests only): its kernel library and what it was built with."""
import ctypes
import os

OFF = {off!r}
AMX = {amx!r}
_LIB = os.path.join(os.path.dirname(__file__), "libtoy_kernel.so")


def system_info() -> str:
    """What it was built with, in llama.cpp's system_info layout."""
    return "CPU : AVX = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = %d | REPACK = 1 |" % AMX


def matmul() -> int:
    return ctypes.CDLL(_LIB).toy_kernel()
'''


def _record(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    off = sorted(g for g in os.environ.get("TOY_BUILD_OFF", "").split(",") if g)
    amx = 0 if "amx" in off else 1
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "libtoy_kernel.so"
        cmd = ["gcc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(HERE / "kernel.c")]
        subprocess.run([*cmd, *(["-DTOY_AMX"] if amx else [])], check=True)
        print(f"toy build: AMX {'on' if amx else 'off'} (TOY_BUILD_OFF={','.join(off)})", flush=True)
        files = {
            "toy_isa/__init__.py": INIT.format(off=off, amx=amx).encode(),
            "toy_isa/libtoy_kernel.so": lib.read_bytes(),
        }
    dist = f"{NAME}-{VERSION}.dist-info"
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: toy-isa-engine\nVersion: {VERSION}\n".encode()
    files[f"{dist}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: toy\nRoot-Is-Purelib: false\nTag: py3-none-any\n"
    )
    record = [_record(p, d) for p, d in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / name, "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)
    return name
