"""What every request to a server carries: the endpoint's extra headers and its API key as a bearer token."""

from __future__ import annotations

from accelbench.domain.endpoint import Endpoint


def test_request_headers_add_the_bearer_token_to_the_extra_headers() -> None:
    ep = Endpoint(base_url="http://h:8000", served_model="m", api_key="k", headers={"X-Team": "a"})
    assert ep.request_headers() == {"X-Team": "a", "Authorization": "Bearer k"}


def test_request_headers_without_a_key_are_the_extra_headers_and_leave_them_unchanged() -> None:
    ep = Endpoint(base_url="http://h:8000", served_model="m", headers={"X-Team": "a"})
    headers = ep.request_headers()
    headers["Authorization"] = "changed"
    assert ep.request_headers() == {"X-Team": "a"} and ep.headers == {"X-Team": "a"}
