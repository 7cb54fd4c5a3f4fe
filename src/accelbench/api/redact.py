"""Keep secrets out of API responses and pages, whatever a stored record happens to contain.

RunSpec already drops ``hf_token`` from every dump; this is the second line: environment or engine settings
that name a token, password or key are shown as ``***``.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# Matched at the end of a key, so ``hf_token`` and ``HF_TOKEN`` are masked but ``max_num_batched_tokens`` is not.
_SECRET_KEY = re.compile(r"(token|secret|password|passwd|api[_-]?key|credentials?|authorization)$", re.I)
MASK = "***"


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def redact(obj: Any) -> Any:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if isinstance(k, str) and _SECRET_KEY.search(k) and isinstance(v, str | int | float) and v != "":
                out[k] = MASK
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


def redact_url(url: str) -> str:
    """A URL or a request target (``/path?query``) with its password and secret-looking query values masked:
    ``http://user:pw@host/x?token=abc&n=1`` -> ``http://user:***@host/x?token=***&n=1``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{hostport}" if colon else f"{MASK}@{hostport}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_KEY.search(k) for k, _ in pairs):
            query = urlencode([(k, MASK if _SECRET_KEY.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class AccessLogRedactor(logging.Filter):
    """For uvicorn's access log: the request target (its third argument) with secrets masked. A token sent in
    the query string is refused by the API, but the access log used to keep it."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_url(args[2]), *args[3:])
        return True
