"""CLI command: ``accelbench serve`` (the REST API, the web pages and the run worker); the API keys it checks
are made by ``accelbench apikey`` (cli/apikey.py)."""

from __future__ import annotations

import copy
import logging
from typing import Any

import typer
import uvicorn
from uvicorn.config import LOGGING_CONFIG

from accelbench.cli.common import err_console, user_errors
from accelbench.redact import RedactingFilter
from accelbench.server.app import create_app
from accelbench.services.service_targets import guard_service
from accelbench.settings import get_settings


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind; 0.0.0.0 serves other machines."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port."),
    worker: bool = typer.Option(
        True, "--worker/--no-worker", help="Run queued runs in this process (one worker per SQLite store)."
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Serve the REST API (/api/v1, OpenAPI at /docs), the web pages and the background run worker."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # httpx logs every request's URL; secrets never reach a log
        handler.addFilter(RedactingFilter())
    with user_errors():
        settings = get_settings()
        guard_service(host, port)  # the service never reaches itself; the policy holds before the worker runs
        app = create_app(settings, start_worker=worker)
        if not app.state.verifier.configured():
            reads = "reads work" if not settings.api_read_auth else "reads"
            err_console.print(
                f"[yellow]No API token is configured:[/] {reads}, queuing runs and other changes are refused "
                "until you set ACCELBENCH_API_TOKEN or create a key with "
                "`accelbench apikey create NAME --role admin`."
                + ("" if not settings.api_read_auth else " (ACCELBENCH_API_READ_AUTH=false opens reads.)")
            )
        if app.state.worker is not None:
            # Started here, before the server, so a second worker on one SQLite store fails with a clear
            # message instead of a start-up traceback; the app's lifespan then finds it running.
            app.state.worker.start()
    db = app.state.store.engine.url.render_as_string(hide_password=True)
    err_console.print(
        f"accelbench serving on http://{host}:{port}  (store: {db}; worker: {'on' if worker else 'off'})"
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower(), log_config=uvicorn_log_config())


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging set-up, with secrets masked in the access log's request targets."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact"] = {"()": "accelbench.redact.RedactingFilter"}
    config["handlers"]["access"]["filters"] = ["redact"]
    config["handlers"]["default"]["filters"] = ["redact"]
    return config


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("serve")(serve)
