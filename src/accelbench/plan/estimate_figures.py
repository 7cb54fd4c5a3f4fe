"""A feasible estimate's figures and words: the decode bound, the time breakdown, the costs, the highest
concurrency meeting an SLO, the notes on how the prediction was made, and the 80% ranges."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.domain.estimate import SLO, CalibrationRef, EfficiencyFactors, Estimate, TimeBreakdown
from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan_query import PlanQuery
from accelbench.domain.quant import parse_quantization
from accelbench.domain.recommendation import Recommendation
from accelbench.plan.error_records import regime_of
from accelbench.plan.measured import Attribution, attribution_note
from accelbench.plan.memory import GIB, native_format
from accelbench.plan.perf_model import PerfModel, Prediction
from accelbench.plan.ranges import with_ranges


@dataclass
class PerfSetup:
    """What a prediction for one deployment rests on: the fit, the performance model and the factors (with
    the calibration they came from, if any)."""

    recommendation: Recommendation
    perf: PerfModel
    factors: EfficiencyFactors
    calibration: CalibrationRef | None
    engine: str


def max_concurrency_for(
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


def bound_words(pred: Prediction) -> str:
    core = max(pred.d_weights + pred.d_kv, pred.d_compute, pred.d_floor)
    if pred.d_overhead >= core:
        return "overhead"
    if pred.d_floor >= max(pred.d_weights + pred.d_kv, pred.d_compute):
        return "latency"
    return "compute" if pred.d_compute > pred.d_weights + pred.d_kv else "memory"


def estimate_notes(
    model: ModelSpec,
    instance: InstanceType,
    found: Attribution,
    setup: PerfSetup,
    pred: Prediction,
    query: PlanQuery,
) -> list[str]:
    """How the prediction was made, in words: the factors' source, where the model was measured, the
    arrivals, Neuron's compiled shapes, a precision other than the checkpoint's, requests that queue, a
    mixture of experts."""
    kind = instance.accelerator_type
    pm, ref, s = setup.perf, setup.calibration, setup.recommendation.settings
    concurrency, arrivals = query.concurrency, query.arrivals
    factors, quantization = query.factors, query.quantization
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
    if pm.moe_e:
        notes.append(
            "Mixture of experts: the prediction counts the experts' bytes and FLOPs but not an MoE layer's routing "
            "and its many small expert GEMMs; the 80% ranges come from published MoE rows, which measured far "
            "slower than predicted where the experts are many and small (see each range's basis)."
        )
    return notes


def time_breakdown(pm: PerfModel, pred: Prediction, f: EfficiencyFactors, bound: str) -> TimeBreakdown:
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


def feasible_estimate(
    base: dict[str, Any],
    setup: PerfSetup,
    pred: Prediction,
    notes: list[str],
    query: PlanQuery,
    topology: str | None,
    cpu_isa: Sequence[str],
) -> Estimate:
    """The feasible estimate: the figures, their costs, the SLO search and the 80% ranges."""
    pm, f, ref = setup.perf, setup.factors, setup.calibration
    s, mem = setup.recommendation.settings, setup.recommendation.memory
    assert s is not None and mem is not None
    input_len, output_len, concurrency, arrivals = (
        query.input_len,
        query.output_len,
        query.concurrency,
        query.arrivals,
    )
    quantization, slo = query.quantization, query.slo
    hourly = base["hourly_usd"]
    bound = bound_words(pred)
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
        max_c = max_concurrency_for(pm, f, slo, input_len, output_len, cap, arrivals)
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
        times=time_breakdown(pm, pred, f, bound),
        notes=notes,
    )
    regime = regime_of(pred.ttft, pred.tpot, pred.queue, pred.prefill, output_len)
    search = (lambda t: max_concurrency_for(pm, f, t, input_len, output_len, cap, arrivals)) if slo else None
    return with_ranges(est, regime, cpu_isa, slo, search, calibration=ref, moe=pm.moe_e > 0)
