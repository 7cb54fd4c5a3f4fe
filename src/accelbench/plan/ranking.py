"""The catalog ranked: every matching instance estimated, cheapest per 1M output tokens first (with an SLO,
the instances that meet it first), and the instance that meets an SLO at the least cost."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from accelbench.domain.catalog import AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan import (
    SLO,
    CalibrationRef,
    Estimate,
    EstimateRow,
    EstimateSummary,
    EstimateTable,
)
from accelbench.domain.run import EngineSettings
from accelbench.errors import UserInputError
from accelbench.plan.calibrations import CalibrationSet
from accelbench.plan.estimate import as_model_spec, estimate, parse_slo
from accelbench.plan.measured import MeasuredRuns
from accelbench.plan.ranges import mark_overlaps

if TYPE_CHECKING:
    from accelbench.catalog import Catalog


# --------------------------------------------------------------------------------------------- the catalog
def _engine_for(engine: str | None, inst: InstanceType) -> str | None:
    """A named engine applies to the tiers it serves; the other tiers keep their default (a catalog-wide
    `--engine sglang` ranks GPUs with SGLang and still shows CPUs with theirs)."""
    if engine is None:
        return None
    from accelbench.plan.recommend.common import ENGINES

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


def estimate_catalog(
    model: ModelSpec | str,
    *,
    input_len: int,
    output_len: int,
    concurrency: int,
    accelerator: AcceleratorType | str | None = None,
    accelerator_type: AcceleratorType | str | None = None,
    instance_type: str | None = None,
    max_cost: float | None = None,
    min_context: int | None = None,
    quantization: str | None = None,
    slo: SLO | str | None = None,
    instances: Iterable[InstanceType] | None = None,
    catalog: Catalog | None = None,
    calibrations: CalibrationSet | None = None,
    prices: Mapping[str, Any] | None = None,
    measured_runs: MeasuredRuns | None = None,
    limit: int | None = None,
    include_infeasible: bool = True,
    arrivals: str = "bursts",
    engine: str | None = None,
    engine_settings: EngineSettings | None = None,
    goal: str | None = None,
    alternatives: bool = False,
    allow_quantization: bool = False,
) -> EstimateTable:
    """Estimates for every catalog instance matching the filters, ranked by ``rank_key``: with an SLO the
    rows that meet it first, then by cost per 1M output tokens and $/h; the infeasible rows last.

    ``accelerator`` (or ``accelerator_type``) keeps one tier; ``instance_type`` keeps one instance.
    ``prices`` (stored prices, which win over the snapshot), ``calibrations`` and ``measured_runs`` (the
    stored runs' models by instance: a row is measured only where this model was) come from the caller's context (``services.plan.plan_context`` builds them from a
    store; the planner never opens one). ``engine_settings``/``engine`` fix settings on every row; ``goal``
    chooses the open ones per row (``plan/choose.py``) and ``alternatives`` lists them. With ``slo``, each row also gets the highest concurrency meeting it, and the summary names the
    cheapest instance that meets it (cost per 1M output tokens at that concurrency).
    """
    started = time.perf_counter()
    model = as_model_spec(model)
    if engine is not None:
        from accelbench.plan.recommend.common import ENGINES

        known = {e for names in ENGINES.values() for e in names} | {"vllm"}
        if engine.strip().lower() not in known:
            raise UserInputError(
                f"Unknown engine {engine!r}.", hint=f"Use one of {', '.join(sorted(known))}."
            )
    if input_len + output_len > model.max_position_embeddings:
        raise UserInputError(
            f"A request of {input_len:,} input + {output_len:,} output tokens is longer than {model.name}'s "
            f"context of {model.max_position_embeddings:,} tokens: no instance can serve it.",
            hint=f"Keep input + output within {model.max_position_embeddings:,} tokens, or pick a model with a "
            "longer context.",
        )
    if isinstance(slo, str):
        slo = parse_slo(slo)
    accelerator = accelerator or accelerator_type
    if catalog is None:
        from accelbench.catalog import get_catalog

        catalog = get_catalog()
    if instance_type is not None:
        instances = [catalog.instance(instance_type)]
    price_of: dict[str, float] = {}
    if prices is not None:
        price_of = {k: float(getattr(v, "usd_per_hour", v)) for k, v in prices.items()}
    if instances is None:
        insts = catalog.filter(accelerator_type=accelerator, max_price=max_cost, prices=price_of or None)
    else:
        insts = list(instances)
        if max_cost is not None:
            insts = [i for i in insts if (price_of.get(i.name, i.on_demand_usd) or math.inf) <= max_cost]
    rows: list[EstimateRow] = []
    used_refs: dict[tuple[str, str], CalibrationRef] = {}
    for inst in insts:
        est = estimate(
            model,
            inst,
            input_len=input_len,
            output_len=output_len,
            concurrency=concurrency,
            quantization=quantization,
            max_model_len=min_context,
            catalog=catalog,
            calibrations=calibrations,
            prices=prices,
            slo=slo,
            measured_runs=measured_runs,
            arrivals=arrivals,
            engine=_engine_for(engine, inst),
            engine_settings=engine_settings,
            goal=goal,
            alternatives=alternatives,
            allow_quantization=allow_quantization,
        )
        if est.calibration is not None:
            used_refs[(est.calibration.accelerator, est.calibration.engine)] = est.calibration
        if est.feasible or include_infeasible:
            rows.append(_row(est))
    feasible = [r for r in rows if r.feasible]
    infeasible = [r for r in rows if not r.feasible]
    feasible.sort(key=rank_key)
    mark_overlaps(feasible)
    infeasible.sort(key=lambda r: (r.accelerator_type.value, r.hourly_usd or math.inf))
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
    ranked = feasible + infeasible
    if limit is not None:
        ranked = ranked[:limit]
    return EstimateTable(
        model=model.name,
        input_len=input_len,
        output_len=output_len,
        concurrency=concurrency,
        filters={
            "accelerator": str(accelerator) if accelerator else None,
            "max_cost": max_cost,
            "min_context": min_context,
            "quantization": quantization,
            "arrivals": arrivals,
        },
        slo=slo,
        rows=ranked,
        summary=summary,
        calibrations_used=list(used_refs.values()),
        elapsed_ms=(time.perf_counter() - started) * 1000,
        notes=notes,
    )
