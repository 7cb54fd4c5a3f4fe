"""Run specs from files: strict YAML (a duplicated key is an error, not a silent last-one-wins) validated into a
``RunSpec`` whose every mistake is a ``UserInputError`` naming the key. Every command that reads a spec file
(``run``, ``export --spec``) reads it here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from accelbench.bench.spec import describe_validation_error
from accelbench.domain.run import RunSpec
from accelbench.errors import UserInputError


class _StrictLoader(yaml.SafeLoader):
    """YAML that refuses duplicated keys (PyYAML would silently keep the last one)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicated key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_run_spec(path: Path) -> RunSpec:
    """Read a run spec file; every mistake is a ``UserInputError`` naming the key."""

    try:
        text = path.read_text()
    except OSError as exc:
        raise UserInputError(f"Cannot read {path}: {exc}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise UserInputError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise UserInputError(f"{path} must hold a mapping (model:, engine:, target:, sweep: ...).")
    try:
        return RunSpec.model_validate(data)
    except ValidationError as exc:
        raise describe_validation_error(exc, str(path), RunSpec) from None
