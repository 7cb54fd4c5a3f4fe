"""The one redaction rule: what is a secret, and how it is masked, wherever accelbench writes something down
(API responses and pages, the store, run files, logs, recorded commands).

A name is secret when one of its words is a secret word (``token``, ``secret``, ``password``, ``auth``,
``authorization``, ``credential``, ``cookie``) or it says ``api key`` / ``access key`` / ``private key``:
``HF_TOKEN``, ``X-Custom-Auth``, ``OPENAI_API_KEY`` and ``--api-key`` are secret; ``max_num_batched_tokens``,
``TOKENIZERS_PARALLELISM`` and ``kv_cache_dtype`` are not. Values are replaced by ``***``: an environment
variable's, a header's, the argument after a secret option (``--api-key X``, ``--api-key=X``), a URL's
password and secret query values.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
_SECRET_WORDS = {"token", "secret", "password", "passwd", "auth", "authorization", "credential", "credentials",
                 "cookie", "apikey"}  # fmt: skip
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")}
_WORDS = re.compile(r"[a-z0-9]+")


def is_secret_name(name: str) -> bool:
    """Whether ``name`` (a variable, header, option or field name) names a secret."""
    words = _WORDS.findall(name.lower())
    return any(w in _SECRET_WORDS for w in words) or any(p in _SECRET_PAIRS for p in pairwise(words))


def redact_header(header: str) -> str:
    """``"X-Auth: abc"`` -> ``"X-Auth: ***"``; a header that is not secret as it was."""
    name, colon, _value = header.partition(":")
    return f"{name}:{MASK}" if colon and is_secret_name(name) else header


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret options and secret headers (``-H``/``--header``) masked."""
    out: list[str] = []
    hide_next = header_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        if header_next:
            out.append(redact_header(arg))
            header_next = False
            continue
        opt, eq, value = arg.partition("=")
        if opt.startswith("-") and is_secret_name(opt):
            out.append(f"{opt}={MASK}" if eq else arg)
            hide_next = not eq
        elif opt in ("-H", "--header"):
            out.append(f"{opt}={redact_header(value)}" if eq else arg)
            header_next = not eq
        else:
            out.append(redact_url(arg) if "://" in arg else arg)
    return out


def redact_url(url: str) -> str:
    """A URL or a request target (``/path?query``) with its password and secret query values masked:
    ``http://user:pw@host/x?token=abc&n=1`` -> ``http://user:***@host/x?token=***&n=1``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{hostport}" if colon else f"{MASK}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_secret_name(k) for k, _ in pairs):
            query = urlencode([(k, MASK if is_secret_name(k) else v) for k, v in pairs], safe="*")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_text(text: str) -> str:
    """Free text (an exception's message, a log line) with every URL in it passed through ``redact_url``."""
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text


def redact(obj: Any) -> Any:
    """A JSON-like value with every secret masked: values under secret keys, secret options and headers in
    lists of arguments, passwords and secret query values in URLs."""
    if isinstance(obj, Mapping):
        return {
            k: MASK if isinstance(k, str) and is_secret_name(k) and obj[k] not in (None, "") else redact(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        if obj and all(isinstance(v, str) for v in obj):
            return redact_argv(obj)
        return [redact(v) for v in obj]
    if isinstance(obj, str) and "://" in obj and "@" in obj:
        return redact_url(obj)
    return obj


class RedactingFilter(logging.Filter):
    """For log handlers: URLs and arguments in a record's message and arguments, masked (httpx logs every
    request's URL; uvicorn's access log the request target)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(self._clean(a) for a in record.args)
        if isinstance(record.msg, str) and ("://" in record.msg or "?" in record.msg):
            record.msg = " ".join(self._clean(part) for part in record.msg.split(" "))
        return True

    @staticmethod
    def _clean(value: Any) -> Any:
        if isinstance(value, str) and ("://" in value or "?" in value):
            return redact_url(value)
        if type(value).__name__ == "URL":  # httpx.URL
            return redact_url(str(value))
        return value


#: loggers that format URLs or request targets into their records (httpx: every request's URL)
REDACTED_LOGGERS = ("httpx", "httpcore", "uvicorn.access", "uvicorn.error", "accelbench")


def install_log_redaction() -> None:
    """Mask secrets in the records of the loggers that name URLs, whatever handler later writes them (a filter
    on a logger runs for every record made on it, before any handler sees it). Idempotent."""
    for name in REDACTED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
