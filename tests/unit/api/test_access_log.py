"""A token sent in a query string is refused by the API, but uvicorn's access log used to write it down. The
log set-up `accelbench serve` gives uvicorn masks it (and a URL's password) in every access line."""

from __future__ import annotations

import io
import logging
import logging.config

from accelbench.cli.serve import uvicorn_log_config
from accelbench.redact import redact_url


def test_secrets_in_a_url_are_masked_and_the_rest_kept() -> None:
    assert redact_url("/api/v1/runs?token=abc123&limit=5") == "/api/v1/runs?token=***&limit=5"
    assert redact_url("/x?API_KEY=k&access_token=t") == "/x?API_KEY=***&access_token=***"
    assert redact_url("http://user:pw@host:8000/v1?n=1") == "http://user:***@host:8000/v1?n=1"
    assert redact_url("/api/v1/runs?max_num_batched_tokens=8") == "/api/v1/runs?max_num_batched_tokens=8"


def test_the_access_log_of_serve_never_shows_a_query_token() -> None:
    logging.config.dictConfig(uvicorn_log_config())
    logger = logging.getLogger("uvicorn.access")
    out = io.StringIO()
    [handler] = logger.handlers
    handler.setStream(out)  # type: ignore[attr-defined]
    # the record uvicorn's httptools/h11 protocols write: client, method, target, HTTP version, status
    logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", "/api/v1/runs?token=s3cret", "1.1", 401)
    line = out.getvalue()
    assert "s3cret" not in line and "token=***" in line and "401" in line
