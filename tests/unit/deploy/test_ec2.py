"""The EC2 target end to end against moto's EC2 server (an EC2-compatible endpoint URL, reached by the
product's own boto3 client), with the model server played by the in-repo streaming fixture: launch with
cloud-init user data, wait for /health, run the sweep from here, store, cost, terminate; and termination
after failures and cancel."""

from __future__ import annotations

import base64
import functools
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from moto.server import ThreadedMotoServer

from accelbench.deploy.ec2 import Ec2DeployTarget
from accelbench.deploy.orchestrator import execute_run
from accelbench.domain.progress import Progress
from accelbench.domain.run import Ec2Target, RunSpec, RunStatus, SweepSpec
from accelbench.store.repo import Store
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

MODEL = "Qwen/Qwen2.5-7B-Instruct"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def moto_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    httpx.post(f"{url}/moto-api/reset")  # moto's backends are per process: start every test empty
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StreamServer]:
    tok = make_tokenizer_dir(tmp_path_factory.mktemp("tok"))
    with StreamServer(Script(ttft_ms=5, itl_ms=2), tokenizer_dir=tok, model="qwen2.5-7b-instruct") as s:
        yield s


def ec2_client(url: str) -> Any:
    return boto3.client("ec2", region_name="us-east-1", endpoint_url=url)


def new_run(store: Store, url: str, **target: Any) -> str:
    ami = ec2_client(url).describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    spec = RunSpec(
        model=MODEL,
        instance_type="m8i.2xlarge",
        target=Ec2Target(endpoint_url=url, ami_id=ami, ingress_cidr="203.0.113.7/32", **target),
        sweep=SweepSpec(
            input_lens=[64], concurrency=[1, 2], prompts_per_concurrency=2, output_len=4, num_warmups=0
        ),
    )
    return store.create_run(kind="run", spec=spec.public_dict(), model=MODEL, target="ec2").id


class Recorder(Progress):
    def __init__(self) -> None:
        self.phases: list[str] = []
        self.sweeps: list[str] = []

    def phase(self, message: str) -> None:
        self.phases.append(message)

    def sweep(self, event: Any) -> None:
        self.sweeps.append(event.kind)


def factory(url_for: Any) -> Any:
    return functools.partial(Ec2DeployTarget, poll_s=0.05, tool_versions={}, url_for=url_for)


def instances(url: str) -> list[dict[str, Any]]:
    res = ec2_client(url).describe_instances()["Reservations"]
    return [i for r in res for i in r["Instances"]]


def accelbench_groups(url: str) -> list[str]:
    groups = ec2_client(url).describe_security_groups()["SecurityGroups"]
    return [g["GroupName"] for g in groups if g["GroupName"].startswith("accelbench-")]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_success_end_to_end(store: Store, moto_url: str, engine: StreamServer) -> None:
    run_id = new_run(store, moto_url)
    seen = Recorder()
    run = execute_run(store, run_id, target_factory=factory(lambda d: engine.base_url), events=seen)
    assert run.status == RunStatus.completed, run.error
    results = {(r.input_len, r.concurrency): r for r in store.get_results(run_id)}
    assert set(results) == {(64, 1), (64, 2)}
    # the CLI's display gets what it gets for a local run: the phases and every sweep event
    assert any(p.startswith("Launching m8i.2xlarge") for p in seen.phases)
    assert [k for k in seen.sweeps if k in ("start", "end")] == ["start", "end"]
    assert seen.sweeps.count("cell_done") == 2
    # where it ran: the instance as the catalog has it, this machine only as the load generator
    env = run.environment
    assert env["instance"]["name"] == "m8i.2xlarge" and env["engine_host"] == "remote" and "cpu" not in env
    assert env["load_generator"]["cpu"] and env["engine_env"]["VLLM_CPU_KVCACHE_SPACE"] == "9"
    assert run.accelerator_type == "cpu" and run.accelerator_name
    assert results[(64, 2)].completed == 4
    # launched as asked, with the engine in the user data, then terminated
    [inst] = instances(moto_url)
    assert inst["InstanceType"] == "m8i.2xlarge"
    assert inst["State"]["Name"] == "terminated"
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
    assert tags["accelbench:run-id"] == run_id
    assert run.extra["ec2"] == {"instance_id": inst["InstanceId"], "terminated": True}
    assert accelbench_groups(moto_url) == []  # the security group it created is gone too
    assert run.engine == "vllm-cpu" and run.hourly_usd and run.extra["cost"]["usd"] >= 0
    assert "***" in (run.command or "") and run.extra["deployment"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == "9"
    # the checks and files a local run gets: the answer check (the fixture server's words are not real ones)
    # and the report files, report.html first
    assert run.extra["answer_check"]["passed"] is False and run.extra["answer_check"]["question"]
    assert run.extra["files"][0].endswith("report.html") and Path(run.extra["files"][0]).exists()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_user_data_installs_and_serves(store: Store, moto_url: str, engine: StreamServer) -> None:
    spec = RunSpec.model_validate(store.get_run(new_run(store, moto_url)).spec)
    target = Ec2DeployTarget(
        spec.target, run_id="t1", tool_versions={}, poll_s=0.05, url_for=lambda d: engine.base_url
    )
    try:
        target.deploy(spec)
        raw = target.ec2.describe_instance_attribute(InstanceId=target.instance_id, Attribute="userData")
        script = base64.b64decode(raw["UserData"]["Value"]).decode()
        attr = target.ec2.describe_instance_attribute(
            InstanceId=target.instance_id, Attribute="instanceInitiatedShutdownBehavior"
        )
        assert attr["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"
    finally:
        target.teardown()
    assert script.startswith("#!/bin/bash")
    assert "shutdown -h +240" in script  # self-termination after max_lifetime_s (4 h)
    assert "apt-get install -y docker.io" in script
    assert "vllm/vllm-openai-cpu:v0.32.0" in script and "--cap-add SYS_NICE" in script
    assert "-m vllm.entrypoints.openai.api_server" in script and "--dtype bfloat16" in script
    assert "VLLM_CPU_KVCACHE_SPACE=9" in script
    assert f"--api-key {target.api_key}" in script
    assert target.terminated


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_never_healthy_terminates(store: Store, moto_url: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    run_id = new_run(store, moto_url, ready_timeout_s=0.5)
    run = execute_run(store, run_id, target_factory=factory(lambda d: dead))
    assert run.status == RunStatus.failed
    assert "did not become healthy within 0.5 s" in (run.error or "")
    assert [i["State"]["Name"] for i in instances(moto_url)] == ["terminated"]
    assert accelbench_groups(moto_url) == []
    assert store.get_results(run_id) == []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_failure_after_launch_terminates(store: Store, moto_url: str) -> None:
    def broken(d: dict[str, Any]) -> str:
        raise RuntimeError("no route to the instance")

    run_id = new_run(store, moto_url)
    run = execute_run(store, run_id, target_factory=factory(broken))
    assert run.status == RunStatus.failed and "no route to the instance" in (run.error or "")
    assert [i["State"]["Name"] for i in instances(moto_url)] == ["terminated"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_cancel_terminates(store: Store, moto_url: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    run_id = new_run(store, moto_url, ready_timeout_s=60)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    run = execute_run(store, run_id, cancel=cancel, target_factory=factory(lambda d: dead))
    assert run.status == RunStatus.cancelled
    assert [i["State"]["Name"] for i in instances(moto_url)] == ["terminated"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_guard_refuses_before_launch(store: Store, moto_url: str, tmp_path: Path) -> None:
    ami = ec2_client(moto_url).describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    spec = RunSpec(
        model=MODEL,
        instance_type="m8i.2xlarge",
        engine={"settings": {"kv_cache_dtype": "fp8"}},
        target=Ec2Target(endpoint_url=moto_url, ami_id=ami, ingress_cidr="203.0.113.7/32"),
    )
    run_id = store.create_run(kind="run", spec=spec.public_dict(), model=MODEL, target="ec2").id
    run = execute_run(store, run_id, target_factory=factory(lambda d: "http://unused"))
    assert run.status == RunStatus.failed and "kv_cache_dtype=fp8" in (run.error or "")
    assert instances(moto_url) == []  # nothing was launched


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_needs_a_reachable_port(store: Store, moto_url: str) -> None:
    ami = ec2_client(moto_url).describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    spec = RunSpec(
        model=MODEL, instance_type="m8i.2xlarge", target=Ec2Target(endpoint_url=moto_url, ami_id=ami)
    )
    run_id = store.create_run(kind="run", spec=spec.public_dict(), model=MODEL, target="ec2").id
    run = execute_run(store, run_id, target_factory=factory(lambda d: "http://unused"))
    assert run.status == RunStatus.failed and "ingress_cidr" in (run.error or "")
    assert instances(moto_url) == []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_cancelled_run_whose_teardown_fails_stays_cancelled_and_says_so(
    store: Store, moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same final-status policy as the local and Kubernetes targets (deploy.base.settle)."""
    dead = f"http://127.0.0.1:{free_port()}"
    run_id = new_run(store, moto_url, ready_timeout_s=60)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    real_teardown = Ec2DeployTarget.teardown

    def failing_teardown(self: Ec2DeployTarget) -> None:
        real_teardown(self)
        self.teardown_errors.append("security group sg-123 still in use")

    monkeypatch.setattr(Ec2DeployTarget, "teardown", failing_teardown)
    run = execute_run(
        store,
        run_id,
        cancel=cancel,
        target_factory=factory(lambda d: dead),
        cancel_status=RunStatus.interrupted,
    )
    assert run.status == RunStatus.interrupted  # the caller's cancel status, as for local runs
    assert "Teardown failed: security group sg-123 still in use" in (run.error or "")
