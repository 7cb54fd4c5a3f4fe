"""Entry point of the ``accelbench`` console script.

Each command group lives in its own module with a ``register(app)`` function, so adding a group is one new
module plus one line here.
"""

from __future__ import annotations

import importlib
import sys

import typer

from accelbench import __version__
from accelbench.errors import AccelbenchError

app = typer.Typer(
    name="accelbench",
    help="Choose, deploy, measure and compare hardware for serving large language models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Modules that register commands. Order decides the order in --help.
COMMAND_MODULES = [
    "accelbench.cli.bench",  # bench
    "accelbench.cli.sweep",  # sweep, sweep-plot
    "accelbench.cli.runs",  # runs list|show|delete
    "accelbench.cli.engine",  # engine install|list|remove
    "accelbench.cli.model",  # model prepare|list
    "accelbench.cli.run",  # run, rerun, demo
    "accelbench.cli.catalog",  # catalog list|show|refresh-prices
    "accelbench.cli.plan",  # recommend, estimate, memory-breakdown, plan calibrate
    "accelbench.cli.compare",  # compare, import, report
    "accelbench.cli.deploy",  # export
    "accelbench.cli.config",  # config tool-versions
    "accelbench.cli.serve",  # serve
]


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"accelbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """accelbench: plan, deploy, measure and compare LLM serving on GPU, Neuron and CPU."""


for _mod in COMMAND_MODULES:
    importlib.import_module(_mod).register(app)


def main() -> None:
    try:
        app()
    except AccelbenchError as exc:  # safety net; commands use cli.common.user_errors
        from accelbench.cli.common import fail

        try:
            fail(exc.message, exc.hint, exc.exit_code)
        except typer.Exit as e:
            sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
