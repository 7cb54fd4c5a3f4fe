"""The engine and load-generator versions deployments use: the table of every tool (the version in effect and
where it comes from), changes stored with who made them, and the audit log of those changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelbench.runtimes.versions import parse_assignments, set_tool_version, tool_versions_table
from accelbench.store import Store


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
