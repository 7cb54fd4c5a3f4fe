"""Manifests for Qwen2.5-7B-Instruct on the four tiers of the must-show list, validated strictly:
Kubernetes objects with kubernetes-validate (strict: unknown fields are errors), Karpenter objects against
the v1 CRD schemas in tests/data/crds. Each test names fields that must be there and fields that must not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from accelbench.catalog import get_catalog
from accelbench.deploy.manifests import (
    Bundle,
    ExportOptions,
    KarpenterOptions,
    facts_from_model_spec,
    plan_bundle,
    render_bundle,
    validate_objects,
    write_bundle,
)
from accelbench.domain.run import EngineSettings, EngineSpec, RunSpec
from accelbench.errors import GuardError, UserInputError
from accelbench.modelspec import load_model_spec
from tests.support.crd import crd_errors

MODEL = "Qwen/Qwen2.5-7B-Instruct"
INSTANCES = ["g6.2xlarge", "inf2.xlarge", "m8i.2xlarge", "r8g.4xlarge"]


def bundle(instance: str, shards: int = 1, **settings: Any) -> Bundle:
    """The bundle for Qwen2.5-7B-Instruct on ``instance``, with the real planner filling the settings.

    inf2.xlarge: the planner refuses (16 GiB of host RAM cannot compile a 7B model), so it is rendered with
    force, as for artefacts compiled on a larger instance; the refusal stays in the warnings."""
    spec = RunSpec(
        model=MODEL, instance_type=instance, engine=EngineSpec(settings=EngineSettings(**settings))
    )
    opts = ExportOptions(
        namespace="bench",
        karpenter=KarpenterOptions(cluster_name="lab"),
        loadgen_shards=shards,
        force=instance == "inf2.xlarge",
    )
    return plan_bundle(spec, options=opts, tool_versions={}, environ={})


def engine_container(b: Bundle) -> dict[str, Any]:
    return b.one("Deployment")["spec"]["template"]["spec"]["containers"][0]


def pod_spec(b: Bundle) -> dict[str, Any]:
    return b.one("Deployment")["spec"]["template"]["spec"]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def toleration_keys(b: Bundle) -> set[str]:
    return {t["key"] for t in pod_spec(b).get("tolerations", [])}


@pytest.mark.parametrize("instance", INSTANCES)
def test_every_object_passes_strict_validation(instance: str) -> None:
    b = bundle(instance, shards=2)
    kinds = sorted(o["kind"] for o in b.objects)
    assert kinds.count("Deployment") == 1 and kinds.count("Job") == 1 and kinds.count("NodePool") == 4
    validate_objects(b.objects, "1.33")
    for obj in b.of_kind("NodePool") + b.of_kind("EC2NodeClass"):
        assert crd_errors(obj) == [], obj["metadata"]["name"]


def test_strict_validation_catches_an_unknown_field() -> None:
    b = bundle("m8i.2xlarge")
    engine_container(b)["resource"] = {}  # misspelt "resources"
    with pytest.raises(UserInputError, match="resource"):
        validate_objects(b.objects)
    nodepool = b.of_kind("NodePool")[0]
    nodepool["spec"]["template"]["spec"]["taint"] = []
    assert any("taint" in e for e in crd_errors(nodepool))


def test_gpu_g6() -> None:
    b = bundle("g6.2xlarge")
    c = engine_container(b)
    assert c["image"] == "vllm/vllm-openai:v0.32.0"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "nvidia.com/gpu" in toleration_keys(b)
    assert "--gpu-memory-utilization" in c["command"]
    assert env_of(c)["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    shm = next(v for v in pod_spec(b)["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    assert pod_spec(b)["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "g6.2xlarge",
        "kubernetes.io/arch": "amd64",
    }
    # must not: anything of the other tiers
    assert "aws.amazon.com/neuron" not in c["resources"]["limits"]
    assert "VLLM_CPU_KVCACHE_SPACE" not in env_of(c)
    assert "securityContext" not in c
    assert not {"accelbench.io/cpu", "accelbench.io/dedicated"} & toleration_keys(b)


def test_neuron_inf2() -> None:
    b = bundle("inf2.xlarge")
    c = engine_container(b)
    assert c["resources"]["limits"]["aws.amazon.com/neuron"] == "1"
    assert "aws.amazon.com/neuron" in toleration_keys(b)
    assert "pytorch-inference-vllm-neuronx" in c["image"]
    # compilation: start-up allowance of at least 90 minutes, much longer than GPU's
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 5400
    gpu_startup = engine_container(bundle("g6.2xlarge"))["startupProbe"]
    assert startup["failureThreshold"] > 2 * gpu_startup["failureThreshold"]
    assert b.ready_timeout_s > bundle("g6.2xlarge").ready_timeout_s
    assert "nvidia.com/gpu" not in c["resources"]["limits"]
    assert "--gpu-memory-utilization" not in c["command"]
    assert "VLLM_CPU_KVCACHE_SPACE" not in env_of(c)


@pytest.mark.parametrize(
    ("instance", "arch", "image"),
    [
        ("m8i.2xlarge", "amd64", "vllm/vllm-openai-cpu:v0.32.0"),
        ("r8g.4xlarge", "arm64", "vllm/vllm-openai-cpu:v0.32.0-arm64"),
    ],
)
def test_cpu_tiers(instance: str, arch: str, image: str) -> None:
    b = bundle(instance, kv_cache_space_gib=12)  # the user's budget wins over the planner's
    c = engine_container(b)
    ps = pod_spec(b)
    assert c["image"] == image
    assert ps["nodeSelector"]["kubernetes.io/arch"] == arch
    assert {"accelbench.io/cpu", "accelbench.io/dedicated"} <= toleration_keys(b)
    assert c["securityContext"]["capabilities"]["add"] == ["SYS_NICE"]
    assert c["securityContext"]["seccompProfile"]["type"] == "Unconfined"
    req, lim = c["resources"]["requests"], c["resources"]["limits"]
    assert req["cpu"] == lim["cpu"] and req["memory"] == lim["memory"]  # Guaranteed QoS
    env = env_of(c)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "12"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    assert c["command"][c["command"].index("--dtype") + 1] == "bfloat16"
    assert any(v["name"] == "dshm" and v["emptyDir"]["medium"] == "Memory" for v in ps["volumes"])
    # must not: device resources, GPU knobs, NCCL settings
    for key in ("nvidia.com/gpu", "aws.amazon.com/neuron"):
        assert key not in lim and key not in req
    assert "--gpu-memory-utilization" not in c["command"] and "--kv-cache-dtype" not in c["command"]
    assert not [k for k in env if k.startswith("NCCL_")]
    assert "nvidia.com/gpu" not in toleration_keys(b)


def test_cpu_pod_fits_the_node_as_karpenter_sees_it() -> None:
    # r8g.4xlarge: 16 vCPU / 128 GiB. Karpenter: 7.5% VM overhead, kube-reserved 255 + 11 x 110 MiB,
    # 100 MiB eviction; daemonsets 1 GiB. The seed's 85% (108.8 GiB) would leave ~7 GiB unused.
    c = engine_container(bundle("r8g.4xlarge"))
    mem_mib = int(c["resources"]["limits"]["memory"].removesuffix("Mi"))
    allocatable = 128 * 1024 * 0.925 - (255 + 11 * 110) - 100
    assert allocatable - 1024 - 256 < mem_mib <= allocatable - 1024
    assert c["resources"]["limits"]["cpu"] == "15"
    # m8i.2xlarge: 8 vCPU (4 cores x 2 threads): whole cores, i.e. an even CPU count
    assert engine_container(bundle("m8i.2xlarge"))["resources"]["limits"]["cpu"] == "6"


def test_probes_hit_health() -> None:
    c = engine_container(bundle("m8i.2xlarge"))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": "http"}
    assert c["livenessProbe"]["timeoutSeconds"] >= 10  # busy CPU cores answer slowly


def test_service_matches_pods() -> None:
    b = bundle("g6.2xlarge")
    svc = b.one("Service", "engine")
    labels = b.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in svc["spec"]["selector"].items())
    assert svc["spec"]["ports"][0]["port"] == 8000
    assert b.engine.service_url == f"http://{svc['metadata']['name']}.bench.svc.cluster.local:8000"


def test_loadgen_job_sharded() -> None:
    b = bundle("r8g.4xlarge", shards=4)
    job = b.one("Job")
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 4
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    svc = b.one("Service", "loadgen")
    assert svc["spec"]["clusterIP"] == "None" and pod["subdomain"] == svc["metadata"]["name"]
    assert pod["containers"][0]["command"][:2] == ["accelbench", "loadgen"]
    assert "tolerations" not in pod  # never on the benchmark nodes
    assert b.loadgen is not None and b.loadgen.shards == 4
    assert (
        b.loadgen.barrier_host
        == f"{job['metadata']['name']}-0.{svc['metadata']['name']}.bench.svc.cluster.local"
    )
    assert b.loadgen.base_url == b.engine.service_url
    one = bundle("r8g.4xlarge", shards=1)
    assert one.loadgen is not None and one.loadgen.barrier_host is None


def test_karpenter_pools() -> None:
    b = bundle("r8g.4xlarge")
    pools = {p["metadata"]["name"]: p for p in b.of_kind("NodePool")}
    assert set(pools) == {"accelbench-cpu-arm64", "accelbench-cpu-amx", "accelbench-gpu", "accelbench-neuron"}

    def req(pool: str, key: str) -> list[str]:
        reqs = pools[pool]["spec"]["template"]["spec"]["requirements"]
        return next(r["values"] for r in reqs if r["key"] == key)

    assert req("accelbench-cpu-arm64", "kubernetes.io/arch") == ["arm64"]
    assert "r8g" in req("accelbench-cpu-arm64", "karpenter.k8s.aws/instance-family")
    assert "m6g" not in req("accelbench-cpu-arm64", "karpenter.k8s.aws/instance-family")  # no Graviton2
    assert req("accelbench-cpu-amx", "kubernetes.io/arch") == ["amd64"]
    assert {"m8i", "m7i"} <= set(req("accelbench-cpu-amx", "karpenter.k8s.aws/instance-family"))
    cpu_taints = {t["key"] for t in pools["accelbench-cpu-arm64"]["spec"]["template"]["spec"]["taints"]}
    assert cpu_taints == {"accelbench.io/cpu", "accelbench.io/dedicated"}
    gpu_taints = {t["key"] for t in pools["accelbench-gpu"]["spec"]["template"]["spec"]["taints"]}
    assert gpu_taints == {"nvidia.com/gpu"}  # the device plugin tolerates exactly this one
    assert pools["accelbench-cpu-arm64"]["spec"]["disruption"]["consolidateAfter"] == "1m"
    classes = {c["metadata"]["name"]: c for c in b.of_kind("EC2NodeClass")}
    cpu_class = classes["accelbench-cpu"]["spec"]
    assert cpu_class["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "500Gi"
    assert cpu_class["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "lab"}}]
    assert "cpuManagerPolicy: static" in cpu_class["userData"]
    assert "userData" not in classes["accelbench-gpu"]["spec"]


def test_unlisted_family_joins_its_pool() -> None:
    inst = get_catalog().instance("r8g.4xlarge").model_copy(update={"name": "x9g.4xlarge", "family": "x9g"})
    spec = RunSpec(model=MODEL, engine=EngineSpec(settings=EngineSettings(kv_cache_space_gib=8)))
    facts = facts_from_model_spec(load_model_spec(MODEL, allow_network=False))
    b = render_bundle(spec, inst, facts, options=ExportOptions(karpenter=KarpenterOptions()), environ={})
    pool = next(p for p in b.of_kind("NodePool") if p["metadata"]["name"] == "accelbench-cpu-arm64")
    fam = next(
        r for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"].endswith("instance-family")
    )
    assert "x9g" in fam["values"]


def test_guards_apply_to_export() -> None:
    with pytest.raises(GuardError, match="kv_cache_dtype=fp8"):
        bundle("m8i.2xlarge", kv_cache_dtype="fp8")
    bundle("g6.2xlarge", kv_cache_dtype="fp8")  # the same setting on GPU renders
    spec = RunSpec(model=MODEL, engine=EngineSpec(name="vllm", settings=EngineSettings(kv_cache_space_gib=8)))
    facts = facts_from_model_spec(load_model_spec(MODEL, allow_network=False))
    with pytest.raises(GuardError, match="serves gpu, not cpu"):
        render_bundle(spec, get_catalog().instance("r8g.4xlarge"), facts, environ={})


def test_image_overrides_and_registry() -> None:
    inst = get_catalog().instance("r8g.4xlarge")
    spec = RunSpec(model=MODEL, engine=EngineSpec(settings=EngineSettings(kv_cache_space_gib=8)))
    facts = facts_from_model_spec(load_model_spec(MODEL, allow_network=False))
    b = render_bundle(
        spec,
        inst,
        facts,
        options=ExportOptions(registry="cache.example/hub"),
        environ={},
        tool_versions={"vllm-cpu": "0.27.0", "loadgen": "0.1.0"},
    )
    assert engine_container(b)["image"] == "cache.example/hub/vllm/vllm-openai-cpu:v0.27.0-arm64"
    assert (
        b.one("Job")["spec"]["template"]["spec"]["containers"][0]["image"]
        == "cache.example/hub/accelbench/accelbench:0.1.0"
    )
    b = render_bundle(spec, inst, facts, environ={"VLLM_CPU_IMAGE": "me/cpu:1"})
    assert engine_container(b)["image"] == "me/cpu:1"


def test_write_bundle(tmp_path: Path) -> None:
    b = bundle("g6.2xlarge")
    files = write_bundle(b, tmp_path)
    names = [f.name for f in files]
    assert names == ["00-karpenter.yaml", "01-engine.yaml", "02-loadgen.yaml", "plan.json"]
    docs = list(yaml.safe_load_all((tmp_path / "01-engine.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["Deployment", "Service"]
    assert "&id" not in (tmp_path / "01-engine.yaml").read_text()  # no YAML anchors
    validate_objects([d for f in files[:-1] for d in yaml.safe_load_all(f.read_text())])


@pytest.mark.parametrize(("instance", "budget"), [("m8i.2xlarge", "9"), ("r8g.4xlarge", "41")])
def test_cpu_kv_budget_is_exactly_the_planners(instance: str, budget: str) -> None:
    from accelbench.deploy.manifests import recommend_for

    spec = RunSpec(model=MODEL, instance_type=instance)
    rec = recommend_for(spec, load_model_spec(MODEL, allow_network=False), get_catalog().instance(instance))
    assert rec.settings is not None and str(rec.settings.kv_cache_space_gib) == budget
    c = engine_container(bundle(instance))
    assert env_of(c)["VLLM_CPU_KVCACHE_SPACE"] == budget
    argv = c["command"]
    assert argv[argv.index("--max-model-len") + 1] == str(rec.settings.max_model_len)
    assert argv[argv.index("--max-num-seqs") + 1] == str(rec.settings.max_num_seqs)


def test_gpu_kv_cache_is_the_model_dtype_unless_fp8_is_asked_for() -> None:
    # vLLM's default (auto = the model dtype): the planner no longer turns FP8 on by itself on an L4
    argv = engine_container(bundle("g6.2xlarge"))["command"]
    assert "--kv-cache-dtype" not in argv


def test_planner_refusal_blocks_export_unless_forced() -> None:
    spec = RunSpec(model=MODEL, instance_type="inf2.xlarge")
    with pytest.raises(GuardError, match="host"):
        plan_bundle(spec, tool_versions={}, environ={})
    forced = bundle("inf2.xlarge")
    assert any(w.startswith("planner:") for w in forced.warnings)
