"""One estimate: predicted TTFT, TPOT, throughput and cost of serving a model on one instance at one traffic
point (the performance model itself is ``plan/perf_model.py``; the feasible estimate's figures and words
``plan/estimate_figures.py``).

Each entry point takes the question as one ``PlanQuery`` and what the caller knows as one ``PlanContext``
(None: nothing known, the snapshot prices and the cited factors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from accelbench.domain.estimate import CalibrationRef, EfficiencyFactors, Estimate
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan_query import FitQuery, PlanQuery
from accelbench.domain.recommendation import Recommendation
from accelbench.domain.run import EngineSettings
from accelbench.errors import UserInputError
from accelbench.modelspec import load_model_spec
from accelbench.plan.calibrations import CalibrationSet, factors_for
from accelbench.plan.choose import GOALS, estimate_for_goal
from accelbench.plan.context import PlanContext
from accelbench.plan.cpu_topology import topology_note
from accelbench.plan.estimate_figures import PerfSetup, estimate_notes, feasible_estimate
from accelbench.plan.hardware import Hardware, hardware_for, local_machine
from accelbench.plan.measured import attribution
from accelbench.plan.memory import WeightFormat
from accelbench.plan.perf_model import (
    EngineLimits,
    PerfModel,
    build_perf_model,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    normalize_engine,
    weight_format_from,
)
from accelbench.plan.recommend import accelerator_name, recommend, resolve_hardware
from accelbench.plan.slo import parse_slo

__all__ = [
    "PerfSetup",
    "as_model_spec",
    "estimate",
    "estimate_local",
    "measured_perf",
    "parse_slo",
    "perf_setup",
    "predict_for",
]


# --------------------------------------------------------------------------------------------- one instance
def _hourly(instance: InstanceType, prices: Mapping[str, Any] | None) -> tuple[float | None, str | None]:
    if prices is not None and instance.name in prices:
        p = prices[instance.name]
        usd = getattr(p, "usd_per_hour", p)
        return float(usd), str(getattr(p, "source", "store"))
    if instance.on_demand_usd is not None:
        return instance.on_demand_usd, f"snapshot {instance.price_date or ''}".strip()
    return None, None


def predict_for(
    model: ModelSpec,
    instance: InstanceType,
    spec: AcceleratorSpec,
    rec: Recommendation,
    *,
    engine_settings: EngineSettings | None = None,
    engine: str | None = None,
    engine_defaults: bool = False,
) -> tuple[PerfModel, Hardware, WeightFormat]:
    """The PerfModel for a fitting recommendation. The recommendation already carries the settings that were
    given (``FitQuery(engine_settings=...)``: TP, KV budget, max_num_seqs are recomputed there); with
    ``engine_defaults`` (a measured run, a published measurement) a batch limit that was not given is the
    engine's own default rather than the planner's choice."""
    assert rec.settings is not None and rec.memory is not None
    s = rec.settings
    hw = hardware_for(instance, spec)
    fmt = weight_format_from(rec, model)
    tp = s.tensor_parallel_size
    kv_bytes = 1.0 if (s.kv_cache_dtype or "").startswith("fp8") else 2.0
    eng = engine or s.engine
    chunk = s.max_num_batched_tokens or default_max_num_batched_tokens(hw, tp)
    seqs = s.max_num_seqs
    given = engine_settings.max_num_seqs if engine_settings is not None else None
    if engine_defaults and given is None:
        seqs = default_max_num_seqs(hw, tp, eng)
    if eng == "llamacpp":
        # llama-cpp-python's OpenAI server decodes one request at a time; the others queue (accelbench starts
        # it with --interrupt_requests False so a new request waits instead of cutting the running one off)
        seqs = 1
    pm = build_perf_model(
        model,
        hw,
        fmt,
        tp=tp,
        kv_bytes=kv_bytes,
        limits=EngineLimits(
            batch_limit=seqs, kv_tokens=rec.memory.kv_cache_tokens, chunk=chunk, max_len=s.max_model_len
        ),
        cpu_threads=s.threads,
        engine=eng,
    )
    return pm, hw, fmt


def measured_perf(
    model: ModelSpec, instance: InstanceType, spec: AcceleratorSpec, asked: FitQuery, *, catalog: Any
) -> PerfModel | str:
    """The PerfModel of a measurement taken at ``asked``'s settings (a stored run, a published row): the
    planner's fit at exactly those settings, the engine's own defaults for a batch limit not given; or why
    the planner says it does not fit. The planner's error when it refuses the settings is raised."""
    rec = recommend(model, instance, asked, spec=spec, catalog=catalog, suggest_alternatives=False)
    if not rec.fits:
        return rec.refusal.reason if rec.refusal else ""
    perf, _, _ = predict_for(
        model,
        instance,
        spec,
        rec,
        engine_settings=asked.engine_settings,
        engine=asked.engine,
        engine_defaults=True,
    )
    return perf


def _recommendation(
    model: ModelSpec,
    instance: InstanceType,
    spec: AcceleratorSpec,
    f: EfficiencyFactors,
    query: PlanQuery,
    catalog: Any,
) -> Recommendation:
    """The planner's fit for this traffic; when the natural context is shorter than the request (and no
    context was asked for), the fit for exactly what the request needs."""
    need = query.input_len + query.output_len
    asked = query.fit_query()
    cpu_factors = f if instance.accelerator_type == AcceleratorType.cpu else None

    def fit(q: FitQuery) -> Recommendation:
        return recommend(
            model,
            instance,
            q,
            spec=spec,
            catalog=catalog,
            suggest_alternatives=False,
            factors=cpu_factors,
        )

    rec = fit(asked)
    if (
        rec.fits
        and rec.settings is not None
        and rec.settings.max_model_len < need
        and asked.max_model_len is None
    ):
        rec = fit(replace(asked, max_model_len=need))
    return rec


def _factors(
    instance: InstanceType,
    engine: str,
    calibrations: CalibrationSet | None,
    factors: EfficiencyFactors | None,
) -> tuple[EfficiencyFactors, CalibrationRef | None]:
    """The factors a prediction uses and the calibration they came from: ``factors`` when given, else the
    engine's on this accelerator, calibrated when a calibration applies."""
    if factors is not None:
        return factors, None
    return factors_for(instance.accelerator_type, accelerator_name(instance), engine, calibrations)


def perf_setup(
    model: ModelSpec,
    instance: InstanceType | str,
    query: PlanQuery,
    context: PlanContext | None = None,
    *,
    spec: AcceleratorSpec | None = None,
) -> PerfSetup | str:
    """The setup ``estimate`` predicts from (the same fit, settings and factors), or why there is none."""
    context = context or PlanContext()
    instance, spec, catalog = resolve_hardware(instance, spec, context.catalog)
    kind = instance.accelerator_type
    eng = normalize_engine(query.engine, kind)
    query = replace(query, engine=eng)
    f, ref = _factors(instance, eng, context.calibrations, query.factors)
    rec = _recommendation(model, instance, spec, f, query, catalog)
    input_len, output_len = query.input_len, query.output_len
    if not rec.fits or rec.settings is None or rec.memory is None:
        return rec.refusal.reason if rec.refusal else "does not fit"
    if rec.settings.max_model_len < input_len + output_len:
        return (
            f"a {input_len + output_len:,}-token request exceeds the {rec.settings.max_model_len:,}-token "
            "context that fits"
        )
    pm, _, _ = predict_for(
        model,
        instance,
        spec,
        rec,
        engine_settings=query.engine_settings,
        engine=eng,
        engine_defaults=query.engine_defaults,
    )
    return PerfSetup(recommendation=rec, perf=pm, factors=f, calibration=ref, engine=eng)


def estimate(
    model: ModelSpec | str,
    instance: InstanceType | str,
    query: PlanQuery,
    context: PlanContext | None = None,
    *,
    spec: AcceleratorSpec | None = None,
    recommendation: Recommendation | None = None,
) -> Estimate:
    """Predicted speed and cost of serving ``model`` on ``instance`` at one traffic point.

    ``query`` is the question (``PlanQuery``): the traffic; the ``engine_settings`` a deployment fixes (TP,
    max_num_seqs, max_num_batched_tokens, KV dtype and space, threads), for which the fit and every memory
    figure are recomputed, with ``engine_defaults`` the ones not given the engine's defaults (a measured run)
    rather than the planner's choice; ``goal`` ("cost" or "latency") weighs every setting the caller left
    open (TP degrees, FP8 beside the native format; ``plan/choose.py``) and reports the best, and
    ``alternatives`` lists them all with their predictions. Without a goal the planner's fit (the smallest TP
    that holds the model) is used. ``factors`` override any calibration. ``arrivals``: "bursts" (users re-send
    at once with fixed lengths, as ``accelbench sweep`` measures) or "steady" (spread out).

    ``context`` is what the caller knows (``PlanContext``): ``calibrations`` (default: none) supplies fitted
    factors by (accelerator, engine); ``prices`` maps instance names to prices (default: the catalog
    snapshot); ``measured_runs`` (instance -> the names of each stored run measured there) marks the row
    measured only where this model was (``plan/measured.py``); None: nothing known. ``recommendation``: a
    fit already made for this question.
    """
    context = context or PlanContext()
    if query.arrivals not in ("bursts", "steady"):
        raise UserInputError(f"Unknown arrivals {query.arrivals!r}: use bursts or steady.")
    if query.input_len < 1 or query.output_len < 1 or query.concurrency < 1:
        raise UserInputError("input_len, output_len and concurrency must be at least 1.")
    model = as_model_spec(model)
    instance, spec, catalog = resolve_hardware(instance, spec, context.catalog)
    context = replace(context, catalog=catalog)
    if query.goal is not None and recommendation is None:
        if query.goal not in GOALS:
            raise UserInputError(f"Unknown goal {query.goal!r}: use cost or latency.")
        fixed_model, fixed_instance, fixed_spec = model, instance, spec

        def at(quantization: str | None, engine_settings: EngineSettings | None) -> Estimate:
            # each open setting predicted by this function (choose.py does not import it)
            at_setting = query.at(quantization=quantization, engine_settings=engine_settings)
            return estimate(fixed_model, fixed_instance, at_setting, context, spec=fixed_spec)

        return estimate_for_goal(model, instance, spec, query, at)
    return _one_setting(model, instance, spec, query, context, recommendation)


def _one_setting(
    model: ModelSpec,
    instance: InstanceType,
    spec: AcceleratorSpec,
    query: PlanQuery,
    context: PlanContext,
    recommendation: Recommendation | None,
) -> Estimate:
    """The estimate at one setting: the fit (``recommendation`` when it holds the request), then the
    prediction, or the infeasible estimate saying why."""
    kind = instance.accelerator_type
    engine = normalize_engine(query.engine, kind)
    query = replace(query, engine=engine)
    f, ref = _factors(instance, engine, context.calibrations, query.factors)
    need = query.input_len + query.output_len
    rec = recommendation
    if rec is None or (
        rec.fits
        and rec.settings is not None
        and rec.settings.max_model_len < need
        and query.max_model_len is None
    ):
        rec = _recommendation(model, instance, spec, f, query, context.catalog)
    hourly, price_source = _hourly(instance, context.prices)
    found = attribution(model, instance.name, context.measured_runs)
    base: dict[str, Any] = {
        "model": model.name,
        "instance": instance.name,
        "accelerator_type": kind,
        "accelerator_name": accelerator_name(instance),
        "accelerator_count": instance.accelerator_count,
        "engine": engine,
        "input_len": query.input_len,
        "output_len": query.output_len,
        "concurrency": query.concurrency,
        "arrivals": query.arrivals,
        "hourly_usd": hourly,
        "price_source": price_source,
        "recommendation": rec,
        "has_benchmark_data": found.measured,
        "measured_other_models": found.other_models,
    }
    if not rec.fits or rec.settings is None or rec.memory is None:
        reason = rec.refusal.reason if rec.refusal else "does not fit"
        return Estimate(**base, feasible=False, explanation=reason)
    if rec.settings.max_model_len < need:
        return Estimate(
            **base,
            feasible=False,
            explanation=f"a {need:,}-token request exceeds the {rec.settings.max_model_len:,}-token context "
            "that fits",
        )
    pm, _hw, _fmt = predict_for(
        model,
        instance,
        spec,
        rec,
        engine_settings=query.engine_settings,
        engine=engine,
        engine_defaults=query.engine_defaults,
    )
    pred = pm.predict(f, query.input_len, query.output_len, query.concurrency, query.arrivals)
    setup = PerfSetup(recommendation=rec, perf=pm, factors=f, calibration=ref, engine=engine)
    notes = estimate_notes(model, instance, found, setup, pred, query)
    topology = topology_note(
        instance, spec, engine, rec.settings.threads, context.catalog, rec.settings.tensor_parallel_size
    )
    return feasible_estimate(base, setup, pred, notes, query, topology, instance.cpu_isa)


def estimate_local(
    model: ModelSpec,
    query: PlanQuery,
    context: PlanContext | None = None,
    *,
    environment: dict[str, Any] | None = None,
) -> Estimate:
    """Estimate for "this machine" (or the machine a captured environment describes)."""
    instance, spec = local_machine(environment)
    return estimate(model, instance, query, context, spec=spec)


def as_model_spec(model: ModelSpec | str) -> ModelSpec:
    if isinstance(model, str):
        return load_model_spec(model)
    return model
