"""One estimate: predicted TTFT, TPOT, throughput and cost of serving a model on one instance at one traffic
point (the performance model itself is ``plan/perf_model.py``), and the SLO parser."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.domain.catalog import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan import (
    SLO,
    CalibrationRef,
    EfficiencyFactors,
    Estimate,
    Recommendation,
    TimeBreakdown,
)
from accelbench.domain.quant import parse_quantization
from accelbench.domain.run import EngineSettings
from accelbench.errors import UserInputError
from accelbench.plan.calibrations import CalibrationSet, factors_for
from accelbench.plan.choose import GOALS, estimate_for_goal
from accelbench.plan.cpu_topology import topology_note
from accelbench.plan.error_records import regime_of
from accelbench.plan.hardware import Hardware, hardware_for
from accelbench.plan.measured import Attribution, MeasuredRuns, attribution, attribution_note
from accelbench.plan.memory import (
    GIB,
    WeightFormat,
    native_format,
)
from accelbench.plan.perf_model import (
    PerfModel,
    Prediction,
    build_perf_model,
    default_max_num_batched_tokens,
    default_max_num_seqs,
    normalize_engine,
    weight_format_from,
)
from accelbench.plan.ranges import with_ranges
from accelbench.plan.recommend import accelerator_name, recommend, resolve_hardware

if TYPE_CHECKING:
    from accelbench.catalog import Catalog


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
    given (``recommend(settings=...)``: TP, KV budget, max_num_seqs are recomputed there); with
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
        batch_limit=seqs,
        kv_tokens=rec.memory.kv_cache_tokens,
        chunk=chunk,
        cpu_threads=s.threads,
        engine=eng,
    )
    return pm, hw, fmt


def _max_concurrency_for(
    pm: PerfModel, f: EfficiencyFactors, slo: SLO, input_len: int, output_len: int, cap: int, arrivals: str
) -> int:
    def ok(c: int) -> bool:
        p = pm.predict(f, input_len, output_len, c, arrivals)
        return slo.met(p.ttft * 1000, p.tpot * 1000, p.e2e * 1000)

    if not ok(1):
        return 0
    lo, hi = 1, 2
    while hi <= cap and ok(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, cap + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _recommendation(
    model: ModelSpec,
    instance: InstanceType,
    spec: AcceleratorSpec,
    f: EfficiencyFactors,
    *,
    quantization: str | None,
    max_model_len: int | None,
    kv_cache_dtype: str | None,
    input_len: int,
    output_len: int,
    catalog: Catalog | None,
    engine_settings: EngineSettings | None,
    engine: str,
) -> Recommendation:
    """The planner's fit for this traffic; when the natural context is shorter than the request (and no
    context was asked for), the fit for exactly what the request needs."""
    kind = instance.accelerator_type
    need = input_len + output_len
    options: dict[str, Any] = {
        "quantization": quantization,
        "kv_cache_dtype": kv_cache_dtype,
        "input_len": input_len,
        "output_len": output_len,
        "spec": spec,
        "catalog": catalog,
        "suggest_alternatives": False,
        "factors": f if kind == AcceleratorType.cpu else None,
        "settings": engine_settings,
        "engine": engine,
    }
    rec = recommend(model, instance, max_model_len=max_model_len, **options)
    if rec.fits and rec.settings is not None and rec.settings.max_model_len < need and max_model_len is None:
        rec = recommend(model, instance, max_model_len=need, **options)
    return rec


@dataclass
class PerfSetup:
    """What a prediction for one deployment rests on: the fit, the performance model and the factors (with
    the calibration they came from, if any)."""

    recommendation: Recommendation
    perf: PerfModel
    factors: EfficiencyFactors
    calibration: CalibrationRef | None
    engine: str


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
    *,
    input_len: int,
    output_len: int,
    spec: AcceleratorSpec | None = None,
    catalog: Catalog | None = None,
    engine: str | None = None,
    quantization: str | None = None,
    max_model_len: int | None = None,
    kv_cache_dtype: str | None = None,
    engine_settings: EngineSettings | None = None,
    calibrations: CalibrationSet | None = None,
    factors: EfficiencyFactors | None = None,
    engine_defaults: bool = False,
) -> PerfSetup | str:
    """The setup ``estimate`` predicts from (the same fit, settings and factors), or why there is none."""
    instance, spec, catalog = resolve_hardware(instance, spec, catalog)
    kind = instance.accelerator_type
    eng = normalize_engine(engine, kind)
    f, ref = _factors(instance, eng, calibrations, factors)
    rec = _recommendation(
        model,
        instance,
        spec,
        f,
        quantization=quantization,
        max_model_len=max_model_len,
        kv_cache_dtype=kv_cache_dtype,
        input_len=input_len,
        output_len=output_len,
        catalog=catalog,
        engine_settings=engine_settings,
        engine=eng,
    )
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
        engine_settings=engine_settings,
        engine=eng,
        engine_defaults=engine_defaults,
    )
    return PerfSetup(recommendation=rec, perf=pm, factors=f, calibration=ref, engine=eng)


def _bound_words(pred: Prediction) -> str:
    core = max(pred.d_weights + pred.d_kv, pred.d_compute, pred.d_floor)
    if pred.d_overhead >= core:
        return "overhead"
    if pred.d_floor >= max(pred.d_weights + pred.d_kv, pred.d_compute):
        return "latency"
    return "compute" if pred.d_compute > pred.d_weights + pred.d_kv else "memory"


def estimate(
    model: ModelSpec | str,
    instance: InstanceType | str,
    *,
    input_len: int,
    output_len: int,
    concurrency: int,
    engine: str | None = None,
    quantization: str | None = None,
    max_model_len: int | None = None,
    kv_cache_dtype: str | None = None,
    spec: AcceleratorSpec | None = None,
    catalog: Catalog | None = None,
    engine_settings: EngineSettings | None = None,
    calibrations: CalibrationSet | None = None,
    factors: EfficiencyFactors | None = None,
    prices: Mapping[str, Any] | None = None,
    slo: SLO | None = None,
    recommendation: Recommendation | None = None,
    measured_runs: MeasuredRuns | None = None,
    arrivals: str = "bursts",
    engine_defaults: bool = False,
    goal: str | None = None,
    alternatives: bool = False,
    allow_quantization: bool = False,
) -> Estimate:
    """Predicted speed and cost of serving ``model`` on ``instance`` at one traffic point.

    ``engine_settings`` are the settings a deployment fixes (TP, max_num_seqs, max_num_batched_tokens, KV
    dtype and space, threads): the fit and every memory figure are recomputed for them; with
    ``engine_defaults`` the ones not given are the engine's defaults (a measured run) rather than the
    planner's choice. ``goal`` ("cost" or "latency") weighs every setting the caller left open (TP degrees,
    FP8 beside the native format; ``plan/choose.py``) and reports the best; ``alternatives`` lists them all
    with their predictions. Without a goal the planner's fit (the smallest TP that holds the model) is used.
    ``calibrations``
    (default: none) supplies fitted factors by (accelerator, engine); ``factors`` overrides both;
    ``prices`` maps instance names to prices (default: the catalog snapshot). ``measured_runs`` (instance ->
    the names of each stored run measured there) marks the row measured only where this model was
    (``plan/measured.py``). ``arrivals``: "bursts"
    (users re-send at once with fixed lengths, as ``accelbench sweep`` measures) or "steady" (spread out).
    """
    if arrivals not in ("bursts", "steady"):
        raise UserInputError(f"Unknown arrivals {arrivals!r}: use bursts or steady.")
    if input_len < 1 or output_len < 1 or concurrency < 1:
        raise UserInputError("input_len, output_len and concurrency must be at least 1.")
    model = as_model_spec(model)
    instance, spec, catalog = resolve_hardware(instance, spec, catalog)
    if goal is not None and recommendation is None:
        if goal not in GOALS:
            raise UserInputError(f"Unknown goal {goal!r}: use cost or latency.")
        return estimate_for_goal(
            model,
            instance,
            spec,
            goal=goal,
            alternatives=alternatives,
            allow_quantization=allow_quantization,
            predict=estimate,  # each open setting predicted by this function (choose.py does not import it)
            quantization=quantization,
            engine_settings=engine_settings,
            kwargs={
                "input_len": input_len,
                "output_len": output_len,
                "concurrency": concurrency,
                "engine": engine,
                "max_model_len": max_model_len,
                "kv_cache_dtype": kv_cache_dtype,
                "catalog": catalog,
                "calibrations": calibrations,
                "factors": factors,
                "prices": prices,
                "slo": slo,
                "measured_runs": measured_runs,
                "arrivals": arrivals,
                "engine_defaults": engine_defaults,
            },
        )
    traffic = Traffic(input_len, output_len, concurrency, arrivals)
    return _one_setting(
        model,
        instance,
        spec,
        traffic,
        _Given(
            engine=engine,
            quantization=quantization,
            max_model_len=max_model_len,
            kv_cache_dtype=kv_cache_dtype,
            engine_settings=engine_settings,
            engine_defaults=engine_defaults,
            factors=factors,
        ),
        _Known(catalog=catalog, calibrations=calibrations, prices=prices, measured_runs=measured_runs),
        slo,
        recommendation,
    )


@dataclass(frozen=True)
class _Given:
    """The settings and factors the caller fixed for one prediction."""

    engine: str | None
    quantization: str | None
    max_model_len: int | None
    kv_cache_dtype: str | None
    engine_settings: EngineSettings | None
    engine_defaults: bool
    factors: EfficiencyFactors | None


@dataclass(frozen=True)
class _Known:
    """What the caller knows besides the question: catalog, calibrations, prices, measured runs."""

    catalog: Catalog | None
    calibrations: CalibrationSet | None
    prices: Mapping[str, Any] | None
    measured_runs: MeasuredRuns | None


def _one_setting(
    model: ModelSpec,
    instance: InstanceType,
    spec: AcceleratorSpec,
    traffic: Traffic,
    given: _Given,
    known: _Known,
    slo: SLO | None,
    recommendation: Recommendation | None,
) -> Estimate:
    """The estimate at one setting: the fit (``recommendation`` when it holds the request), then the
    prediction, or the infeasible estimate saying why."""
    input_len, output_len, concurrency, arrivals = (
        traffic.input_len,
        traffic.output_len,
        traffic.concurrency,
        traffic.arrivals,
    )
    engine, quantization, max_model_len = given.engine, given.quantization, given.max_model_len
    kv_cache_dtype, engine_settings, engine_defaults = (
        given.kv_cache_dtype,
        given.engine_settings,
        given.engine_defaults,
    )
    catalog, calibrations, prices, measured_runs = (
        known.catalog,
        known.calibrations,
        known.prices,
        known.measured_runs,
    )
    factors = given.factors
    kind = instance.accelerator_type
    engine = normalize_engine(engine, kind)
    f, ref = _factors(instance, engine, calibrations, factors)
    need = input_len + output_len
    rec = recommendation
    if rec is None or (
        rec.fits and rec.settings is not None and rec.settings.max_model_len < need and max_model_len is None
    ):
        rec = _recommendation(
            model,
            instance,
            spec,
            f,
            quantization=quantization,
            max_model_len=max_model_len,
            kv_cache_dtype=kv_cache_dtype,
            input_len=input_len,
            output_len=output_len,
            catalog=catalog,
            engine_settings=engine_settings,
            engine=engine,
        )
    hourly, price_source = _hourly(instance, prices)
    found = attribution(model, instance.name, measured_runs)
    base: dict[str, Any] = {
        "model": model.name,
        "instance": instance.name,
        "accelerator_type": kind,
        "accelerator_name": accelerator_name(instance),
        "accelerator_count": instance.accelerator_count,
        "engine": engine,
        "input_len": input_len,
        "output_len": output_len,
        "concurrency": concurrency,
        "arrivals": arrivals,
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
        engine_settings=engine_settings,
        engine=engine,
        engine_defaults=engine_defaults,
    )
    pred = pm.predict(f, input_len, output_len, concurrency, arrivals)
    setup = PerfSetup(recommendation=rec, perf=pm, factors=f, calibration=ref, engine=engine)
    notes = _notes(model, instance, found, setup, pred, factors, quantization, traffic)
    topology = topology_note(
        instance, spec, engine, rec.settings.threads, catalog, rec.settings.tensor_parallel_size
    )
    return _prediction(base, setup, pred, notes, traffic, quantization, slo, topology, instance.cpu_isa)


@dataclass(frozen=True)
class Traffic:
    """The traffic point one prediction is for."""

    input_len: int
    output_len: int
    concurrency: int
    arrivals: str


def _notes(
    model: ModelSpec,
    instance: InstanceType,
    found: Attribution,
    setup: PerfSetup,
    pred: Prediction,
    factors: EfficiencyFactors | None,
    quantization: str | None,
    traffic: Traffic,
) -> list[str]:
    """How the prediction was made, in words: the factors' source, where the model was measured, the
    arrivals, Neuron's compiled shapes, a precision other than the checkpoint's, requests that queue."""
    kind = instance.accelerator_type
    pm, ref, s = setup.perf, setup.calibration, setup.recommendation.settings
    concurrency, arrivals = traffic.concurrency, traffic.arrivals
    assert s is not None
    notes: list[str] = []
    if ref is not None:
        notes.append(
            f"Calibrated: factors fitted to {ref.n_points} measured point(s) on {ref.accelerator} with "
            f"{ref.engine} (calibration {ref.id}"
            + (
                f", TPOT error {ref.tpot_error_before_pct:.0f}% -> {ref.tpot_error_after_pct:.0f}%"
                if ref.tpot_error_after_pct is not None and ref.tpot_error_before_pct is not None
                else ""
            )
            + ")."
        )
    elif factors is not None:
        notes.append("Efficiency factors given by the caller (no calibration applied).")
    else:
        notes.append(
            f"Uncalibrated: starting efficiency factors for {kind.value} / {setup.engine} (cited in the data file)."
        )
    if (said := attribution_note(model, instance.name, found)) is not None:
        notes.append(said)
    notes.append(
        "Arrivals: bursts (users re-send at once with fixed lengths, as `accelbench sweep` measures)."
        if arrivals == "bursts"
        else "Arrivals: steady (spread out; other requests' prefills interleave with decode)."
    )
    if kind == AcceleratorType.neuron:
        notes.append(
            f"Neuron runs compiled shapes: every decode step runs the compiled batch ({pm.batch_limit}) and "
            "contexts are padded to power-of-two buckets."
        )
    if s.quantization is not None:
        why = (
            "as asked"
            if parse_quantization(quantization) is not None
            else "the checkpoint's precision does not fit"
        )
        notes.append(
            f"Precision: {s.weight_format} weights, not the checkpoint's {native_format(model).name} ({why}): not like "
            "for like with a deployment at the checkpoint's precision."
        )
    if pred.batch < concurrency:
        notes.append(
            f"Only {pred.batch} of {concurrency} requests run at once (max_num_seqs {pm.batch_limit}, "
            f"KV cache {pm.kv_tokens:,} tokens); the rest queue, which TTFT includes."
        )
    return notes


def _times(pm: PerfModel, pred: Prediction, f: EfficiencyFactors, bound: str) -> TimeBreakdown:
    """The parts of one prediction, ms."""
    return TimeBreakdown(
        decode_step_ms=pred.decode_step * 1000,
        decode_weights_ms=pred.d_weights * 1000,
        decode_kv_ms=pred.d_kv * 1000,
        decode_compute_ms=pred.d_compute * 1000,
        decode_allreduce_ms=pred.d_allreduce * 1000,
        decode_overhead_ms=pred.d_overhead * 1000,
        decode_layer_floor_ms=pred.d_floor * 1000,
        decode_bound=bound,
        prefill_ms=pred.prefill * 1000,
        prefill_bound=pred.prefill_bound,
        prefill_interference_ms=pred.interference * 1000,
        queue_ms=pred.queue * 1000,
        ridge_flops_per_byte=pm.ridge,
        achievable_bandwidth_gbps=pm.bw_peak * f.bandwidth_efficiency / 1e9,
        achievable_tflops=pm.flops_peak * f.compute_efficiency / 1e12,
    )


def _prediction(
    base: dict[str, Any],
    setup: PerfSetup,
    pred: Prediction,
    notes: list[str],
    traffic: Traffic,
    quantization: str | None,
    slo: SLO | None,
    topology: str | None,
    cpu_isa: Sequence[str],
) -> Estimate:
    """The feasible estimate: the figures, their costs, the SLO search and the 80% ranges."""
    pm, f, ref = setup.perf, setup.factors, setup.calibration
    s, mem = setup.recommendation.settings, setup.recommendation.memory
    assert s is not None and mem is not None
    input_len, output_len, concurrency, arrivals = (
        traffic.input_len,
        traffic.output_len,
        traffic.concurrency,
        traffic.arrivals,
    )
    hourly = base["hourly_usd"]
    bound = _bound_words(pred)
    bw_eff = pm.bw_peak * f.bandwidth_efficiency / 1e9
    explanation = (
        f"decode {bound}-bound: {pred.decode_step * 1000:.1f} ms/step at batch {pred.batch} "
        f"({(pm.dense_read + pm.expert_bytes) / GIB:.2f} GiB weights/rank over {bw_eff:,.0f} GB/s"
        + (f", TP {pm.tp}" if pm.tp > 1 else "")
        + f"); prefill {pred.prefill_bound}-bound {pred.prefill * 1000:.0f} ms"
    )
    usd_m = usd_req = None
    if hourly is not None and pred.out_tps > 0:
        usd_m = hourly / (pred.out_tps * 3600) * 1e6
        usd_req = hourly / (pred.rps * 3600)
    slo_met = None
    max_c = None
    usd_m_slo = None
    cap = max(concurrency, pm.batch_limit)
    if slo is not None:
        slo_met = slo.met(pred.ttft * 1000, pred.tpot * 1000, pred.e2e * 1000)
        max_c = _max_concurrency_for(pm, f, slo, input_len, output_len, cap, arrivals)
        if max_c and hourly is not None:
            p2 = pm.predict(f, input_len, output_len, max_c, arrivals)
            usd_m_slo = hourly / (p2.out_tps * 3600) * 1e6 if p2.out_tps > 0 else None
    util = (mem.weights_gib + mem.overhead_gib) / mem.usable_gib * 100 if mem.usable_gib else None
    est = Estimate(
        **base,
        feasible=True,
        quantization_required=s.quantization is not None and parse_quantization(quantization) is None,
        like_for_like=s.quantization is None,
        weight_format=s.weight_format,
        tensor_parallel_size=pm.tp,
        max_model_len=s.max_model_len,
        weights_gib=mem.weights_gib,
        available_gib=mem.usable_gib,
        memory_utilization_pct=round(util, 1) if util is not None else None,
        batch=pred.batch,
        ttft_ms=pred.ttft * 1000,
        tpot_ms=pred.tpot * 1000,
        e2e_ms=pred.e2e * 1000,
        output_tokens_per_s=pred.out_tps,
        total_tokens_per_s=pred.total_tps,
        requests_per_s=pred.rps,
        usd_per_million_output_tokens=usd_m,
        usd_per_request=usd_req,
        calibrated=ref is not None,
        topology=topology,
        slo_met=slo_met,
        max_concurrency_meeting_slo=max_c,
        usd_per_million_output_tokens_at_slo=usd_m_slo,
        explanation=explanation,
        factors=f,
        calibration=ref,
        times=_times(pm, pred, f, bound),
        notes=notes,
    )
    regime = regime_of(pred.ttft, pred.tpot, pred.queue, pred.prefill, output_len)
    search = (lambda t: _max_concurrency_for(pm, f, t, input_len, output_len, cap, arrivals)) if slo else None
    return with_ranges(est, regime, cpu_isa, slo, search, calibration=ref)


def estimate_local(
    model: ModelSpec,
    *,
    environment: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Estimate:
    """Estimate for "this machine" (or the machine a captured environment describes)."""
    from accelbench.plan.hardware import local_machine

    instance, spec = local_machine(environment)
    return estimate(model, instance, spec=spec, **kwargs)


def as_model_spec(model: ModelSpec | str) -> ModelSpec:
    if isinstance(model, str):
        from accelbench.modelspec import load_model_spec

        return load_model_spec(model)
    return model


def parse_slo(text: str) -> SLO:
    """``ttft:500,tpot:50`` (ms; ``e2e`` too) into an SLO."""
    values: dict[str, float] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, val = part.partition(":")
        key = key.strip().lower()
        if not sep or key not in ("ttft", "tpot", "e2e"):
            raise UserInputError(
                f"Bad SLO part {part!r}.", hint="Write e.g. --slo ttft:500,tpot:50 (milliseconds)."
            )
        try:
            values[f"{key}_ms"] = float(val.strip().removesuffix("ms"))
        except ValueError:
            raise UserInputError(f"Bad SLO value {val!r} for {key}: give milliseconds.") from None
        if values[f"{key}_ms"] <= 0:
            raise UserInputError(f"SLO {key} must be positive.")
    if not values:
        raise UserInputError("Empty SLO.", hint="Write e.g. --slo ttft:500,tpot:50.")
    return SLO(**values)
