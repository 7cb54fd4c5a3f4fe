"""The FastAPI application: the REST API under ``/api/v1``, the web pages, and the run worker's lifecycle.

``create_app`` is the only entry point (``accelbench serve`` and the tests call it). The worker starts with the
application and stops with it; ``start_worker=False`` (``serve --no-worker``) serves the API and pages only,
for a replica whose runs another process executes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import swagger_ui_bundle
from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from accelbench import __version__
from accelbench.api.auth import TokenVerifier
from accelbench.api.errors import install_error_handlers, reject_nul
from accelbench.api.responses import SafeJSONResponse
from accelbench.api.routers import catalog, compare, config, fleet, health, imports, models, plan, runs
from accelbench.redact import install_log_redaction
from accelbench.services.service_targets import apply_service_policy
from accelbench.services.session import Store, get_store
from accelbench.services.worker import RunWorker
from accelbench.settings import Settings, get_settings
from accelbench.web import fleet_page, import_page, pages

if TYPE_CHECKING:
    from accelbench.services.worker import Executor

log = logging.getLogger("accelbench.api")

API_PREFIX = "/api/v1"

DESCRIPTION = """
Plan, queue, measure and compare LLM serving on GPU, Neuron and CPU instances.

Everything here is also a CLI command. Mutating endpoints need `Authorization: Bearer <token>`
(`ACCELBENCH_API_TOKEN`, or a key from `accelbench apikey create NAME`); reads need one only when
`ACCELBENCH_API_READ_AUTH=true`. Errors are JSON: `{"error": {"message", "hint", "type"}}`.
"""


def create_app(
    settings: Settings | None = None,
    store: Store | None = None,
    start_worker: bool = True,
    *,
    executor: Executor | None = None,
) -> FastAPI:
    """Build the app. ``executor`` replaces the orchestrator's ``execute_run`` (for tests of the worker)."""
    install_log_redaction()  # the worker's httpx requests name URLs that may carry a password

    settings = settings or get_settings()
    store = store or get_store(settings.effective_database_url)
    worker = (
        RunWorker(store, executor=executor, max_runs=settings.worker_max_runs)
        if start_worker and settings.worker
        else None
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        apply_service_policy(True)  # the worker's endpoint targets check and pin the servers they reach
        if worker is not None:
            worker.start()
        try:
            yield
        finally:
            if worker is not None:
                worker.stop()
            apply_service_policy(False)

    app = FastAPI(
        title="accelbench",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        default_response_class=SafeJSONResponse,
        docs_url=None,  # served below with Swagger UI's files from the installed package, not a CDN
        redoc_url=None,
        openapi_url="/openapi.json",
        dependencies=[Depends(reject_nul)],
    )
    app.state.settings = settings
    app.state.store = store
    app.state.worker = worker
    app.state.verifier = TokenVerifier(settings, store)
    install_error_handlers(app, html=pages.html_error)

    for module in (health, catalog, models, plan, runs, compare, config, fleet, imports):
        app.include_router(module.router, prefix=API_PREFIX)
    pages.install(app)
    app.include_router(fleet_page.router)
    app.include_router(import_page.router)
    install_docs(app)
    install_openapi(app, reads_open=not settings.api_read_auth)
    return app


def install_openapi(app: FastAPI, *, reads_open: bool) -> None:
    """The schema says what the service does: with reads open (the default) a read needs no token, though a
    token that is sent is still checked, so reads list "no token" as well as the bearer token. The schema used
    to say every read needed one."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            if reads_open:
                for item in schema.get("paths", {}).values():
                    read = item.get("get")
                    if read is not None and read.get("security"):
                        read["security"] = [{}, *read["security"]]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def install_docs(app: FastAPI) -> None:
    """/docs: Swagger UI from the ``swagger-ui-bundle-v2`` package, so the API docs work offline too."""
    app.mount(
        "/vendor/swagger-ui", StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="swagger-ui"
    )

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="accelbench API",
            swagger_js_url="/vendor/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url="/vendor/swagger-ui/swagger-ui.css",
            swagger_favicon_url="/vendor/swagger-ui/favicon-32x32.png",
        )
