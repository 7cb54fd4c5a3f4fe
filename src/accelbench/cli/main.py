"""Entry point of the ``accelbench`` console script.

Each command group lives in its own module with a ``register(app)`` function. The root group loads a module
only when one of its commands runs (``COMMANDS`` says which module holds which command), so
``accelbench estimate`` does not pay for importing the store, alembic and the benchmark engine.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import typer
from typer._click.exceptions import BadParameter, UsageError
from typer.core import TyperCommand, TyperGroup

import accelbench
from accelbench.errors import AccelbenchError, plain_words
from accelbench.redact import install_log_redaction
from accelbench.registry import suggestion


def _rich_help_on_first_use() -> None:
    """typer formats help and errors with ``typer.rich_utils``, which imports rich's markdown, syntax highlighting
    and tracebacks (about a tenth of ``runs list``'s start-up). Load it when help or an error is first printed,
    not with every command: importlib's ``LazyLoader`` runs the module on its first attribute read, and keeps
    what was set on it before (``install_help_fit``'s functions)."""
    name = "typer.rich_utils"
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    typer.rich_utils = module  # what `from typer import rich_utils` finds
    spec.loader.exec_module(module)


_rich_help_on_first_use()  # before render is imported: it names typer.rich_utils at its top

from accelbench.cli.render import install_help_fit  # noqa: E402  (after the lazy typer.rich_utils above)

# Top-level command -> module under accelbench.cli that registers it. Order is the order in --help.
COMMANDS: dict[str, str] = {
    "demo": "run",
    "bench": "bench",
    "sweep": "sweep",
    "sweep-plot": "sweep",
    "capacity": "capacity",
    "fleet": "fleet",
    "run": "run",
    "rerun": "run",
    "runs": "runs",
    "compare": "compare",
    "report": "compare",
    "import": "compare",
    "recommend": "plan",
    "estimate": "plan",
    "memory-breakdown": "plan",
    "plan": "plan",
    "catalog": "catalog",
    "machine": "machine",
    "export": "deploy",
    "loadgen": "deploy",
    "engine": "engine",
    "model": "model",
    "config": "config",
    "serve": "serve",
    "apikey": "apikey",
}

# Top-level command -> its one-line summary in `accelbench --help` (None: hidden). They live here so that the
# root --help imports no command module; tests/unit/cli/test_main.py checks they match the commands.
SUMMARIES: dict[str, str | None] = {
    "demo": "The main job: vLLM on this CPU, swept and reported.",
    "bench": "Benchmark one OpenAI-compatible streaming server.",
    "sweep": "Measure a server over input lengths x concurrency.",
    "sweep-plot": "Plot and tabulate stored sweeps on shared axes.",
    "capacity": "The most load a server takes while meeting an SLO.",
    "fleet": "Size, price and rank fleets for a day of traffic.",
    "run": "Deploy a spec, measure, store, report, tear down.",
    "rerun": "Repeat a stored run from its recorded spec.",
    "runs": "List, show, export and delete stored runs.",
    "compare": "Compare runs with a baseline: cells, ratios, cost.",
    "report": "Write an offline HTML and Markdown report with its charts.",
    "import": "Bring results measured elsewhere into the store.",
    "recommend": "Whether a model fits an instance, with which settings.",
    "estimate": "Predicted TTFT, TPOT, tokens/s and cost per instance.",
    "memory-breakdown": "Where accelerator memory goes (GPU and Neuron).",
    "plan": "Planning: calibrate the speed model from measured runs.",
    "catalog": "Instance types, accelerator specs and prices.",
    "machine": "This machine, as the planner sees it.",
    "export": "Write the Kubernetes manifests of a benchmark run.",
    "loadgen": None,
    "engine": "Install, list and remove serving engines.",
    "model": "Prepare and list models for the local engines.",
    "config": "Configuration: tool versions and their audit log.",
    "serve": "Serve the REST API, the web pages and the run worker.",
    "apikey": "API keys for the service: create, list, revoke.",
}


@contextmanager
def _plain_flag_errors() -> Iterator[None]:
    """typer checks a flag's value with pydantic and says it in pydantic's words ("Input should be greater than
    or equal to 1"); say it in the words of ``errors.plain_words`` instead, before typer prints the error."""
    try:
        yield
    except BadParameter as exc:
        errors = getattr(exc.__cause__, "errors", None)
        if errors is not None:
            exc.message = "; ".join(plain_words(e) for e in errors()) + "."
        raise


# Typer vendors its own click; its classes are private, so the overrides below are typed loosely.
@cache
def module_commands(module: str) -> dict[str, Any]:
    """The click commands one CLI module registers (imports it)."""
    sub = typer.Typer()
    importlib.import_module(f"accelbench.cli.{module}").register(sub)
    return dict(typer.main.get_group(sub).commands)


class LazyGroup(TyperGroup):
    """The root group: commands are looked up in ``COMMANDS`` and imported on first use; its own --help lists
    them by their summaries without importing any."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        if self._listing:
            summary = SUMMARIES.get(cmd_name)
            return TyperCommand(cmd_name, help=summary, short_help=summary, hidden=summary is None)
        return module_commands(module).get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with _plain_flag_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with _plain_flag_errors():  # every command's flags are parsed, and its body run, in here
            return super().invoke(ctx)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """An unknown command names the closest ones (the commands are not loaded, so typer cannot)."""
        try:
            return super().resolve_command(ctx, args)
        except UsageError as exc:
            if args and "Did you mean" not in exc.message:
                hint = suggestion(args[0], COMMANDS)
                if hint:
                    exc.message = exc.message.rstrip(".") + "." + hint
            raise


install_help_fit()  # flag names stay whole in --help at any width (cli/render.py)

app = typer.Typer(
    name="accelbench",
    cls=LazyGroup,
    help="Choose, deploy, measure and compare hardware for serving large language models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"accelbench {accelbench.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """accelbench: plan, deploy, measure and compare LLM serving on GPU, Neuron and CPU."""
    install_log_redaction()  # a URL's password never reaches a log line


def main(argv: list[str] | None = None) -> Any:
    try:
        return app(args=argv)
    except Exception as exc:  # safety net; commands use cli.common.user_errors
        # start-up time: pydantic and the modules that use it load only when a command failed this way
        from pydantic import ValidationError

        from accelbench.cli.common import fail
        from accelbench.cli.input_errors import flag_error

        if isinstance(exc, ValidationError):
            exc = flag_error(exc)
        if not isinstance(exc, AccelbenchError):
            raise
        try:
            fail(exc.message, exc.hint, exc.exit_code)
        except typer.Exit as e:
            sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
