"""The one path rule for files a remote caller (the API, the pages) names: a model, a dataset, a trace, a tools
file, a tokenizer directory, a kubeconfig.

A name is resolved against the service's data roots only, never against its working directory: the models
directory, the datasets directory and the directories ``ACCELBENCH_API_PATH_ROOTS`` adds. Symlinks are resolved
before the check, so a link inside a root that points outside is refused like the outside path itself. ``..``
parts, percent-encoded characters and control characters are refused outright (a name is written as it is).
What passes is handed on as the resolved absolute path, so the worker opens exactly the file that was checked.

A model may also be a name (a preset, a prepared model, a hub id such as ``Qwen/Qwen2.5-7B-Instruct``): it stays
a name unless it is written as a path or a file of that name sits in the working directory (which the model
loader would otherwise read). The CLI is a person on their own machine: it is not confined.
"""

from __future__ import annotations

import re
from pathlib import Path

from accelbench.domain.run import EndpointTarget, KubernetesTarget, RunSpec
from accelbench.errors import UserInputError
from accelbench.settings import get_settings

_ENCODED = re.compile(r"%[0-9A-Fa-f]{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ROOTS_HINT = "ACCELBENCH_API_PATH_ROOTS (a JSON list of directories) adds roots."


def data_roots() -> list[Path]:
    """The directories a remote caller's file names resolve against, symlinks resolved, in lookup order."""
    settings = get_settings()
    roots = [settings.models_dir, settings.datasets_dir, *settings.api_path_roots]
    out: list[Path] = []
    for root in roots:
        resolved = Path(root).expanduser().resolve()
        if resolved not in out:
            out.append(resolved)
    return out


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _refuse(what: str, value: str, why: str, roots: list[Path]) -> UserInputError:
    names = ", ".join(str(r) for r in roots)
    name = "Give a preset name, a prepared model or a hub id, or name" if what == "model" else "Name"
    return UserInputError(
        f"{what} {value!r} {why}; this service reads files only from its data roots: {names}.",
        hint=f"{name} a file under one of them (relative to the root, or by its absolute path). {_ROOTS_HINT}",
    )


def _is_path_syntax(value: str) -> bool:
    return value.startswith(("/", "~", ".")) or ".." in Path(value).parts


def _check_form(value: str, what: str, roots: list[Path]) -> None:
    if _CONTROL.search(value):
        raise _refuse(what, value, "holds a control character", roots)
    if _ENCODED.search(value):
        raise _refuse(what, value, "holds a percent-encoded character (write the name as it is)", roots)
    if ".." in Path(value).parts:
        raise _refuse(what, value, "climbs out with '..', outside the roots", roots)


def resolve_file(value: str, what: str, *, may_be_name: bool = False) -> str:
    """``value`` as the resolved absolute path of a file or directory under a data root, or refused with the
    roots named. ``may_be_name``: a value that is not written as a path and is no file stays as it is (a model
    preset or hub id)."""
    roots = data_roots()
    _check_form(value, what, roots)
    if may_be_name and not _is_path_syntax(value):
        try:
            beside = Path(value).resolve()
            exists = Path(value).exists()
        except (OSError, RuntimeError, ValueError):
            return value
        if exists and not _inside(beside, roots):
            raise _refuse(what, value, "names a file beside the service, outside the roots", roots)
        return value
    try:
        path = Path(value).expanduser()
    except RuntimeError:  # ~user that does not exist
        raise _refuse(what, value, "names a home directory that does not exist", roots) from None
    try:
        if path.is_absolute():
            resolved = path.resolve()
            if not _inside(resolved, roots):
                raise _refuse(what, value, "is outside the roots (symlinks resolved)", roots)
            return str(resolved)
        for root in roots:
            candidate = (root / path).resolve()
            if candidate.exists():
                if not _inside(candidate, roots):
                    raise _refuse(what, value, "links outside the roots", roots)
                return str(candidate)
    except (OSError, ValueError):
        raise _refuse(what, value, "cannot be read as a path", roots) from None
    raise _refuse(what, value, "is not a file under any root", roots)


def confine(value: str | None, what: str) -> str | None:
    """A model a remote caller names: a name as it is, a path resolved under the data roots, or refused."""
    if not value:
        return value
    return resolve_file(value, what, may_be_name=True)


def _file(value: str | None, what: str) -> str | None:
    if value is None or (value == "builtin" and what.endswith(".tools")):
        return value
    return resolve_file(value, what)


def confine_spec(spec: RunSpec) -> RunSpec:
    """A remote caller's run spec with every file it names resolved under the data roots (the model, a dataset
    or trace, a tools file, an endpoint's tokenizer, a kubeconfig), or refused."""
    sweep = spec.sweep.model_copy(
        update={
            "dataset_path": _file(spec.sweep.dataset_path, "sweep.dataset_path"),
            "tools": _file(spec.sweep.tools, "sweep.tools"),
        }
    )
    update: dict[str, object] = {"model": confine(spec.model, "model"), "sweep": sweep}
    if spec.capacity is not None:
        update["capacity"] = spec.capacity.model_copy(
            update={
                "dataset_path": _file(spec.capacity.dataset_path, "capacity.dataset_path"),
                "tools": _file(spec.capacity.tools, "capacity.tools"),
            }
        )
    if isinstance(spec.target, EndpointTarget) and spec.target.tokenizer:
        update["target"] = spec.target.model_copy(
            update={"tokenizer": _file(spec.target.tokenizer, "target.tokenizer")}
        )
    elif isinstance(spec.target, KubernetesTarget) and spec.target.kubeconfig:
        update["target"] = spec.target.model_copy(
            update={"kubeconfig": _file(spec.target.kubeconfig, "target.kubeconfig")}
        )
    return spec.model_copy(update=update)
