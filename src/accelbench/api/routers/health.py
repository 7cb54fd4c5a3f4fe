"""Health: is the service up, can it read and write its store, is the worker running. Always open (probes).

The store is probed with a read and a write that is rolled back (``services/store_health.py``), so a read-only
store shows as ``writable: false`` while reads still work; the answer is kept for a moment, so load balancers
asking many times a second cost one probe.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from accelbench import __version__
from accelbench.api.deps import SettingsDep, StoreDep, WorkerDep
from accelbench.services.store_health import ProbeCache, store_health

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str = Field(
        description="ok, or degraded when the store cannot be read or written, or the run worker has stopped, "
        "cannot write to the store or has runs whose final status is not yet written."
    )
    version: str
    database: dict[str, Any] = Field(
        description="dialect; ok: a read succeeded; writable: a write (rolled back) succeeded; error: why "
        "not, in one line (null when both succeeded)."
    )
    worker: dict[str, Any] | None = Field(description="The run worker of this process; null when disabled.")
    auth: dict[str, Any] = Field(description="Whether a token is configured and reads need one.")


def _cache(request: Request) -> ProbeCache:
    state = request.app.state
    cache: ProbeCache | None = getattr(state, "store_probe", None)
    if cache is None:
        cache = state.store_probe = ProbeCache()
    return cache


@router.get("/health", response_model=Health, summary="Service health")
def health(request: Request, store: StoreDep, settings: SettingsDep, worker: WorkerDep) -> Health:
    db = store_health(store, _cache(request))
    ok = db["ok"] and db["writable"] and (worker is None or worker.healthy)
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
