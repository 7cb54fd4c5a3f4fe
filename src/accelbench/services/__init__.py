"""The application layer: every use case the CLI, the API, the pages and the run worker share, decided once.

The shells parse input, call one function here and render its answer; this package imports no typer and no
FastAPI. ``runs`` (resolve and check a run, export its manifests), ``submit`` (store a checked run, submit it
for the worker), ``dryrun`` (what a run would do, and its predicted duration and cost), ``capacity`` (capacity
at an SLO: flags into a capacity spec, the planner's plan, the search against an endpoint, priced and stored;
a stored answer read back),
``plan`` (presets, model specs, recommend, estimate, memory breakdown), ``results`` (aggregates, findings,
compare, report).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.services.capacity import (
        CapacityOutcome,
        RunCapacity,
        capacity_answer,
        capacity_spec,
        measure_capacity,
        plan_capacity,
        plan_for_run,
    )
    from accelbench.services.dryrun import dry_run, predict_sweep
    from accelbench.services.plan import (
        estimate,
        memory_breakdown,
        model_spec,
        prepared_models,
        presets,
        recommend,
    )
    from accelbench.services.results import (
        aggregate,
        compare_csv,
        compare_json,
        render_report,
        run_comparison,
        run_findings,
    )
    from accelbench.services.runs import (
        CheckedRun,
        as_input_error,
        check_guards,
        export_bundle,
        export_manifests,
        load_model,
        model_lookup,
        preflight,
        resolve_instance,
        tier_of,
        with_default_runtime,
    )
    from accelbench.services.submit import store_run, submit_run

#: each use case this package exports, and the module it lives in: loaded when first asked for, so a command that
#: needs one use case (``runs list``: ``services.stored_runs``) does not import every layer the others need
#: (start-up time: the capacity search alone brings in the benchmark engine and the deploy layer)
_WHERE = {
    "CapacityOutcome": "accelbench.services.capacity",
    "CheckedRun": "accelbench.services.runs",
    "RunCapacity": "accelbench.services.capacity",
    "aggregate": "accelbench.services.results",
    "as_input_error": "accelbench.services.runs",
    "capacity_answer": "accelbench.services.capacity",
    "capacity_spec": "accelbench.services.capacity",
    "check_guards": "accelbench.services.runs",
    "compare_csv": "accelbench.services.results",
    "compare_json": "accelbench.services.results",
    "dry_run": "accelbench.services.dryrun",
    "estimate": "accelbench.services.plan",
    "export_bundle": "accelbench.services.runs",
    "export_manifests": "accelbench.services.runs",
    "load_model": "accelbench.services.runs",
    "measure_capacity": "accelbench.services.capacity",
    "memory_breakdown": "accelbench.services.plan",
    "model_lookup": "accelbench.services.runs",
    "model_spec": "accelbench.services.plan",
    "plan_capacity": "accelbench.services.capacity",
    "plan_for_run": "accelbench.services.capacity",
    "predict_sweep": "accelbench.services.dryrun",
    "preflight": "accelbench.services.runs",
    "prepared_models": "accelbench.services.plan",
    "presets": "accelbench.services.plan",
    "recommend": "accelbench.services.plan",
    "render_report": "accelbench.services.results",
    "resolve_instance": "accelbench.services.runs",
    "run_comparison": "accelbench.services.results",
    "run_findings": "accelbench.services.results",
    "store_run": "accelbench.services.submit",
    "submit_run": "accelbench.services.submit",
    "tier_of": "accelbench.services.runs",
    "with_default_runtime": "accelbench.services.runs",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CapacityOutcome",
    "CheckedRun",
    "RunCapacity",
    "aggregate",
    "as_input_error",
    "capacity_answer",
    "capacity_spec",
    "check_guards",
    "compare_csv",
    "compare_json",
    "dry_run",
    "estimate",
    "export_bundle",
    "export_manifests",
    "load_model",
    "measure_capacity",
    "memory_breakdown",
    "model_lookup",
    "model_spec",
    "plan_capacity",
    "plan_for_run",
    "predict_sweep",
    "preflight",
    "prepared_models",
    "presets",
    "recommend",
    "render_report",
    "resolve_instance",
    "run_comparison",
    "run_findings",
    "store_run",
    "submit_run",
    "tier_of",
    "with_default_runtime",
]
