"""The local serving engines and the models prepared for them: install, list, remove, clear the executable-stack
flag; prepare, list, remove a model. The CLI's ``engine`` and ``model`` commands call these; the work itself is
``deploy.engines``, ``deploy.execstack`` and ``deploy.model_store``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from accelbench.deploy import engines as eng
from accelbench.deploy import execstack
from accelbench.deploy import model_store as ms
from accelbench.domain.progress import NO_PROGRESS, Progress
from accelbench.errors import NotFoundError
from accelbench.services.keywords import keywords

__all__ = [
    "EngineInstallRequest",
    "EngineRemoval",
    "ExecstackFix",
    "ModelList",
    "ModelPrepareRequest",
    "clear_engine_execstack",
    "engine_installed",
    "engine_names",
    "engine_to_remove",
    "execstack_targets",
    "install_engine",
    "installed_engines",
    "list_prepared_models",
    "model_presets",
    "other_packages",
    "prepare_model",
    "remove_engine",
    "remove_model",
    "slow_install",
]


def engine_names() -> list[str]:
    """The engines ``engine install`` knows."""
    return list(eng.ENGINES.names())


def model_presets() -> list[str]:
    """The model presets ``model prepare`` knows."""
    return list(ms.PRESETS)


@dataclass(frozen=True)
class EngineInstallRequest:
    name: str
    version: str | None = None
    python: str | None = None
    extra_index_url: str | None = None
    force: bool = False
    without_isa: tuple[str, ...] = ()
    check: bool = True
    check_model: str | None = None


def slow_install(name: str, version: str | None) -> str | None:
    """The version an install would build when it compiles from source and is not installed yet (it takes
    minutes: the shell says so first); None when it is quick."""
    recipe = eng.get_recipe(name)
    v = version or recipe.default_version
    return v if recipe.compiles and not eng.find_engine(name, v) else None


def install_engine(req: EngineInstallRequest, progress: Progress = NO_PROGRESS) -> Any:
    """Install an engine into its own environment (a finished install is reused); its ``EngineInfo``."""
    version = req.version or eng.get_recipe(req.name).default_version
    return eng.install_engine(req.name, version, **keywords(req, "name", "version"), progress=progress)


def installed_engines() -> list[Any]:
    """Every installed engine's ``EngineInfo``."""
    return list(eng.list_engines())


def other_packages(info: Any) -> str:
    """The packages of an installed engine besides the engine's own, for ``engine list``."""
    return ", ".join(f"{k} {v}" for k, v in info.packages.items() if k != eng.get_recipe(info.name).package)


def engine_installed(name: str, version: str | None) -> bool:
    return eng.find_engine(name, version) is not None


@dataclass(frozen=True)
class EngineRemoval:
    name: str
    version: str
    path: Path


def engine_to_remove(name: str, version: str | None) -> EngineRemoval:
    """The installed engine ``engine remove`` would delete; NotFoundError when it is not installed."""
    v = version or eng.default_version(name)
    path = eng.engine_dir(name, v)
    if not path.exists():
        raise NotFoundError(
            f"Engine {name} {v} is not installed.", hint="`accelbench engine list` shows what is."
        )
    return EngineRemoval(name=name, version=v, path=path)


def remove_engine(removal: EngineRemoval) -> Path:
    return eng.remove_engine(removal.name, removal.version)


@dataclass
class ExecstackFix:
    """``engine fix-execstack``: the engine, and the libraries to clear (every one that asks for an executable
    stack when none is named)."""

    name: str
    version: str | None = None
    paths: list[Path] = field(default_factory=list)
    engine: Any = None
    targets: list[Path] = field(default_factory=list)


def execstack_targets(req: ExecstackFix) -> ExecstackFix:
    info = eng.get_engine(req.name, req.version)
    targets = list(req.paths) if req.paths else execstack.find_execstack_libraries(Path(info.path))
    return ExecstackFix(name=req.name, version=req.version, paths=req.paths, engine=info, targets=targets)


def clear_engine_execstack(fix: ExecstackFix, progress: Progress = NO_PROGRESS) -> list[Path]:
    return list(execstack.clear_execstack(fix.targets, engine=fix.engine, progress=progress))


@dataclass(frozen=True)
class ModelPrepareRequest:
    ref: str
    name: str | None = None
    check: str = "engine"
    engine_version: str | None = None
    revision: str | None = None
    convert: bool = True
    force: bool = False


def prepare_model(req: ModelPrepareRequest, progress: Progress = NO_PROGRESS) -> Any:
    """Fetch, convert and check a model; its ``PreparedModel``."""
    return ms.prepare_model(
        req.ref,
        name=req.name,
        check=cast(Literal["engine", "transformers", "none"], req.check),
        engine_version=req.engine_version,
        revision=req.revision,
        convert=req.convert,
        force=req.force,
        progress=progress,
    )


@dataclass(frozen=True)
class ModelList:
    prepared: list[Any]
    presets: list[Any]


def list_prepared_models() -> ModelList:
    """Prepared models, and the presets not prepared yet."""
    models = ms.list_models()
    prepared = {m.name for m in models}
    return ModelList(prepared=models, presets=[p for p in ms.PRESETS.values() if p.name not in prepared])


def remove_model(name: str) -> Path:
    return ms.remove_model(name)
