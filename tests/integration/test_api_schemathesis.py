"""Property-based tests of the whole API against its own OpenAPI schema (schemathesis 4): valid and invalid
requests for every operation, with a valid token, on SQLite and PostgreSQL. No response may be a 500, every
status code and content type must be declared, and every JSON body must match its schema.

The schema is loaded once through a small ASGI proxy; each test points the proxy at an app over that test's
store (schemathesis' ``from_fixture`` relies on a pytest internal that pytest 9 removed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from accelbench.server.app import create_app
from accelbench.settings import Settings
from accelbench.store import Store

TOKEN = "schemathesis-token"


class _Proxy:
    """ASGI app that forwards to the app of the running test."""

    def __init__(self) -> None:
        self.app: Any = create_app(Settings(api_token=TOKEN, database_url="sqlite://"), Store("sqlite://"),
                                   start_worker=False)  # fmt: skip

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


PROXY = _Proxy()
schema = schemathesis.openapi.from_asgi("/openapi.json", PROXY)


@pytest.fixture
def api_app(store: Store) -> Iterator[None]:
    PROXY.app = create_app(Settings(api_token=TOKEN, database_url=store.url), store, start_worker=False)
    yield


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
def test_api_conforms_and_never_fails_with_500(api_app: None, case: schemathesis.Case) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Bearer {TOKEN}"},
        checks=[
            checks.not_a_server_error,
            checks.status_code_conformance,
            checks.content_type_conformance,
            checks.response_schema_conformance,
        ],
    )
