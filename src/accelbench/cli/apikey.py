"""CLI commands: ``accelbench apikey create|list|revoke`` (API keys for the service, stored as salted scrypt
hashes; a key is shown once, when it is made)."""

from __future__ import annotations

import typer

from accelbench.api.auth import create_api_key, key_prefix
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
from accelbench.services.api_keys import list_api_keys, revoke_api_key
from accelbench.services.session import get_store

apikey_app = typer.Typer(
    help="API keys for the service: create (shown once), list, revoke.", no_args_is_help=True
)


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
    with user_errors():
        keys = list_api_keys(get_store())
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
    with user_errors():
        revoke_api_key(get_store(), name)
    err_console.print(f"API key {name!r} revoked.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(apikey_app, name="apikey")
