"""Typed errors a user can cause. Each carries a message that says what to change.

The CLI prints them without a traceback and exits non-zero; the API maps ``status_code`` to the HTTP status.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


class AccelbenchError(Exception):
    """Base of every error a user can cause or fix."""

    status_code = 400
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n{self.hint}" if self.hint else self.message


class UserInputError(AccelbenchError):
    """Bad input: a flag, a spec file, an API body. The CLI exits 2, as it does for a flag it cannot parse."""

    exit_code = 2


class ServerUnreachable(UserInputError):
    """The server could not be reached (connection refused or timed out, no such host). The input may be right
    and the server down, so the CLI exits 1, not 2."""

    exit_code = 1

    @classmethod
    def at(cls, shown: str, exc: Exception) -> ServerUnreachable:
        """The error for a server that refused or timed out the connection; ``shown`` is its URL as a message
        may name it (redacted)."""
        return cls(
            f"Cannot reach the server at {shown} ({exc or type(exc).__name__}).",
            hint="Is it running, and are --base-url and the port right?",
        )


class Declined(AccelbenchError):
    """The person answered no (or nothing) when asked to confirm: nothing was wrong with the input (exit 1)."""


class NotFoundError(AccelbenchError):
    """A named thing (run, model, instance type, engine) does not exist: bad input too (exit 2)."""

    status_code = 404
    exit_code = 2


class ConflictError(AccelbenchError):
    """The request contradicts the current state (e.g. cancelling a finished run)."""

    status_code = 409


class ClaimLost(ConflictError):
    """A write by a run's executor whose claim on the run is gone: another executor claimed it, or the run was
    taken from it as interrupted. The write is refused so that one run never holds two executors' cells."""


class PayloadTooLarge(UserInputError):
    """A request body larger than the API accepts."""

    status_code = 413


class GuardError(UserInputError):
    """A deployment setting that cannot work on the chosen accelerator tier. ``misfit``: the planner's refusal
    (the model cannot be served on the instance as asked), which ``export --force`` may override."""

    def __init__(self, message: str, *, hint: str | None = None, misfit: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.misfit = misfit


class EngineError(AccelbenchError):
    """An engine failed to install, start or keep running."""

    status_code = 502


class AuthError(AccelbenchError):
    status_code = 401


class ForbiddenError(AccelbenchError):
    """A known caller asked for something its key's role or ownership does not allow."""

    status_code = 403


class TooManyAttempts(AccelbenchError):
    """Too many refused credentials from one client in a short time; ``retry_after_s`` says when to retry."""

    status_code = 429

    def __init__(self, message: str, *, hint: str | None = None, retry_after_s: int = 60) -> None:
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s


class StoreError(AccelbenchError):
    """The results store cannot be opened or used: damaged, empty, written by a newer accelbench, unreachable."""

    status_code = 503


#: pydantic error type -> the sentence after the flag or field ({...} filled from the error's context); the pages
#: use it too (``web/form_errors.py``), with a few words of their own for a form
PLAIN_WORDS = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "int_type": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "string_too_short": "must have at least {min_length} characters",
    "string_too_long": "must have at most {max_length} characters",
    "too_short": "must have at least {min_length} items",
    "too_long": "must have at most {max_length} items",
    "missing": "is required",
    "extra_forbidden": "is not a setting here; check its spelling",
}


def plain_words(err: Mapping[str, Any], *, with_input: bool = True) -> str:
    """One pydantic validation problem (an item of ``ValidationError.errors()``) as a phrase without its field:
    "must be cost or latency (got 'fast')", "unknown quantization 'fp4'; use one of: ..." (a validator's own
    message, its "Value error, " dropped). ``with_input``: end with the value given when it is short."""
    kind = str(err.get("type", ""))
    ctx = err.get("ctx") or {}
    if kind in ("literal_error", "enum") and "expected" in ctx:
        text = "must be " + str(ctx["expected"]).replace("'", "")
    elif kind in PLAIN_WORDS:
        try:
            text = PLAIN_WORDS[kind].format(**{k: _number(v) for k, v in ctx.items()})
        except (KeyError, IndexError):
            text = PLAIN_WORDS[kind].split(" {")[0]
    else:
        msg = str(err.get("msg", "is not valid"))
        msg = re.sub(r"^(Value|Assertion) error, ", "", msg)
        text = re.sub(r"^Input should be ", "must be ", msg).rstrip(".")
        if "(got " in text:
            return text
    value = err.get("input")
    if (
        with_input
        and kind not in ("missing", "extra_forbidden")
        and isinstance(value, str | int | float)
        and len(repr(value)) <= 60
    ):
        text += f" (got {_number(value)!r})"
    return text


def _number(value: Any) -> Any:
    """0.0 as 0: a bound or value typed as a whole number reads as one."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
