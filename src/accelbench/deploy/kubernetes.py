"""The Kubernetes target: deploy the model server, run the load generator inside the cluster, clean up.

What this target does in the run lifecycle (``deploy.orchestrator.execute_run``)::

    render + validate manifests -> Deployment + Service -> wait ready (per-tier timeout, early failure on
    image pull errors, crash loops) -> find the device exporter on the engine's node -> load-generator Job
    (N shards) -> read each shard's results from its log -> merge shards per cell -> store -> cost (hourly
    price x how long the node was held) -> teardown

Device telemetry (``KubernetesTarget.telemetry``, ``deploy/manifests/telemetry.py``): with ``auto`` the target
asks the cluster before rendering whether it runs the tier's node exporter (node mode) or not (a sidecar in the
engine pod); in node mode, once the engine is ready, its node's exporter pod is found by label
(``incluster.find_node_exporter``) and its address, or the sentence saying why there is none, goes into the
load generator's config. The run's record keeps where telemetry came from (``record()["device_telemetry"]``).

A capacity search (a spec's ``capacity:`` section, ``measure_capacity``) runs in one load-generator pod, which
measures each level and chooses the next; its probes and their summaries come back through the pod's log.

Teardown always runs: on success, on any failure, and on cancel (the cancel event is checked at every
poll). Everything the target created is deleted, in reverse order, and a deletion that fails is reported
in the run instead of being swallowed.

It uses the official ``kubernetes`` client; the ``api_client`` can be injected (the tests point it at a
small in-process HTTP server that answers the same REST calls).
"""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from accelbench.bench.sweep import SweepOutcome
from accelbench.catalog import get_catalog
from accelbench.deploy.endpoint_capacity import store_probes
from accelbench.deploy.incluster import decode_capacity, find_node_exporter, merge_shards
from accelbench.deploy.kubernetes_api import (
    Clients,
    api_error,
    clients,
    create_object,
    delete_object,
    ensure_namespace,
    load_api_client,
)
from accelbench.deploy.manifests import (
    Bundle,
    ExportOptions,
    LoadgenConfig,
    load_model_facts,
    plan_bundle,
    validate_objects,
)
from accelbench.deploy.manifests.render import DEFAULT_K8S_VERSION, KARPENTER_KINDS, dns_name
from accelbench.deploy.manifests.telemetry import EXPORTERS, LoadgenTelemetry
from accelbench.deploy.shards import decode_results
from accelbench.deploy.target import TARGETS, DeployedEngine, Target
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.progress import Progress
from accelbench.domain.run import CellStatus, KubernetesTarget, RunSpec, RunStatus, SweepSpec
from accelbench.domain.sweep_events import CellKey, SweepEvent
from accelbench.errors import EngineError, UserInputError
from accelbench.runtimes.versions import effective_tool_versions
from accelbench.store import get_store

if TYPE_CHECKING:
    from accelbench.bench.sweep import SweepOutcome
    from accelbench.domain.capacity import CapacityResult, CapacitySpec
    from accelbench.store.repo import Store

log = logging.getLogger(__name__)

IMAGE_PULL_GRACE_S = 300.0
CRASH_RESTARTS = 3
FATAL_WAITING = {"InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}
LOADGEN_POLL_S = 15.0
READY_POLL_S = 10.0


@TARGETS.register("kubernetes")
class KubernetesDeployTarget(Target):
    """The model server as a Deployment + Service in a cluster; the load generator as an Indexed Job."""

    kind = "kubernetes"
    #: the Service is cluster-internal: the load generator runs in the cluster (``measure``), and the answer
    #: check and the engine probe, which would have to reach it from here, are not made
    measured_from_here = False

    def __init__(
        self,
        config: KubernetesTarget | None = None,
        *,
        progress: Progress | None = None,
        api_client: k8s.ApiClient | None = None,
        tool_versions: dict[str, str] | None = None,
        poll_s: float = READY_POLL_S,
        loadgen_poll_s: float = LOADGEN_POLL_S,
        k8s_version: str = DEFAULT_K8S_VERSION,
        **context: Any,
    ) -> None:
        """``context``: the lifecycle's ``cancel``, ``run_id``, ``hf_token`` (``Target``)."""
        super().__init__(progress=progress, **context)
        self.config: KubernetesTarget = config or KubernetesTarget()
        self._api_client = api_client
        self.tool_versions = tool_versions
        self.poll_s = poll_s
        self.loadgen_poll_s = loadgen_poll_s
        self.k8s_version = k8s_version
        self.bundle: Bundle | None = None
        self.created: list[tuple[str, str, str]] = []  # (kind, name, namespace), in creation order
        self.cells_stored = 0
        self.torn_down = False
        #: where the load generator reads device telemetry (found at deploy time), for the run's record
        self.device_telemetry: LoadgenTelemetry | None = None
        self.telemetry_notes: list[str] = []
        self._clients: Clients | None = None

    # ---- clients ------------------------------------------------------------------------------------
    @property
    def api(self) -> Clients:
        if self._clients is None:
            self._clients = clients(self._api_client or load_api_client(self.config))
        return self._clients

    @property
    def namespace(self) -> str:
        return self.config.namespace

    # ---- render ---------------------------------------------------------------------------------------
    def render(self, spec: RunSpec) -> Bundle:
        """The same bundle ``accelbench export`` writes (planner settings, guards, strict validation)."""

        if not spec.instance_type:
            raise UserInputError(
                "A kubernetes run needs instance_type: the node type the model server is pinned to.",
                hint="Add instance_type (e.g. g6.2xlarge, r8g.4xlarge) to the spec.",
            )
        self.instance = get_catalog().instance(spec.instance_type)
        if self.tool_versions is None:
            self.tool_versions = effective_tool_versions(get_store())
        facts, _ = load_model_facts(spec)
        base = dns_name("ab", facts.served_model_name, limit=30)
        # the run id's random tail keeps two runs of the same model (same day) apart
        suffix = re.sub(r"[^a-z0-9]", "", self.run_id.lower())[-6:] or "run"
        name = dns_name(f"{base}-{suffix}")
        options = ExportOptions(
            namespace=self.namespace,
            name=name,
            runtime=spec.engine.name if "name" in spec.engine.model_fields_set else None,
            loadgen_image=self.config.image,
            loadgen_shards=self.config.loadgen_shards,
            loadgen_timeout_s=self.config.loadgen_timeout_s,
            hf_token_secret=f"{name}-hf" if self.hf_token else None,
            run_id=self.run_id,
            telemetry=self.config.telemetry,
            cluster_has_exporter=self._cluster_has_exporter(),
        )
        bundle = plan_bundle(spec, options=options, tool_versions=self.tool_versions, instance=self.instance)
        validate_objects(bundle.objects, self.k8s_version)
        return bundle

    def _cluster_has_exporter(self) -> bool | None:
        """Whether the cluster runs the tier's node exporter (a pod with its label in its namespace), asked only
        when the mode is auto; a cluster that cannot be asked gets the sidecar, and says why."""
        tel = self.config.telemetry
        kind = EXPORTERS.get(self.instance.accelerator_type) if self.instance is not None else None
        if tel.mode != "auto" or kind is None:
            return None
        ns, sel = tel.namespace or kind.namespace, tel.selector or kind.selector
        try:
            pods = self.api[0].list_namespaced_pod(ns, label_selector=sel, limit=1)
        except ApiException as exc:
            self.telemetry_notes.append(
                f"telemetry auto: cannot look for a {kind.label} (pods labelled {sel} in {ns}: "
                f"{api_error(exc)}); the engine pod carries its own"
            )
            return False
        found = bool(pods.items)
        self.telemetry_notes.append(
            f"telemetry auto: {'the cluster runs' if found else 'no'} {kind.label} (pods labelled {sel} in {ns})"
            + ("; reading the one on the engine's node" if found else "; the engine pod carries its own")
        )
        return found

    def find_exporter(self) -> LoadgenTelemetry | None:
        """Node mode: the exporter on the engine's node, found by label now (the engine is ready, so its node is
        known), for the load generator's config; its absence is a sentence, never an error."""
        assert self.bundle is not None and self.bundle.loadgen is not None
        tel = self.bundle.loadgen.telemetry
        if tel is None or tel.mode != "node":
            self.device_telemetry = tel
            return tel
        pods = self._engine_pods()
        node = next((p.spec.node_name for p in pods if p.spec is not None and p.spec.node_name), None)
        self.device_telemetry = (
            find_node_exporter(self.api[0], tel, node)
            if node
            else tel.model_copy(
                update={
                    "missing": [f"{tel.kind.label if tel.kind else 'exporter'}: the engine pod has no node"]
                }
            )
        )
        for line in self.device_telemetry.missing:
            self.progress.line(f"device telemetry: {line}")
        if self.device_telemetry.url:
            self.progress.line(f"device telemetry: {self.device_telemetry.url} on node {node}")
        return self.device_telemetry

    # ---- create ---------------------------------------------------------------------------------------
    def _create(self, obj: dict[str, Any]) -> None:
        namespace = obj["metadata"].get("namespace") or self.namespace
        create_object(self.api, obj, namespace)
        self.created.append((obj["kind"], obj["metadata"]["name"], namespace))

    # ---- Target interface -----------------------------------------------------------------------------
    def deploy(self, spec: RunSpec, *, run_dir: Path | None = None) -> Endpoint:
        self._check_cancel()
        self.progress.phase("Rendering manifests")
        bundle = self.bundle = self.render(spec)
        plan = bundle.engine
        ensure_namespace(self.api[0], self.namespace)
        if self.hf_token and plan.hf_token_secret:
            self._create(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": plan.hf_token_secret,
                        "namespace": self.namespace,
                        "labels": plan.labels(),
                    },
                    "type": "Opaque",
                    "stringData": {"HF_TOKEN": self.hf_token},
                }
            )
        self.progress.phase(
            f"Deploying {plan.runtime} on {plan.instance.name} ({self.namespace}/{plan.name})"
        )
        for obj in bundle.objects:
            if (
                obj["kind"] in KARPENTER_KINDS
                or obj["metadata"]["labels"].get("app.kubernetes.io/component") != "engine"
            ):
                continue
            self._create(obj)
        self.deployed = DeployedEngine.serving(
            spec,
            plan.params,
            target="kubernetes",
            **plan.model_dump(include={"runtime", "engine_version", "command", "env"}),
            base_url=plan.service_url,
            started_at=time.time(),
            extra={
                "namespace": self.namespace,
                "deployment": plan.name,
                "image": plan.image,
                "instance_type": plan.instance.name,
                "pod": {"cpus": plan.size.cpus, "memory_mib": plan.size.memory_mib},
                "ready_timeout_s": bundle.ready_timeout_s,
                "warnings": bundle.warnings,
            },
        )
        return Endpoint(base_url=plan.service_url, served_model=plan.params.served_model_name)

    def _engine_pods(self) -> list[Any]:
        assert self.bundle is not None
        sel = ",".join(f"{k}={v}" for k, v in self.bundle.engine.selector().items())
        return list(self.api[0].list_namespaced_pod(self.namespace, label_selector=sel).items or [])

    def _pod_events(self, pod_name: str) -> list[str]:
        try:
            events = self.api[0].list_namespaced_event(
                self.namespace, field_selector=f"involvedObject.name={pod_name}"
            )
        except ApiException:
            return []
        return [f"{e.reason}: {e.message}" for e in (events.items or [])][-5:]

    def _pod_state(self) -> tuple[str | None, str]:
        """(fatal reason or None, a one-line description of where the pod is)."""
        pods = self._engine_pods()
        if not pods:
            return None, "no pod yet (the ReplicaSet has not created it)"
        pod = pods[0]
        status = pod.status
        phase = status.phase if status else "Unknown"
        for cond in (status.conditions or []) if status else []:
            if cond.type == "PodScheduled" and cond.status == "False":
                return None, f"pod {pod.metadata.name} not scheduled: {cond.reason}: {cond.message}"
        for cs in (status.container_statuses or []) if status else []:
            waiting = cs.state.waiting if cs.state else None
            if waiting is not None:
                reason = waiting.reason or ""
                if reason in FATAL_WAITING:
                    return f"{reason}: {waiting.message}", f"pod {pod.metadata.name}: {reason}"
                if reason in ("ImagePullBackOff", "ErrImagePull"):
                    return (reason if self._pull_failing_since(reason) else None), (
                        f"pod {pod.metadata.name}: {reason}: {waiting.message}"
                    )
                if reason == "CrashLoopBackOff" and (cs.restart_count or 0) >= CRASH_RESTARTS:
                    return (
                        f"the engine crashed {cs.restart_count} times (CrashLoopBackOff)",
                        f"pod {pod.metadata.name}: CrashLoopBackOff",
                    )
        return None, f"pod {pod.metadata.name}: {phase}"

    _pull_first_seen: float | None = None

    def _pull_failing_since(self, reason: str) -> bool:
        now = time.monotonic()
        if self._pull_first_seen is None:
            self._pull_first_seen = now
        return now - self._pull_first_seen >= IMAGE_PULL_GRACE_S

    def wait_ready(self, timeout: float | None = None) -> None:
        assert self.bundle is not None, "deploy() first"
        plan = self.bundle.engine
        timeout = timeout or self.config.ready_timeout_s or self.bundle.ready_timeout_s
        apps = self.api[1]
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        where = ""
        self.progress.phase(f"Waiting for {plan.name} to become ready (up to {timeout / 60:.0f} min)")
        while True:
            self._check_cancel()
            dep = apps.read_namespaced_deployment(plan.name, self.namespace)
            if dep.status is not None and (dep.status.available_replicas or 0) >= 1:
                if self.deployed is not None:
                    self.deployed = self.deployed.model_copy(update={"ready_s": time.monotonic() - started})
                return
            fatal, where = self._pod_state()
            if fatal:
                raise self._not_ready(f"The model server cannot start: {fatal}.", where)
            if time.monotonic() >= deadline:
                raise self._not_ready(f"The model server did not become ready within {timeout:g} s.", where)
            self.progress.line(where)
            self._sleep(self.poll_s)

    def _not_ready(self, message: str, where: str) -> EngineError:
        details = [where] if where else []
        pods = self._engine_pods()
        if pods:
            details += self._pod_events(pods[0].metadata.name)
            tail = self._pod_log(pods[0].metadata.name, 20)
            if tail.strip():
                details.append("engine log (last lines):\n" + tail)
        return EngineError(
            message + (" " + details[0] if details else ""),
            hint="\n".join(details[1:]) or "Check that the node pool can provide the instance type.",
        )

    def _pod_log(self, pod: str, tail: int | None) -> str:
        try:
            return str(self.api[0].read_namespaced_pod_log(pod, self.namespace, tail_lines=tail))
        except ApiException:
            return ""

    def logs(self, tail: int | None = 200) -> str:
        if self.bundle is None:
            return ""
        pods = self._engine_pods()
        return self._pod_log(pods[0].metadata.name, tail) if pods else ""

    def check_alive(self, wait_s: float = 0.0) -> None:
        fatal, where = self._pod_state()
        if fatal:
            raise EngineError(f"The model server stopped: {fatal} ({where}).")

    def teardown(self) -> None:
        """Delete what this target created, newest first; never raises (failures are recorded)."""
        if self.torn_down:
            return
        for kind, name, namespace in reversed(self.created):
            try:
                delete_object(self.api, kind, name, namespace)
            except Exception as exc:  # keep deleting the rest; report what stayed behind
                msg = f"left behind: {kind} {namespace}/{name}: {exc}"
                log.warning("teardown: %s", msg)
                self.teardown_errors.append(msg)
        self.created = [c for c in self.created if any(f"{c[2]}/{c[1]}" in e for e in self.teardown_errors)]
        self.torn_down = not self.teardown_errors

    # ---- the in-cluster benchmark ---------------------------------------------------------------------
    def run_loadgen(
        self, config_update: dict[str, Any] | None = None, *, what: str = "the sweep"
    ) -> list[dict[str, Any]]:
        """Create the load-generator objects, wait for the Job, return each shard's decoded payload.
        ``config_update`` changes the pods' config (``LoadgenConfig``) before it is created."""

        assert self.bundle is not None
        lg = [
            o
            for o in self.bundle.objects
            if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "loadgen"
        ]
        for obj in lg:
            if config_update and obj["kind"] == "ConfigMap" and "loadgen.json" in obj.get("data", {}):
                config = LoadgenConfig.model_validate_json(obj["data"]["loadgen.json"])
                config = LoadgenConfig.model_validate({**config.model_dump(), **config_update})
                text = json.dumps(config.model_dump(mode="json"), indent=2, sort_keys=True)
                obj = {**obj, "data": {**obj["data"], "loadgen.json": text}}
            if obj["kind"] in ("Role", "RoleBinding") and obj["metadata"]["namespace"] != self.namespace:
                # the load generator's own lookup in the exporter's namespace: not needed when the address was
                # found from here, so a refusal (no rights there) is said, not fatal
                try:
                    self._create(obj)
                except EngineError as exc:
                    self.telemetry_notes.append(
                        f"{exc.message} (the exporter's address found from here is used)"
                    )
                continue
            self._create(obj)
        job = next(o for o in lg if o["kind"] == "Job")
        name = job["metadata"]["name"]
        shards = job["spec"]["completions"]
        batch = self.api[2]
        deadline = time.monotonic() + self.config.loadgen_timeout_s + 120
        self.progress.phase(f"Load generator: {shards} pod(s) running {what} in the cluster")
        while True:
            self._check_cancel()
            st = batch.read_namespaced_job(name, self.namespace).status
            succeeded, failed = (st.succeeded or 0, st.failed or 0) if st else (0, 0)
            if succeeded >= shards:
                break
            if failed:
                raise EngineError(
                    f"The load-generator Job {name} failed ({failed} pod(s)).",
                    hint=self._loadgen_tail(name),
                )
            if time.monotonic() > deadline:
                raise EngineError(f"The load-generator Job {name} did not finish in time.")
            self.progress.line(f"load generator: {succeeded}/{shards} shard(s) done")
            self._sleep(self.loadgen_poll_s)
        return self._collect(name, shards)

    def _loadgen_pods(self, job: str) -> list[Any]:
        pods = self.api[0].list_namespaced_pod(
            self.namespace, label_selector=f"batch.kubernetes.io/job-name={job}"
        )
        return list(pods.items or [])

    def _loadgen_tail(self, job: str) -> str:
        out = []
        for pod in self._loadgen_pods(job):
            tail = self._pod_log(pod.metadata.name, 15)
            lines = [ln for ln in tail.splitlines() if not ln.startswith("ACCELBENCH-RESULT")]
            out.append(f"{pod.metadata.name}:\n" + "\n".join(lines))
        return "\n".join(out)

    def _collect(self, job: str, shards: int) -> list[dict[str, Any]]:
        by_index: dict[int, dict[str, Any]] = {}
        for pod in self._loadgen_pods(job):
            annotations = pod.metadata.annotations or {}
            index = int(annotations.get("batch.kubernetes.io/job-completion-index", -1))
            if pod.status is None or pod.status.phase != "Succeeded":
                continue
            payload = decode_results(self._pod_log(pod.metadata.name, None))
            by_index[payload.get("shard", index)] = payload
        missing = sorted(set(range(shards)) - set(by_index))
        if missing:
            raise EngineError(f"No results from load-generator shard(s) {missing} of Job {job}.")
        errors = [p["error"] for p in by_index.values() if p.get("error")]
        if errors:
            raise EngineError("The load generator reported errors: " + "; ".join(errors))
        return [by_index[i] for i in range(shards)]

    def measure(
        self, store: Store, run_id: str, endpoint: Endpoint, sweep: SweepSpec, *, events: Progress
    ) -> SweepOutcome:
        """Run the sweep in the cluster, merge the shards, store one result per (cell, repeat)."""

        payloads = self.run_loadgen(self._telemetry_update())
        merged = merge_shards(sweep, payloads)
        total = len(merged)
        events.sweep(SweepEvent(kind="start", cells_total=total, cells_done=0))
        outcome = SweepOutcome(run_id=run_id, status=RunStatus.completed, error=None, cells_total=total)
        for key, status, summary in merged:
            store.save_result(
                run_id,
                input_len=key["input_len"],
                concurrency=key["concurrency"],
                repeat=key["repeat"],
                summary=summary,
                status=status,
            )
            cell = CellKey(key["input_len"], key["concurrency"], key["repeat"])
            (outcome.ran if status == CellStatus.completed else outcome.partial).append(cell)
            events.sweep(
                SweepEvent(
                    kind="cell_done", cells_total=total, cells_done=len(outcome.ran), key=cell, status=status
                )
            )
        events.sweep(SweepEvent(kind="end", cells_total=total, cells_done=len(outcome.ran)))
        self.cells_stored = total
        if not merged:
            outcome.status, outcome.error = RunStatus.failed, "The load generator returned no results."
        return outcome

    def measure_capacity(
        self,
        store: Store,
        run_id: str,
        endpoint: Endpoint,
        capacity: CapacitySpec,
        *,
        start: float,
        events: Progress,
    ) -> CapacityResult:
        """The capacity search in the cluster: one load-generator pod runs it from ``start``; its probes, each
        with its summary, come back through the pod's log and are stored as a search from here stores them."""

        update = {"capacity_start": start, **(self._telemetry_update() or {})}
        (payload,) = self.run_loadgen(update, what="the capacity search")
        result, measured = decode_capacity(payload)
        store_probes(store, run_id, input_len=capacity.input_len, load=capacity.load, measured=measured)
        self.cells_stored = len(measured)
        for probe, _ in measured:
            events.line(f"{capacity.load} {probe.level:g}: {probe.why or 'measured'}")
        return result

    def _telemetry_update(self) -> dict[str, Any] | None:
        tel = self.find_exporter() if self.bundle is not None and self.bundle.loadgen is not None else None
        return {"telemetry": tel.model_dump(mode="json")} if tel is not None else None

    def run_fields(self) -> dict[str, Any]:
        fields = super().run_fields()
        if self.bundle is not None:
            plan = self.bundle.engine
            fields.update(tp_degree=plan.tensor_parallel, quantization=plan.params.settings.quantization)
        return fields

    def record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "namespace": self.namespace,
            "torn_down": self.torn_down,
            "cells_stored": self.cells_stored,
        }
        tel = self.device_telemetry or (
            self.bundle.loadgen.telemetry if self.bundle and self.bundle.loadgen else None
        )
        if tel is not None:
            record["device_telemetry"] = {
                **tel.model_dump(include={"mode", "exporter", "url"}),
                "node": tel.engine_node,
                "missing": tel.missing,
                "notes": self.telemetry_notes,
            }
        return record

    def explain(self, exc: Exception) -> str | None:
        return f"Kubernetes API error: {api_error(exc)}" if isinstance(exc, ApiException) else None
