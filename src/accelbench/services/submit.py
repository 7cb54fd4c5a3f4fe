"""Submitting a run: a checked spec stored as pending (with its tier, its guard warnings and, for a capacity
search, the planner's plan: the price, the predicted capacity and the first level), and the worker told.
``accelbench run``, ``rerun``, ``demo`` and ``POST /api/v1/runs`` store runs through here.

Its own module because the capacity plan comes from ``services.capacity`` (which asks ``services.plan``, which
reads models through ``services.runs``): ``services.runs`` keeps the checks, this module the storing.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunSpec
from accelbench.errors import UserInputError
from accelbench.services.capacity import plan_for_run
from accelbench.services.runs import CheckedRun, preflight, tier_of
from accelbench.store import Store

log = logging.getLogger("accelbench.services")


class RunNotifier(Protocol):
    """What submitting a run needs of the process that executes runs (the API's worker)."""

    def keep_secrets(self, run_id: str, secrets: dict[str, str]) -> None: ...

    def notify(self) -> None: ...


def store_run(store: Store, checked: CheckedRun, extra: dict[str, Any] | None = None) -> RunInfo:
    """Store a checked run as pending, with its tier and its guard warnings; a capacity search also keeps
    the planner's plan (``extra["capacity_plan"]``), which the run lifecycle starts the search from."""
    from accelbench.deploy.orchestrator import create_run

    instance = checked.instance
    extra = {**(extra or {}), "guard_warnings": checked.warnings}
    plan = plan_for_run(checked.spec)
    if plan is not None:
        extra["capacity_plan"] = plan.model_dump(mode="json")
    run = create_run(store, checked.spec, extra=extra)
    return store.update_run(
        run.id,
        accelerator_type=tier_of(instance).value,
        accelerator_name=instance.accelerator_name if instance else None,
        accelerator_count=instance.accelerator_count if instance else None,
    )


def submit_run(
    store: Store, spec: RunSpec, *, worker: RunNotifier | None, actor: str | None = None
) -> RunInfo:
    """Preflight and store a run as pending; the worker executes it. Nothing is stored on refusal."""
    if spec.hf_token and worker is None:
        raise UserInputError(
            "This server runs without a worker, so a secret sent with the run (hf_token) could not reach "
            "the process that executes it: secrets are never stored.",
            hint="Send the run to a server started with its worker, or give the engine HF_TOKEN in its "
            "own environment.",
        )
    checked = preflight(spec)
    run = store_run(store, checked, {"submitted_by": actor})
    if worker is not None:
        if spec.hf_token:
            worker.keep_secrets(run.id, {"hf_token": spec.hf_token})
        worker.notify()
    log.info("run %s queued (%s on %s) by %s", run.id, spec.model, run.instance_type or "local", actor)
    return run
