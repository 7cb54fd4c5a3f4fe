"""The root command table: every command a module registers is reachable, and nothing else is listed."""

from __future__ import annotations

import importlib
import pkgutil

import typer
from typer.testing import CliRunner

import accelbench.cli as cli_pkg
from accelbench.cli.main import COMMANDS, app, module_commands


def test_command_table_matches_what_modules_register() -> None:
    registered: dict[str, str] = {}
    for info in pkgutil.iter_modules(cli_pkg.__path__):
        module = importlib.import_module(f"accelbench.cli.{info.name}")
        if not hasattr(module, "register"):
            continue
        for name in module_commands(info.name):
            registered[name] = info.name
    assert registered == COMMANDS


def test_help_lists_visible_commands_and_unknown_command_fails() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in ("demo", "bench", "sweep", "estimate", "serve"):
        assert name in result.output
    assert "loadgen" not in result.output  # hidden: what the in-cluster Job runs
    bad = runner.invoke(app, ["benhc"])
    assert bad.exit_code != 0
    assert isinstance(app, typer.Typer)
