"""llm-d-benchmark's benchmark report JSON Schema (version 0.2.1, vendored in ``data/`` with its source and
license) and validation against it, used by the exporter and the ``llm-d-report`` importer."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

SCHEMA_FILE = "llm_d_benchmark_report_v0_2_1.schema.json"
REPORT_VERSION = "0.2.1"


@cache
def report_schema() -> dict[str, Any]:
    """The vendored schema document."""
    text = resources.files("accelbench.bench.importers").joinpath("data", SCHEMA_FILE).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _deepest(err: Any) -> Any:
    """The most specific error under an ``anyOf``/``oneOf`` failure (the one reached furthest into the report)."""
    while err.context:
        err = max(err.context, key=lambda e: len(e.absolute_path))
    return err


def report_errors(report: Any, *, limit: int = 5) -> list[str]:
    """Where ``report`` breaks the schema: up to ``limit`` messages, each with the dotted path of the field and
    the rule it breaks (a value shown at most 120 characters long)."""
    from jsonschema import Draft202012Validator  # heavy: only when a report is checked (report/ imports this)

    validator = Draft202012Validator(report_schema())
    out = []
    for top in sorted(validator.iter_errors(report), key=lambda e: list(map(str, e.absolute_path))):
        err = _deepest(top)
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        message = err.message if len(err.message) <= 120 else err.message[:117] + "..."
        out.append(f"{where}: {message}")
        if len(out) >= limit:
            break
    return out
