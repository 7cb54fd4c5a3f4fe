"""Property-based tests of the whole API against its own OpenAPI schema (schemathesis 4): valid and invalid
requests for every operation, with a valid token, on SQLite and PostgreSQL, with reads open and with reads
closed (``api_read_auth``); and stateful sequences through the schema's OpenAPI links (POST /api/v1/runs ->
GET, cancel, DELETE /api/v1/runs/{run_id}). No response may be a 500, every status code and content type must
be declared, and every JSON body must match its schema.

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
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


class _Proxy:
    """ASGI app that forwards to the app of the running test."""

    def __init__(self) -> None:
        self.app: Any = create_app(Settings(api_token=TOKEN, database_url="sqlite://"), Store("sqlite://"),
                                   start_worker=False)  # fmt: skip

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def counting_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                TALLY[f"{message['status'] // 100}xx"] = TALLY.get(f"{message['status'] // 100}xx", 0) + 1
                if scope["path"].startswith("/api/v1/runs/") and message["status"] < 300:
                    TALLY["run_by_id_ok"] = TALLY.get("run_by_id_ok", 0) + 1
            await send(message)

        await self.app(scope, receive, counting_send)


#: responses by status class over the module (printed at its end: the figures quoted in the note)
TALLY: dict[str, int] = {}


PROXY = _Proxy()


@pytest.fixture(scope="module", autouse=True)
def _report_tally() -> Iterator[None]:
    yield
    print(f"\nschemathesis responses: {dict(sorted(TALLY.items()))}")


schema = schemathesis.openapi.from_asgi("/openapi.json", PROXY)


@pytest.fixture(params=[False, True], ids=["reads-open", "reads-closed"])
def api_app(store: Store, request: pytest.FixtureRequest) -> Iterator[None]:
    settings_ = Settings(api_token=TOKEN, api_read_auth=request.param, database_url=store.url)
    PROXY.app = create_app(settings_, store, start_worker=False)
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
    case.call_and_validate(headers=AUTH, checks=CHECKS)


def test_the_schema_links_a_created_run_to_its_operations() -> None:
    links = PROXY.app.openapi()["paths"]["/api/v1/runs"]["post"]["responses"]["202"]["links"]
    assert set(links) == {"GetRun", "CancelRun", "DeleteRun"}
    assert all(link["parameters"] == {"run_id": "$response.body#/id"} for link in links.values())


class _Stateful(schema.as_state_machine()):  # type: ignore[misc]
    def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
        return {"headers": AUTH}

    def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
        case.validate_response(response, checks=CHECKS)


@pytest.mark.parametrize("read_auth", [False, True], ids=["reads-open", "reads-closed"])
def test_stateful_sequences_through_the_links_never_fail(store: Store, read_auth: bool) -> None:
    PROXY.app = create_app(Settings(api_token=TOKEN, api_read_auth=read_auth, database_url=store.url), store,
                           start_worker=False)  # fmt: skip
    _Stateful.run(
        settings=settings(
            max_examples=25,
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
