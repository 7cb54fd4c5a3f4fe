"""The EC2 target: one instance of an EC2-compatible cloud serves the model; accelbench benchmarks it from
where it runs, then terminates it, always.

- boto3 against ``endpoint_url`` (AWS when unset, or any EC2-compatible API).
- The instance boots with cloud-init user data that installs Docker when missing, pulls the same engine
  image a Kubernetes deployment uses and starts it with exactly the runtime's argv and environment
  (``runtime.command`` / ``runtime.env``), on the host network, with the GPU / Neuron devices or the CPU
  tier's SYS_NICE + unconfined seccomp. The server requires a random API key (vLLM/SGLang ``--api-key``),
  so the open port serves only this benchmark.
- Termination, always: ``teardown`` terminates the instance (and deletes the security group accelbench
  created) on success, failure and cancel; besides, the instance schedules its own shutdown after
  ``max_lifetime_s`` with shutdown behaviour "terminate", so it cannot outlive a crashed accelbench.
"""

from __future__ import annotations

import logging
import math
import secrets
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from accelbench.catalog import get_catalog
from accelbench.deploy.manifests.render import load_model_facts, recommend_for, select_runtime
from accelbench.deploy.target import TARGETS, DeployedEngine, Held, Target
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.progress import Progress
from accelbench.domain.run import Ec2Target, RunSpec
from accelbench.errors import EngineError, GuardError, UserInputError
from accelbench.runtimes.guards import check
from accelbench.runtimes.runtime import Runtime, ServeParams
from accelbench.runtimes.versions import effective_tool_versions
from accelbench.store import get_store

log = logging.getLogger(__name__)

SERVER_PORT = 8000
ROOT_VOLUME_GIB = 500
#: public SSM parameters of the default images (overridden by ``ami_id``)
DEFAULT_AMI_PARAMETERS = {
    AcceleratorType.gpu: "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
    AcceleratorType.neuron: "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id",
    AcceleratorType.cpu: "/aws/service/canonical/ubuntu/server/22.04/stable/current/{arch}/hvm/ebs-gp2/ami-id",
}
CLOUD_INIT_LOG = "/var/log/accelbench-engine.log"


def docker_args(runtime: Runtime, params: ServeParams, image: str, env: dict[str, str]) -> list[str]:
    """``docker run`` argv for the engine container on the instance."""
    args = ["docker", "run", "-d", "--name", "accelbench-engine", "--network", "host", "--ipc", "host"]
    args += ["-v", "/opt/accelbench/cache:/cache"]
    if params.accelerator_type == AcceleratorType.gpu:
        args += ["--gpus", "all"]
    elif params.accelerator_type == AcceleratorType.neuron:
        args += [f"--device=/dev/neuron{i}" for i in range(max(1, params.accelerator_count))]
    else:
        # NUMA binding (sched_setaffinity, set_mempolicy) needs these, as in the Kubernetes manifest
        args += ["--cap-add", "SYS_NICE", "--security-opt", "seccomp=unconfined"]
    for k, v in sorted(env.items()):
        args += ["-e", f"{k}={v}"]
    argv = runtime.command(params, python="python3")
    args += ["--entrypoint", argv[0], image, *argv[1:]]
    return args


def user_data(docker: list[str], *, max_lifetime_s: float) -> str:
    """cloud-init shell script: self-termination timer, Docker, the engine container."""
    minutes = max(1, math.ceil(max_lifetime_s / 60))
    return f"""#!/bin/bash
# accelbench engine bootstrap (cloud-init user data)
set -euxo pipefail
exec > >(tee -a {CLOUD_INIT_LOG} > /dev/console) 2>&1
# The instance's shutdown behaviour is "terminate": this ends it even if accelbench is gone.
shutdown -h +{minutes} "accelbench: maximum lifetime reached" || true
if ! command -v docker >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    apt-get update -y && DEBIAN_FRONTEND=noninteractive apt-get install -y docker.io
  else
    dnf install -y docker || yum install -y docker
  fi
fi
systemctl enable --now docker
mkdir -p /opt/accelbench/cache
{shlex.join(docker)}
docker logs -f accelbench-engine &
"""


@TARGETS.register("ec2")
class Ec2DeployTarget(Target):
    """One cloud instance running the engine container; benchmarked from here."""

    kind = "ec2"

    def __init__(
        self,
        config: Ec2Target | None = None,
        *,
        progress: Progress | None = None,
        ec2_client: Any = None,
        ssm_client: Any = None,
        tool_versions: dict[str, str] | None = None,
        poll_s: float = 10.0,
        url_for: Callable[[dict[str, Any]], str] | None = None,
        **context: Any,
    ) -> None:
        """``url_for`` maps the described instance to the server's base URL (default: its public or
        private IP and port 8000); tests point it at a local server. ``context``: the lifecycle's ``cancel``,
        ``run_id``, ``hf_token`` (``Target``)."""
        super().__init__(progress=progress, **context)
        self.config: Ec2Target = config or Ec2Target()
        self._ec2 = ec2_client
        self._ssm = ssm_client
        self.tool_versions = tool_versions
        self.poll_s = poll_s
        self._url_for = url_for
        self.instance_id: str | None = None
        self.security_group_id: str | None = None
        self.api_key = secrets.token_urlsafe(24)
        self.base_url: str | None = None
        self.terminated = False
        self.ready_timeout_s = self.config.ready_timeout_s

    # ---- clients ---------------------------------------------------------------------------------------
    @property
    def ec2(self) -> Any:
        if self._ec2 is None:
            import boto3  # heavy: boto3/botocore, only when AWS is called

            self._ec2 = boto3.client(
                "ec2", region_name=self.config.region, endpoint_url=self.config.endpoint_url
            )
        return self._ec2

    @property
    def ssm(self) -> Any:
        if self._ssm is None:
            import boto3  # heavy: boto3/botocore, only when AWS is called

            self._ssm = boto3.client("ssm", region_name=self.config.region)
        return self._ssm

    # ---- deploy ----------------------------------------------------------------------------------------
    def plan(self, spec: RunSpec) -> tuple[Runtime, ServeParams, str, dict[str, str], list[str]]:
        """(runtime, params, image, env, warnings) for ``spec`` on its instance type; guards applied."""

        if not spec.instance_type:
            raise UserInputError(
                "An ec2 run needs instance_type: the instance type to launch.",
                hint="Add instance_type (e.g. g6.2xlarge, r8g.4xlarge) to the spec.",
            )
        self.instance = inst = get_catalog().instance(spec.instance_type)
        if self.tool_versions is None:
            self.tool_versions = effective_tool_versions(get_store())
        facts, model_spec = load_model_facts(spec)
        rec = recommend_for(spec, model_spec, inst)
        if not rec.fits:
            reason = rec.refusal.reason if rec.refusal else "the model does not fit"
            raise GuardError(reason, hint="; ".join(rec.refusal.way_forward) if rec.refusal else None)
        runtime = select_runtime(spec, inst)
        settings = spec.engine.settings.model_copy(
            update={"extra_args": [*spec.engine.settings.extra_args, "--api-key", self.api_key]}
        )
        if facts.revision:
            settings = settings.model_copy(
                update={"extra_args": [*settings.extra_args, "--revision", facts.revision]}
            )
        params = facts.serve_params(
            inst, settings=settings, recommendation=rec, isa_trace=spec.isa_trace, port=SERVER_PORT
        )
        warnings = check(params, runtime)
        version = spec.engine.version or runtime.resolve_version(self.tool_versions)
        image = runtime.image(version, None, inst.arch)
        env = runtime.env(params)
        env.setdefault("HF_HOME", "/cache/huggingface")
        if self.hf_token:
            env["HF_TOKEN"] = self.hf_token
        self.ready_timeout_s = self.config.ready_timeout_s
        return runtime, params, image, env, [*rec.warnings, *warnings]

    def _ami(self, inst: InstanceType) -> str:
        if self.config.ami_id:
            return self.config.ami_id
        name = DEFAULT_AMI_PARAMETERS[inst.accelerator_type].format(
            arch="arm64" if inst.arch == "arm64" else "amd64"
        )
        try:
            return str(self.ssm.get_parameter(Name=name)["Parameter"]["Value"])
        except Exception as exc:
            raise UserInputError(
                f"No AMI given and the default image parameter {name} could not be read: {exc}",
                hint="Set target.ami_id to an image with Docker (and the GPU/Neuron drivers for those tiers).",
            ) from exc

    def _security_groups(self) -> list[str]:
        if self.config.security_group_ids:
            return list(self.config.security_group_ids)
        if not self.config.ingress_cidr:
            raise UserInputError(
                "The server's port must be reachable from here: give target.security_group_ids, or "
                "target.ingress_cidr (e.g. your address/32) for a security group accelbench creates and deletes.",
            )
        vpc_id = None
        if self.config.subnet_id:
            subnets = self.ec2.describe_subnets(SubnetIds=[self.config.subnet_id])["Subnets"]
            vpc_id = subnets[0]["VpcId"]
        else:
            vpcs = self.ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"]
            if not vpcs:
                raise UserInputError("No default VPC: give target.subnet_id or target.security_group_ids.")
            vpc_id = vpcs[0]["VpcId"]
        sg = self.ec2.create_security_group(
            GroupName=f"accelbench-{self.run_id}-{secrets.token_hex(3)}",
            Description=f"accelbench run {self.run_id}: engine port from {self.config.ingress_cidr}",
            VpcId=vpc_id,
        )
        self.security_group_id = sg["GroupId"]
        self.ec2.authorize_security_group_ingress(
            GroupId=self.security_group_id,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": SERVER_PORT,
                    "ToPort": SERVER_PORT,
                    "IpRanges": [{"CidrIp": self.config.ingress_cidr, "Description": "accelbench client"}],
                }
            ],
        )
        return [self.security_group_id]

    def deploy(self, spec: RunSpec, *, run_dir: Path | None = None) -> Endpoint:
        self._check_cancel()
        runtime, params, image, env, warnings = self.plan(spec)
        inst = self.instance
        assert inst is not None
        docker = docker_args(runtime, params, image, env)
        script = user_data(docker, max_lifetime_s=self.config.max_lifetime_s)
        self.progress.phase(f"Launching {inst.name} for {runtime.name} ({image})")
        request: dict[str, Any] = {
            "ImageId": self._ami(inst),
            "InstanceType": inst.name,
            "MinCount": 1,
            "MaxCount": 1,
            "UserData": script,
            "InstanceInitiatedShutdownBehavior": "terminate",
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
            "BlockDeviceMappings": [
                {
                    "DeviceName": "/dev/sda1",
                    "Ebs": {"VolumeSize": ROOT_VOLUME_GIB, "VolumeType": "gp3", "DeleteOnTermination": True},
                }
            ],
            "TagSpecifications": [
                {
                    "ResourceType": "instance",
                    "Tags": [
                        {"Key": "Name", "Value": f"accelbench-{self.run_id}"},
                        {"Key": "accelbench:run-id", "Value": self.run_id},
                        {"Key": "accelbench:managed", "Value": "true"},
                    ],
                }
            ],
            "SecurityGroupIds": self._security_groups(),
        }
        if self.config.subnet_id:
            request["SubnetId"] = self.config.subnet_id
        if self.config.key_name:
            request["KeyName"] = self.config.key_name
        try:
            resp = self.ec2.run_instances(**request)
        except Exception as exc:
            raise EngineError(f"Could not launch {inst.name}: {exc}") from exc
        self.instance_id = resp["Instances"][0]["InstanceId"]
        described = self._wait_running()
        self.base_url = self._url_for(described) if self._url_for else self._default_url(described)
        redacted = {k: ("***" if k in ("HF_TOKEN",) else v) for k, v in env.items()}
        command = [("***" if a == self.api_key else a) for a in runtime.command(params, python="python3")]
        self.deployed = DeployedEngine.serving(
            spec,
            params,
            target="ec2",
            runtime=runtime.name,
            engine_version=image.rsplit(":", 1)[-1],
            base_url=self.base_url,
            command=command,
            env=redacted,
            started_at=time.time(),
            extra={
                "instance_id": self.instance_id,
                "instance_type": inst.name,
                "image": image,
                "security_group_created": self.security_group_id,
                "warnings": warnings,
                "tensor_parallel": getattr(runtime, "tensor_parallel", lambda p: None)(params),
            },
        )
        return self.endpoint

    @property
    def endpoint(self) -> Endpoint:
        if self.base_url is None or self.deployed is None:
            raise EngineError("Nothing is deployed yet.", hint="Call deploy() first.")
        return Endpoint(base_url=self.base_url, served_model=self.deployed.served_model, api_key=self.api_key)

    def _describe(self) -> dict[str, Any]:
        resp = self.ec2.describe_instances(InstanceIds=[self.instance_id])
        return dict(resp["Reservations"][0]["Instances"][0])

    def _default_url(self, described: dict[str, Any]) -> str:
        ip = (
            described.get("PublicIpAddress")
            if self.config.use_public_ip
            else described.get("PrivateIpAddress")
        )
        if not ip:
            raise EngineError(
                f"Instance {self.instance_id} has no {'public' if self.config.use_public_ip else 'private'} IP.",
                hint="Use a subnet that assigns public IPs, or set target.use_public_ip to false.",
            )
        return f"http://{ip}:{SERVER_PORT}"

    def _wait_running(self, timeout: float = 600.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            d = self._describe()
            state = d["State"]["Name"]
            if state == "running":
                return d
            if state in ("shutting-down", "terminated", "stopping", "stopped"):
                reason = d.get("StateReason", {}).get("Message", "")
                raise EngineError(f"Instance {self.instance_id} is {state} before serving: {reason}")
            if time.monotonic() > deadline:
                raise EngineError(f"Instance {self.instance_id} did not reach running within {timeout:g} s.")
            self._sleep(self.poll_s)

    def wait_ready(self, timeout: float | None = None) -> None:
        timeout = timeout or self.ready_timeout_s
        deadline = time.monotonic() + timeout
        assert self.base_url is not None, "deploy() first"
        started = time.monotonic()
        last = ""
        self.progress.phase(f"Waiting for the engine on {self.instance_id} (up to {timeout / 60:.0f} min)")
        with httpx.Client(timeout=5.0) as client:
            while True:
                self._check_cancel()
                state = self._describe()["State"]["Name"]
                if state != "running":
                    raise EngineError(
                        f"Instance {self.instance_id} is {state}; the engine never served.",
                        hint=self.logs(40),
                    )
                try:
                    r = client.get(f"{self.base_url}/health")
                    if r.status_code == 200:
                        if self.deployed is not None:
                            self.deployed = self.deployed.model_copy(
                                update={"ready_s": time.monotonic() - started}
                            )
                        return
                    last = f"/health answered {r.status_code}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                if time.monotonic() >= deadline:
                    raise EngineError(
                        f"The engine on {self.instance_id} did not become healthy within {timeout:g} s ({last}).",
                        hint=self.logs(40) or "No console output yet.",
                    )
                self.progress.line(last)
                self._sleep(self.poll_s)

    def logs(self, tail: int | None = 200) -> str:
        """The instance's console output (cloud-init and the engine log are copied to the console)."""
        if not self.instance_id:
            return ""
        try:
            out = self.ec2.get_console_output(InstanceId=self.instance_id, Latest=True).get("Output") or ""
        except Exception:
            return ""
        lines = str(out).splitlines()
        return "\n".join(lines if tail is None else lines[-tail:])

    def check_alive(self, wait_s: float = 0.0) -> None:
        if self.instance_id and self._describe()["State"]["Name"] != "running":
            raise EngineError(f"Instance {self.instance_id} stopped running.")

    def run_fields(self) -> dict[str, Any]:
        fields = super().run_fields()
        if self.deployed is not None:
            fields["tp_degree"] = self.deployed.extra.get("tensor_parallel")
        return fields

    def held(self) -> Held | None:
        return Held(self.instance.name, self.config.region) if self.instance is not None else None

    def record(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "terminated": self.terminated}

    def teardown(self) -> None:
        """Terminate the instance and delete the security group accelbench created; never raises."""
        if self.terminated:
            return
        if self.instance_id:
            try:
                self.ec2.terminate_instances(InstanceIds=[self.instance_id])
                self._wait_terminated()
            except Exception as exc:
                msg = f"instance {self.instance_id}: {exc}"
                log.warning("teardown: %s", msg)
                self.teardown_errors.append(msg)
        if self.security_group_id and not self.teardown_errors:
            try:
                self.ec2.delete_security_group(GroupId=self.security_group_id)
            except Exception as exc:
                self.teardown_errors.append(f"security group {self.security_group_id}: {exc}")
        self.terminated = not self.teardown_errors

    def _wait_terminated(self, timeout: float = 600.0) -> None:
        """The security group can only go once the instance is gone."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._describe()["State"]["Name"] == "terminated":
                return
            time.sleep(min(self.poll_s, 5.0))
        raise EngineError(f"Instance {self.instance_id} was not terminated within {timeout:g} s.")
