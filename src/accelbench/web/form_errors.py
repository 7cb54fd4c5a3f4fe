"""Form errors in plain words, next to the field they concern, for every page with a form.

A page hands what the user typed to the same pydantic model the CLI and the API use; when that model refuses,
``field_errors`` turns pydantic's errors into one sentence per form field ("Concurrency must be at least 1"),
never pydantic's own wording ("Input should be greater than or equal to 1"), and the page renders the form
again with those sentences beside the fields and the typed values kept (``templates/_form.html``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from accelbench.errors import PLAIN_WORDS, AccelbenchError

#: a pydantic error's ``type`` -> the sentence after the field's label; ``{...}`` is filled from its context. The
#: CLI's words (``errors.PLAIN_WORDS``), with a form's own where a form reads differently
_PLAIN: dict[str, str] = {
    **PLAIN_WORDS,
    "bool_parsing": "must be yes or no",
    "string_too_short": "is required",
    "string_too_long": "must be at most {max_length} characters",
    "enum": "must be one of {expected}",
    "literal_error": "must be one of {expected}",
}


def _number(value: Any) -> str:
    """1.0 -> "1", 0.5 -> "0.5", 100000 -> "100,000"."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def plain_message(error: Mapping[str, Any], label: str) -> str:
    """One pydantic error as a sentence that starts with the field's label, e.g. "Concurrency must be at
    least 1"; a model's own refusal (a ``value_error``) keeps its words, without pydantic's "Value error, "."""
    kind = str(error.get("type", ""))
    ctx = {k: _number(v) for k, v in (error.get("ctx") or {}).items()}
    if "expected" in ctx:
        ctx["expected"] = ctx["expected"].replace("'", "")
    template = _PLAIN.get(kind)
    if template is not None:
        try:
            sentence = template.format(**ctx)
        except KeyError:
            sentence = None
        if sentence is not None:
            typed = error.get("input")
            shown = (
                f" (you typed {typed!r})"
                if kind.endswith(("_parsing", "_type", "enum", "literal_error"))
                and isinstance(typed, str)
                and 0 < len(typed) <= 40
                else ""
            )
            return f"{label} {sentence}{shown}."
    msg = str(error.get("msg") or "is not valid")
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    msg = msg.rstrip(".")
    return f"{label}: {msg}."


def field_errors(
    exc: ValidationError, labels: Mapping[str, str], fields: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``{form field name: sentence}`` for a model's refusal. ``labels`` names each form field as the form
    shows it; ``fields`` maps a model field to the form field that holds it where their names differ
    (``interval_s`` -> ``interval``). An error on no field of the form (a check across fields, a value only the
    address carries) is kept under ``""``, for the form as a whole, named by the model field's own name. The first problem of each field is the one said."""
    out: dict[str, str] = {}
    rename = fields or {}
    for error in exc.errors():
        loc = error.get("loc") or ()
        name = str(loc[0]) if loc else ""
        name = rename.get(name, name)
        key = name if name in labels else ""
        label = labels.get(key) or (name.replace("_", " ").capitalize() if name else "This request")
        out.setdefault(key, plain_message(error, label))
    return out


def refusal_text(exc: AccelbenchError) -> str:
    """A refusal a form field earned (a file outside the data roots, a percentile not stored), with its hint."""
    return f"{exc.message} {exc.hint}" if exc.hint else exc.message
