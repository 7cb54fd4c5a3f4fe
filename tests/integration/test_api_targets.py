"""The target policy through the API: a run naming a metadata, link-local or non-http target, or one smuggling
a path, is refused before anything is stored; the operator's allow-list is enforced. No refused address is ever
connected to (each is refused on its literal address)."""

from __future__ import annotations

import pytest

from accelbench.settings import reset_settings_cache
from accelbench.store import Store
from tests.support.api_app import api_for

SMALL = "smollm2-135m-instruct"


@pytest.fixture
def api(store: Store):
    with api_for(store) as a:
        yield a


def _post(api, base_url: str, **kw):
    body = {"model": SMALL, "target": {"kind": "endpoint", "base_url": base_url}}
    return api.client.post("/api/v1/runs", json=body, headers=api.auth, **kw)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://169.254.169.254/latest/meta-data", "carries a path"),
        ("http://169.254.169.254", "cloud metadata"),
        ("http://[fd00:ec2::254]", "cloud metadata"),
        ("http://169.254.1.1:8000", "link-local"),
        ("http://127.0.0.1:9/anything?", "a query or a fragment"),
        ("file:///etc/passwd", "only http and https"),
        ("gopher://127.0.0.1:9/", "only http and https"),
        ("http://u:hunter2@127.0.0.1:9", "user name or password"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_refused_target_is_a_400_and_nothing_is_stored(api, url: str, says: str, dry_run: bool) -> None:
    r = _post(api, url, params={"dry_run": str(dry_run).lower()})
    assert r.status_code == 400, r.text
    assert says in r.json()["error"]["message"] and "target.base_url" in r.json()["error"]["message"]
    assert "hunter2" not in r.text
    assert api.store.list_runs()[1] == 0


def test_the_allow_list_is_enforced(api, monkeypatch) -> None:
    monkeypatch.setenv("ACCELBENCH_ALLOWED_TARGETS", "10.0.0.0/8")
    reset_settings_cache()
    refused = _post(api, "http://127.0.0.1:9")
    assert refused.status_code == 400 and "ACCELBENCH_ALLOWED_TARGETS" in refused.text
    assert _post(api, "http://10.0.0.7:8000", params={"dry_run": "true"}).status_code == 200
    monkeypatch.delenv("ACCELBENCH_ALLOWED_TARGETS")
    reset_settings_cache()
    assert _post(api, "http://127.0.0.1:9", params={"dry_run": "true"}).status_code == 200
