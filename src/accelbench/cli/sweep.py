"""CLI commands: sweep, sweep-plot (filled in by the issue that owns it)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
