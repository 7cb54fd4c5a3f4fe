"""``accelbench capacity`` as one use case: a ``CapacityRequest`` (the server as given, the search's settings in
the command's words, what to keep) in, a ``CapacityRun`` (the answer, its stored run and that run's results)
out. The rules are ``services.capacity_at_slo``'s: the flags become the ``CapacitySpec`` a run spec's ``capacity:``
section is, and ``measure_capacity`` searches, prices and stores. Ctrl-C leaves the run cancelled with the
probes so far and raises ``CapacityInterrupted`` (a ``KeyboardInterrupt`` carrying the run id)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from accelbench.bench.datasets import FILE_DATASETS, check_dataset
from accelbench.domain.capacity import CapacityResult
from accelbench.domain.results import ResultInfo
from accelbench.errors import UserInputError
from accelbench.services.capacity_at_slo import CapacityInterrupted, capacity_spec, measure_capacity
from accelbench.services.endpoints import ServerTarget, served_model_root
from accelbench.services.session import get_store

__all__ = ["CapacityInterrupted", "CapacityRequest", "CapacityRun", "run_capacity"]


class CapacityRequest(BaseModel):
    """One search as asked: ``settings`` are ``services.capacity_at_slo.capacity_spec``'s keywords (``load`` as
    concurrency or rate, ``slo`` as tpot:50,ttft:1000, the rest ``CapacitySpec`` fields)."""

    server: ServerTarget
    settings: dict[str, Any] = Field(default_factory=dict)
    instance: str | None = None
    label: str | None = None
    resume: str | None = None
    store: bool = True


class CapacityRun(BaseModel):
    """The answer, the run it is stored as (None unstored) and that run's results (the devices' telemetry)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    result: CapacityResult
    run_id: str | None = None
    results: list[ResultInfo] = Field(default_factory=list)


def run_capacity(
    request: CapacityRequest,
    *,
    progress: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    during_search: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> CapacityRun:
    """``accelbench capacity``: search ``request.server`` for its capacity (``progress``: a line per step;
    ``during_search``: what the caller holds open while the search runs)."""
    spec = capacity_spec(**request.settings)
    check_dataset(spec.dataset, "--dataset")
    if spec.dataset in FILE_DATASETS and not spec.dataset_path:
        raise UserInputError(f"--dataset {spec.dataset} needs --dataset-path FILE.")
    target = request.server
    endpoint = target.endpoint()
    repo = get_store() if request.store or request.resume else None
    model_ref = (
        target.tokenizer
        or served_model_root(target.base_url, target.headers, target.api_key, endpoint.served_model)
        or endpoint.served_model
    )
    with during_search():
        outcome = measure_capacity(
            repo,
            endpoint,
            spec,
            instance=request.instance,
            model_ref=model_ref,
            label=request.label,
            resume=request.resume,
            progress=progress,
            cancel=cancel,
        )
    run_id = outcome.run_id
    results = repo.get_results(run_id) if repo is not None and run_id else []
    return CapacityRun(result=outcome.result, run_id=run_id, results=results)
