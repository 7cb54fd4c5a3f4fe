"""The planner graded against published measurements it was not built from.

``public_points`` turns each usable row of the shipped public data set (``plan/data/public_measurements.yaml``,
loaded by ``plan/public_data.py``) into a prediction setup with the row's own settings (instance, TP, precision,
KV-cache dtype, batch limits, engine defaults for what the source did not set) and the arrival pattern its load
implies: a closed loop with fixed lengths travels in waves ("bursts"); dataset lengths or a request rate
spread the arrivals out ("steady"); a fixed request rate is turned into the concurrency Little's law gives.

``grade`` prints the error of TPOT, TTFT and output tokens/s per accelerator kind; ``leave_one_source_out``
fits the starting factors of a kind on every source but one and grades that one, so the figure says how the
model does on data it has not seen. ``benchmarks/estimate_accuracy.py`` prints both and writes the per-kind
figures (``plan/data/accuracy.yaml``) that estimates quote next to their predictions.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.catalog import get_catalog
from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.plan_query import FitQuery
from accelbench.domain.run import EngineSettings
from accelbench.errors import AccelbenchError
from accelbench.modelspec import load_model_spec
from accelbench.plan.calibrate import fit_factors
from accelbench.plan.error_records import ErrorRecord, engine_group, family_of, regime_of
from accelbench.plan.estimate import measured_perf
from accelbench.plan.hardware import default_factors, prior_factors
from accelbench.plan.measured_error import THROUGHPUT_MIN_BATCH
from accelbench.plan.perf_model import PerfModel, Prediction, unfused_fp8_dequant_bytes

# precision as sources write it -> the planner's quantization
PRECISION = {
    "bf16": "none",
    "bfloat16": "none",
    "fp16": "fp16",
    "float16": "fp16",
    "fp8": "fp8",
    "w8a8": "int8",
    "int8": "int8",
    "w8a16": "int8",
    "w4a16": "int4",
    "awq": "int4",
    "gptq": "int4",
    "int4": "int4",
    "w4a8": "int4",
}
# the engines the planner models, by the names sources use
ENGINES = {
    "vllm": "vllm",
    "sglang": "sglang",
    "vllm-neuron": "vllm-neuron",
    "nxd-inference": "vllm-neuron",
    "nxdi": "vllm-neuron",
    "neuronx-distributed-inference": "vllm-neuron",
    "transformers-neuronx": "vllm-neuron",
    "vllm-cpu": "vllm-cpu",
    "llama.cpp": "llamacpp",
    "llamacpp": "llamacpp",
}
# engines the planner does not model, graded with the tier's vLLM physics and reported apart: the hardware
# part of the model is the same, the engine's overheads are not
OTHER_ENGINES = {
    "tgi": "vllm",
    "text-generation-inference": "vllm",
    "tensorrt-llm": "vllm",
    "nvidia-nim": "vllm",
    "djl-lmi": "vllm",
    "transformers-neuronx": "vllm-neuron",
}
KINDS = ("gpu", "neuron", "cpu")


@dataclass
class PublicPoint:
    """One published measurement with what predicting it needs."""

    id: str
    source: str
    kind: str
    accelerator: str
    instance: str
    model: str
    perf: PerfModel
    input_len: int
    output_len: int
    concurrency: int
    arrivals: str
    tpot_ms: float | None
    ttft_ms: float | None
    out_tps: float | None
    request_rate: float | None = None
    label: str = ""
    modelled_engine: bool = True  # False: an engine the planner does not model, graded with vLLM's physics
    engine: str = "vllm"  # the planner's engine whose factors predict it
    one_shot: bool = False  # all prompts sent at once (not a closed loop): throughput over the makespan
    dataset_lengths: bool = False

    def predict(self, f: EfficiencyFactors) -> Prediction:  # what calibrate.fit_factors fits
        return predict_point(self, f)

    @property
    def tps_graded(self) -> bool:
        """A one-shot burst of dataset prompts ends when its longest output does: its throughput depends on
        the length distribution's tail, which sources do not give, so it is neither graded nor fitted."""
        return not (self.one_shot and self.dataset_lengths)


@dataclass
class Skipped:
    id: str
    why: str


def _get(row: Any, name: str) -> Any:
    if isinstance(row, Mapping):
        return row.get(name)
    return getattr(row, name, None)


def _engine(row: Any, kind: AcceleratorType) -> str | None:
    raw = str(_get(row, "engine") or "").strip().lower()
    if not raw:
        return {"gpu": "vllm", "neuron": "vllm-neuron", "cpu": "vllm-cpu"}[kind.value]
    if raw == "vllm" and kind != AcceleratorType.gpu:
        return "vllm-neuron" if kind == AcceleratorType.neuron else "vllm-cpu"
    return ENGINES.get(raw) or ENGINES.get(raw.split()[0]) or OTHER_ENGINES.get(raw.split()[0])


def is_modelled_engine(raw: str | None) -> bool:
    r = str(raw or "").strip().lower()
    return bool(r) and (r in ENGINES or r.split()[0] in ENGINES or r.startswith("vllm"))


def _arrivals(row: Any) -> str:
    load = str(_get(row, "load") or "concurrency")
    lengths = str(_get(row, "lengths") or "fixed")
    rate = _get(row, "request_rate")
    if load == "batch" or (load == "request_rate" and rate and math.isinf(float(rate))):
        return "wave"  # everything sent at once, once
    if lengths == "dataset" or load == "request_rate":
        return "steady"
    return "bursts"  # fixed (or vLLM's "random", fixed by default) lengths in a closed loop


def public_points(rows: Iterable[Any], catalog: Any = None) -> tuple[list[PublicPoint], list[Skipped]]:
    """Prediction setups for the usable rows, and why the others cannot be predicted."""
    if catalog is None:
        catalog = get_catalog()
    points: list[PublicPoint] = []
    skipped: list[Skipped] = []
    specs: dict[str, Any] = {}
    for row in rows:
        got = _point(row, catalog, specs)
        if isinstance(got, Skipped):
            skipped.append(got)
        else:
            points.append(got)
    return points, skipped


def _point(row: Any, catalog: Any, specs: dict[str, Any]) -> PublicPoint | Skipped:
    """One row's prediction setup (the planner's fit at the row's settings, its engine's defaults for the
    ones not given), or why it cannot be predicted. ``specs`` caches the models read."""
    rid = str(_get(row, "id"))
    inst_name = _get(row, "catalog_instance")
    if not inst_name or inst_name not in catalog:
        return Skipped(rid, f"instance {inst_name!r} is not in the catalog")
    inst = catalog.instance(inst_name)
    kind = inst.accelerator_type
    engine = _engine(row, kind)
    if engine is None:
        return Skipped(rid, f"engine {_get(row, 'engine')!r} is not one the planner models")
    model_name = str(_get(row, "model") or "")
    try:
        if model_name not in specs:
            specs[model_name] = load_model_spec(model_name, allow_network=False)
        model = specs[model_name]
    except AccelbenchError as exc:
        return Skipped(rid, f"model {model_name!r}: {exc.message}")
    precision = str(_get(row, "precision") or "bf16").lower()
    quant = PRECISION.get(precision)
    if quant is None:
        return Skipped(rid, f"precision {precision!r} is not one the planner models")
    input_len, output_len = _get(row, "input_len"), _get(row, "output_len")
    if not input_len or not output_len:
        return Skipped(rid, "no input or output length")
    settings = _settings(row, kind)
    load, level, rate, one_shot = _load(row)
    if not level and not rate:
        return Skipped(rid, "no concurrency, batch or request rate")
    asked = FitQuery(
        quantization=quant,
        input_len=int(input_len),
        output_len=int(output_len),
        max_model_len=int(_get(row, "max_model_len")) if _get(row, "max_model_len") else None,
        engine_settings=settings,
        engine=engine,
    )
    try:
        spec = catalog.accelerator(inst.accelerator_name)
        perf = measured_perf(model, inst, spec, asked, catalog=catalog)
    except AccelbenchError as exc:
        return Skipped(rid, f"the planner refuses the settings: {exc.message}")
    if isinstance(perf, str):
        return Skipped(rid, f"the planner says it does not fit: {perf}")
    kernel = str(_get(row, "kernel") or "").lower()
    if kernel == "dot":
        # a llama.cpp build that ran the weights as downloaded, with its per-row dot-product kernels
        perf.dot_kernel = True
    elif kernel == "unfused-fp8-dequant":
        # a vLLM build whose FP8 GEMMs left the scales to separate elementwise passes
        perf.unfused_dequant_bytes = unfused_fp8_dequant_bytes(model, perf.tp)
    if load == "batch" and _get(row, "max_num_seqs") is None:
        # a static-batch benchmark (Neuron's tables) compiles and runs exactly that batch
        perf.batch_limit = int(level or 1)
    tpot = _get(row, "tpot_ms") or _get(row, "itl_ms")
    return PublicPoint(
        id=rid,
        source=str(_get(row, "source")),
        kind=kind.value,
        accelerator=inst.accelerator_name,
        instance=inst.name,
        model=model.name,
        perf=perf,
        input_len=int(input_len),
        output_len=int(output_len),
        concurrency=int(level) if level else 0,
        arrivals=_arrivals(row),
        tpot_ms=float(tpot) if tpot else None,
        ttft_ms=float(_get(row, "ttft_ms")) if _get(row, "ttft_ms") else None,
        out_tps=float(_get(row, "output_tokens_per_s")) if _get(row, "output_tokens_per_s") else None,
        request_rate=float(rate) if rate else None,
        label=f"{model.name} {precision} {inst.name} TP{perf.tp}",
        modelled_engine=is_modelled_engine(_get(row, "engine")),
        engine=engine,
        one_shot=one_shot,
        dataset_lengths=str(_get(row, "lengths") or "") == "dataset",
    )


def _settings(row: Any, kind: AcceleratorType) -> EngineSettings:
    """The engine settings a row was measured with."""
    tp = _get(row, "tensor_parallel_size")
    if tp is None and kind == AcceleratorType.gpu:
        tp = _get(row, "units")
    kv_dtype = _get(row, "kv_cache_dtype")
    if str(kv_dtype or "").lower() in ("bf16", "bfloat16", "fp16", "float16", "auto"):
        kv_dtype = None  # the model dtype: vLLM's "auto"
    # on a CPU, "units" is the threads the engine ran with (llama.cpp -t, vLLM's OpenMP threads)
    threads = _get(row, "threads") or (_get(row, "units") if kind == AcceleratorType.cpu else None)
    settings = EngineSettings(
        threads=int(threads) if threads else None,
        tensor_parallel_size=int(tp) if tp else None,
        max_num_seqs=_get(row, "max_num_seqs"),
        max_num_batched_tokens=_get(row, "max_num_batched_tokens"),
        kv_cache_dtype=str(kv_dtype) if kv_dtype and kv_dtype != "auto" else None,
    )
    return settings


def _load(row: Any) -> tuple[str, Any, Any, bool]:
    """A row's load: its kind, its level (concurrency or batch), its request rate, and whether every prompt
    was sent at once (an infinite rate: one wave of num_prompts requests, graded over its makespan)."""
    load = str(_get(row, "load") or "concurrency")
    level = _get(row, "concurrency") or _get(row, "batch")
    rate = _get(row, "request_rate") if load == "request_rate" else None
    one_shot = False
    if rate is not None and math.isinf(float(rate)):
        # every prompt sent at once: one wave of num_prompts requests, graded over its makespan
        level, rate, one_shot = _get(row, "num_prompts"), None, True
    return load, level, rate, one_shot


def predict_point(p: PublicPoint, f: EfficiencyFactors) -> Prediction:
    """The prediction for a point; a request rate becomes the concurrency that carries it (Little's law,
    closed on the model's own E2E), capped where the engine saturates."""
    if p.one_shot:
        return _one_shot(p, f)
    if p.arrivals == "wave":
        return p.perf.predict(f, p.input_len, p.output_len, max(p.concurrency, 1), "wave")
    if p.request_rate is None:
        return p.perf.predict(f, p.input_len, p.output_len, max(p.concurrency, 1), p.arrivals)
    lo, hi = 1, 1
    pred = p.perf.predict(f, p.input_len, p.output_len, 1, "steady")
    if pred.rps >= p.request_rate:
        return pred
    while hi < 8192:
        hi *= 2
        pred = p.perf.predict(f, p.input_len, p.output_len, hi, "steady")
        if pred.rps >= p.request_rate:
            break
        lo = hi
    else:
        # saturated: the rate is above what the engine serves; it runs its full batch and the queue (so
        # TTFT) grows for as long as the test lasts
        full = p.perf.predict(f, p.input_len, p.output_len, p.perf.batch_limit, "steady")
        full.ttft = full.tpot = math.inf  # both depend on how long the test ran; the throughput does not
        return full
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if p.perf.predict(f, p.input_len, p.output_len, mid, "steady").rps >= p.request_rate:
            hi = mid
        else:
            lo = mid
    return p.perf.predict(f, p.input_len, p.output_len, hi, "steady")


def _one_shot(p: PublicPoint, f: EfficiencyFactors) -> Prediction:
    """N prompts sent at once: the engine runs min(N, batch limit) of them, admits the rest as slots free,
    and the throughput is N outputs over the makespan (the first full batch, then the remainder)."""
    first = p.perf.predict(f, p.input_len, p.output_len, p.concurrency, "wave")
    batch = first.batch
    if p.concurrency <= batch:
        return first
    # the engine serves the queue a batch at a time, admitting a queued request whenever one finishes: after
    # the first wave its steps mix the newcomers' prefills with everyone's decode (the steady regime)
    served = p.perf.predict(f, p.input_len, p.output_len, batch, "steady")
    service = served.e2e
    waves = p.concurrency / batch
    span = waves * service
    rps = p.concurrency / span
    median = math.ceil(p.concurrency / 2)
    if median <= batch:  # the median request is in the first wave: its TTFT and TPOT are the wave's
        first.ttft, first.queue = p.perf.wave_ttft(f, p.input_len, median, batch), 0.0
    else:  # it is admitted once (median - batch) requests ahead of it are done, into the steady regime
        wait = (median - batch) / (batch / service)
        # and not before every prompt ahead of it is prefilled, first come first served: a floor the slot
        # count alone misses when the prompts are long and the batch is large
        fcfs = p.perf.wave_ttft(f, p.input_len, median, median)
        first.ttft, first.queue, first.tpot = max(served.ttft + wait, fcfs), wait, served.tpot
    first.rps, first.out_tps, first.total_tps = rps, rps * p.output_len, rps * (p.input_len + p.output_len)
    return first


# --------------------------------------------------------------------------------------------- grading
@dataclass
class KindError:
    kind: str
    n_points: int = 0
    n_sources: int = 0
    tpot_mape_pct: float | None = None
    tpot_n: int = 0
    ttft_median_error_pct: float | None = None
    ttft_n: int = 0
    tps_mape_pct: float | None = None  # output tokens/s at batch >= THROUGHPUT_MIN_BATCH
    tps_n: int = 0
    per_source: dict[str, float] = field(default_factory=dict)  # TPOT MAPE by source

    def as_dict(self) -> dict[str, Any]:
        """The counts and errors, in field order (the kind is the key it is filed under; ``per_source`` is
        reported apart)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("kind", "per_source")
        }


def _pct(pred: float, meas: float) -> float:
    return abs(pred - meas) / meas * 100


def errors_of(p: PublicPoint, f: EfficiencyFactors) -> tuple[float | None, float | None, float | None]:
    """(TPOT, TTFT, tokens/s) absolute percentage errors; tokens/s only at batch >= 32."""
    pred = predict_point(p, f)
    tpot = _pct(pred.tpot * 1000, p.tpot_ms) if p.tpot_ms and math.isfinite(pred.tpot) else None
    # a saturated request rate has no steady TTFT: the queue grows for as long as the test runs
    ttft = _pct(pred.ttft * 1000, p.ttft_ms) if p.ttft_ms and math.isfinite(pred.ttft) else None
    level = p.concurrency or (pred.rps * (pred.e2e or 0))
    tps = (
        _pct(pred.out_tps, p.out_tps)
        if p.out_tps and level >= THROUGHPUT_MIN_BATCH and p.tps_graded
        else None
    )
    return tpot, ttft, tps


def summarize(kind: str, rows: Sequence[tuple[PublicPoint, tuple[float | None, ...]]]) -> KindError:
    out = KindError(kind=kind, n_points=len(rows), n_sources=len({p.source for p, _ in rows}))
    tpots = [e[0] for _, e in rows if e[0] is not None]
    ttfts = [e[1] for _, e in rows if e[1] is not None]
    tpss = [e[2] for _, e in rows if e[2] is not None]
    if tpots:
        out.tpot_mape_pct, out.tpot_n = round(statistics.fmean(tpots), 1), len(tpots)
    if ttfts:
        out.ttft_median_error_pct, out.ttft_n = round(statistics.median(ttfts), 1), len(ttfts)
    if tpss:
        out.tps_mape_pct, out.tps_n = round(statistics.fmean(tpss), 1), len(tpss)
    by_source: dict[str, list[float]] = defaultdict(list)
    for p, e in rows:
        if e[0] is not None:
            by_source[p.source].append(e[0])
    out.per_source = {s: round(statistics.fmean(v), 1) for s, v in sorted(by_source.items())}
    return out


def grade(
    points: Sequence[PublicPoint], factors: Mapping[str, EfficiencyFactors] | None = None
) -> dict[str, KindError]:
    """Errors per kind with the given factors (keyed by ``group_of``; default: the shipped factors of the
    point's kind and engine)."""
    by_kind: dict[str, list[tuple[PublicPoint, tuple[float | None, ...]]]] = defaultdict(list)
    for p in points:
        f = (factors or {}).get(group_of(p)) or default_factors(p.kind, p.engine)
        by_kind[p.kind].append((p, errors_of(p, f)))
    return {k: summarize(k, v) for k, v in by_kind.items()}


ENGINE_OF_KIND = {"gpu": "vllm", "neuron": "vllm-neuron", "cpu": "vllm-cpu"}


def group_of(p: PublicPoint) -> str:
    """Factors are fitted per accelerator kind, and on CPUs per engine as well: vLLM and SGLang on a GPU (or
    NxD on Neuron) share the hardware and a continuous-batching scheduler, while llama.cpp's step costs on a
    CPU are nothing like vLLM's."""
    return f"cpu/{p.engine}" if p.kind == "cpu" else p.kind


def _group_prior(key: str) -> EfficiencyFactors:
    """The cited priors of a group: fits start there, never from values fitted to the data itself."""
    kind, _, engine = key.partition("/")
    return prior_factors(kind, engine or ENGINE_OF_KIND[kind])


def fit_groups(points: Sequence[PublicPoint]) -> dict[str, EfficiencyFactors]:
    """Factors fitted to every point of each group (``group_of``) of the engines the planner models."""
    return {
        key: fit_kind([p for p in points if group_of(p) == key], _group_prior(key))
        for key in sorted({group_of(p) for p in points if p.modelled_engine})
    }


FIT_EXTRA = (
    "layer_floor_us",
    "kv_read_efficiency",
    "weight_only_efficiency",
    "allreduce_latency_us",
    "request_serial_ms",
    "dot_kernel_efficiency",
)


# Published measurements are of real hardware at its datasheet peaks: no efficiency may exceed them (a local
# calibration allows more, because a local machine's peaks are guesses).
PHYSICAL_BOUNDS = {
    "bandwidth_efficiency": (0.2, 0.95),
    "kv_read_efficiency": (0.2, 1.0),
    "compute_efficiency": (0.05, 0.9),
    "weight_only_efficiency": (0.1, 1.0),
    "dot_kernel_efficiency": (0.05, 1.0),
    # engine and interconnect costs within what engines and NCCL measure (an all-reduce of a small message
    # takes microseconds to tens of them; an HTTP request's own cost is milliseconds, not seconds)
    "allreduce_latency_us": (2.0, 80.0),
    "step_overhead_ms": (0.05, 30.0),
    "per_sequence_overhead_ms": (0.001, 1.0),
    "request_overhead_ms": (1.0, 200.0),
    "layer_floor_us": (1.0, 200.0),
    "request_serial_ms": (0.05, 20.0),
}
# Published rows of a kind come from few sources: factors the data cannot separate stay near the cited
# priors (a stronger pull than a local calibration's, whose runs cover one machine densely)
PRIOR_WEIGHT = 0.3


def _fit_points(points: Sequence[PublicPoint]) -> list[Any]:
    """What factors are fitted to: rows of the engines the planner models, serving dense models. Other engines'
    rows are graded only: their schedulers, batch limits and KV-cache defaults are not the ones the model
    describes. So are mixture-of-experts rows: the model has no term for an MoE layer's routing and its many
    small expert GEMMs, and fitting the hardware's factors to them would put those costs into every dense
    estimate (their error is their own stratum, ``error_records.family_of``)."""
    return [
        p if p.tps_graded else dataclasses.replace(p, out_tps=None)
        for p in points
        if p.modelled_engine and (p.tpot_ms or p.out_tps) and not p.perf.moe_e
    ]


def fit_kind(points: Sequence[PublicPoint], prior: EfficiencyFactors) -> EfficiencyFactors:
    pts = _fit_points(points)
    if not pts:
        return prior
    return fit_factors(pts, prior, names=FIT_EXTRA, bounds=PHYSICAL_BOUNDS, prior_weight=PRIOR_WEIGHT)


def leave_one_source_out(
    points: Sequence[PublicPoint], train: Sequence[PublicPoint] | None = None
) -> dict[str, KindError]:
    """Per kind: for each source of ``points``, fit on the other sources (of ``train``, default ``points``)
    and grade the held-out one; the errors of every held-out point together."""
    pool = list(train) if train is not None else list(points)
    out: dict[str, KindError] = {}
    for kind in KINDS:
        pts = [p for p in points if p.kind == kind]
        sources = sorted({p.source for p in pts})
        others = {p.source for p in pool if p.kind == kind}
        if not pts or len(others) < 2:
            continue
        rows: list[tuple[PublicPoint, tuple[float | None, ...]]] = []
        for s in sources:
            for key in sorted({group_of(p) for p in pts if p.source == s}):
                train = [p for p in pool if group_of(p) == key and p.source != s]
                f = fit_kind(train, _group_prior(key))  # the prior alone when no other source
                rows += [(p, errors_of(p, f)) for p in pts if p.source == s and group_of(p) == key]
        out[kind] = summarize(kind, rows)
    return out


def _ratio(measured: float | None, predicted: float) -> float | None:
    if not measured or not math.isfinite(predicted) or predicted <= 0:
        return None
    return float(measured) / predicted


def out_of_source_records(
    points: Sequence[Any],
    train: Sequence[Any] | None = None,
    fits: dict[tuple[str, frozenset[str]], EfficiencyFactors] | None = None,
) -> list[ErrorRecord]:
    """Each point of an engine the planner models, predicted with factors fitted to the other sources of its
    group in ``train`` (the cited priors alone when no other source has rows), as measured / predicted ratios.
    ``fits`` caches the fits by (group, sources fitted to)."""
    pool = list(train) if train is not None else list(points)
    fits = {} if fits is None else fits
    out: list[ErrorRecord] = []
    for p in points:
        if not p.modelled_engine:
            continue
        group = group_of(p)
        rest = [q for q in pool if group_of(q) == group and q.source != p.source]
        key = (group, frozenset(q.source for q in rest))
        if key not in fits:
            fits[key] = fit_kind(rest, _group_prior(group))
        pred = predict_point(p, fits[key])
        out.append(
            ErrorRecord(
                id=p.id,
                source=p.source,
                kind=p.kind,
                family=family_of(p.accelerator, p.kind, moe=p.perf.moe_e > 0),
                engine=engine_group(p.engine),
                regime=regime_of(pred.ttft, pred.tpot, pred.queue, pred.prefill, p.output_len),
                tpot=_ratio(p.tpot_ms, pred.tpot * 1000),
                ttft=_ratio(p.ttft_ms, pred.ttft * 1000),
                tps=_ratio(p.out_tps, pred.out_tps) if p.tps_graded else None,
                ttft_share=pred.ttft / pred.e2e
                if math.isfinite(pred.ttft + pred.e2e) and pred.e2e > 0
                else None,
            )
        )
    return out


def held_out_records(
    points: Sequence[Any], train: Sequence[Any] | None = None
) -> dict[str, list[ErrorRecord]]:
    """For each source S: the records of every other source, predicted with factors fitted without S as well
    as without their own source. The ranges that grade S's rows are built from these, so that nothing S
    measured reaches them, not even through the factors the other rows were predicted with."""
    pool = list(train) if train is not None else list(points)
    fits: dict[tuple[str, frozenset[str]], EfficiencyFactors] = {}
    return {
        s: out_of_source_records(
            [p for p in points if p.source != s], [q for q in pool if q.source != s], fits=fits
        )
        for s in sorted({p.source for p in points if p.modelled_engine})
    }
