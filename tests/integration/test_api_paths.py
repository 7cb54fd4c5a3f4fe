"""The path rule through the API: a file beside the service (its working directory) is never read, whatever form
its name takes, and a refusal names the data roots; a name under a root is stored as its resolved path."""

from __future__ import annotations

from pathlib import Path as FilePath
from urllib.parse import quote

import pytest

from accelbench.settings import get_settings, reset_settings_cache
from accelbench.store import Store
from tests.support.api_app import api_for

SMALL = "smollm2-135m-instruct"
TARGET = {"kind": "endpoint", "base_url": "http://127.0.0.1:9"}


@pytest.fixture
def api(store: Store, tmp_path, monkeypatch):
    monkeypatch.delenv("ACCELBENCH_API_PATH_ROOTS")  # only the service's own directories
    reset_settings_cache()
    cwd = tmp_path / "service-cwd"
    cwd.mkdir()
    (cwd / "outside.jsonl").write_text('{"prompt": "hunter2"}\n')
    (cwd / "etc").mkdir()
    (cwd / "etc" / "passwd").write_text('{"prompt": "hunter2"}\n')
    monkeypatch.chdir(cwd)
    with api_for(store) as a:
        yield a


def _post(api, sweep: dict, **kw):
    body = {"model": SMALL, "target": TARGET, "sweep": sweep}
    return api.client.post("/api/v1/runs", json=body, headers=api.auth, **kw)


@pytest.mark.parametrize("name", ["outside.jsonl", "etc/passwd", "./outside.jsonl", "%2e%2e/outside.jsonl",
                                  "..%2f..%2fetc%2fpasswd", "../../service-cwd/outside.jsonl"])  # fmt: skip
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_file_beside_the_service_is_refused_and_the_roots_named(api, name, dry_run) -> None:
    r = _post(api, {"dataset": "jsonl", "dataset_path": name}, params={"dry_run": str(dry_run).lower()})
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "sweep.dataset_path" in message and str(get_settings().datasets_dir.resolve()) in message
    assert "hunter2" not in r.text
    assert api.store.list_runs()[1] == 0


@pytest.mark.parametrize("name", ["outside.jsonl", "%2e%2e%2f%2e%2e%2fetc", "..%252f..%252fetc"])
def test_model_lookups_refuse_encoded_and_beside_names(api, name) -> None:
    r = api.client.get("/api/v1/models/" + quote(name, safe="%"))
    assert r.status_code in (400, 404), r.text
    assert "hunter2" not in r.text


def test_a_dataset_named_relative_to_its_root_is_stored_resolved(api) -> None:
    datasets = get_settings().datasets_dir
    datasets.mkdir(parents=True, exist_ok=True)
    (datasets / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    r = _post(api, {"dataset": "jsonl", "dataset_path": "prompts.jsonl"})
    assert r.status_code == 202, r.text
    run = api.store.get_run(r.json()["id"])
    assert run.spec["sweep"]["dataset_path"] == str((datasets / "prompts.jsonl").resolve())


SPEC_KEYS = {
    "sweep.dataset_path": lambda v: {"sweep": {"dataset": "jsonl", "dataset_path": v}},
    "sweep.trace": lambda v: {"sweep": {"dataset": "trace", "dataset_path": v}},
    "sweep.tools": lambda v: {"sweep": {"tools": v}},
    "capacity.dataset_path": lambda v: {
        "capacity": {"slo": {"ttft_ms": 500}, "dataset": "jsonl", "dataset_path": v}
    },
    "capacity.tools": lambda v: {"capacity": {"slo": {"ttft_ms": 500}, "tools": v}},
    "target.tokenizer": lambda v: {"target": {**TARGET, "tokenizer": v}},
    "target.kubeconfig": lambda v: {"target": {"kind": "kubernetes", "kubeconfig": v}},
    "model": lambda v: {"model": v},
}


@pytest.mark.parametrize("key", sorted(SPEC_KEYS))
def test_every_spec_key_naming_a_file_is_confined_through_the_api(api, key) -> None:
    """Each key, with a name beside the service, a symlink out of a root, '..' and an encoded form."""
    datasets = get_settings().datasets_dir
    datasets.mkdir(parents=True, exist_ok=True)
    (datasets / "escape").symlink_to(FilePath.cwd())
    for name in ("outside.jsonl", "escape/outside.jsonl", "../../service-cwd/outside.jsonl", "%2e%2e/x",
                 str(FilePath.cwd() / "outside.jsonl")):  # fmt: skip
        if key == "model" and name == "escape/outside.jsonl":
            continue  # a model may be a hub id: an unknown one is the loader's to refuse, not a path
        body = {"model": SMALL, "target": TARGET, **SPEC_KEYS[key](name)}
        r = api.client.post("/api/v1/runs", json=body, headers=api.auth, params={"dry_run": "true"})
        assert r.status_code == 400, (key, name, r.text)
        assert key.replace("sweep.trace", "sweep.dataset_path") in r.json()["error"]["message"], r.text


@pytest.mark.parametrize("route", ["/api/v1/estimate", "/api/v1/recommend", "/api/v1/memory-breakdown"])
def test_plan_routes_do_not_read_a_model_beside_the_service(api, route) -> None:
    model = FilePath.cwd() / "beside-model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    for name in ("beside-model", str(model), "./beside-model"):
        r = api.client.get(route, params={"model": name, "instance_type": "g6.2xlarge"}, headers=api.auth)
        assert r.status_code == 400 and "data roots" in r.json()["error"]["message"], (name, r.text)
