"""The endpoint target: a server already running is used as it is, and never stopped."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from accelbench.deploy.endpoint import ExistingEndpointTarget
from accelbench.deploy.local import free_port
from accelbench.deploy.target import make_target
from accelbench.domain.run import EndpointTarget, RunSpec
from accelbench.errors import EngineError
from tests.unit.deploy.conftest import TOY_ENGINE_SCRIPT


def test_existing_server_is_used_and_left_running(cache_dir: object) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(TOY_ENGINE_SCRIPT), "--port", str(port), "--served-model-name", "served-x"],
        stdout=subprocess.DEVNULL,
    )
    try:
        spec = RunSpec(model="whatever", target=EndpointTarget(base_url=f"http://127.0.0.1:{port}/v1"))
        target = make_target(spec.target)
        assert isinstance(target, ExistingEndpointTarget)
        with target:
            target.wait_ready(timeout=30)
            ep = target.deploy(spec)
            assert ep.base_url == f"http://127.0.0.1:{port}"
            assert ep.served_model == "served-x"  # the only model the server lists
            assert target.logs() == ""
        time.sleep(0.2)
        assert proc.poll() is None
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    finally:
        proc.kill()
        proc.wait()


def test_unreachable_server_times_out() -> None:
    target = ExistingEndpointTarget(EndpointTarget(base_url=f"http://127.0.0.1:{free_port()}"))
    with pytest.raises(EngineError, match="not ready after 1 s"):
        target.wait_ready(timeout=1)
