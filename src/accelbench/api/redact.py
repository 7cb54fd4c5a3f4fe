"""Keep secrets out of API responses and pages, whatever a stored record happens to contain: the project's one
redaction rule (``accelbench/redact.py``) applied to every value served. RunSpec already drops ``hf_token``
from every dump; this is the second line."""

from __future__ import annotations

from accelbench.redact import MASK, RedactingFilter, is_secret_name, redact, redact_url

__all__ = ["MASK", "AccessLogRedactor", "is_secret_key", "redact", "redact_url"]


def is_secret_key(key: str) -> bool:
    return is_secret_name(key)


class AccessLogRedactor(RedactingFilter):
    """For uvicorn's access log: the request target with secrets masked. A token sent in the query string is
    refused by the API, but the access log used to keep it."""
