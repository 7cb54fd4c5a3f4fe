"""Validate custom resources against a CRD's openAPIV3Schema with ``jsonschema``.

The API server prunes or (with strict field validation, kubectl's default) refuses fields a structural
schema does not declare; JSON Schema allows them unless told otherwise. ``crd_validator`` therefore closes
every object that declares ``properties`` (``additionalProperties: false``) except where the schema says
``x-kubernetes-preserve-unknown-fields``, and leaves ``metadata`` to the API server as the real CRD does.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRD_DIR = Path(__file__).resolve().parent.parent / "data" / "crds"


def crd_schema(kind: str, version: str = "v1") -> dict[str, Any]:
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] != kind:
            continue
        for v in crd["spec"]["versions"]:
            if v["name"] == version:
                schema = copy.deepcopy(v["schema"]["openAPIV3Schema"])
                return _close_preserving(schema)
    raise KeyError(f"no CRD for {kind} {version} in {CRD_DIR}")


def _close_preserving(schema: dict[str, Any]) -> dict[str, Any]:
    """Close objects, except those marked to preserve unknown fields (status) and metadata."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
            out = {k: walk(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
            if (
                not preserve
                and out.get("type") == "object"
                and "properties" in out
                and "additionalProperties" not in out
            ):
                out["additionalProperties"] = False
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def crd_validator(kind: str, version: str = "v1") -> jsonschema.Draft7Validator:
    schema = crd_schema(kind, version)
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """Every schema violation of ``obj`` (a NodePool, an EC2NodeClass), as 'path: message'."""
    group_version = obj["apiVersion"].split("/")
    validator = crd_validator(obj["kind"], group_version[-1])
    return [
        "/".join(str(p) for p in e.absolute_path) + ": " + e.message
        for e in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    ]
