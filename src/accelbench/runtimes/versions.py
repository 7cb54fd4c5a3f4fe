"""Tool versions: which engine and load-generator versions deployments use, and where each value comes from.

Precedence, highest first: an environment variable (``ACCELBENCH_TOOL_<KEY>``, e.g. ``ACCELBENCH_TOOL_VLLM``),
the value stored with ``accelbench config tool-versions --set`` (every change audited), the built-in default
(each runtime's ``default_version``). The image variables (``VLLM_IMAGE``, ``VLLM_CPU_IMAGE``,
``VLLM_NEURON_IMAGE``, ``SGLANG_IMAGE``) replace a runtime's whole image and are reported beside its version.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from accelbench import __version__
from accelbench.domain.strict import StrictModel
from accelbench.errors import UserInputError
from accelbench.registry import did_you_mean
from accelbench.runtimes.runtime import RUNTIMES

if TYPE_CHECKING:
    from accelbench.store.repo import Store

LOADGEN_KEY = "loadgen"
#: the project's own image (Dockerfile at the repository root): runs ``accelbench sweep`` inside the cluster
LOADGEN_REPOSITORY = "accelbench/accelbench"
LOADGEN_IMAGE_ENV = "ACCELBENCH_LOADGEN_IMAGE"

#: a version or image tag: a digit first (or "v" and a digit), e.g. 0.32.0, v0.9.1, 0.9.1-neuronx-py310-sdk2.25.0
_VERSION_RE = re.compile(r"^v?[0-9][A-Za-z0-9._+\-]{0,126}$")


def check_version(key: str, value: str) -> str:
    """The stripped value, or a refusal that says what a version looks like."""
    value = value.strip()
    if not _VERSION_RE.match(value):
        raise UserInputError(
            f"Version {value!r} for {key} is not a version or image tag: a version starts with a digit "
            "(or 'v' and a digit) and uses letters, digits, '.', '-', '_', '+' (at most 128 characters), "
            "e.g. 0.32.0, v0.9.1 or 0.9.1-neuronx-py310-sdk2.25.0-ubuntu22.04."
        )
    return value


class ToolVersion(StrictModel):
    """One row of the tool-versions table."""

    key: str = Field(description="Tool key: a runtime name or 'loadgen'.")
    value: str = Field(description="The version in effect.")
    source: Literal["default", "store", "env"] = Field(description="Where the value in effect comes from.")
    default: str = Field(description="The built-in default.")
    stored: str | None = Field(default=None, description="The stored value, if any (shadowed by env).")
    env_var: str = Field(description="Environment variable that overrides the version.")
    image_env_var: str | None = Field(
        default=None, description="Environment variable that replaces the image."
    )
    image_override: str | None = Field(default=None, description="The image set by image_env_var, if any.")


def env_var_for(key: str) -> str:
    return "ACCELBENCH_TOOL_" + re.sub(r"[^A-Za-z0-9]", "_", key).upper()


def tool_defaults() -> dict[str, str]:
    """Built-in defaults: each runtime's ``default_version`` and the load generator (this package)."""
    defaults = {name: rt.default_version for name, rt in RUNTIMES.items()}
    defaults[LOADGEN_KEY] = __version__
    return defaults


def _image_env(key: str) -> str | None:
    if key == LOADGEN_KEY:
        return LOADGEN_IMAGE_ENV
    if key in RUNTIMES:
        return RUNTIMES.get(key).image_env_var
    return None


def tool_versions_table(
    stored: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> list[ToolVersion]:
    """Every known tool with its value in effect and the value's source."""
    env = os.environ if environ is None else environ
    stored = stored or {}
    rows = []
    for key, default in sorted(tool_defaults().items()):
        var = env_var_for(key)
        img_var = _image_env(key)
        if env.get(var, "").strip():
            value, source = env[var].strip(), "env"
        elif stored.get(key):
            value, source = stored[key], "store"
        else:
            value, source = default, "default"
        rows.append(
            ToolVersion(
                key=key,
                value=value,
                source=source,
                default=default,
                stored=stored.get(key),
                env_var=var,
                image_env_var=img_var,
                image_override=(env.get(img_var) or None) if img_var else None,
            )
        )
    return rows


def effective_tool_versions(
    store: Store | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """key -> version in effect; what ``Runtime.resolve_version`` reads."""
    stored = store.get_tool_versions() if store is not None else {}
    return {row.key: row.value for row in tool_versions_table(stored, environ)}


def set_tool_version(
    store: Store, key: str, value: str | None, *, actor: str | None = None, source: str = "cli"
) -> bool:
    """Store a version; an empty value keeps the current one. Returns whether anything changed.

    Each change writes one audit line (old value, new value, who, from where).
    """
    defaults = tool_defaults()
    if key not in defaults:
        raise did_you_mean(key, list(defaults), "tool")
    value = (value or "").strip()
    if not value:
        return False  # empty = keep what is there (the seed platform's rule, kept)
    value = check_version(key, value)
    return store.set_tool_version(key, value, actor=actor, source=source)


def parse_assignments(items: list[str]) -> list[tuple[str, str]]:
    """``["vllm=0.33.0", "sglang="]`` -> pairs; a missing '=' is an error that says what to write."""
    out = []
    for item in items:
        if "=" not in item:
            raise UserInputError(f"Bad --set {item!r}: write KEY=VALUE, e.g. vllm-cpu=0.32.0.")
        key, value = item.split("=", 1)
        out.append((key.strip(), value.strip()))
    return out
