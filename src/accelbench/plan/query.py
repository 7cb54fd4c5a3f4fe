"""The planner's entry for a question: an ``EstimateQuery`` (what was asked: model, instance or filters,
traffic, the settings fixed, the goal) and a ``PlanContext`` (what the caller knows: active calibrations,
prices, the models measured on each instance, the catalog). ``services.plan`` builds the context from a store; the
planner never opens one."""

from __future__ import annotations

from dataclasses import replace

from accelbench.catalog import get_catalog
from accelbench.domain.estimate import Estimate, EstimateTable
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan_query import EstimateQuery, PlanQuery
from accelbench.errors import UserInputError
from accelbench.plan.context import PlanContext
from accelbench.plan.cpu_topology import described_instance
from accelbench.plan.estimate import estimate, parse_slo
from accelbench.plan.hardware import is_local, local_machine
from accelbench.plan.ranking import CatalogFilters, estimate_catalog
from accelbench.plan.refusal import Question, priced_estimate

__all__ = ["answer", "plan_query", "question"]


def answer(
    query: EstimateQuery, model: ModelSpec, context: PlanContext | None = None
) -> Estimate | EstimateTable:
    """One instance's estimate (``query.instance_type``, "local" for this machine) or the ranked catalog."""
    ctx = context or PlanContext()
    asked = plan_query(query)
    described = query.cores is not None or query.smt is not None
    if query.instance_type:
        return priced_estimate(_one_instance(query, model, ctx, asked), model, question(query, ctx))
    if described:
        raise UserInputError("--cores and --smt describe one guest: give --instance as well.")
    filters = CatalogFilters(accelerator=query.accelerator_type, max_cost=query.max_cost)
    return estimate_catalog(model, asked, ctx, filters=filters)


def plan_query(query: EstimateQuery) -> PlanQuery:
    """What the planner asks of each instance for a user's query (its ``min_context`` the context needed)."""
    return PlanQuery(
        input_len=query.input_len,
        output_len=query.output_len,
        concurrency=query.concurrency,
        arrivals=query.arrivals,
        engine=query.engine,
        quantization=query.quantization,
        max_model_len=query.min_context,
        engine_settings=query.engine_settings(),
        slo=parse_slo(query.slo) if query.slo else None,
        goal=query.goal,
        alternatives=query.alternatives,
        allow_quantization=query.allow_quantization,
    )


def _one_instance(query: EstimateQuery, model: ModelSpec, ctx: PlanContext, asked: PlanQuery) -> Estimate:
    """The estimate for the one instance asked for: this machine, a described guest or a catalog row."""
    assert query.instance_type is not None
    if is_local(query.instance_type):
        inst, accel_spec = local_machine()
        inst = described_instance(inst, query.cores, query.smt)
        return estimate(model, inst, asked, ctx, spec=accel_spec)
    if query.cores is not None or query.smt is not None:
        return _described_estimate(query, model, ctx, asked)
    return estimate(model, query.instance_type, asked, ctx)


def question(query: EstimateQuery, ctx: PlanContext) -> Question:
    """The question a refusal's way forward is predicted for: the query's traffic and settings, its goal
    choosing the open ones (no SLO, no list of alternatives, no FP8 the caller did not ask for)."""
    asked = replace(
        plan_query(query),
        kv_cache_dtype=query.kv_cache_dtype,
        slo=None,
        alternatives=False,
        allow_quantization=False,
    )
    return Question(asked, ctx)


def _described_estimate(
    query: EstimateQuery, model: ModelSpec, ctx: PlanContext, asked: PlanQuery
) -> Estimate:
    """One catalog instance planned with the guest topology the user described (``--cores`` / ``--smt``)."""
    catalog = ctx.catalog or get_catalog()
    name = str(query.instance_type)
    row = catalog.instance(name)
    if row.accelerator_type != AcceleratorType.cpu:
        raise UserInputError(
            f"--cores and --smt describe a CPU guest; {name} is a {row.accelerator_type.value}."
        )
    inst = described_instance(row, query.cores, query.smt)
    spec = catalog.accelerator(inst.accelerator_name)
    return estimate(model, inst, asked, ctx, spec=spec)
