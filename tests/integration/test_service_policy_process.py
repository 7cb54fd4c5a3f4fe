"""The path rule and the target policy in a real ``accelbench serve`` process over real HTTP: the service refuses
its own address (however it is written) and a file beside it in its working directory, before anything is
stored."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.faults.service import AUTH, Service, service_env, services

SMALL = "smollm2-135m-instruct"


def test_serve_refuses_its_own_address_and_files_beside_it(tmp_path: Path) -> None:
    env = service_env(f"sqlite:///{tmp_path / 'ab.db'}", tmp_path / "data")
    env.pop("ACCELBENCH_API_PATH_ROOTS", None)
    with services(Service(env, tmp_path / "serve.log", worker=False).start()) as (svc,):

        def post(body: dict[str, object]) -> httpx.Response:
            return httpx.post(
                svc.url + "/api/v1/runs", json={"model": SMALL, **body}, headers=AUTH, timeout=30
            )

        for own in (svc.url, f"http://localhost:{svc.port}/v1", f"http://[::ffff:127.0.0.1]:{svc.port}"):
            r = post({"target": {"kind": "endpoint", "base_url": own}})
            assert r.status_code == 400 and "own address" in r.json()["error"]["message"], (own, r.text)
        other = post({"target": {"kind": "endpoint", "base_url": f"http://127.0.0.1:{svc.port + 1}"}})
        assert other.status_code == 202, other.text  # loopback on another port is another server
        # pyproject.toml sits in the service's working directory (the repository root): never readable
        beside = post({"target": {"kind": "endpoint", "base_url": "http://127.0.0.1:9"},
                       "sweep": {"dataset": "jsonl", "dataset_path": "pyproject.toml"}})  # fmt: skip
        assert beside.status_code == 400 and "data roots" in beside.json()["error"]["message"], beside.text
        assert len(svc.run_ids()) == 1
