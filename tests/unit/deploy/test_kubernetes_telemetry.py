"""Device telemetry on Kubernetes: what the manifests carry per tier and mode (validated strictly with
kubernetes-validate), the lookup of the node's exporter against the fake Kubernetes API, and the load generator
storing DeviceTelemetry from a recorded DCGM scrape served by a local HTTP server. No real cluster is used."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from pydantic import ValidationError

from accelbench.deploy.incluster import find_node_exporter, merge_shards, run_shard
from accelbench.deploy.kubernetes import KubernetesDeployTarget
from accelbench.deploy.manifests import (
    Bundle,
    ExportOptions,
    LoadgenConfig,
    bundle_files,
    plan_bundle,
    validate_objects,
)
from accelbench.deploy.manifests.telemetry import LoadgenTelemetry
from accelbench.deploy.orchestrator import execute_run
from accelbench.deploy.shards import Barrier
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.run import (
    EngineSpec,
    KubernetesTarget,
    KubernetesTelemetry,
    RunSpec,
    RunStatus,
    SweepSpec,
)
from accelbench.report.compared_cells import device_figures
from accelbench.report.failures import cell_devices
from accelbench.services.specs import load_run_spec
from accelbench.store.repo import Store
from tests.support.fake_kube import FakeCluster, FakeKubeServer
from tests.unit.deploy.test_kubernetes import fake_bench

MODEL = "Qwen/Qwen2.5-7B-Instruct"
DATA = Path(__file__).resolve().parents[2] / "data" / "telemetry"
NODE = "ip-10-0-1-23.ec2.internal"
DCGM_LABELS = {"app": "nvidia-dcgm-exporter"}


def bundle(instance: str, telemetry: KubernetesTelemetry | str | None = None, **opts: Any) -> Bundle:
    spec = RunSpec(model=MODEL, instance_type=instance)
    tel = KubernetesTelemetry.model_validate(telemetry) if telemetry is not None else None
    options = ExportOptions(namespace="bench", force=instance == "inf2.xlarge", telemetry=tel, **opts)
    return plan_bundle(spec, options=options, tool_versions={}, environ={})


def containers(b: Bundle) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in b.one("Deployment")["spec"]["template"]["spec"]["containers"]}


def loadgen_pod(b: Bundle) -> dict[str, Any]:
    spec: dict[str, Any] = b.one("Job")["spec"]["template"]["spec"]
    return spec


# ---- manifests ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("instance", ["g6.2xlarge", "inf2.xlarge", "m8i.2xlarge"])
@pytest.mark.parametrize("mode", ["auto", "node", "sidecar", "off"])
def test_every_tier_and_mode_validates(instance: str, mode: str) -> None:
    b = bundle(instance, mode)
    validate_objects(b.objects, "1.33")  # strict: an unknown field in a sidecar or a Role fails here
    assert b.loadgen is not None
    tel = b.loadgen.telemetry
    tier = b.engine.tier
    expected = (
        "off" if tier == AcceleratorType.cpu or mode == "off" else ("sidecar" if mode == "auto" else mode)
    )
    # off: nothing read and nothing claimed; a CPU tier: nothing to read, which its results say
    assert (tel is None) == (mode == "off")
    assert tel is None or tel.mode == expected
    kinds = [o["kind"] for o in b.objects]
    sidecars = set(containers(b)) - {"engine"}
    if expected == "node":
        assert sorted(k for k in kinds if k in ("ServiceAccount", "Role", "RoleBinding")) == [
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "ServiceAccount",
        ]
        assert not sidecars
    else:
        assert not {"ServiceAccount", "Role", "RoleBinding"} & set(kinds)
        assert loadgen_pod(b)["automountServiceAccountToken"] is False  # no API token it does not need
    assert bool(sidecars) == (expected == "sidecar")


def test_gpu_sidecar_is_nvidias_dcgm_exporter_reached_through_the_service() -> None:
    b = bundle("g6.2xlarge", "sidecar")
    dcgm = containers(b)["dcgm-exporter"]
    assert dcgm["image"].startswith("nvcr.io/nvidia/k8s/dcgm-exporter:")
    assert dcgm["ports"] == [{"name": "dcgm", "containerPort": 9400, "protocol": "TCP"}]
    env = {e["name"]: e["value"] for e in dcgm["env"]}
    assert env["DCGM_EXPORTER_LISTEN"] == ":9400" and env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["DCGM_EXPORTER_INTERVAL"] == "1000"  # not the exporter's 30 s default
    assert dcgm["securityContext"]["capabilities"]["add"] == ["SYS_ADMIN"]
    assert dcgm["resources"]["requests"] == dcgm["resources"]["limits"]  # the pod stays Guaranteed
    # the sidecar asks for no GPU: the engine container holds them all
    assert "nvidia.com/gpu" not in dcgm["resources"]["limits"]
    assert containers(b)["engine"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    ports = {p["name"]: p for p in b.one("Service", "engine")["spec"]["ports"]}
    assert ports["dcgm"]["port"] == 9400 and ports["dcgm"]["targetPort"] == "dcgm"
    assert b.loadgen is not None and b.loadgen.telemetry is not None
    assert b.loadgen.telemetry.url == f"http://{b.engine.name}.bench.svc.cluster.local:9400/metrics"
    # what was decided is in the exported plan.json
    plan = json.loads(bundle_files(b)["plan.json"])
    assert plan["device_telemetry"]["mode"] == "sidecar" and plan["device_telemetry"]["exporter"] == "dcgm"


def test_neuron_sidecar_is_neuron_monitor_off_the_engines_port() -> None:
    b = bundle("inf2.xlarge", "sidecar")
    nm = containers(b)["neuron-monitor"]
    assert nm["image"].startswith("public.ecr.aws/neuron/neuron-monitor:")
    assert nm["command"] == ["/opt/bin/entrypoint.sh"] and nm["args"] == ["--port", "8008"]
    assert nm["securityContext"] == {"privileged": True}
    assert b.engine.port == 8000 and nm["ports"][0]["containerPort"] == 8008
    assert b.loadgen is not None and b.loadgen.telemetry is not None
    assert b.loadgen.telemetry.exporter == "neuron" and b.loadgen.telemetry.url is not None
    assert b.loadgen.telemetry.url.endswith(":8008/metrics")


def test_node_mode_grants_only_list_pods_where_the_lookup_needs_it() -> None:
    b = bundle("g6.2xlarge", {"mode": "node"})
    roles = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in b.of_kind("Role")}
    assert {ns for ns, _ in roles} == {"bench", "gpu-operator"}
    for role in roles.values():
        assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    (account,) = b.of_kind("ServiceAccount")
    assert loadgen_pod(b)["serviceAccountName"] == account["metadata"]["name"]
    for binding in b.of_kind("RoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "bench"}
        ]
    assert b.loadgen is not None and b.loadgen.telemetry is not None
    tel = b.loadgen.telemetry
    assert (tel.namespace, tel.selector, tel.port, tel.url) == (
        "gpu-operator",
        "app=nvidia-dcgm-exporter",
        9400,
        None,
    )
    # the RBAC objects go with the load generator (created before its Job, deleted with it)
    kinds = [o["kind"] for o in b.objects]
    assert kinds.index("ServiceAccount") < kinds.index("Job")


def test_node_mode_settings_and_the_neuron_defaults() -> None:
    b = bundle(
        "g6.2xlarge",
        {
            "mode": "node",
            "namespace": "monitoring",
            "selector": "app.kubernetes.io/name=dcgm-exporter",
            "port": 9500,
        },
    )
    assert b.loadgen is not None and b.loadgen.telemetry is not None
    tel = b.loadgen.telemetry
    assert (tel.namespace, tel.selector, tel.port) == (
        "monitoring",
        "app.kubernetes.io/name=dcgm-exporter",
        9500,
    )
    assert {o["metadata"]["namespace"] for o in b.of_kind("Role")} == {"bench", "monitoring"}
    n = bundle("inf2.xlarge", "node")
    assert n.loadgen is not None and n.loadgen.telemetry is not None
    assert (n.loadgen.telemetry.namespace, n.loadgen.telemetry.selector, n.loadgen.telemetry.port) == (
        "neuron-monitor",
        "app=neuron-monitor",
        8000,
    )


def test_auto_follows_what_the_cluster_runs() -> None:
    found = bundle("g6.2xlarge", "auto", cluster_has_exporter=True)
    assert found.loadgen is not None and found.loadgen.telemetry is not None
    assert found.loadgen.telemetry.mode == "node" and set(containers(found)) == {"engine"}
    assert bundle("g6.2xlarge", "auto", cluster_has_exporter=False).loadgen.telemetry.mode == "sidecar"  # type: ignore[union-attr]


def test_spec_telemetry_spellings(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(
        f"model: {MODEL}\ninstance_type: g6.2xlarge\ntarget:\n  kind: kubernetes\n  telemetry: node\n"
    )
    spec = load_run_spec(path)
    assert isinstance(spec.target, KubernetesTarget) and spec.target.telemetry.mode == "node"
    # an exported bundle of this spec follows its target's choice
    b = plan_bundle(spec, options=ExportOptions(namespace="bench"), tool_versions={}, environ={})
    assert b.loadgen is not None and b.loadgen.telemetry is not None and b.loadgen.telemetry.mode == "node"
    assert KubernetesTarget().telemetry.mode == "auto"
    with pytest.raises(ValidationError, match="label=value pairs"):
        KubernetesTelemetry(mode="node", selector="nvidia-dcgm-exporter")
    with pytest.raises(ValidationError, match="mode"):
        KubernetesTelemetry.model_validate("daemonset")


# ---- the lookup, against the fake Kubernetes API -----------------------------------------------------------
def telemetry(**update: Any) -> LoadgenTelemetry:
    base = LoadgenTelemetry(
        tier=AcceleratorType.gpu,
        mode="node",
        exporter="dcgm",
        namespace="gpu-operator",
        selector="app=nvidia-dcgm-exporter",
        port=9400,
        engine_namespace="bench",
        engine_selector={"app.kubernetes.io/instance": "eng", "app.kubernetes.io/component": "engine"},
    )
    return base.model_copy(update=update)


@pytest.fixture
def cluster_api() -> Iterator[tuple[FakeCluster, k8s.CoreV1Api]]:
    cluster = FakeCluster(existing_namespaces={"default", "bench"})
    cluster.add_pod("bench", "eng-7d9f8-abcde", telemetry().engine_selector, node=NODE, ip="10.0.1.40")
    with FakeKubeServer(cluster) as api:
        yield cluster, k8s.CoreV1Api(api)


def test_lookup_finds_the_exporter_on_the_engines_node(
    cluster_api: tuple[FakeCluster, k8s.CoreV1Api],
) -> None:
    cluster, core = cluster_api
    cluster.add_pod(
        "gpu-operator", "nvidia-dcgm-exporter-aaaaa", DCGM_LABELS, node="ip-10-0-9-9", ip="10.0.9.7"
    )
    cluster.add_pod("gpu-operator", "nvidia-dcgm-exporter-bbbbb", DCGM_LABELS, node=NODE, ip="10.0.1.77")
    cluster.add_pod("gpu-operator", "other-on-the-node", {"app": "other"}, node=NODE, ip="10.0.1.78")
    found = find_node_exporter(core, telemetry())
    assert found.url == "http://10.0.1.77:9400/metrics" and found.engine_node == NODE and found.missing == []


def test_lookup_says_why_when_there_is_none(cluster_api: tuple[FakeCluster, k8s.CoreV1Api]) -> None:
    cluster, core = cluster_api
    cluster.add_pod(
        "gpu-operator", "nvidia-dcgm-exporter-aaaaa", DCGM_LABELS, node="ip-10-0-9-9", ip="10.0.9.7"
    )
    none = find_node_exporter(core, telemetry())
    assert none.url is None
    assert none.missing == [
        f"DCGM exporter: no pod labelled app=nvidia-dcgm-exporter on node {NODE} (namespace gpu-operator)"
    ]
    cluster.add_pod(
        "gpu-operator", "nvidia-dcgm-exporter-ccccc", DCGM_LABELS, node=NODE, ip=None, phase="Pending"
    )
    pending = find_node_exporter(core, telemetry())
    assert (
        pending.url is None
        and "on node " + NODE in pending.missing[0]
        and "is Pending, not running" in pending.missing[0]
    )
    cluster.forbidden_namespaces.add("gpu-operator")
    refused = find_node_exporter(core, telemetry())
    assert (
        refused.url is None
        and "cannot list pods labelled app=nvidia-dcgm-exporter in namespace gpu-operator (403"
        in refused.missing[0]
    )
    cluster.forbidden_namespaces = {"bench"}
    blind = find_node_exporter(core, telemetry())
    assert blind.url is None and "cannot list the engine's pods in namespace bench (403" in blind.missing[0]


# ---- the load generator stores device telemetry ------------------------------------------------------------
class Exporter:
    """A DCGM exporter answering with recorded scrapes: ``scripted`` texts in turn (the last one repeated), or,
    with ``step_j``, scrape 2 whose energy counters rise by ``step_j`` per GPU at every request."""

    def __init__(self, scripted: list[str] | None = None, step_j: float | None = None) -> None:
        self.requests = 0
        self.scripted = scripted or []
        self.step_j = step_j
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = outer.next_text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next_text(self) -> str:
        self.requests += 1
        if self.step_j is None:
            return self.scripted[min(self.requests, len(self.scripted)) - 1]
        text = (DATA / "dcgm_scrape_2.txt").read_text()
        for base in ("9878343210", "1234759890"):
            text = text.replace(f" {base}\n", f" {int(base) + int(self.requests * self.step_j * 1000)}\n")
        return text

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_load_generator_stores_device_telemetry_from_a_dcgm_scrape() -> None:
    one, two = ((DATA / f"dcgm_scrape_{i}.txt").read_text() for i in (1, 2))
    exporter = Exporter([one, one, two])  # the probe and the baseline read scrape 1, the end scrape 2
    sweep = SweepSpec(
        input_lens=[128], concurrency=[2], prompts_per_concurrency=2, output_len=8, num_warmups=0
    )
    config = LoadgenConfig(
        run_id="r1",
        base_url="http://eng.bench.svc.cluster.local:8000",
        served_model="m",
        sweep=sweep,
        telemetry=telemetry(mode="sidecar", url=exporter.url, namespace=None, selector=None, port=None),
    )
    lines: list[str] = []
    try:
        payload = run_shard(config, 0, bench=fake_bench, out=lines.append)
    finally:
        exporter.close()
    assert payload["error"] is None and exporter.requests == 3
    ((_key, _status, summary),) = merge_shards(sweep, [payload])
    tel = summary.device_telemetry
    assert tel is not None and tel.available
    assert [d.device for d in tel.devices] == ["gpu0", "gpu1"]
    assert tel.sources == [f"dcgm:{exporter.url}"]
    assert tel.energy_j == pytest.approx(1992.0)  # the recorded counters' rise: 1800 J + 192 J
    assert tel.device("gpu0").util_peak_pct == 99.0  # type: ignore[union-attr]
    assert tel.tokens_per_joule(summary.total_output_tokens) == pytest.approx(
        summary.total_output_tokens / 1992.0
    )
    # said once: the engine's CPU is on another node
    assert sum(m.startswith("cpu: the engine runs") for m in tel.missing) == 1
    assert any(n.startswith("Energy: 1992 J") for n in summary.notes)
    assert sum(n.startswith("Device gpu0:") for n in summary.notes) == 1
    assert tel.zero_wall == pytest.approx(summary.started_at - min(r.start_s for r in summary.requests))
    assert any("device telemetry from " + exporter.url in line for line in lines)


def test_an_exporter_that_does_not_answer_is_said_not_raised() -> None:
    sweep = SweepSpec(
        input_lens=[128], concurrency=[1], prompts_per_concurrency=1, output_len=4, num_warmups=0
    )
    config = LoadgenConfig(
        run_id="r1",
        base_url="http://eng.bench.svc.cluster.local:8000",
        served_model="m",
        sweep=sweep,
        telemetry=telemetry(mode="sidecar", url="http://127.0.0.1:9/metrics"),
    )
    payload = run_shard(config, 0, bench=fake_bench, out=lambda _line: None)
    ((_, _, summary),) = merge_shards(sweep, [payload])
    assert summary.completed == 1 and summary.device_telemetry is not None
    assert not summary.device_telemetry.available
    assert any(
        m.startswith("DCGM: the exporter at http://127.0.0.1:9/metrics did not answer")
        for m in summary.device_telemetry.missing
    )


def test_a_cpu_engine_in_a_cluster_says_its_cpu_is_not_read() -> None:
    b = bundle("m8i.2xlarge")
    assert b.loadgen is not None and b.loadgen.telemetry is not None
    config = b.loadgen.model_copy(
        update={
            "sweep": SweepSpec(
                input_lens=[64], concurrency=[1], prompts_per_concurrency=1, output_len=4, num_warmups=0
            )
        }
    )
    payload = run_shard(config, 0, bench=fake_bench, out=lambda _line: None)
    ((_, _, summary),) = merge_shards(config.sweep, [payload])
    tel = summary.device_telemetry
    assert tel is not None and not tel.available and tel.samples == []
    assert len(tel.missing) == 1 and "cgroups" in tel.missing[0] and "not read" in tel.missing[0]


# ---- a whole run on the fake cluster ------------------------------------------------------------------------
def make_loadgen() -> Any:
    barrier = Barrier(2, port=0, timeout_s=20)

    def loadgen(config: dict[str, Any], shard: int, shards: int) -> tuple[str, bool]:
        lines: list[str] = []
        payload = run_shard(
            LoadgenConfig.model_validate(config),
            shard,
            barrier=barrier.arrive,
            bench=fake_bench,
            out=lines.append,
        )
        return "\n".join(lines) + "\n", payload["error"] is None

    return loadgen


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_gpu_run_reads_the_nodes_dcgm_exporter(store: Store) -> None:
    exporter = Exporter(step_j=50.0)
    cluster = FakeCluster(ready_after=2, job_done_after=2, loadgen=make_loadgen())
    # the GPU Operator's DaemonSet: one pod per GPU node; the engine's node's answers on this machine
    cluster.add_pod("gpu-operator", "nvidia-dcgm-exporter-x1", DCGM_LABELS, node="ip-10-0-7-7", ip="10.0.7.8")
    cluster.add_pod(
        "gpu-operator", "nvidia-dcgm-exporter-x2", DCGM_LABELS, node=cluster.engine_node, ip="127.0.0.1"
    )
    spec = RunSpec(
        model=MODEL,
        instance_type="g6.2xlarge",
        engine=EngineSpec(name="vllm"),  # the tier's default runtime, as submitting a run fills it in
        target=KubernetesTarget(
            namespace="bench", loadgen_shards=2, telemetry={"mode": "auto", "port": exporter.port}
        ),
        sweep=SweepSpec(
            input_lens=[128],
            concurrency=[1, 4],
            prompts_per_concurrency=2,
            output_len=8,
            num_warmups=0,
            scrape_metrics=False,
        ),
    )
    run_id = store.create_run(kind="run", spec=spec.public_dict(), model=MODEL, target="kubernetes").id
    factory = functools.partial(KubernetesDeployTarget, poll_s=0.01, loadgen_poll_s=0.01)
    try:
        with FakeKubeServer(cluster) as api:
            run = execute_run(store, run_id, target_factory=functools.partial(factory, api_client=api))
    finally:
        exporter.close()
    assert run.status == RunStatus.completed, run.error
    record = run.extra["kubernetes"]["device_telemetry"]
    assert record["mode"] == "node" and record["node"] == cluster.engine_node
    assert record["url"] == f"http://127.0.0.1:{exporter.port}/metrics" and record["missing"] == []
    # the engine pod carries no sidecar in node mode; the load generator's RBAC was made and deleted
    (deployment,) = [o for (r, _, _), o in cluster.objects.items() if r == "deployments"] or [None]
    assert deployment is None  # torn down
    assert any("/namespaces/gpu-operator/roles" in p for m, p in cluster.requests if m == "POST")
    assert any("/namespaces/gpu-operator/rolebindings/" in p for m, p in cluster.requests if m == "DELETE")
    assert [k for k in cluster.objects if k[0] in ("roles", "rolebindings", "serviceaccounts")] == []
    results = store.get_results(run_id)
    assert len(results) == 2
    for result in results:
        summary = BenchmarkSummary.model_validate(result.summary)
        tel = summary.device_telemetry
        assert tel is not None and tel.available and [d.device for d in tel.devices] == ["gpu0", "gpu1"]
        # probe, baseline and end reading per cell (shard 0 only): the counters rose 50 J per GPU per reading
        assert tel.energy_j == pytest.approx(2 * 50.0)
        assert (
            sum(m.startswith("cpu: the engine runs on node " + cluster.engine_node) for m in tel.missing) == 1
        )
    assert exporter.requests == 3 * len(results)
    # the readers a local run's results go through take them unchanged: runs show's Devices table, the compare
    cells = cell_devices(results)
    assert [(c.input_len, c.concurrency) for c in cells] == [(128, 1), (128, 4)]
    figures = device_figures([r.summary for r in results if r.concurrency == 4])
    assert figures["kind"] == "gpu" and figures["energy_j"] == pytest.approx(100.0)
    assert figures["tokens_per_joule"] == pytest.approx(8 * 8 / 100.0)  # 8 requests x 8 output tokens


def test_a_config_without_telemetry_settings_claims_nothing() -> None:
    """An older ConfigMap (no telemetry section): nothing is read and the summary carries no device telemetry."""
    sweep = SweepSpec(
        input_lens=[64], concurrency=[1], prompts_per_concurrency=1, output_len=4, num_warmups=0
    )
    config = LoadgenConfig(
        run_id="r", base_url="http://eng.bench.svc.cluster.local:8000", served_model="m", sweep=sweep
    )
    payload = run_shard(config, 0, bench=fake_bench, out=lambda _line: None)
    ((_, _, summary),) = merge_shards(sweep, [payload])
    assert summary.completed == 1 and summary.device_telemetry is None
