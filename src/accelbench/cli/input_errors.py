"""Bad input from the command line in plain words, named by the flag the user typed.

Every command's values end in a pydantic model (a flag's own type, ``EstimateQuery``, ``SweepSpec``,
``LoadSettings``, ...). Its errors are written for a programmer ("Value error, ...", "Input should be 'cost' or
'latency'", a field name such as ``instance_type``). ``flag_error`` turns them into one sentence per problem
that names the flag (``--goal must be cost or latency (got 'fast')``), as a ``UserInputError`` (exit 2).
One problem is worded by ``errors.plain_words`` (there so that spec files say it the same way). Used by
``cli/common.py`` (``user_errors``, around every command's body) and ``cli/main.py`` (the safety net, and the
hook that words typer's own flag checks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from typer._click.globals import get_current_context

from accelbench.errors import UserInputError, plain_words


def flag_error(
    exc: ValidationError, flags: Mapping[str, str] | None = None, params: Sequence[Any] = ()
) -> UserInputError:
    """The problems of ``exc`` named by flag: ``flags`` (field -> flag) first, then the command's ``params``
    (click parameters: by name, or by a flag spelled like the field), then ``--`` + the field."""
    lines = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        words = plain_words(err)
        if not loc:
            lines.append(words[:1].upper() + words[1:])
            continue
        flag = flag_for(loc[0], flags or {}, params)
        where = flag + "".join(f" (item {int(p) + 1})" if p.isdigit() else f".{p}" for p in loc[1:])
        lines.append(f"{where} {words}" if words.startswith(("must ", "is ")) else f"{where}: {words}")
    return UserInputError("; ".join(lines) + ".")


def flag_for(field: str, flags: Mapping[str, str], params: Sequence[Any]) -> str:
    """The flag a person types for a model field."""
    if field in flags:
        return flags[field]
    # start-up time: the load flags (and domain/load.py's models) load only when an error names a flag
    from accelbench.cli.load_flags import LOAD_FLAGS

    if field in LOAD_FLAGS:
        return LOAD_FLAGS[field][0].split("/")[0]
    stems = [field, field.removesuffix("_type"), field.removesuffix("_s"), field.removesuffix("_gib")]
    for param in params:
        longs = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
        if not longs:
            continue
        spelled = {o.removeprefix("--").replace("-", "_") for o in longs}
        if param.name in stems or spelled & set(stems):
            return longs[0]
    return "--" + field.replace("_", "-")


def current_params() -> list[Any]:
    """The parameters of the command being run (none outside one)."""
    ctx = get_current_context(silent=True)
    return list(ctx.command.params) if ctx is not None else []
