"""Options made from model fields (``cli/load_flags.py``: ``command``, ``Group``, ``Flag``): a field with a flag
is an option with the field's type, default, help, range and env var, and the command's body receives what
was given, parsed, as the fields' values."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from accelbench.cli.load_flags import Given, Group, command, flag
from accelbench.errors import UserInputError

runner = CliRunner()


class Knobs(BaseModel):
    size: int = Field(default=4, ge=1, le=64, description="How many at once.")
    name: str | None = Field(default=None, description="What to call it.")
    loud: bool = Field(default=False, description="Say more.")
    levels: list[int] = Field(default_factory=lambda: [1, 2], description="Levels.")


def _levels(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise UserInputError(f"--levels {text!r}: whole numbers, comma-separated.") from None


FLAGS = {
    "size": flag("--size", "-s", envvar="KNOBS_SIZE"),
    "name": flag("--name"),
    "loud": flag("--loud/--quiet"),
    "levels": flag("--levels", typed=str, help="Levels, e.g. 1,2.", parse=_levels),
}


def _app(*groups: Group) -> tuple[typer.Typer, list[Given]]:
    seen: list[Given] = []
    app = typer.Typer()

    @command(*groups)
    def knobs(given: Given) -> None:
        """Turn the knobs."""
        seen.append(given)

    app.command()(knobs)
    app.command("other")(lambda: None)  # two commands, so the first is named
    return app, seen


def _option(app: typer.Typer, name: str) -> Any:
    cmd = typer.main.get_command(app).get_command(None, "knobs")  # type: ignore[attr-defined]
    return next(p for p in cmd.params if p.name == name)


def test_a_field_is_an_option_with_its_type_default_help_range_and_env_var() -> None:
    app, seen = _app(Group("knobs", Knobs, FLAGS))
    size = _option(app, "size")
    assert (size.opts, size.default, size.help, size.envvar) == (
        ["--size", "-s"],
        4,
        "How many at once.",
        "KNOBS_SIZE",
    )
    assert (size.min, size.max) == (1, 64)
    assert _option(app, "loud").secondary_opts == ["--quiet"]
    res = runner.invoke(app, ["knobs", "--size", "65"])
    assert res.exit_code == 2 and not seen  # out of the field's range: refused before the body runs


def test_the_body_receives_what_was_given_parsed() -> None:
    app, seen = _app(Group("knobs", Knobs, FLAGS))
    res = runner.invoke(app, ["knobs", "--levels", "3,5", "--loud"], env={"KNOBS_SIZE": "8"})
    assert res.exit_code == 0, res.output
    (given,) = seen
    assert given.fields("knobs") == {"size": 8, "loud": True, "levels": [3, 5]}  # None (name) left out
    assert given.model("knobs", Knobs) == Knobs(size=8, loud=True, levels=[3, 5])


def test_an_unset_group_leaves_every_value_to_a_later_source_and_shows_the_default() -> None:
    app, seen = _app(Group("knobs", Knobs, FLAGS, unset=True))
    assert _option(app, "size").default is None
    assert _option(app, "size").show_default == "4"
    assert _option(app, "loud").show_default == "--quiet"  # a flag pair's default is the flag in force
    assert runner.invoke(app, ["knobs"]).exit_code == 0
    assert seen[0].fields("knobs") == {}


def test_a_field_shown_by_two_groups_is_refused() -> None:
    with pytest.raises(ValueError, match="size"):
        command(Group("a", Knobs, {"size": FLAGS["size"]}), Group("b", Knobs, {"size": FLAGS["size"]}))
