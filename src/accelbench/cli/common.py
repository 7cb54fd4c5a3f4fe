"""Helpers every command shares: output format, JSON printing, error reporting, the rich console.

Conventions:
- every command that reports takes ``--format table|json``; JSON goes to stdout and nothing else is mixed in
  (progress and messages go to stderr through ``err_console``);
- a user error (``AccelbenchError``) is printed without a traceback and the exit code is non-zero.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any, NoReturn, TypeVar, get_type_hints

import typer
from pydantic import BaseModel, ValidationError
from rich.table import Table

from accelbench.cli.input_errors import current_params, flag_error
from accelbench.cli.render import Col, console, err_console, fit_table
from accelbench.errors import AccelbenchError

__all__ = ["console", "err_console"]

T = TypeVar("T")


class OutputFormat(enum.StrEnum):
    table = "table"
    json = "json"


FormatOption = typer.Option(
    OutputFormat.table, "--format", "-f", help="table (human) or json (machine, stdout only)."
)

#: ``--yes`` of every command that deletes something after asking
YesOption = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")


def to_jsonable(data: Any) -> Any:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, dict):
        return {str(k): to_jsonable(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [to_jsonable(v) for v in data]
    if isinstance(data, enum.Enum):
        return data.value
    return data


def print_json(data: Any) -> None:
    """Write ``data`` as JSON to stdout, bypassing rich so nothing but JSON is printed."""
    sys.stdout.write(json.dumps(to_jsonable(data), indent=2, default=str, allow_nan=False))
    sys.stdout.write("\n")
    sys.stdout.flush()


def emit(data: Any, fmt: OutputFormat, render_table: Callable[[], None]) -> None:
    """Print ``data`` as JSON, or call ``render_table`` for the human form."""
    if fmt == OutputFormat.json:
        print_json(data)
    else:
        render_table()


def simple_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A table of text that fits the console (`cli/render.py`): every column is kept, numbers stay whole, text
    folds. Where some columns matter less, use ``render.print_table`` with priorities instead."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    cols = [Col(c, priority=0, num=_numeric(cells, i)) for i, c in enumerate(columns)]
    return fit_table(cols, cells, title=title)[0]


def _numeric(rows: Sequence[Sequence[str]], i: int) -> bool:
    values = [r[i] for r in rows if i < len(r) and r[i] not in ("", "-")]
    return bool(values) and all(
        v.replace(",", "").replace(".", "").replace("%", "").lstrip("+-$").isdigit() for v in values
    )


def fail(message: str, hint: str | None = None, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]Error:[/] {message}", highlight=False)
    if hint:
        err_console.print(hint, highlight=False)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn AccelbenchError into a clean message and a non-zero exit, and a model's validation error into
    plain words naming the flags (``cli/input_errors.py``, exit 2)."""
    try:
        yield
    except AccelbenchError as exc:
        fail(exc.message, exc.hint, exc.exit_code)
    except ValidationError as exc:
        err = flag_error(exc, params=current_params())
        fail(err.message, err.hint, err.exit_code)


def parse_kv_list(values: Sequence[str] | None, sep: str, what: str) -> dict[str, str]:
    """Parse ``["K:V", ...]`` (or with another separator) into a dict, with a clear error."""
    out: dict[str, str] = {}
    for item in values or []:
        if sep not in item:
            raise AccelbenchError(f"Bad {what} {item!r}: expected KEY{sep}VALUE.")
        k, v = item.split(sep, 1)
        if not k.strip():
            raise AccelbenchError(f"Bad {what} {item!r}: the key is empty.")
        out[k.strip()] = v.strip()
    return out


@contextmanager
def graceful_interrupt(cancel: threading.Event, message: str) -> Iterator[None]:
    """First Ctrl-C sets ``cancel`` (stop sending, keep what finished) and prints ``message``; the second one
    raises KeyboardInterrupt at once. Outside the main thread (tests, the API) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: FrameType | None) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        err_console.print(f"[yellow]{message}[/]", highlight=False)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def options_command(options: type[T], run: Callable[[T], None]) -> Callable[..., None]:
    """A typer command whose flags are the fields of the dataclass ``options`` (each field ``Annotated`` with its
    ``typer.Option`` or ``typer.Argument``, or with one as its default), calling ``run`` with one filled-in ``options``: a command with
    many flags keeps them in one model instead of one parameter each. Its help is ``run``'s docstring."""
    hints = get_type_hints(options, include_extras=True)  # the Annotated[..., typer.Option(...)] kept
    fields = dataclasses.fields(options)  # type: ignore[arg-type]
    params = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=hints[f.name],
        )
        for f in fields
    ]

    def command(**values: Any) -> None:
        run(options(**values))

    command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    command.__annotations__ = {**{f.name: hints[f.name] for f in fields}, "return": None}
    command.__name__ = command.__qualname__ = run.__name__
    command.__doc__ = run.__doc__
    command.__module__ = run.__module__
    return command
