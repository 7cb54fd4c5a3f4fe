"""The flags the measure commands (``bench``, ``sweep``, ``capacity``) share besides the load: the server they
point at and how they print, each a field of a small model here with its flag beside it (the load's flags are
``cli/load_flags.py``'s, from ``LoadSettings``)."""

from __future__ import annotations

import typer
from pydantic import BaseModel, Field

from accelbench.cli.common import OutputFormat
from accelbench.cli.load_flags import Flag, Group, flag
from accelbench.errors import UserInputError
from accelbench.services.endpoints import ServerTarget, check_base_url


def base_url_option(value: str | None) -> str | None:
    """``--base-url`` checked before anything connects (a bad one is a usage error, exit 2)."""
    if value is not None:
        try:
            check_base_url(value)
        except UserInputError as exc:
            raise typer.BadParameter(exc.message) from None
    return value


def parse_headers(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        if ":" not in item:
            raise UserInputError(f"Bad --header {item!r}.", hint="Use --header NAME:VALUE.")
        k, v = item.split(":", 1)
        if not k.strip():
            raise UserInputError(f"Bad --header {item!r}: the name is empty.")
        out[k.strip()] = v.strip()
    return out


class ServerFlags(BaseModel):
    """The server ``bench``, ``sweep`` and ``capacity`` measure, as typed."""

    base_url: str = Field(description="Server root, e.g. http://127.0.0.1:8000.")
    model: str | None = Field(default=None, description="Served model name.")
    tokenizer: str | None = Field(default=None, description="Local tokenizer directory.")
    api_key: str | None = Field(default=None, description="Bearer token for the server.")
    header: list[str] = Field(default_factory=list, description="Extra HTTP header NAME:VALUE (repeatable).")

    def target(self) -> ServerTarget:
        """The server as the measure use cases take it, its ``--header`` items parsed."""
        return ServerTarget(
            base_url=self.base_url,
            served_model=self.model,
            tokenizer=self.tokenizer,
            api_key=self.api_key,
            headers=parse_headers(self.header),
        )


SERVER_FLAGS: dict[str, Flag] = {
    "base_url": flag("--base-url", envvar="ACCELBENCH_BASE_URL", callback=base_url_option),
    "model": flag("--model", show_default="the first one /v1/models lists"),
    "tokenizer": flag("--tokenizer", show_default="the server's /tokenize"),
    "api_key": flag("--api-key", envvar="OPENAI_API_KEY"),
    "header": flag("--header", "-H"),
}


class FormatFlags(BaseModel):
    """How a command prints its answer."""

    fmt: OutputFormat = Field(
        default=OutputFormat.table, description="table (human) or json (machine, stdout only)."
    )


FORMAT_FLAGS: dict[str, Flag] = {"fmt": flag("--format", "-f")}

#: the server ``bench`` and ``capacity`` measure, as one group of flags
SERVER_GROUP = Group("server", ServerFlags, SERVER_FLAGS)

#: ``--format`` as every command built from groups takes it, its default shown
FORMAT_GROUP = Group("format", FormatFlags, FORMAT_FLAGS, show_defaults=True)
