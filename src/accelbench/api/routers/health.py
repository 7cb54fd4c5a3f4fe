"""Health: is the service up, can it reach its store, is the worker running. Always open (probes)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from sqlalchemy import text

from accelbench import __version__
from accelbench.api.deps import SettingsDep, StoreDep, WorkerDep

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str = Field(
        description="ok, or degraded when the store cannot be reached, or the run worker has stopped, cannot "
        "write to the store or has runs whose final status is not yet written."
    )
    version: str
    database: dict[str, Any] = Field(description="dialect and whether a query succeeded.")
    worker: dict[str, Any] | None = Field(description="The run worker of this process; null when disabled.")
    auth: dict[str, Any] = Field(description="Whether a token is configured and reads need one.")


@router.get("/health", response_model=Health, summary="Service health")
def health(request: Request, store: StoreDep, settings: SettingsDep, worker: WorkerDep) -> Health:
    db: dict[str, Any] = {"dialect": store.engine.dialect.name, "ok": True}
    try:
        with store.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        db.update(ok=False, error=type(exc).__name__)
    ok = db["ok"] and (worker is None or worker.healthy)
    return Health(
        status="ok" if ok else "degraded",
        version=__version__,
        database=db,
        worker=worker.status() if worker is not None else None,
        auth={
            "token_configured": request.app.state.verifier.configured(),
            "read_auth": settings.api_read_auth,
        },
    )
