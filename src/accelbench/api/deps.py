"""FastAPI dependencies shared by the routers: the settings, the store, the worker, pagination."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Query, Request

from accelbench.services.session import Store
from accelbench.settings import Settings

if TYPE_CHECKING:
    from accelbench.services.worker import RunWorker


def settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def store_dep(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def worker_dep(request: Request) -> RunWorker | None:
    worker: RunWorker | None = request.app.state.worker
    return worker


SettingsDep = Annotated[Settings, Depends(settings_dep)]
StoreDep = Annotated[Store, Depends(store_dep)]
WorkerDep = Annotated["RunWorker | None", Depends(worker_dep)]

MAX_PAGE = 500


@dataclass(frozen=True)
class Page:
    limit: int
    offset: int


def page_dep(
    limit: int = Query(50, ge=1, le=MAX_PAGE, description=f"Items per page (1-{MAX_PAGE})."),
    offset: int = Query(0, ge=0, le=10**9, description="Items to skip."),
) -> Page:
    return Page(limit=limit, offset=offset)


PageDep = Annotated[Page, Depends(page_dep)]
