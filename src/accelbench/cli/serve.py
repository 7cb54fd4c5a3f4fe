"""CLI commands: ``accelbench serve`` (the REST API, the web pages and the run worker) and
``accelbench apikey create|list|revoke`` (API keys, stored as salted scrypt hashes; shown once)."""

from __future__ import annotations

import logging
from typing import Any

import typer

from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    console,
    emit,
    err_console,
    print_json,
    simple_table,
    user_errors,
)

apikey_app = typer.Typer(
    help="API keys for the service: create (shown once), list, revoke.", no_args_is_help=True
)


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind; 0.0.0.0 serves other machines."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="TCP port."),
    worker: bool = typer.Option(
        True, "--worker/--no-worker", help="Run queued runs in this process (one worker per SQLite store)."
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Serve the REST API (/api/v1, OpenAPI at /docs), the web pages and the background run worker."""
    import uvicorn

    from accelbench.server.app import create_app
    from accelbench.settings import get_settings

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from accelbench.redact import RedactingFilter

    for handler in logging.getLogger().handlers:  # httpx logs every request's URL; secrets never reach a log
        handler.addFilter(RedactingFilter())
    with user_errors():
        settings = get_settings()
        from accelbench.deploy.target_policy import enforce, note_listening, service_policy

        note_listening(host, port)  # the service never reaches itself
        enforce(service_policy())  # before the worker below can take a run
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
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact"] = {"()": "accelbench.redact.RedactingFilter"}
    config["handlers"]["access"]["filters"] = ["redact"]
    config["handlers"]["default"]["filters"] = ["redact"]
    return config


@apikey_app.command("create")
def apikey_create(
    name: str = typer.Argument(..., help="A name for the key, e.g. ci or alice."),
    role: str = typer.Option(
        "user",
        "--role",
        help="admin (every run, the configuration), user (queue runs; cancel and delete its own) or "
        "read-only (read).",
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Create a key with a role. It is printed once; only its hash is stored."""
    from accelbench.api.auth import create_api_key, key_prefix
    from accelbench.store import get_store

    with user_errors():
        key = create_api_key(get_store(), name, role=role)
    if fmt == OutputFormat.json:
        print_json({"name": name.strip(), "prefix": key_prefix(key), "role": role, "key": key})
        return
    typer.echo(key)
    err_console.print(
        f"API key {name.strip()!r} ({role}) created. Copy it now: it is not stored and cannot be shown again. "
        "Send it as `Authorization: Bearer <key>`."
    )


@apikey_app.command("list")
def apikey_list(fmt: OutputFormat = FormatOption) -> None:
    """List keys (names and prefixes; the keys themselves are never stored)."""
    from accelbench.store import get_store

    with user_errors():
        keys = get_store().list_api_keys()
    emit(
        keys,
        fmt,
        lambda: console.print(
            simple_table(
                "API keys",
                ["Name", "Role", "Prefix", "Created", "Last used", "Revoked"],
                [[k["name"], k["role"], k["prefix"], k["created_at"], k["last_used_at"] or "never",
                  "yes" if k["revoked"] else ""]
                 for k in keys],
            )
        ),
    )  # fmt: skip


@apikey_app.command("revoke")
def apikey_revoke(name: str = typer.Argument(..., help="The key's name.")) -> None:
    """Revoke a key: requests with it are refused from now on."""
    from accelbench.store import get_store

    with user_errors():
        get_store().revoke_api_key(name)
    err_console.print(f"API key {name!r} revoked.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("serve")(serve)
    app.add_typer(apikey_app, name="apikey")
