"""CLI commands: ``accelbench config tool-versions [--set KEY=VALUE ...]``.

Prints every tool (engine runtimes and the load-generator image) with the version in effect and where it
comes from: ``env`` (an ``ACCELBENCH_TOOL_<KEY>`` variable, which wins), ``store`` (set here earlier) or
``default``; an image variable such as ``VLLM_CPU_IMAGE`` replacing a runtime's whole image is shown too.
``--set`` stores a version (an empty value keeps the current one) and each change is written to the audit
log, which is printed below the table.
"""

from __future__ import annotations

import getpass
import os

import typer

from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    console,
    err_console,
    print_json,
    simple_table,
    user_errors,
)
from accelbench.services.session import get_store
from accelbench.services.tool_versions import ToolVersionsRequest, update_tool_versions

config_app = typer.Typer(help="Configuration: tool versions and their audit log.", no_args_is_help=True)


def _actor() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user database entry (containers): still audit something
        return os.environ.get("USER", "unknown")


@config_app.command("tool-versions")
def tool_versions(
    set_: list[str] = typer.Option(
        None,
        "--set",
        help="KEY=VALUE, repeatable (e.g. vllm-cpu=0.32.0). An empty VALUE keeps the current one.",
    ),
    audit_limit: int = typer.Option(20, "--audit", min=0, help="Audit lines to show (newest first)."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Show (and with --set, change) the engine and load-generator versions deployments use."""
    with user_errors():
        store = get_store()
        request = ToolVersionsRequest(assignments=list(set_ or []), actor=_actor(), audit_limit=audit_limit)
        result = update_tool_versions(store, request)
    rows, changes, audit = result.rows, result.changes, result.audit
    by_key = {r.key: r for r in rows}
    shadowed = [c for c in changes if c["changed"] and by_key[c["key"]].source == "env"]
    if fmt == OutputFormat.json:
        print_json(
            {
                "tool_versions": [r.model_dump(mode="json") for r in rows],
                "changes": changes,
                "audit": audit,
            }
        )
    else:
        for c in changes:
            if not c["value"]:
                err_console.print(f"{c['key']}: empty value, kept {by_key[c['key']].stored or 'the default'}")
            elif c["changed"]:
                err_console.print(f"{c['key']}: set to {c['value']}")
            else:
                err_console.print(f"{c['key']}: already {c['value']}, nothing changed")
        console.print(
            simple_table(
                "Tool versions",
                ["key", "value", "source", "default", "override variable", "image override"],
                [
                    [
                        r.key,
                        r.value,
                        r.source,
                        r.default,
                        r.env_var + (" (set)" if r.source == "env" else ""),
                        f"{r.image_env_var}={r.image_override}" if r.image_override else "",
                    ]
                    for r in rows
                ],
            )
        )
        if audit:
            console.print(
                simple_table(
                    "Audit log (newest first)",
                    ["at", "key", "old", "new", "by", "via"],
                    [
                        [a["at"], a["key"], a["old_value"], a["new_value"], a["actor"], a["source"]]
                        for a in audit
                    ],
                )
            )
    for c in shadowed:
        err_console.print(
            f"[yellow]Note:[/] {c['key']} is stored, but {by_key[c['key']].env_var} in the environment wins."
        )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(config_app, name="config")
