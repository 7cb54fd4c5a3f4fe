"""The application layer: every use case the CLI, the API, the pages and the run worker share, decided once.

The shells parse input, call one function here and render its answer; this package imports no typer and no
FastAPI. ``run_checks`` (resolve and check a run, export its manifests), ``submit`` (store a checked run, submit it
for the worker), ``dryrun`` (what a run would do, and its predicted duration and cost), ``capacity_at_slo``
(capacity at an SLO: flags into a capacity spec, the planner's plan, the search against an endpoint, priced and stored;
a stored answer read back),
``planning`` (presets, model specs, recommend, estimate, memory breakdown), ``results`` (aggregates, findings,
compare, report).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.services.capacity_at_slo import (
        CapacityOutcome,
        RunCapacity,
        capacity_answer,
        capacity_spec,
        measure_capacity,
        plan_capacity,
        plan_for_run,
    )
    from accelbench.services.dryrun import dry_run, predict_sweep
    from accelbench.services.planning import (
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
    from accelbench.services.run_checks import (
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
    "CapacityOutcome": "accelbench.services.capacity_at_slo",
    "CheckedRun": "accelbench.services.run_checks",
    "RunCapacity": "accelbench.services.capacity_at_slo",
    "aggregate": "accelbench.services.results",
    "as_input_error": "accelbench.services.run_checks",
    "capacity_answer": "accelbench.services.capacity_at_slo",
    "capacity_spec": "accelbench.services.capacity_at_slo",
    "check_guards": "accelbench.services.run_checks",
    "compare_csv": "accelbench.services.results",
    "compare_json": "accelbench.services.results",
    "dry_run": "accelbench.services.dryrun",
    "estimate": "accelbench.services.planning",
    "export_bundle": "accelbench.services.run_checks",
    "export_manifests": "accelbench.services.run_checks",
    "load_model": "accelbench.services.run_checks",
    "measure_capacity": "accelbench.services.capacity_at_slo",
    "memory_breakdown": "accelbench.services.planning",
    "model_lookup": "accelbench.services.run_checks",
    "model_spec": "accelbench.services.planning",
    "plan_capacity": "accelbench.services.capacity_at_slo",
    "plan_for_run": "accelbench.services.capacity_at_slo",
    "predict_sweep": "accelbench.services.dryrun",
    "preflight": "accelbench.services.run_checks",
    "prepared_models": "accelbench.services.planning",
    "presets": "accelbench.services.planning",
    "recommend": "accelbench.services.planning",
    "render_report": "accelbench.services.results",
    "resolve_instance": "accelbench.services.run_checks",
    "run_comparison": "accelbench.services.results",
    "run_findings": "accelbench.services.results",
    "store_run": "accelbench.services.submit",
    "submit_run": "accelbench.services.submit",
    "tier_of": "accelbench.services.run_checks",
    "with_default_runtime": "accelbench.services.run_checks",
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
