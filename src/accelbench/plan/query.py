"""The planner's entry for a question: an ``EstimateQuery`` (what was asked: model, instance or filters,
traffic, the settings fixed, the goal) and a ``PlanContext`` (what the caller knows: active calibrations,
prices, the models measured on each instance, the catalog). ``services.plan`` builds the context from a store; the
planner never opens one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelbench.domain.model import ModelSpec
from accelbench.domain.plan import Estimate, EstimateQuery, EstimateTable
from accelbench.errors import UserInputError
from accelbench.plan.calibrations import CalibrationSet
from accelbench.plan.cpu_topology import described_instance
from accelbench.plan.estimate import estimate, parse_slo
from accelbench.plan.hardware import is_local
from accelbench.plan.ranking import estimate_catalog
from accelbench.plan.refusal import Question, priced_estimate

if TYPE_CHECKING:
    from accelbench.catalog import Catalog


@dataclass(frozen=True)
class PlanContext:
    """What the planner is told besides the question."""

    calibrations: CalibrationSet | None = None
    prices: Mapping[str, Any] | None = None  # instance -> price (stored prices win over the snapshot)
    # instance type -> the names of each stored run measured there (plan/measured.py says which are this model)
    measured_runs: Mapping[str, Sequence[Sequence[str]]] = field(default_factory=dict)
    catalog: Catalog | None = None


def answer(
    query: EstimateQuery, model: ModelSpec, context: PlanContext | None = None
) -> Estimate | EstimateTable:
    """One instance's estimate (``query.instance_type``, "local" for this machine) or the ranked catalog."""
    ctx = context or PlanContext()
    common: dict[str, Any] = {
        "input_len": query.input_len,
        "output_len": query.output_len,
        "concurrency": query.concurrency,
        "quantization": query.quantization,
        "slo": parse_slo(query.slo) if query.slo else None,
        "calibrations": ctx.calibrations,
        "prices": ctx.prices,
        "measured_runs": ctx.measured_runs,
        "arrivals": query.arrivals,
        "engine": query.engine,
        "engine_settings": query.engine_settings(),
        "goal": query.goal,
        "alternatives": query.alternatives,
        "allow_quantization": query.allow_quantization,
        "catalog": ctx.catalog,
    }
    described = query.cores is not None or query.smt is not None
    if query.instance_type:
        return priced_estimate(_one_instance(query, model, ctx, common), model, question(query, ctx))
    if described:
        raise UserInputError("--cores and --smt describe one guest: give --instance as well.")
    return estimate_catalog(
        model,
        accelerator=query.accelerator_type,
        max_cost=query.max_cost,
        min_context=query.min_context,
        **common,
    )


def _one_instance(
    query: EstimateQuery, model: ModelSpec, ctx: PlanContext, common: dict[str, Any]
) -> Estimate:
    """The estimate for the one instance asked for: this machine, a described guest or a catalog row."""
    assert query.instance_type is not None
    if is_local(query.instance_type):
        from accelbench.plan.hardware import local_machine

        inst, accel_spec = local_machine()
        inst = described_instance(inst, query.cores, query.smt)
        return estimate(model, inst, spec=accel_spec, max_model_len=query.min_context, **common)
    if query.cores is not None or query.smt is not None:
        return _described_estimate(query, model, ctx, common)
    return estimate(model, query.instance_type, max_model_len=query.min_context, **common)


def question(query: EstimateQuery, ctx: PlanContext) -> Question:
    """The question a refusal's way forward is predicted for: the query's traffic and settings."""
    return Question(
        input_len=query.input_len,
        output_len=query.output_len,
        concurrency=query.concurrency,
        quantization=query.quantization,
        max_model_len=query.min_context,
        kv_cache_dtype=query.kv_cache_dtype,
        settings=query.engine_settings(),
        engine=query.engine,
        goal=query.goal,
        arrivals=query.arrivals,
        calibrations=ctx.calibrations,
        prices=ctx.prices,
        catalog=ctx.catalog,
    )


def _described_estimate(
    query: EstimateQuery, model: ModelSpec, ctx: PlanContext, common: dict[str, Any]
) -> Estimate:
    """One catalog instance planned with the guest topology the user described (``--cores`` / ``--smt``)."""
    from accelbench.catalog import get_catalog
    from accelbench.domain.catalog import AcceleratorType

    catalog = ctx.catalog or get_catalog()
    name = str(query.instance_type)
    row = catalog.instance(name)
    if row.accelerator_type != AcceleratorType.cpu:
        raise UserInputError(
            f"--cores and --smt describe a CPU guest; {name} is a {row.accelerator_type.value}."
        )
    inst = described_instance(row, query.cores, query.smt)
    spec = catalog.accelerator(inst.accelerator_name)
    return estimate(model, inst, spec=spec, max_model_len=query.min_context, **common)
