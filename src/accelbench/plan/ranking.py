"""The catalog ranked: every matching instance estimated, cheapest per 1M output tokens first (with an SLO,
the instances that meet it first), and the instance that meets an SLO at the least cost."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from accelbench.catalog import Catalog, get_catalog
from accelbench.domain.estimate import CalibrationRef, Estimate, EstimateRow, EstimateSummary, EstimateTable
from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan_query import PlanQuery
from accelbench.errors import UserInputError
from accelbench.plan.context import PlanContext
from accelbench.plan.estimate import as_model_spec, estimate
from accelbench.plan.ranges import mark_overlaps
from accelbench.plan.recommend.tier_steps import ENGINES


# --------------------------------------------------------------------------------------------- the catalog
def _engine_for(engine: str | None, inst: InstanceType) -> str | None:
    """A named engine applies to the tiers it serves; the other tiers keep their default (a catalog-wide
    `--engine sglang` ranks GPUs with SGLang and still shows CPUs with theirs)."""
    if engine is None:
        return None
    e = engine.strip().lower()
    names = ENGINES[inst.accelerator_type]
    return e if e in names or e == "vllm" else None


def rank_key(r: EstimateRow) -> tuple[bool, float, float, float]:
    """The order of feasible rows: with an SLO the ones that meet it first (``slo_met``: at the asked
    concurrency), then by cost: $ per 1M output tokens, then $/h, then TPOT; without one, by cost alone."""
    return (
        r.slo_met is False,
        r.usd_per_million_output_tokens if r.usd_per_million_output_tokens is not None else math.inf,
        r.hourly_usd if r.hourly_usd is not None else math.inf,
        r.tpot_ms if r.tpot_ms is not None else math.inf,
    )


def _row(e: Estimate) -> EstimateRow:
    return EstimateRow(**{k: getattr(e, k) for k in EstimateRow.model_fields})


@dataclass(frozen=True)
class CatalogFilters:
    """Which catalog rows a ranking covers: one tier (``accelerator``), one instance (``instance_type``), the
    given ``instances`` instead of the catalog's, a price ceiling (``max_cost``, $/h); and how many rows it
    keeps (``limit``; ``include_infeasible`` keeps the rows that do not fit, last)."""

    accelerator: AcceleratorType | str | None = None
    instance_type: str | None = None
    max_cost: float | None = None
    instances: Iterable[InstanceType] | None = None
    limit: int | None = None
    include_infeasible: bool = True


def estimate_catalog(
    model: ModelSpec | str,
    query: PlanQuery,
    context: PlanContext | None = None,
    *,
    filters: CatalogFilters | None = None,
) -> EstimateTable:
    """Estimates for every catalog instance matching the ``filters``, ranked by ``rank_key``: with an SLO the
    rows that meet it first, then by cost per 1M output tokens and $/h; the infeasible rows last.

    ``query`` is asked of every row (``plan/estimate.py``); its ``max_model_len`` is the context the
    deployment needs. ``context``: ``prices`` (stored prices, which win over the snapshot), ``calibrations``
    and ``measured_runs`` (the stored runs' models by instance: a row is measured only where this model was),
    built by ``services.plan.plan_context`` from a store (the planner never opens one). The query's
    ``engine_settings``/``engine`` fix settings on every row; its ``goal`` chooses the open ones per row
    (``plan/choose.py``) and ``alternatives`` lists them. With an SLO, each row also gets the highest
    concurrency meeting it, and the summary names the cheapest instance that meets it (cost per 1M output
    tokens at that concurrency). ``filters`` default to the whole catalog, every row kept.
    """
    started = time.perf_counter()
    filters = filters or CatalogFilters()
    context = context or PlanContext()
    model = as_model_spec(model)
    _check_question(model, query)
    catalog = context.catalog or get_catalog()
    context = replace(context, catalog=catalog)
    insts = _instances(catalog, filters, context)
    rows: list[EstimateRow] = []
    used_refs: dict[tuple[str, str], CalibrationRef] = {}
    for inst in insts:
        est = estimate(model, inst, replace(query, engine=_engine_for(query.engine, inst)), context)
        if est.calibration is not None:
            used_refs[(est.calibration.accelerator, est.calibration.engine)] = est.calibration
        if est.feasible or filters.include_infeasible:
            rows.append(_row(est))
    feasible = [r for r in rows if r.feasible]
    infeasible = [r for r in rows if not r.feasible]
    feasible.sort(key=rank_key)
    mark_overlaps(feasible)
    infeasible.sort(key=lambda r: (r.accelerator_type.value, r.hourly_usd or math.inf))
    summary, notes = _summary(feasible, infeasible, query)
    ranked = feasible + infeasible
    if filters.limit is not None:
        ranked = ranked[: filters.limit]
    return EstimateTable(
        model=model.name,
        input_len=query.input_len,
        output_len=query.output_len,
        concurrency=query.concurrency,
        filters={
            "accelerator": str(filters.accelerator) if filters.accelerator else None,
            "max_cost": filters.max_cost,
            "min_context": query.max_model_len,
            "quantization": query.quantization,
            "arrivals": query.arrivals,
        },
        slo=query.slo,
        rows=ranked,
        summary=summary,
        calibrations_used=list(used_refs.values()),
        elapsed_ms=(time.perf_counter() - started) * 1000,
        notes=notes,
    )


def _check_question(model: ModelSpec, query: PlanQuery) -> None:
    """An engine no tier knows, or a request longer than the model's context, is the user's error."""
    if query.engine is not None:
        known = {e for names in ENGINES.values() for e in names} | {"vllm"}
        if query.engine.strip().lower() not in known:
            raise UserInputError(
                f"Unknown engine {query.engine!r}.", hint=f"Use one of {', '.join(sorted(known))}."
            )
    input_len, output_len = query.input_len, query.output_len
    if input_len + output_len > model.max_position_embeddings:
        raise UserInputError(
            f"A request of {input_len:,} input + {output_len:,} output tokens is longer than {model.name}'s "
            f"context of {model.max_position_embeddings:,} tokens: no instance can serve it.",
            hint=f"Keep input + output within {model.max_position_embeddings:,} tokens, or pick a model with a "
            "longer context.",
        )


def _instances(catalog: Catalog, filters: CatalogFilters, context: PlanContext) -> list[InstanceType]:
    """The rows to estimate: the catalog's matching the filters, priced at the known prices."""
    instances = filters.instances
    if filters.instance_type is not None:
        instances = [catalog.instance(filters.instance_type)]
    price_of: dict[str, float] = {}
    if context.prices is not None:
        price_of = {k: float(getattr(v, "usd_per_hour", v)) for k, v in context.prices.items()}
    max_cost = filters.max_cost
    if instances is None:
        return catalog.filter(
            accelerator_type=filters.accelerator, max_price=max_cost, prices=price_of or None
        )
    insts = list(instances)
    if max_cost is not None:
        insts = [i for i in insts if (price_of.get(i.name, i.on_demand_usd) or math.inf) <= max_cost]
    return insts


def _summary(
    feasible: list[EstimateRow], infeasible: list[EstimateRow], query: PlanQuery
) -> tuple[EstimateSummary, list[str]]:
    """The table's summary (how many rows fit, the cheapest, fastest and roomiest, the cheapest meeting the
    SLO) and its notes."""
    slo, concurrency = query.slo, query.concurrency
    summary = EstimateSummary(
        feasible_native=sum(1 for r in feasible if not r.quantization_required),
        feasible_quantized=sum(1 for r in feasible if r.quantization_required),
        infeasible=len(infeasible),
        cheapest=next((r.instance for r in feasible if r.usd_per_million_output_tokens is not None), None),
        fastest=min(feasible, key=lambda r: r.tpot_ms or math.inf).instance if feasible else None,
        most_headroom=min(feasible, key=lambda r: r.memory_utilization_pct or math.inf).instance
        if feasible
        else None,
    )
    notes: list[str] = []
    if slo is not None:
        meeting = [
            r
            for r in feasible
            if r.max_concurrency_meeting_slo and r.max_concurrency_meeting_slo >= concurrency
        ]
        meeting.sort(
            key=lambda r: (
                r.usd_per_million_output_tokens_at_slo
                if r.usd_per_million_output_tokens_at_slo is not None
                else math.inf,
                r.hourly_usd or math.inf,
            )
        )
        if meeting:
            summary.slo_choice = meeting[0].instance
            summary.slo_max_concurrency = meeting[0].max_concurrency_meeting_slo
        else:
            notes.append(f"No instance meets {slo.label()} at concurrency {concurrency}.")
    return summary, notes
