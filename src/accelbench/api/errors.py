"""Error responses of the API: every failure is JSON ``{"error": {"message", "hint", "type"}}``.

``AccelbenchError`` subclasses carry their own status code (400 bad input and guards, 401 auth, 404 unknown
names, 409 state conflicts, 502 engine failures). Request validation errors become 422 with a message that
names each bad field and what it should be, so a client never has to read a stack trace; anything else is
a 500 whose body says nothing internal (the traceback goes to the server log).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.exc import DataError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from accelbench.domain.limits import MAX_BODY_BYTES
from accelbench.errors import AccelbenchError, PayloadTooLarge, UserInputError
from accelbench.redact import is_secret_name

log = logging.getLogger("accelbench.api")


class ErrorDetail(BaseModel):
    """What went wrong and what to change."""

    message: str = Field(description="What went wrong, in words that say what to change.")
    hint: str | None = Field(default=None, description="A further suggestion, when there is one.")
    type: str = Field(description="Error class, e.g. UserInputError, GuardError, NotFoundError.")
    fields: list[dict[str, Any]] | None = Field(
        default=None, description="For validation errors: each bad field, its location and the problem."
    )


class ErrorBody(BaseModel):
    """The body of every error response."""

    error: ErrorDetail


HtmlErrorRenderer = Callable[[Request, int, str, str | None], Response]


def wants_html(request: Request) -> bool:
    """A browser asking for a page (not the API) gets an HTML error page instead of JSON."""
    path = request.url.path
    if path.startswith("/api/") or path in ("/docs", "/openapi.json"):
        return False
    return "text/html" in request.headers.get("accept", "")


def error_response(
    status: int,
    message: str,
    *,
    hint: str | None = None,
    type_: str = "Error",
    fields: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"message": message, "hint": hint, "type": type_}
    if fields is not None:
        body["fields"] = fields
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _loc(loc: Sequence[Any]) -> str:
    """``("query", "status", 0)`` -> "query parameter 'status' (value 1)"; body paths are dotted."""
    parts = [p for p in loc]
    where = {"query": "query parameter", "path": "path parameter", "header": "header", "body": "body"}
    if parts and parts[0] in where:
        kind = where[str(parts[0])]
        rest = parts[1:]
        if kind != "body" and rest and isinstance(rest[-1], int):
            return f"{kind} {'.'.join(str(p) for p in rest[:-1])!r} (value {rest[-1] + 1})"
        name = ".".join(str(p) for p in rest)
        return f"{kind} {name!r}" if name else kind
    return ".".join(str(p) for p in parts) or "input"


def is_secret_loc(loc: Sequence[Any]) -> bool:

    return any(isinstance(p, str) and is_secret_name(p) for p in loc)


def describe_validation_errors(errors: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
    """One readable sentence per problem, plus a machine-readable list (location, message, input)."""
    lines: list[str] = []
    fields: list[dict[str, Any]] = []
    for err in errors:
        loc = tuple(err.get("loc", ()))
        msg = str(err.get("msg", "invalid value"))
        kind = str(err.get("type", ""))
        where = _loc(loc)
        if kind == "extra_forbidden":
            text = f"{where}: unknown field; remove it or check its spelling"
        elif kind == "missing":
            text = f"{where}: required; add it"
        else:
            text = f"{where}: {msg}"
            value = err.get("input")
            # Echo only short scalars, never a whole object (it may hold a secret) nor a secret-named field.
            if (
                isinstance(value, str | int | float | bool)
                and kind != "json_invalid"
                and not is_secret_loc(loc)
            ):
                shown = repr(value)
                if len(shown) <= 80:
                    text += f" (got {shown})"
        lines.append(text)
        fields.append({"loc": [str(p) for p in loc], "message": msg, "type": kind})
    if not lines:
        return "The request is not valid.", fields
    return "Invalid request: " + "; ".join(lines) + ".", fields


async def _accelbench_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AccelbenchError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
    if (retry := getattr(exc, "retry_after_s", None)) is not None:
        headers = {"Retry-After": str(retry)}
    return error_response(
        exc.status_code, exc.message, hint=exc.hint, type_=type(exc).__name__, headers=headers
    )


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError | ValidationError)
    message, fields = describe_validation_errors(exc.errors())
    return error_response(
        422,
        message,
        hint="See the API schema at /docs for the accepted fields and values.",
        type_="ValidationError",
        fields=fields,
    )


def allowed_methods(request: Request) -> list[str]:
    """Every method the API answers on this path, from its OpenAPI schema (Starlette's own 405 names only the
    first route that matched the path: GET and POST on /api/v1/runs came back as "Allow: POST")."""
    methods: set[str] = set()
    for template, item in request.app.openapi().get("paths", {}).items():
        pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, request.url.path):
            methods |= {m.upper() for m in item}
    return sorted(methods | {"OPTIONS"}) if methods else []


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    hint = None
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405 and (methods := allowed_methods(request)):
        if request.method == "OPTIONS":  # what may I send here? answered, not refused
            return Response(status_code=204, headers={"Allow": ", ".join(methods)})
        headers = {**(headers or {}), "Allow": ", ".join(methods)}
    if exc.status_code == 404:
        detail = (
            f"No such endpoint or page: {detail}" if detail != "Not Found" else "No such endpoint or page."
        )
        hint = "The API lives under /api/v1; its schema is at /docs."
    elif exc.status_code == 405:
        detail = "This method is not allowed on this endpoint."
        hint = "See /docs for the methods each endpoint accepts."
    return error_response(exc.status_code, detail, hint=hint, type_="HTTPError", headers=headers)


async def _data_error(_request: Request, exc: Exception) -> JSONResponse:
    # The database refused a value the request carried (e.g. a NUL character PostgreSQL cannot store in text):
    # that is bad input, and the transaction was rolled back.
    orig = str(getattr(exc, "orig", exc)).splitlines()[0]
    return error_response(
        400,
        f"A value in the request cannot be stored: {orig}.",
        hint="Remove control characters (such as NUL, \\u0000) from names, labels and other text.",
        type_="UserInputError",
    )


def _bad_text(value: Any, where: str) -> tuple[str, str] | None:
    """(where, what) of the first string in a decoded JSON body that no store can keep: a NUL character
    (PostgreSQL refuses it) or a lone UTF-16 surrogate (not Unicode text: it cannot be encoded as UTF-8)."""
    if isinstance(value, str):
        if "\x00" in value:
            return where, "a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where, "a lone UTF-16 surrogate"
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            found = _bad_text(k, f"{where}.{k}" if where else "a key") or _bad_text(
                v, f"{where}.{k}" if where else k
            )
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            if found := _bad_text(v, f"{where}[{i}]"):
                return found
    return None


async def _check_body_size(request: Request) -> None:

    declared = request.headers.get("content-length", "")
    size = int(declared) if declared.isdigit() else len(await request.body())
    if size > MAX_BODY_BYTES:
        raise PayloadTooLarge(
            f"The request body is {size:,} bytes; the most this API accepts is {MAX_BODY_BYTES:,}.",
            hint="A run spec is a few kilobytes: check what is being sent.",
        )


async def reject_nul(request: Request) -> None:
    """Dependency of every route: NUL characters in the path or query, and NULs or lone surrogates in a JSON
    body, are refused up front with where they are (no database can store them; a lone surrogate stored on
    SQLite used to break every listing that included it)."""
    raw = request.url.query.lower() + request.url.path.lower()
    if "%00" in raw or "\x00" in raw:
        raise UserInputError(
            "The path or a query parameter contains a NUL character (%00).",
            hint="Remove control characters from the request.",
        )
    if request.method in ("POST", "PUT", "PATCH"):
        await _check_body_size(request)
    if request.method in ("POST", "PUT", "PATCH") and "json" in request.headers.get("content-type", ""):
        body = await request.body()  # cached: the route reads the same bytes
        if b"\\u" not in body and b"\x00" not in body:
            return  # raw UTF-8 cannot carry a lone surrogate; only a JSON \u escape can
        try:
            decoded = json.loads(body)
        except ValueError:
            return  # the route's own parser answers malformed JSON
        if found := _bad_text(decoded, ""):
            where, what = found
            raise UserInputError(
                f"The request body has {what} in {where or 'a string'}.",
                hint="Send valid Unicode text (a surrogate must be half of a pair) without control characters.",
            )


async def _storage_error(request: Request, exc: Exception) -> JSONResponse:
    # The database is unreachable, full, read-only or damaged: the service is degraded, not buggy, and the
    # caller may retry. One line of the driver's message says which.
    orig = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:300]
    log.error("store error on %s %s: %s", request.method, request.url.path, orig)
    return error_response(
        503,
        f"The results store cannot be used right now: {orig}.",
        hint="Nothing was changed. Retry shortly; if it persists, check the database server, its disk space "
        "and its permissions (GET /api/v1/health says whether the store answers).",
        type_="StorageError",
        headers={"Retry-After": "5"},
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(
        500,
        "Internal error; the server log has the details.",
        hint="This is a bug in accelbench, not in your request; please report it with the log excerpt.",
        type_="InternalError",
    )


def install_error_handlers(app: FastAPI, html: HtmlErrorRenderer | None = None) -> None:
    """JSON errors everywhere; for page requests from a browser, ``html`` renders the same message."""

    def both(handler: Callable[[Request, Exception], Any]) -> Callable[[Request, Exception], Any]:
        async def wrapped(request: Request, exc: Exception) -> Response:
            response: JSONResponse = await handler(request, exc)
            if html is not None and wants_html(request):
                err = json.loads(bytes(response.body))["error"]
                return html(request, response.status_code, err["message"], err.get("hint"))
            return response

        return wrapped

    app.add_exception_handler(AccelbenchError, both(_accelbench_error))
    app.add_exception_handler(RequestValidationError, both(_validation_error))
    app.add_exception_handler(ValidationError, both(_validation_error))
    app.add_exception_handler(StarletteHTTPException, both(_http_error))

    app.add_exception_handler(DataError, both(_data_error))
    app.add_exception_handler(OperationalError, both(_storage_error))
    app.add_exception_handler(Exception, both(_unexpected))


#: Declared on every route so the OpenAPI schema documents the error bodies (schemathesis checks them).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "Bad input or a guard refused the request."},
    401: {"model": ErrorBody, "description": "A bearer token is required or was not accepted."},
    403: {
        "model": ErrorBody,
        "description": "The key's role or ownership does not allow this (a read-only key, another key's run).",
    },
    404: {"model": ErrorBody, "description": "Unknown run, model or instance type."},
    409: {"model": ErrorBody, "description": "The request conflicts with the run's state."},
    422: {"model": ErrorBody, "description": "A parameter or body field is invalid."},
    429: {
        "model": ErrorBody,
        "description": "Too many refused credentials from this client; see Retry-After.",
    },
}
