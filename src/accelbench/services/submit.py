"""Submitting a run: a checked spec stored as pending (with its tier, its guard warnings and, for a capacity
search, the planner's plan: the price, the predicted capacity and the first level), and the worker told.
``accelbench run``, ``rerun``, ``demo`` and ``POST /api/v1/runs`` store runs through here.

Secrets given with a run (``hf_token``; in the engine's ``extra_args`` and ``env`` whatever the one redaction
rule masks) are stored as the masked placeholder; their values stay in memory: in the process that stored the
run (``accelbench run`` executes it there) or, through ``RunNotifier.keep_secrets``, with the API's worker. A
spec that carries the placeholder itself (a stored run's spec sent back) is refused: its secrets are gone.

Its own module because the capacity plan comes from ``services.capacity`` (which asks ``services.plan``, which
reads models through ``services.runs``): ``services.runs`` keeps the checks, this module the storing.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from accelbench.deploy.orchestrator import create_run, take_secrets
from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunSpec, secret_slot_name
from accelbench.errors import UserInputError
from accelbench.redact import MASK
from accelbench.services.capacity_at_slo import plan_for_run
from accelbench.services.dryrun import checked_prediction
from accelbench.services.run_checks import CheckedRun, preflight, tier_of
from accelbench.store import Store
from accelbench.store.owner import process_owner

log = logging.getLogger("accelbench.services")


class RunNotifier(Protocol):
    """What submitting a run needs of the process that executes runs (the API's worker)."""

    def keep_secrets(self, run_id: str, secrets: dict[str, str]) -> None: ...

    def notify(self) -> None: ...


def store_run(
    store: Store,
    checked: CheckedRun,
    extra: dict[str, Any] | None = None,
    *,
    for_worker: bool = False,
    owner_key_id: int | None = None,
) -> RunInfo:
    """Store a checked run as pending, with its tier and its guard warnings; a capacity search also keeps
    the planner's plan (``extra["capacity_plan"]``), which the run lifecycle starts the search from.

    The calling process claims the run as it is stored (it executes it: ``accelbench run``, ``rerun``,
    ``demo``), so a worker never takes it; ``for_worker`` leaves it unclaimed for a worker to take (the API).
    ``owner_key_id``: the API key that submitted it, whose run it is."""

    placeholders = checked.spec.secret_placeholders()
    if placeholders:  # a stored run's spec (rerun, or one read from the API) sent back: its secrets are gone
        names = ", ".join(secret_slot_name(slot) for slot in placeholders)
        raise UserInputError(
            f"The spec holds the masked placeholder {MASK} in place of a secret ({names}): secrets are never "
            "stored, so a stored run's spec does not carry them.",
            hint="Give the secret values in the spec (or through the engine's own environment) and submit it "
            "again.",
        )
    instance = checked.instance
    extra = {**(extra or {}), "guard_warnings": checked.warnings}
    plan = plan_for_run(checked.spec)
    if plan is not None:
        extra["capacity_plan"] = plan.model_dump(mode="json")
    else:  # what the dry run predicts the sweep takes, kept so the run's page can say how long is left
        extra["sweep_prediction"] = sweep_prediction(checked)
    run = create_run(  # secrets masked, their values kept in this process
        store,
        checked.spec,
        extra=extra,
        claimed_by=None if for_worker else process_owner(),
        owner_key_id=owner_key_id,
    )
    try:
        return store.update_run(
            run.id,
            accelerator_type=tier_of(instance).value,
            accelerator_name=instance.accelerator_name if instance else None,
            accelerator_count=instance.accelerator_count if instance else None,
        )
    except BaseException:
        take_secrets(run.id).clear()  # the caller never learns the run's id: nothing may wait for it
        raise


def sweep_prediction(checked: CheckedRun) -> dict[str, Any]:
    """The dry run's prediction of a checked run's sweep as a run keeps it (``extra["sweep_prediction"]``):
    the whole load's seconds (None when the planner cannot predict every cell), each cell's seconds per
    repeat, and what the figure leaves out (the engine's start-up, the model's download)."""

    prediction = checked_prediction(checked)
    return {
        "duration_s": prediction.duration_s,
        "cells": [
            {
                "input_len": c.input_len,
                "concurrency": c.concurrency,
                "repeats": c.repeats,
                "predicted_s": c.predicted_s,
            }
            for c in prediction.cells
        ],
        "notes": prediction.notes,
    }


def submit_run(
    store: Store,
    spec: RunSpec,
    *,
    worker: RunNotifier | None,
    actor: str | None = None,
    owner_key_id: int | None = None,
) -> RunInfo:
    """Preflight and store a run as pending; the worker executes it. Nothing is stored on refusal. The run's
    secrets are stored masked; their values reach the worker through ``keep_secrets``, in memory only.
    ``owner_key_id``: the API key submitting it, the only key besides an admin's that may cancel, delete or
    rerun it."""

    if spec.hf_token and worker is None:
        raise UserInputError(
            "This server runs without a worker, so a secret sent with the run (hf_token) could not reach "
            "the process that executes it: secrets are never stored.",
            hint="Send the run to a server started with its worker, or give the engine HF_TOKEN in its "
            "own environment.",
        )
    checked = preflight(spec)
    run = store_run(store, checked, {"submitted_by": actor}, for_worker=True, owner_key_id=owner_key_id)
    # the secrets (hf_token, the engine's secret arguments and variables) go to the worker in memory; without
    # one here they are dropped, and whichever worker takes the run fails it, saying to submit it again
    secrets = take_secrets(run.id)
    if worker is not None:
        worker.keep_secrets(run.id, secrets)
        worker.notify()
    elif secrets:
        log.warning("run %s: no worker in this process, so its engine secrets cannot reach one", run.id)
    secrets.clear()
    log.info("run %s queued (%s on %s) by %s", run.id, spec.model, run.instance_type or "local", actor)
    return run
