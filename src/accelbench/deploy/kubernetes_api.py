"""The cluster's REST API as the Kubernetes target uses it: a client from the kubeconfig or the pod's service
account, create and delete of the kinds a run applies, the run's namespace, and an API error in words.

Every kind the target applies is listed once (``KINDS``): its client model and which of the four API clients
(core, apps, batch, RBAC) creates and deletes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from accelbench.domain.run import KubernetesTarget
from accelbench.errors import EngineError, UserInputError

#: the API clients the target calls, in this order
Clients = tuple[k8s.CoreV1Api, k8s.AppsV1Api, k8s.BatchV1Api, k8s.RbacAuthorizationV1Api]


@dataclass(frozen=True)
class Kind:
    """How the client library creates and deletes one kind of object."""

    model: Any  # the client's model class, built from the manifest with ``from_dict``
    client: int  # index into ``Clients``
    suffix: str  # the client methods are ``create_<suffix>`` and ``delete_<suffix>``


KINDS: dict[str, Kind] = {
    "Deployment": Kind(k8s.V1Deployment, 1, "namespaced_deployment"),
    "Service": Kind(k8s.V1Service, 0, "namespaced_service"),
    "ConfigMap": Kind(k8s.V1ConfigMap, 0, "namespaced_config_map"),
    "Job": Kind(k8s.V1Job, 2, "namespaced_job"),
    "Secret": Kind(k8s.V1Secret, 0, "namespaced_secret"),
    "ServiceAccount": Kind(k8s.V1ServiceAccount, 0, "namespaced_service_account"),
    "Role": Kind(k8s.V1Role, 3, "namespaced_role"),
    "RoleBinding": Kind(k8s.V1RoleBinding, 3, "namespaced_role_binding"),
}


def load_api_client(config: KubernetesTarget) -> k8s.ApiClient:
    """kubeconfig (the given file/context, else the default) or, inside a pod, the service account."""
    from kubernetes import config as kconfig  # heavy: the Kubernetes client, only when a cluster is used

    if config.kubeconfig or config.context:
        return kconfig.new_client_from_config(config_file=config.kubeconfig, context=config.context)
    try:
        kconfig.load_incluster_config()
        return k8s.ApiClient()
    except kconfig.ConfigException:
        pass
    try:
        return kconfig.new_client_from_config()
    except (kconfig.ConfigException, OSError) as exc:
        raise UserInputError(
            f"No Kubernetes cluster configuration found: {exc}",
            hint="Set target.kubeconfig (and target.context) in the spec, or run accelbench inside the cluster.",
        ) from exc


def clients(api_client: k8s.ApiClient) -> Clients:
    return (
        k8s.CoreV1Api(api_client),
        k8s.AppsV1Api(api_client),
        k8s.BatchV1Api(api_client),
        k8s.RbacAuthorizationV1Api(api_client),
    )


def api_error(exc: ApiException) -> str:
    """The API's refusal in words: status, reason and message."""
    try:
        body = json.loads(exc.body or "{}")
        return f"{exc.status} {body.get('reason', '')}: {body.get('message', exc.reason)}"
    except ValueError:
        return f"{exc.status}: {exc.reason}"


def _method(api: Clients, verb: str, kind: str) -> Callable[..., Any]:
    k = KINDS[kind]
    method: Callable[..., Any] = getattr(api[k.client], f"{verb}_{k.suffix}")
    return method


def create_object(api: Clients, obj: dict[str, Any], namespace: str) -> None:
    """Create the manifest ``obj`` in ``namespace``; a refusal is an ``EngineError`` that says why."""
    kind, name = obj["kind"], obj["metadata"]["name"]
    body = KINDS[kind].model.from_dict(obj)
    try:
        _method(api, "create", kind)(namespace, body)
    except ApiException as exc:
        raise EngineError(
            f"Kubernetes refused to create {kind} {namespace}/{name}: {api_error(exc)}",
            hint="Check the namespace exists and your credentials may create this kind there.",
        ) from exc


def delete_object(api: Clients, kind: str, name: str, namespace: str) -> None:
    """Delete one object; one that is already gone is fine."""
    # Background propagation: a Job's pods and a Deployment's ReplicaSet go with it
    opts = k8s.V1DeleteOptions(propagation_policy="Background")
    try:
        # the response (the deleted object or a Status, depending on the kind) is not needed: do not
        # let the client deserialize it
        _method(api, "delete", kind)(name, namespace, body=opts, _preload_content=False)
    except ApiException as exc:
        if exc.status != 404:
            raise


def ensure_namespace(core: k8s.CoreV1Api, namespace: str) -> None:
    """Create ``namespace`` (labelled as accelbench's) unless it exists."""
    try:
        core.read_namespace(namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise EngineError(f"Cannot read namespace {namespace}: {api_error(exc)}") from exc
        meta = k8s.V1ObjectMeta(name=namespace, labels={"app.kubernetes.io/managed-by": "accelbench"})
        core.create_namespace(k8s.V1Namespace(metadata=meta))
