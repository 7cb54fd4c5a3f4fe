"""Tool versions as use cases: the table of every tool's version in effect (with its source) and the audit log
of changes, and setting versions (each key and value checked before anything is written). The API's
``/config/tool-versions`` and the Config page call ``tool_versions_state`` and ``set_tool_versions``;
``accelbench config tool-versions`` calls ``update_tool_versions``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from accelbench.registry import did_you_mean
from accelbench.runtimes import versions as tv
from accelbench.runtimes.versions import ToolVersion, parse_assignments, set_tool_version, tool_versions_table
from accelbench.services.run_checks import as_input_error
from accelbench.store import Store


class ToolVersionsState(BaseModel):
    """Every tool's version in effect, and the newest audit lines."""

    versions: list[ToolVersion]
    audit: list[dict[str, Any]]


class ToolVersionsUpdate(BaseModel):
    """Versions to set (an empty value keeps the current one), by whom and from where."""

    versions: dict[str, str]
    actor: str | None = None
    source: str = "api"


class ToolVersionsChange(ToolVersionsState):
    changed: list[str] = Field(description="Keys whose stored value changed.")
    shadowed: list[str] = Field(description="Changed keys whose environment override still wins.")


def tool_versions_state(store: Store, audit_limit: int = 50) -> ToolVersionsState:
    return ToolVersionsState(
        versions=tv.tool_versions_table(store.get_tool_versions()), audit=store.audit_log(limit=audit_limit)
    )


def set_tool_versions(store: Store, update: ToolVersionsUpdate) -> ToolVersionsChange:
    """Check every key and value, then store them: a bad entry never half-applies an update."""
    known = tv.tool_defaults()
    for key, value in update.versions.items():
        if key not in known:
            raise as_input_error(did_you_mean(key, list(known), "tool"), "versions")
        if value.strip():
            tv.check_version(key, value)
    changed = [
        key
        for key, value in update.versions.items()
        if tv.set_tool_version(store, key, value, actor=update.actor, source=update.source)
    ]
    state = tool_versions_state(store, 50)
    env_keys = {r.key for r in state.versions if r.source == "env"}
    return ToolVersionsChange(**dict(state), changed=changed, shadowed=[k for k in changed if k in env_keys])


@dataclass(frozen=True)
class ToolVersionsRequest:
    """``KEY=VALUE`` assignments to store (an empty value keeps the current one), who asks and through what,
    and how many audit lines to read back (0: none)."""

    assignments: list[str] = field(default_factory=list)
    actor: str = "unknown"
    source: str = "cli"
    audit_limit: int = 20


@dataclass(frozen=True)
class ToolVersionsResult:
    rows: list[Any]
    changes: list[dict[str, Any]]
    audit: list[dict[str, Any]]


def update_tool_versions(store: Store, req: ToolVersionsRequest) -> ToolVersionsResult:
    """Store each assignment (audited), then read the table and the audit log as they now are."""
    changes: list[dict[str, Any]] = []
    for key, value in parse_assignments(list(req.assignments)):
        changed = set_tool_version(store, key, value, actor=req.actor, source=req.source)
        changes.append({"key": key, "value": value, "changed": changed})
    rows = tool_versions_table(store.get_tool_versions())
    audit = store.audit_log(limit=req.audit_limit) if req.audit_limit else []
    return ToolVersionsResult(rows=rows, changes=changes, audit=audit)
