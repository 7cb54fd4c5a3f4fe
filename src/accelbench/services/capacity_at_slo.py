"""Capacity at an SLO, measured, as a use case: the highest load a server sustains within latency targets (or,
without targets, the knee), priced and set beside the planner's prediction.

One set of rules for every shell: ``capacity_spec`` turns the flags of ``accelbench capacity`` into the
``CapacitySpec`` a run spec's ``capacity:`` section is (the same validation, in flag names); ``plan_capacity``
asks the planner once (``services.plan.capacity_plan``: the hourly price, the predicted capacity, so the first
level); ``measure_capacity`` is ``accelbench capacity``'s use case: create (or resume) the run of kind
``capacity``, search the endpoint with cancel and progress, price the answer, attach the prediction and its
error (``deploy.capacity.finish``), store it in ``extra["capacity"]`` and set the final status (failed with
the reason when the search raises). A run spec's search runs in the run lifecycle
(``deploy.orchestrator.execute_run`` -> ``Target.measure_capacity``) with the plan made here at submission
(``services.submit.store_run`` keeps it in ``extra["capacity_plan"]``) and the same finishing step.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from accelbench.deploy.endpoint_capacity import CapacityPlan, finish, first_level, search_endpoint
from accelbench.domain.capacity import CapacityResult, CapacitySpec, LoadKind, parse_slo
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunSpec, RunStatus
from accelbench.errors import AccelbenchError, NotFoundError, UserInputError
from accelbench.modelspec import load_model_spec
from accelbench.plan.hardware import is_local
from accelbench.redact import redact_url
from accelbench.report.capacity_results import capacity_result, finished
from accelbench.services.planning import capacity_plan
from accelbench.store import Store
from accelbench.store.owner import process_owner
from accelbench.telemetry.host import capture_environment

if TYPE_CHECKING:
    from accelbench.deploy.endpoint_capacity import CapacityPlan

log = logging.getLogger("accelbench.services")

#: how a load kind may be spelled (the CLI's ``--load rate`` is a run spec's ``load: request_rate``)
LOAD_SPELLINGS: dict[str, LoadKind] = {
    "concurrency": "concurrency",
    "rate": "request_rate",
    "request_rate": "request_rate",
}
#: CapacitySpec field -> the flag of ``accelbench capacity`` (for messages in the caller's words)
CLI_FLAGS = {
    "load": "--load",
    "input_len": "--input-len",
    "output_len": "--output-len",
    "percentile": "--percentile",
    "attainment": "--attainment",
    "start": "--start",
    "max_load": "--max-load",
    "max_probes": "--max-probes",
    "burstiness": "--burstiness",
    "timeout_s": "--timeout",
    "dataset_path": "--dataset-path",
}


def load_kind(text: str, *, what: str = "--load") -> LoadKind:
    kind = LOAD_SPELLINGS.get(text.strip().lower())
    if kind is None:
        raise UserInputError(f"Unknown {what} {text!r}.", hint="Use concurrency or rate.")
    return kind


def _num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _say(error: Mapping[str, Any], names: Mapping[str, str]) -> str:
    """One validation error in the caller's words (its flag or key)."""
    field = ".".join(str(x) for x in error.get("loc", ())) or "capacity"
    what = names.get(field, field)
    v, ctx, kind = error.get("input"), error.get("ctx") or {}, error.get("type")
    if kind == "greater_than_equal":
        return f"{what} {_num(v)} is below {_num(ctx.get('ge'))}."
    if kind == "less_than_equal":
        return f"{what} {_num(v)} is above {_num(ctx.get('le'))}."
    if kind == "greater_than":
        return f"{what} {_num(v)} must be above {_num(ctx.get('gt'))}."
    if kind == "less_than":
        return f"{what} {_num(v)} must be below {_num(ctx.get('lt'))}."
    return f"{what}: {str(error.get('msg', '')).removeprefix('Value error, ')}"


def capacity_spec(
    *,
    load: str = "concurrency",
    slo: str | None = None,
    percentile: float = 90.0,
    attainment: float = 0.95,
    names: Mapping[str, str] = CLI_FLAGS,
    **fields: Any,
) -> CapacitySpec:
    """A ``CapacitySpec`` from flags (``slo`` as ``tpot:50,ttft:1000``; ``load`` as concurrency or rate),
    validated by the same model a run spec's ``capacity:`` section is; a refusal names the flag."""
    kind = load_kind(load, what=names.get("load", "load"))
    if not 0 < percentile < 100:
        raise UserInputError(
            f"Percentile {percentile:g} is outside (0, 100).", hint="Give e.g. --percentile 90 or 99."
        )
    targets = parse_slo(slo, percentile=percentile, attainment=attainment).targets if slo else None
    try:
        return CapacitySpec(load=kind, slo=targets, percentile=percentile, attainment=attainment, **fields)
    except ValidationError as exc:
        errors = exc.errors()
        raise UserInputError(
            " ".join(_say(e, names) for e in errors),
            hint="Give --max-load 1 or more." if any(e["loc"] == ("max_load",) for e in errors) else None,
        ) from None


def capacity_instance(spec: RunSpec) -> str | None:
    """The instance a run spec's capacity is priced and predicted on: its instance type, else this machine
    for a local run ("local"), else none (an endpoint somewhere else)."""
    if spec.instance_type:
        return spec.instance_type
    return "local" if spec.target.kind == "local" else None


def readable_model(model_ref: str) -> bool:
    """Whether the planner can read ``model_ref``'s architecture offline."""

    try:
        load_model_spec(model_ref, allow_network=False)
    except (AccelbenchError, OSError, ValueError):
        return False
    return True


def plan_capacity(
    capacity: CapacitySpec, *, instance: str | None, model_ref: str, strict: bool = True
) -> CapacityPlan:
    """The planner's side of a search: the instance's hourly price, its predicted capacity at the SLO and so
    the first level (the spec's ``start``, else the prediction, else 1). The prediction is advice: a planner
    failure is a note, not a refusal; an unknown instance is refused unless ``strict`` is False."""

    notes: list[str] = []
    hourly = predicted = None
    if instance and capacity.target() is not None and not readable_model(model_ref):
        notes.append(
            f"no prediction: the planner cannot read the model {model_ref!r} here (not a preset, a prepared "
            "model or a local directory); give --tokenizer DIR with the model's config.json"
        )
    try:
        hourly, predicted = capacity_plan(
            instance, model_ref, capacity.input_len, capacity.output_len, capacity.target(), capacity.load
        )
    except AccelbenchError as exc:
        if strict:
            raise
        notes.append(f"no prediction: {exc.message}")
    except Exception as exc:  # the planner is advice: it never stops a measurement
        log.warning("capacity: no prediction for %s on %s", model_ref, instance, exc_info=True)
        notes.append(f"no prediction: {type(exc).__name__}: {exc}")
    start, where = first_level(capacity, predicted)
    return CapacityPlan(
        instance=instance,
        hourly_usd=hourly,
        predicted_max_load=predicted,
        start=start,
        start_from=where,
        notes=notes,
    )


def plan_for_run(spec: RunSpec) -> CapacityPlan | None:
    """The plan of a run spec's capacity search (None for a sweep), as a submitted run keeps it."""
    if spec.capacity is None:
        return None
    return plan_capacity(spec.capacity, instance=capacity_instance(spec), model_ref=spec.model, strict=False)


class CapacityInterrupted(KeyboardInterrupt):
    """Ctrl-C (or ``cancel``) stopped a search: the probes so far are stored with ``run_id`` (None unstored)."""

    def __init__(self, run_id: str | None) -> None:
        super().__init__("interrupted")
        self.run_id = run_id


@dataclass
class CapacityOutcome:
    """A finished search: the stored run (None with ``--no-store``) and the answer."""

    run_id: str | None
    result: CapacityResult


def open_capacity_run(
    store: Store,
    capacity: CapacitySpec,
    plan: CapacityPlan,
    *,
    endpoint: Endpoint,
    model_ref: str,
    label: str | None = None,
    resume: str | None = None,
) -> tuple[str, CapacityPlan]:
    """The run a search stores its probes in: a new run of kind ``capacity`` (its spec the ``capacity:``
    section, the plan in its extra), or ``resume``'s, which keeps the plan it started with (so the search
    asks for the levels it asked for before, and replays them from the store)."""

    if resume:
        run = store.get_run(resume)
        if run.kind != "capacity" and not (run.extra or {}).get("capacity"):
            raise UserInputError(
                f"Run {run.id} is a {run.kind} run, not a capacity search.",
                hint="Resume a run made by `accelbench capacity` (see `accelbench runs list`).",
            )
        stored = (run.extra or {}).get("capacity_plan")
        if isinstance(stored, dict):
            plan = CapacityPlan.model_validate(stored)
        store.claim_run(run.id)  # this process measures it now; refused while another one does
        return run.id, plan
    run = store.create_run(
        kind="capacity",
        status=RunStatus.benchmarking,
        claimed_by=process_owner(),  # this process measures it: the run's one executor
        label=label,
        served_model=endpoint.served_model,
        model=model_ref,
        base_url=redact_url(endpoint.base_url),
        instance_type=plan.instance,
        spec={"capacity": capacity.model_dump(mode="json"), "endpoint": endpoint.record()},
        extra={"capacity_plan": plan.model_dump(mode="json")},
    )

    if is_local(
        plan.instance
    ):  # the server runs on this machine: describe it, so calibration can use the run
        store.update_run(run.id, environment=capture_environment())
    return run.id, plan


def measure_capacity(
    store: Store | None,
    endpoint: Endpoint,
    capacity: CapacitySpec,
    *,
    instance: str | None,
    model_ref: str,
    label: str | None = None,
    resume: str | None = None,
    progress: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    tokenizer: Any = None,
) -> CapacityOutcome:
    """``accelbench capacity``: search ``endpoint`` (already running) for its capacity. With a store, every
    probe is a cell of a run of kind ``capacity`` (``resume``: continue that run), the answer its
    ``extra["capacity"]`` and the status completed; Ctrl-C or ``cancel`` leaves it cancelled with the probes
    so far (``CapacityInterrupted``, a ``KeyboardInterrupt``, is raised), any other failure failed with the reason (re-raised)."""

    plan = plan_capacity(capacity, instance=instance, model_ref=model_ref)
    run_id = None
    if store is not None:
        run_id, plan = open_capacity_run(
            store, capacity, plan, endpoint=endpoint, model_ref=model_ref, label=label, resume=resume
        )
    try:
        result = search_endpoint(
            store,
            run_id,
            endpoint,
            capacity,
            start=plan.start,
            label=label,
            tokenizer=tokenizer,
            progress=progress,
            cancel=cancel,
        )
    except KeyboardInterrupt:
        if store is not None and run_id is not None:
            store.set_status(run_id, RunStatus.cancelled, error="interrupted; resume with --resume")
        raise CapacityInterrupted(run_id) from None
    except Exception as exc:  # the run must not stay "benchmarking": say why it stopped, keep the probes
        if store is not None and run_id is not None:
            store.set_status(run_id, RunStatus.failed, error=f"{type(exc).__name__}: {exc}"[:500])
        raise
    result = finish(result, plan)
    if store is not None and run_id is not None:
        store.merge_run_extra(run_id, capacity=result.model_dump(mode="json"))
        store.set_status(run_id, RunStatus.completed)
    return CapacityOutcome(run_id=run_id, result=result)


# ------------------------------------------------------------------------------------ reading an answer
class RunCapacity(CapacityResult):
    """A run's capacity answer: the highest load meeting its SLO (or, without one, the knee), every probe
    measured, the throughput and price per million tokens there, and the planner's prediction beside it."""

    run_id: str = Field(description="The run id.")
    status: RunStatus = Field(description="The run's status.")
    complete: bool = Field(
        description="True once the search has answered; False while it runs, or when it stopped before "
        "answering: the probes so far, no max_load."
    )
    prediction_error_pct: float | None = Field(
        default=None,
        description="(predicted_max_load - max_load) / max_load x 100, when both are known.",
    )


def capacity_answer(run: RunInfo) -> RunCapacity | None:
    """The capacity answer stored in a run's ``extra["capacity"]`` (whatever the run's kind), read as the
    report reads it (``report.capacity``); None when the run is no capacity search. Before the search answers
    (queued, running, or stopped) only its probes so far are stored, or none: the load kind and SLO then come
    from the run's spec, ``complete`` is False, and a run that stopped says so in ``reason``."""

    extra = run.extra or {}
    if not isinstance(extra.get("capacity"), dict) and isinstance((run.spec or {}).get("capacity"), dict):
        # a capacity search that has measured nothing yet (pending, or stopped before its first level)
        run = run.model_copy(update={"extra": {**extra, "capacity": {"probes": []}}})
    result, unreadable = capacity_result(run)
    if result is None:
        if unreadable is None:
            return None
        raise NotFoundError(
            f"Run {run.id}'s stored capacity answer cannot be read.",
            hint="It was written by another version of accelbench, or damaged; run the search again.",
        )
    complete = finished(run, result)
    if not complete and run.status.finished and result.reason is None:
        result = result.model_copy(
            update={
                "reason": f"The search stopped ({run.status.value}) before it answered; "
                f"{len(result.probes)} probe(s) were measured."
            }
        )
    error = result.prediction_error()
    return RunCapacity(
        **result.model_dump(),
        run_id=run.id,
        status=run.status,
        complete=complete,
        prediction_error_pct=round(error, 1) if error is not None else None,
    )
