"""Typed errors a user can cause. Each carries a message that says what to change.

The CLI prints them without a traceback and exits non-zero; the API maps ``status_code`` to the HTTP status.
"""

from __future__ import annotations


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
    """Bad input: a flag, a spec file, an API body."""


class NotFoundError(AccelbenchError):
    """A named thing (run, model, instance type, engine) does not exist."""

    status_code = 404


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
