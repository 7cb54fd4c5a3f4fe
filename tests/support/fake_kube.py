"""A tiny in-process Kubernetes API server for orchestration tests (no cluster can run here).

It answers the REST calls the official ``kubernetes`` client makes for the objects accelbench uses
(namespaces, Deployments, Services, ConfigMaps, Secrets, Jobs, Pods and their logs, Events), keeps them in
memory, and plays the controllers' part just enough for a run: a Deployment gets a pod that becomes ready
after ``ready_after`` reads (or never, stuck unschedulable), a Job gets one pod per completion index whose
log is produced by ``loadgen`` (the tests pass accelbench's real in-cluster shard code) and which succeeds
after ``job_done_after`` reads. Every request is recorded, so tests can assert what was created and deleted.

It is a test double of the API server's REST surface, not of Kubernetes' behaviour: scheduling, image pulls,
probes and networking are not simulated beyond the states listed above.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from kubernetes import client as k8s

Loadgen = Callable[[dict[str, Any], int, int], tuple[str, bool]]  # (config, shard, shards) -> (log, ok)

_ROUTES = [
    (re.compile(r"^/api/v1/namespaces/?$"), "namespaces", False),
    (re.compile(r"^/api/v1/namespaces/(?P<name>[^/]+)$"), "namespaces", False),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/log$"), "podlog", True),
    (
        re.compile(
            r"^/api/v1/namespaces/(?P<ns>[^/]+)/(?P<res>services|configmaps|secrets|pods|events|serviceaccounts)(?:/(?P<name>[^/]+))?$"
        ),
        "core",
        True,
    ),
    (
        re.compile(r"^/apis/apps/v1/namespaces/(?P<ns>[^/]+)/(?P<res>deployments)(?:/(?P<name>[^/]+))?$"),
        "apps",
        True,
    ),
    (
        re.compile(r"^/apis/batch/v1/namespaces/(?P<ns>[^/]+)/(?P<res>jobs)(?:/(?P<name>[^/]+))?$"),
        "batch",
        True,
    ),
    (
        re.compile(
            r"^/apis/rbac.authorization.k8s.io/v1/namespaces/(?P<ns>[^/]+)/(?P<res>roles|rolebindings)(?:/(?P<name>[^/]+))?$"
        ),
        "rbac",
        True,
    ),
]

_KINDS = {
    "services": "Service",
    "configmaps": "ConfigMap",
    "secrets": "Secret",
    "pods": "Pod",
    "events": "Event",
    "deployments": "Deployment",
    "jobs": "Job",
    "namespaces": "Namespace",
    "serviceaccounts": "ServiceAccount",
    "roles": "Role",
    "rolebindings": "RoleBinding",
}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class FakeCluster:
    ready_after: int | None = 2
    job_done_after: int = 2
    loadgen: Loadgen | None = None
    engine_log: str = "INFO: Started server process\nINFO: Uvicorn running on http://0.0.0.0:8000\n"
    existing_namespaces: set[str] = field(default_factory=lambda: {"default"})
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    reads: dict[tuple[str, str, str], int] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    #: the node a running engine pod is on, and its IP
    engine_node: str = "ip-10-0-1-23.ec2.internal"
    engine_ip: str = "10.0.1.40"
    #: list requests answered 403 Forbidden, by namespace (a caller without the rights there)
    forbidden_namespaces: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for ns in self.existing_namespaces:
            self.objects[("namespaces", "", ns)] = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns},
            }

    # -- views for assertions ---------------------------------------------------------------------------
    def names(self, res: str, ns: str | None = None) -> list[str]:
        return sorted(n for (r, s, n) in self.objects if r == res and (ns is None or s == ns))

    def created(self, res: str) -> list[str]:
        return [p for m, p in self.requests if m == "POST" and f"/{res}" in p]

    def deleted(self, res: str) -> list[str]:
        return [p.rsplit("/", 1)[-1] for m, p in self.requests if m == "DELETE" and f"/{res}/" in p]

    def add_pod(
        self, ns: str, name: str, labels: dict[str, str], *, node: str, ip: str | None, phase: str = "Running"
    ) -> None:
        """A pod another controller made (a DaemonSet's): on ``node``, with ``ip`` once running."""
        self.objects.setdefault(
            ("namespaces", "", ns), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
        status: dict[str, Any] = {"phase": phase}
        if ip:
            status["podIP"] = ip
        self.objects[("pods", ns, name)] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "exporter", "image": "x"}]},
            "status": status,
        }

    # -- controllers --------------------------------------------------------------------------------------
    def _meta(self, obj: dict[str, Any], ns: str) -> None:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", ns)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta["resourceVersion"] = "1"

    def _on_create(self, res: str, ns: str, obj: dict[str, Any]) -> None:
        if res == "deployments":
            name = obj["metadata"]["name"]
            tmpl = obj["spec"]["template"]
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-7d9f8-abcde",
                    "namespace": ns,
                    "labels": dict(tmpl["metadata"]["labels"]),
                },
                "spec": tmpl["spec"],
                "status": {
                    "phase": "Pending",
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
                        }
                    ],
                },
            }
            self.objects[("pods", ns, pod["metadata"]["name"])] = pod
            self.logs[(ns, pod["metadata"]["name"])] = self.engine_log
            obj["status"] = {"replicas": 1, "unavailableReplicas": 1}
            self.objects[("events", ns, f"ev-{name}")] = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"ev-{name}", "namespace": ns},
                "involvedObject": {"kind": "Pod", "name": pod["metadata"]["name"], "namespace": ns},
                "reason": "FailedScheduling",
                "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
                "type": "Warning",
            }
        if res == "jobs":
            obj["status"] = {"active": obj["spec"]["completions"]}

    def _on_read(self, res: str, ns: str, name: str, obj: dict[str, Any]) -> None:
        key = (res, ns, name)
        self.reads[key] = self.reads.get(key, 0) + 1
        n = self.reads[key]
        if res == "deployments" and self.ready_after is not None and n >= self.ready_after:
            obj["status"] = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
            for (r, s, pname), pod in self.objects.items():
                if r == "pods" and s == ns and pname.startswith(name + "-"):
                    pod["spec"] = {**pod["spec"], "nodeName": self.engine_node}
                    pod["status"] = {
                        "phase": "Running",
                        "podIP": self.engine_ip,
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "containerStatuses": [
                            {
                                "name": "engine",
                                "ready": True,
                                "restartCount": 0,
                                "image": "x",
                                "imageID": "",
                                "state": {"running": {"startedAt": _now()}},
                            }
                        ],
                    }
        if (
            res == "jobs"
            and n >= self.job_done_after
            and "succeeded" not in obj["status"]
            and "failed" not in obj["status"]
        ):
            self._run_job(ns, obj)

    def _run_job(self, ns: str, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        shards = job["spec"]["completions"]
        cm_name = job["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"]
        config = json.loads(self.objects[("configmaps", ns, cm_name)]["data"]["loadgen.json"])
        assert self.loadgen is not None, "a Job was created but the test gave no loadgen"
        results: dict[int, tuple[str, bool]] = {}
        threads = [
            threading.Thread(target=lambda i=i: results.__setitem__(i, self.loadgen(config, i, shards)))  # type: ignore[misc]
            for i in range(shards)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        ok = 0
        for i in range(shards):
            text, good = results.get(i, ("shard never finished", False))
            pod_name = f"{name}-{i}-x{i}z"
            labels = dict(job["spec"]["template"]["metadata"]["labels"])
            labels["batch.kubernetes.io/job-name"] = name
            self.objects[("pods", ns, pod_name)] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "namespace": ns,
                    "labels": labels,
                    "annotations": {"batch.kubernetes.io/job-completion-index": str(i)},
                },
                "status": {"phase": "Succeeded" if good else "Failed"},
            }
            self.logs[(ns, pod_name)] = text
            ok += good
        job["status"] = {"succeeded": ok} if ok == shards else {"succeeded": ok, "failed": shards - ok}

    # -- HTTP ---------------------------------------------------------------------------------------------
    def handle(self, method: str, url: str, body: bytes) -> tuple[int, Any, str]:
        parsed = urlparse(url)
        path, query = parsed.path, parse_qs(parsed.query)
        with self.lock:
            self.requests.append((method, path))
            for rx, group, _namespaced in _ROUTES:
                m = rx.match(path)
                if not m:
                    continue
                g = m.groupdict()
                if group == "podlog":
                    text = self.logs.get((g["ns"], g["name"]))
                    if text is None:
                        return (
                            404,
                            _status(404, "NotFound", f'pods "{g["name"]}" not found'),
                            "application/json",
                        )
                    tail = query.get("tailLines")
                    if tail:
                        text = "\n".join(text.splitlines()[-int(tail[0]) :])
                    return 200, text, "text/plain"
                res = g.get("res") or "namespaces"
                ns = g.get("ns") or ""
                name = g.get("name")
                return self._crud(method, res, ns, name, body, query)
        return 404, _status(404, "NotFound", f"no route {path}"), "application/json"

    def _crud(
        self, method: str, res: str, ns: str, name: str | None, body: bytes, query: dict[str, list[str]]
    ) -> tuple[int, Any, str]:
        kind = _KINDS[res]
        if method == "POST" and name is None:
            obj = json.loads(body)
            obj_name = obj["metadata"]["name"]
            if (res, ns, obj_name) in self.objects:
                return (
                    409,
                    _status(409, "AlreadyExists", f'{res} "{obj_name}" already exists'),
                    "application/json",
                )
            if ns and ("namespaces", "", ns) not in self.objects:
                return 404, _status(404, "NotFound", f'namespaces "{ns}" not found'), "application/json"
            self._meta(obj, ns)
            self.objects[(res, ns, obj_name)] = obj
            self._on_create(res, ns, obj)
            return 201, obj, "application/json"
        if method == "GET" and name is None and ns in self.forbidden_namespaces:
            return (
                403,
                _status(
                    403, "Forbidden", f'{res} is forbidden: cannot list resource "{res}" in namespace "{ns}"'
                ),
                "application/json",
            )
        if method == "GET" and name is None:
            items = [o for (r, s, _), o in self.objects.items() if r == res and s == ns]
            for sel in query.get("labelSelector", []):
                want = dict(p.split("=", 1) for p in sel.split(","))
                items = [
                    o
                    for o in items
                    if all(o["metadata"].get("labels", {}).get(k) == v for k, v in want.items())
                ]
            for sel in query.get("fieldSelector", []):
                k, v = sel.split("=", 1)
                if k == "involvedObject.name":
                    items = [o for o in items if o.get("involvedObject", {}).get("name") == v]
                if k == "spec.nodeName":
                    items = [o for o in items if o.get("spec", {}).get("nodeName") == v]
            return (
                200,
                {"apiVersion": "v1", "kind": f"{kind}List", "metadata": {}, "items": items},
                "application/json",
            )
        obj = self.objects.get((res, ns, name or ""))
        if obj is None:
            return 404, _status(404, "NotFound", f'{res} "{name}" not found'), "application/json"
        if method == "GET":
            self._on_read(res, ns, name or "", obj)
            return 200, obj, "application/json"
        if method == "DELETE":
            del self.objects[(res, ns, name or "")]
            if res == "services":  # the API server answers a Service deletion with the deleted Service
                return 200, obj, "application/json"
            if res == "deployments":  # the ReplicaSet's pods go with it (background propagation)
                for key in [
                    k for k in self.objects if k[0] == "pods" and k[1] == ns and k[2].startswith(f"{name}-")
                ]:
                    del self.objects[key]
            if res == "jobs":
                for key in [
                    k
                    for k, o in self.objects.items()
                    if k[0] == "pods"
                    and o["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == name
                ]:
                    del self.objects[key]
            return 200, _status(200, "", "deleted", "Success"), "application/json"
        return 405, _status(405, "MethodNotAllowed", method), "application/json"


def _status(code: int, reason: str, message: str, status: str = "Failure") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": status,
        "reason": reason,
        "message": message,
        "code": code,
    }


class FakeKubeServer:
    """``with FakeKubeServer(cluster) as api_client:`` gives a real ``kubernetes.client.ApiClient``."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _do(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                code, payload, ctype = outer.cluster.handle(self.command, self.path, body)
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _do

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> k8s.ApiClient:
        self.thread.start()
        cfg = k8s.Configuration(host=f"http://127.0.0.1:{self.server.server_address[1]}")
        self.api_client = k8s.ApiClient(cfg)
        return self.api_client

    def __exit__(self, *exc: object) -> None:
        self.api_client.close()
        self.server.shutdown()
        self.server.server_close()
