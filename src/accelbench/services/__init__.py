"""The application layer: every use case the CLI, the API, the pages and the run worker share, decided once.

The shells parse input, call one function here and render its answer; this package imports no typer and no
FastAPI. ``runs`` (resolve and check a run, export its manifests), ``submit`` (store a checked run, submit it
for the worker), ``dryrun`` (what a run would do, and its predicted duration and cost), ``capacity`` (capacity
at an SLO: flags into a capacity spec, the planner's plan, the search against an endpoint, priced and stored;
a stored answer read back),
``plan`` (presets, model specs, recommend, estimate, memory breakdown), ``results`` (aggregates, findings,
compare, report).
"""

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
