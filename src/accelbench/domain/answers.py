"""What accelbench reads from a server or a file it did not write, as models, and the one way to read it.

A server's ``/tokenize``, ``/detokenize`` and ``/v1/models`` answers and every imported file are validated by a
model here; a bad one is a one-line :class:`MalformedAnswer` naming the URL or file, the field and what was
expected (never a traceback, never the body itself: it may be large or hostile). URLs are redacted before they
are named.
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from accelbench.errors import UserInputError
from accelbench.redact import redact_url

T = TypeVar("T", bound=BaseModel)


class MalformedAnswer(UserInputError):
    """A server's answer or an imported file that is not what it should be. The CLI exits 2 (bad input)."""

    exit_code = 2


class _Answer(BaseModel):
    """Fields accelbench reads; anything else a server sends is ignored."""

    model_config = ConfigDict(extra="ignore")


class TokenizeAnswer(_Answer):
    """vLLM's ``POST /tokenize``."""

    tokens: list[StrictInt] = Field(description="Token ids of the prompt or messages.")


class DetokenizeAnswer(_Answer):
    """vLLM's ``POST /detokenize``."""

    prompt: str = Field(description="The text of the token ids.")


class ServedModel(_Answer):
    """One entry of ``GET /v1/models``."""

    id: str = Field(min_length=1, description="The name requests use.")
    root: str | None = Field(default=None, description="vLLM: where the model was loaded from.")
    owned_by: str | None = Field(default=None, description="vllm, sglang, llamacpp ...")


class ModelsAnswer(_Answer):
    """``GET /v1/models``: the served models, at least one."""

    data: list[ServedModel] = Field(min_length=1, description="The served models.")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    field = ".".join(str(p) for p in err["loc"]) or "the document"
    got = "" if err["type"] == "missing" else f", got {_kind(err.get('input'))}"
    return f"field '{field}': {err['msg'].lower()}{got}"


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is out of range for a number")
    return value


def decode_text(data: bytes | str, source: str) -> str:
    """``data`` as UTF-8 text, or MalformedAnswer naming ``source`` and the first bad byte."""
    try:
        return data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise MalformedAnswer(
            f"{redact_url(source)} is not UTF-8 text (byte {exc.start}); expected JSON.",
            hint="Check that it is the file or server you meant.",
        ) from None


def load_json(data: bytes | str, source: str) -> Any:
    """``data`` parsed as strict JSON (no NaN/Infinity, no number out of range), or MalformedAnswer naming
    ``source``."""
    where = redact_url(source)
    text = decode_text(data, source)
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
    except (ValueError, RecursionError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise MalformedAnswer(
            f"{where} is not valid JSON ({why}).", hint="Check that it is the file or server you meant."
        ) from None


def validate_answer(model: type[T], value: Any, source: str, *, what: str = "answer from") -> T:
    """``value`` as ``model``, or MalformedAnswer naming ``source``, the field and what was expected."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise MalformedAnswer(
            f"Malformed {what} {redact_url(source)}: {_first_error(exc)}.",
            hint="Check that it is the server or file you meant (an OpenAI-compatible server such as vLLM).",
        ) from None


def parse_answer(model: type[T], data: bytes | str, source: str, *, what: str = "answer from") -> T:
    """JSON text from ``source`` (a URL or a file) read as ``model``: the one way a foreign answer is read."""
    return validate_answer(model, load_json(data, source), source, what=what)
