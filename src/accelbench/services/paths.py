"""File paths from remote callers (the API, the pages) are confined to the directories accelbench keeps models
and datasets in: an API caller could otherwise make the service stat and read any file it can (a
``dataset_path`` whose lines were then sent to a URL of the caller's choice; ``GET /api/v1/models/{path}``
returning any model-shaped ``config.json``). The CLI is a person on their own machine: it is not confined.

A value is a path when it is absolute, starts with ``~`` or ``.``, or has a ``..`` part; anything else is a name
(a preset, a prepared model, a hub id such as ``Qwen/Qwen2.5-7B-Instruct``).
"""

from __future__ import annotations

from pathlib import Path

from accelbench.domain.run import EndpointTarget, RunSpec
from accelbench.errors import UserInputError
from accelbench.settings import get_settings


def _is_path(value: str) -> bool:
    return value.startswith(("/", "~", ".")) or ".." in Path(value).parts


def confine(value: str | None, what: str) -> None:
    """Refuse ``value`` when it is a path outside the models and datasets directories."""
    if not value or not _is_path(value):
        return
    settings = get_settings()
    roots = [settings.models_dir.resolve(), settings.datasets_dir.resolve()]
    roots += [Path(r).expanduser().resolve() for r in settings.api_path_roots]
    try:
        resolved = Path(value).expanduser().resolve()
    except (RuntimeError, OSError, ValueError):
        return  # an unknown ~user, a NUL byte: no file can be reached; the loader says it is bad input
    if any(resolved == root or root in resolved.parents for root in roots):
        return
    raise UserInputError(
        f"{what} names a path outside the directories this service reads from.",
        hint=f"Name a preset or a prepared model, or put the file under {roots[0]} (models) or {roots[1]} "
        "(datasets) on the server (ACCELBENCH_API_PATH_ROOTS adds directories).",
    )


def confine_spec(spec: RunSpec) -> None:
    """Every path a run spec from a remote caller names: the model, the dataset, a tools file, an endpoint's
    tokenizer."""
    confine(spec.model, "model")
    confine(spec.sweep.dataset_path, "sweep.dataset_path")
    if spec.sweep.tools not in (None, "builtin"):
        confine(spec.sweep.tools, "sweep.tools")  # a tools file is read like a dataset
    if spec.capacity is not None:
        confine(spec.capacity.dataset_path, "capacity.dataset_path")
        if spec.capacity.tools not in (None, "builtin"):
            confine(spec.capacity.tools, "capacity.tools")
    if isinstance(spec.target, EndpointTarget):
        confine(spec.target.tokenizer, "target.tokenizer")
