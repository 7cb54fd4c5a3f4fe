"""A capacity search as a run measures it, whichever shell started it: ``accelbench capacity`` (through
``services.capacity``) and a run spec's ``capacity:`` section in the run lifecycle (``deploy.orchestrator``)
share these steps.

- ``CapacityPlan``: what the planner said before the search (the instance's hourly price, its predicted
  capacity, the first level and where it comes from); ``services.capacity.plan_capacity`` makes it, a
  submitted run keeps it in ``extra["capacity_plan"]``.
- ``search_endpoint``: the search (``bench.capacity.run_capacity``) against an endpoint reachable from here,
  each probe stored as a cell and the probes so far in the run's ``extra["capacity"]``.
- ``store_probes``: probes measured elsewhere (the in-cluster load generator) stored exactly the same way.
- ``finish``: the answer priced at the capacity and set beside the planner's prediction, with its error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field

from accelbench.bench import capacity_search as bench_capacity
from accelbench.bench.capacity_search import SearchBounds, cell_key, price
from accelbench.bench.tokenizer import load_tokenizer
from accelbench.catalog import get_catalog
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.capacity import CapacityResult, CapacitySpec, LoadKind, Probe
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.run import CellStatus
from accelbench.domain.strict import StrictModel
from accelbench.errors import AccelbenchError

if TYPE_CHECKING:
    from accelbench.store.repo import Store

START_FROM_SPEC = "the spec"
START_FROM_PLANNER = "the planner's predicted capacity"
START_FROM_DEFAULT = "the default (no prediction)"


class CapacityPlan(StrictModel):
    """What is known before a capacity search: its price, the planner's capacity and the first level."""

    instance: str | None = Field(
        default=None, description="The instance type priced ('local': this machine)."
    )
    hourly_usd: float | None = Field(default=None, description="The instance's hourly price, when known.")
    predicted_max_load: float | None = Field(default=None, description="The planner's capacity at the SLO.")
    start: float = Field(default=1.0, description="The first level the search measures.")
    start_from: str = Field(default=START_FROM_DEFAULT, description="Where the first level comes from.")
    notes: list[str] = Field(default_factory=list, description="Why the planner could not say more.")


def first_level(capacity: CapacitySpec, predicted: float | None) -> tuple[float, str]:
    """The first level and where it comes from: the spec's ``start``, else the planner's prediction, else 1."""
    if capacity.start is not None:
        return capacity.start, START_FROM_SPEC
    if predicted:
        return min(max(predicted, 1.0), capacity.max_load), START_FROM_PLANNER
    return 1.0, START_FROM_DEFAULT


def unplanned(capacity: CapacitySpec, instance: str | None) -> CapacityPlan:
    """The plan of a run stored without one (made outside ``services``): the catalog's price, no prediction."""

    hourly = None
    if instance:
        try:
            hourly = get_catalog().instance(instance).on_demand_usd
        except AccelbenchError:
            hourly = None
    start, where = first_level(capacity, None)
    return CapacityPlan(instance=instance, hourly_usd=hourly, start=start, start_from=where)


def stored_plan(extra: dict[str, Any], capacity: CapacitySpec, instance: str | None) -> CapacityPlan:
    """The plan kept with a submitted run, else ``unplanned``."""
    stored = extra.get("capacity_plan")
    if isinstance(stored, dict):
        return CapacityPlan.model_validate(stored)
    return unplanned(capacity, instance)


def search_endpoint(
    store: Store | None,
    run_id: str | None,
    endpoint: Endpoint,
    capacity: CapacitySpec,
    *,
    start: float,
    label: str | None = None,
    tokenizer: Any = None,
    progress: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> CapacityResult:
    """The search from this machine against ``endpoint``; with a store, every probe is a cell of ``run_id``
    and a search interrupted before resumes from the probes stored. ``cancel`` (or Ctrl-C) stops it after
    the level in flight by raising ``KeyboardInterrupt``; the levels measured stay stored."""
    # through the module, so that a test's stand-in for the search is the one called
    return bench_capacity.run_capacity(
        endpoint,
        capacity.bench_config(label=label),
        SearchBounds(
            load=capacity.load,
            slo=capacity.target(),
            start=start,
            max_load=capacity.max_load,
            max_probes=capacity.max_probes,
        ),
        tokenizer=tokenizer if tokenizer is not None else load_tokenizer(endpoint),
        store=store,
        run_id=run_id,
        progress=progress,
        cancel=cancel,
    )


def store_probes(
    store: Store,
    run_id: str,
    *,
    input_len: int,
    load: LoadKind,
    measured: Sequence[tuple[Probe, BenchmarkSummary]],
) -> None:
    """Probes measured elsewhere, in the order measured, stored as ``run_capacity`` stores its own: each a
    cell under ``bench.capacity.cell_key``, the probes in the run's ``extra["capacity"]``."""

    for index, (probe, summary) in enumerate(measured):
        concurrency, repeat = cell_key(load, index, probe.level, probe.repeat)
        store.save_result(
            run_id,
            input_len=input_len,
            concurrency=concurrency,
            repeat=repeat,
            summary=summary,
            status=CellStatus.completed,
        )
    store.merge_run_extra(run_id, capacity={"probes": [p.model_dump(mode="json") for p, _ in measured]})


def finish(result: CapacityResult, plan: CapacityPlan) -> CapacityResult:
    """The answer priced at the capacity (cost per million tokens from the hourly price) and set beside the
    planner's capacity, with the planner's error against the measured."""

    out = price(result, plan.hourly_usd)
    notes = list(out.notes)
    notes += [n for n in plan.notes if n not in notes]
    update: dict[str, Any] = {"notes": notes}
    predicted = plan.predicted_max_load
    if predicted is not None:
        update["predicted_max_load"] = predicted
        err = out.model_copy(update={"predicted_max_load": predicted}).prediction_error()
        if err is not None:
            notes.append(f"The planner predicted {predicted:g} ({err:+.0f}% against the measured).")
    return out.model_copy(update=update)
