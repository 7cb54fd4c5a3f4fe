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


def test_every_command_has_a_one_line_summary_in_the_root_help() -> None:
    from accelbench.cli.main import SUMMARIES

    assert list(SUMMARIES) == list(COMMANDS)
    for name, summary in SUMMARIES.items():
        cmd = module_commands(COMMANDS[name])[name]
        if summary is None:
            assert cmd.hidden, f"{name} is listed as hidden but is not"
            continue
        assert not cmd.hidden, name
        assert "\n" not in summary and len(summary) <= 75 and summary.endswith("."), (name, summary)


def test_the_root_help_imports_no_command_module() -> None:
    """`accelbench --help` lists the commands from their summaries: no command module, store or engine code is
    imported for it (that is what made every invocation of --help slow)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom accelbench.cli.main import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith(('accelbench.cli.', 'accelbench.store', "
        "'accelbench.bench.', 'accelbench.report.tables', 'accelbench.plan')) and m not in "
        "('accelbench.cli.main', 'accelbench.cli.render')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "Commands" in out
    assert "LOADED []" in out, out.splitlines()[-1]
