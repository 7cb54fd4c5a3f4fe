"""Performance and cost estimates: TTFT, TPOT, E2E, tokens/s and dollars, for one instance or the catalog.

The model (all quantities per tensor-parallel rank):
- decode step = max(bytes read / achievable bandwidth, FLOPs / achievable compute) + TP all-reduces
  + engine overhead (a fixed part per step and a part per sequence). Bytes read = the weights a step touches
  (MoE: the dense part plus the experts the batch routes to, 1 - (1 - k/E)^B of them) + the KV cache of
  every sequence in the batch;
- prefill = max(FLOPs / achievable compute, weights / achievable bandwidth): memory-bound below the ridge
  point (compute / bandwidth), compute-bound above; chunked in ``max_num_batched_tokens`` pieces;
- continuous batching, closed loop (C users, each sending the next request when the last ends): the batch is
  min(C, max_num_seqs, what the KV cache holds); TPOT grows with the batch's bytes and compute and with the
  other requests' prefills that stall decode; TTFT grows with the prefills a request waits for and, above the
  batch limit, with the queue ((C / batch - 1) x service time). Two arrival patterns: "bursts" (every user
  re-sends at once with fixed lengths, which is what a benchmark sweep does: requests travel in waves, see
  ``PerfModel.predict``) and "steady" (arrivals spread out, prefills interleave with decode);
- CPUs: bandwidth = min(sockets x socket peak, cores x per-core bandwidth); compute from the ISA's matrix
  path (AMX, AVX512-BF16, SVE BFMMLA ...) via the catalog's per-core BF16 rate.
Efficiency factors come from ``plan/data/efficiency.yaml`` (cited) or from a calibration fitted to measured
runs (``accelbench plan calibrate``); an estimate says which.

TPOT is the *typical* (median) request's: ``prefill_interference`` is the share of the mean prefill stall a
median request sees; E2E and throughput use the mean, which is what work conservation gives.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelbench.domain.catalog import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.domain.model import ModelSpec
from accelbench.domain.plan import (
    SLO,
    CalibrationRef,
    EfficiencyFactors,
    Estimate,
    EstimateRow,
    EstimateSummary,
    EstimateTable,
    Recommendation,
    TimeBreakdown,
)
from accelbench.domain.run import EngineSettings
from accelbench.errors import UserInputError
from accelbench.plan.hardware import LOCAL_INSTANCE, Hardware, default_factors, efficiency_data, hardware_for
from accelbench.plan.memory import (
    GIB,
    WeightFormat,
    kv_rank_ratio,
    native_format,
    online_format,
    weight_bytes,
)
from accelbench.plan.recommend import accelerator_name, recommend

if TYPE_CHECKING:
    from accelbench.catalog import Catalog
    from accelbench.store.repo import Store

DEFAULT_ENGINE = {
    AcceleratorType.gpu: "vllm",
    AcceleratorType.neuron: "vllm-neuron",
    AcceleratorType.cpu: "vllm-cpu",
}
ENGINE_KIND = {"vllm": "gpu", "sglang": "gpu", "vllm-neuron": "neuron", "vllm-cpu": "cpu", "llamacpp": "cpu"}


def engine_for(kind: AcceleratorType) -> str:
    return DEFAULT_ENGINE[kind]


def normalize_engine(engine: str | None, kind: AcceleratorType) -> str:
    """The engine a prediction is for: the tier's default when unset, and vLLM on a CPU or Neuron instance
    named by its flavour (a server reports itself as plain "vllm" whatever its build)."""
    if not engine:
        return DEFAULT_ENGINE[kind]
    e = engine.strip().lower()
    if e == "vllm" and kind != AcceleratorType.gpu:
        return DEFAULT_ENGINE[kind]
    return e


def default_max_num_batched_tokens(hw: Hardware, tp: int) -> int:
    """vLLM's defaults for the OpenAI server (engine/arg_utils.py): CPU 2048 x TP; GPUs 2048, or 8192 on
    >= 70 GiB GPUs other than A100, 16384 on >= 160 GiB."""
    if hw.kind == AcceleratorType.cpu:
        return 2048 * tp
    mem = hw.unit_memory_gib
    if mem >= 160:
        return 16384
    if mem >= 70 and not hw.spec.name.upper().startswith("A100"):
        return 8192
    return 2048


# --------------------------------------------------------------------------------------------- the model
@dataclass
class Prediction:
    """Seconds, tokens/s; what ``PerfModel.predict`` returns (plain floats: calibration calls it a lot)."""

    ttft: float
    tpot: float
    tpot_mean: float
    e2e: float
    rps: float
    out_tps: float
    total_tps: float
    batch: int
    decode_step: float
    d_weights: float
    d_kv: float
    d_compute: float
    d_allreduce: float
    d_overhead: float
    prefill: float
    prefill_bound: str
    interference: float
    queue: float


@dataclass
class PerfModel:
    """Everything about (model, hardware, format, TP) the predictions need, precomputed once."""

    tp: int
    bw_peak: float  # bytes/s per rank
    flops_peak: float  # FLOP/s per rank at the format's math
    link: float  # bytes/s between ranks
    dense_read: float  # weight bytes every decode step reads, per rank (no routed experts)
    expert_bytes: float  # routed-expert bytes, per rank
    moe_e: int
    moe_k: int
    decode_flops_per_token: float  # per rank
    prefill_flops_per_token: float  # per rank (no output head)
    head_flops: float  # output head of one token, per rank
    attn_coef: float  # FLOPs per (token x context position), per rank
    kv_per_token: float  # bytes per context token, per rank (full-attention layers)
    window: int | None
    window_share: float  # share of layers that slide
    allreduce_bytes_per_token: float
    n_allreduce: int
    min_allreduce_us: float  # PCIe-only GPUs: all-reduces cross the host, whatever the fitted latency
    batch_limit: int  # max_num_seqs
    kv_tokens: int  # tokens the KV cache holds (all sequences)
    chunk: int  # max_num_batched_tokens

    def _kv_bytes(self, ctx: float) -> float:
        if self.window:
            return self.kv_per_token * (
                (1 - self.window_share) * ctx + self.window_share * min(ctx, self.window)
            )
        return self.kv_per_token * ctx

    def _touched(self, tokens: float) -> float:
        if not self.moe_e:
            return 1.0
        return 1.0 - (1.0 - self.moe_k / self.moe_e) ** max(tokens, 1.0)

    def _allreduce(self, f: EfficiencyFactors, tokens: float) -> float:
        if self.tp <= 1:
            return 0.0
        per = (
            max(f.allreduce_latency_us, self.min_allreduce_us) * 1e-6
            + 2 * (self.tp - 1) / self.tp * tokens * self.allreduce_bytes_per_token / self.link
        )
        return self.n_allreduce * per

    def decode_step(
        self, f: EfficiencyFactors, batch: int, ctx: float
    ) -> tuple[float, float, float, float, float, float]:
        bw = self.bw_peak * f.bandwidth_efficiency
        fl = self.flops_peak * f.compute_efficiency
        w = (self.dense_read + self.expert_bytes * self._touched(batch)) / bw
        kv = batch * self._kv_bytes(ctx) / bw
        comp = batch * (self.decode_flops_per_token + self.attn_coef * ctx) / fl
        ar = self._allreduce(f, batch)
        over = (f.step_overhead_ms + f.per_sequence_overhead_ms * batch) / 1000
        return max(w + kv, comp) + ar + over, w, kv, comp, ar, over

    def prefill(self, f: EfficiencyFactors, length: int, sequences: int = 1) -> tuple[float, str]:
        """Prefill of ``sequences`` prompts of ``length`` tokens scheduled together, in chunks of at most
        ``max_num_batched_tokens``; each chunk reads the weights once and pays one step overhead."""
        bw = self.bw_peak * f.bandwidth_efficiency
        fl = self.flops_peak * f.compute_efficiency
        tokens = length * sequences
        flops = sequences * (
            length * self.prefill_flops_per_token + self.head_flops + self.attn_coef * length * length / 2
        )
        comp = flops / fl
        chunks = max(1, math.ceil(tokens / self.chunk))
        per_chunk = min(tokens, self.chunk)
        weights = (self.dense_read + self.expert_bytes * self._touched(per_chunk)) / bw
        mem = chunks * weights + sequences * self._kv_bytes(length) / bw
        t = max(comp, mem) + self._allreduce(f, tokens) + chunks * f.step_overhead_ms / 1000
        return t, ("compute" if comp >= mem else "memory")

    def predict(
        self,
        f: EfficiencyFactors,
        input_len: int,
        output_len: int,
        concurrency: int,
        arrivals: str = "bursts",
    ) -> Prediction:
        """Closed loop of ``concurrency`` users. ``arrivals``:

        - ``bursts`` (what ``accelbench sweep`` measures: every user re-sends at once with fixed lengths):
          requests travel in waves. The engine starts the first arrival's prefill alone; the other B - 1
          arrive during it and are prefilled together next, while the first one's decode waits. So B - 1 of
          B requests see TTFT = own + the others' prefill and a pure-decode TPOT, and one sees a short TTFT
          and a TPOT inflated by that stall (measured so on the local vLLM CPU sweep). Not modelled: when the
          engine's first step already catches B - 1 arrivals, it prefills those together and the last one
          after, so B - 1 requests see a TPOT inflated by one prefill. Which grouping the first wave gets is
          a race, and the later waves keep it: the same 512 x 4 demo cell measured a TPOT p50 of 41 ms in
          one run and 57 ms in another (ITL p50 34-36 ms in both);
        - ``steady``: arrivals spread out (e.g. Poisson traffic at this concurrency): each request's decode
          is stalled by the prefills of the others that land in it, of which a typical (median) request sees
          the ``prefill_interference`` share.
        Typical values are medians over the requests; throughput and E2E follow from the mean cycle.
        """
        per_seq_tokens = input_len + output_len
        kv_cap = max(1, self.kv_tokens // max(per_seq_tokens, 1))
        batch = max(1, min(concurrency, self.batch_limit, kv_cap))
        ctx = input_len + output_len / 2
        step, w, kv, comp, ar, over = self.decode_step(f, batch, ctx)
        p, bound = self.prefill(f, input_len)
        req = f.request_overhead_ms / 1000
        decode_tokens = max(output_len - 1, 0)
        extra = 0.0  # what the typical request's TPOT gets from other requests' prefills
        if batch == 1:
            ttft = req + p
            tpot = tpot_mean = step
            e2e_mean = ttft + decode_tokens * step
        elif arrivals == "bursts":
            p_rest, _ = self.prefill(f, input_len, batch - 1)
            chunks = max(1, math.ceil((batch - 1) * input_len / self.chunk))
            ttft_first = req + p
            ttft_rest = req + p + p_rest
            # the first request gets a token per chunk of the others' prefill; the rest of it is a stall
            stall = max(p_rest - chunks * step, 0.0) / decode_tokens if decode_tokens else 0.0
            if batch == 2:  # one of each: the median falls between them
                ttft = (ttft_first + ttft_rest) / 2
                extra = stall / 2
            else:  # most requests are the ones prefilled together
                ttft = ttft_rest
            tpot = step + extra
            tpot_mean = step + stall / batch
            e2e_mean = ttft_rest + decode_tokens * step
        else:
            # Each of the batch - 1 other slots starts a new request once per E2E; the share of them that
            # lands in this request's decode window is T_dec / E2E.
            tpot_mean = step
            e2e = req + p + decode_tokens * step
            mean_extra = 0.0
            if decode_tokens > 0:
                for _ in range(8):
                    window = decode_tokens * tpot_mean / e2e if e2e > 0 else 1.0
                    mean_extra = (batch - 1) * p * window / decode_tokens
                    tpot_mean = step + mean_extra
                    e2e = req + p + decode_tokens * tpot_mean
            # arriving mid-step, and finding another prefill running (mean residual: half of it)
            wait = 0.5 * step + f.prefill_interference * (batch - 1) * p / max(e2e, 1e-9) * p / 2
            ttft = req + p + wait
            extra = f.prefill_interference * mean_extra
            tpot = step + extra
            e2e_mean = ttft + decode_tokens * tpot_mean
        queue = 0.0
        if concurrency > batch:
            queue = (concurrency / batch - 1) * e2e_mean  # closed loop: wait for a free slot
        ttft += queue
        rps = concurrency / (e2e_mean + queue) if e2e_mean + queue > 0 else 0.0
        return Prediction(
            ttft=ttft,
            tpot=tpot if decode_tokens > 0 else step,
            tpot_mean=tpot_mean,
            e2e=ttft + decode_tokens * tpot,
            rps=rps,
            out_tps=rps * output_len,
            total_tps=rps * (input_len + output_len),
            batch=batch,
            decode_step=step,
            d_weights=w,
            d_kv=kv,
            d_compute=comp,
            d_allreduce=ar,
            d_overhead=over,
            prefill=p,
            prefill_bound=bound,
            interference=extra,
            queue=queue,
        )

    @property
    def ridge(self) -> float:
        return self.flops_peak / self.bw_peak if self.bw_peak else 0.0


def weight_format_from(rec: Recommendation, model: ModelSpec) -> WeightFormat:
    s = rec.settings
    if s is None:
        return native_format(model)
    if s.quantization in ("fp8", "int8", "int4"):
        return online_format(s.quantization)
    return native_format(model, "fp16" if s.weight_format == "fp16" else None)


def build_perf_model(
    model: ModelSpec,
    hw: Hardware,
    fmt: WeightFormat,
    *,
    tp: int,
    kv_bytes: float,
    batch_limit: int,
    kv_tokens: int,
    chunk: int,
) -> PerfModel:
    p = model.parameters
    wb = weight_bytes(model, fmt)
    linear_total = max(p.decoder_linear, 1)
    expert = wb.linear * p.routed_experts / linear_total if p.routed_experts else 0.0
    embed_bytes = 0.0
    if not model.tie_word_embeddings:
        # A decode step reads one row of the input table, not the table.
        per = (wb.other / max(p.total - p.decoder_linear, 1)) if p.total > p.decoder_linear else 2.0
        embed_bytes = p.embedding * per
    dense = max(wb.total - expert - embed_bytes, 0.0)
    if hw.kind == AcceleratorType.cpu:
        bw = hw.unit_bandwidth_gbps * 1e9 / tp
        flops = hw.tflops_for(fmt.math) * 1e12 / tp
    else:
        bw = hw.unit_bandwidth_gbps * 1e9
        flops = hw.tflops_for(fmt.math) * 1e12
    head_params = p.lm_head if p.lm_head else (p.embedding if model.tie_word_embeddings else 0)
    active_mm = p.active_matmul
    if model.mla is not None:
        m = model.mla
        attn_dim = model.num_attention_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
    else:
        attn_dim = 2 * model.num_attention_heads * model.head_dim
    attn_coef = 2.0 * attn_dim * model.num_layers / tp
    ratio = kv_rank_ratio(model, tp)
    window_share = model.sliding_window_layers / model.num_layers if model.sliding_window else 0.0
    return PerfModel(
        tp=tp,
        bw_peak=bw,
        flops_peak=flops,
        link=hw.link_gbps * 1e9,
        dense_read=dense / tp,
        expert_bytes=expert / tp,
        moe_e=model.moe.num_experts if model.moe else 0,
        moe_k=model.moe.experts_per_token if model.moe else 0,
        decode_flops_per_token=2.0 * active_mm / tp,
        prefill_flops_per_token=2.0 * max(active_mm - head_params, 0) / tp,
        head_flops=2.0 * head_params / tp,
        attn_coef=attn_coef,
        kv_per_token=model.kv_bytes_per_token(kv_bytes) * ratio,
        window=model.sliding_window,
        window_share=window_share,
        allreduce_bytes_per_token=model.hidden_size * 2.0,
        n_allreduce=2 * model.num_layers,
        min_allreduce_us=(
            float(efficiency_data()["pcie_allreduce_latency_us"]["value"])
            if hw.kind == AcceleratorType.gpu and not hw.nvlink
            else 0.0
        ),
        batch_limit=max(1, batch_limit),
        kv_tokens=max(1, kv_tokens),
        chunk=max(1, chunk),
    )


# --------------------------------------------------------------------------------------------- calibrations
@dataclass
class CalibrationSet:
    """Active calibrations by (accelerator, engine)."""

    factors: dict[tuple[str, str], EfficiencyFactors]
    refs: dict[tuple[str, str], CalibrationRef]

    @classmethod
    def empty(cls) -> CalibrationSet:
        return cls({}, {})

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> CalibrationSet:
        out = cls.empty()
        for row in rows:
            key = (str(row["accelerator"]), str(row["engine"]))
            kind = ENGINE_KIND.get(key[1], "cpu" if key[0].startswith("local:") else "gpu")
            base = default_factors(kind, key[1]).model_dump()
            base.update({k: float(v) for k, v in (row.get("factors") or {}).items() if k in base})
            try:
                out.factors[key] = EfficiencyFactors(**base)
            except ValueError:
                continue  # a calibration from an older factor set: ignore rather than fail every estimate
            before = (row.get("error_before") or {}).get("tpot_mape_pct")
            after = (row.get("error_after") or {}).get("tpot_mape_pct")
            created = row.get("created_at")
            out.refs[key] = CalibrationRef(
                id=int(row["id"]),
                accelerator=key[0],
                engine=key[1],
                n_points=int(row.get("n_points") or 0),
                created_at=_iso(created),
                tpot_error_before_pct=before,
                tpot_error_after_pct=after,
            )
        return out

    @classmethod
    def from_store(cls, store: Store) -> CalibrationSet:
        """The store's active calibrations (the planner is handed a store; it never opens one)."""
        return cls.from_rows(store.active_calibrations())


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else str(value)


def factors_for(
    kind: AcceleratorType, accel: str, engine: str, calibrations: CalibrationSet | None
) -> tuple[EfficiencyFactors, CalibrationRef | None]:
    if calibrations is not None:
        key = (accel, engine)
        if key in calibrations.factors:
            return calibrations.factors[key], calibrations.refs[key]
    return default_factors(kind.value, engine), None


# --------------------------------------------------------------------------------------------- one instance
def _hourly(instance: InstanceType, prices: Mapping[str, Any] | None) -> tuple[float | None, str | None]:
    if prices is not None and instance.name in prices:
        p = prices[instance.name]
        usd = getattr(p, "usd_per_hour", p)
        return float(usd), str(getattr(p, "source", "store"))
    if instance.on_demand_usd is not None:
        return instance.on_demand_usd, f"snapshot {instance.price_date or ''}".strip()
    return None, None


def _settings_for_run(rec: Recommendation, override: EngineSettings | None) -> tuple[int, int, int | None]:
    """(tp, max_num_seqs, kv_space_gib) after a run's explicit engine settings."""
    s = rec.settings
    assert s is not None
    tp = s.tensor_parallel_size
    seqs = s.max_num_seqs
    kv_space = s.kv_cache_space_gib
    if override is not None:
        tp = override.tensor_parallel_size or tp
        seqs = override.max_num_seqs or seqs
        if override.kv_cache_space_gib:
            kv_space = int(override.kv_cache_space_gib)
    return tp, seqs, kv_space


def predict_for(
    model: ModelSpec,
    instance: InstanceType,
    spec: AcceleratorSpec,
    rec: Recommendation,
    *,
    engine_settings: EngineSettings | None = None,
    engine: str | None = None,
) -> tuple[PerfModel, Hardware, WeightFormat]:
    """The PerfModel for a fitting recommendation (optionally with a run's own engine settings)."""
    assert rec.settings is not None and rec.memory is not None
    hw = hardware_for(instance, spec)
    fmt = weight_format_from(rec, model)
    tp, seqs, kv_space = _settings_for_run(rec, engine_settings)
    kv_bytes = 1.0 if (rec.settings.kv_cache_dtype or "").startswith("fp8") else 2.0
    if engine_settings is not None and engine_settings.kv_cache_dtype:
        kv_bytes = 1.0 if engine_settings.kv_cache_dtype.startswith("fp8") else 2.0
    kv_tokens = rec.memory.kv_cache_tokens
    if kv_space is not None:
        kv_tokens = model.max_tokens_for_kv_bytes(kv_space * GIB / kv_rank_ratio(model, tp), kv_bytes)
    chunk = (
        engine_settings.max_num_batched_tokens if engine_settings else None
    ) or default_max_num_batched_tokens(hw, tp)
    if (
        (engine or rec.settings.engine) == "vllm-cpu"
        and engine_settings is not None
        and not engine_settings.max_num_seqs
    ):
        seqs = 128 * tp  # vLLM's CPU default for the OpenAI server when a run does not set it
    if (engine or rec.settings.engine) == "llamacpp":
        # llama-cpp-python's OpenAI server decodes one request at a time; the others queue (accelbench starts
        # it with --interrupt_requests False so a new request waits instead of cutting the running one off)
        seqs = 1
    pm = build_perf_model(
        model, hw, fmt, tp=tp, kv_bytes=kv_bytes, batch_limit=seqs, kv_tokens=kv_tokens, chunk=chunk
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


def _bound_words(pred: Prediction) -> str:
    if pred.d_overhead >= max(pred.d_weights + pred.d_kv, pred.d_compute):
        return "overhead"
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
    benchmarked: set[str] | None = None,
    arrivals: str = "bursts",
) -> Estimate:
    """Predicted speed and cost of serving ``model`` on ``instance`` at one traffic point.

    ``engine_settings`` replays a run's explicit settings (TP, max_num_seqs, KV space); ``calibrations``
    (default: none) supplies fitted factors by (accelerator, engine); ``factors`` overrides both;
    ``prices`` maps instance names to prices (default: the catalog snapshot). ``arrivals``: "bursts"
    (users re-send at once with fixed lengths, as ``accelbench sweep`` measures) or "steady" (spread out).
    """
    if arrivals not in ("bursts", "steady"):
        raise UserInputError(f"Unknown arrivals {arrivals!r}: use bursts or steady.")
    if input_len < 1 or output_len < 1 or concurrency < 1:
        raise UserInputError("input_len, output_len and concurrency must be at least 1.")
    model = _model(model)
    if isinstance(instance, str):
        if is_local(instance):
            from accelbench.plan.hardware import local_machine

            instance, spec = local_machine()
        else:
            from accelbench.plan.recommend import resolve_instance

            instance, catalog = resolve_instance(instance, catalog)
    if spec is None:
        if catalog is None:
            from accelbench.catalog import get_catalog

            catalog = get_catalog()
        spec = catalog.accelerator(instance.accelerator_name)
    kind = instance.accelerator_type
    engine = normalize_engine(engine, kind)
    accel = accelerator_name(instance)
    f, ref = factors_for(kind, accel, engine, calibrations)
    if factors is not None:
        f, ref = factors, None
    need = input_len + output_len
    rec = recommendation or recommend(
        model,
        instance,
        quantization=quantization,
        max_model_len=max_model_len,
        kv_cache_dtype=kv_cache_dtype,
        input_len=input_len,
        output_len=output_len,
        spec=spec,
        catalog=catalog,
        suggest_alternatives=False,
        factors=f if kind == AcceleratorType.cpu else None,
    )
    if rec.fits and rec.settings is not None and rec.settings.max_model_len < need and max_model_len is None:
        # The natural context is shorter than this request: ask for exactly what the request needs.
        rec = recommend(
            model,
            instance,
            quantization=quantization,
            max_model_len=need,
            kv_cache_dtype=kv_cache_dtype,
            input_len=input_len,
            output_len=output_len,
            spec=spec,
            catalog=catalog,
            suggest_alternatives=False,
        )
    hourly, price_source = _hourly(instance, prices)
    base: dict[str, Any] = {
        "model": model.name,
        "instance": instance.name,
        "accelerator_type": kind,
        "accelerator_name": accel,
        "accelerator_count": instance.accelerator_count,
        "engine": engine,
        "input_len": input_len,
        "output_len": output_len,
        "concurrency": concurrency,
        "arrivals": arrivals,
        "hourly_usd": hourly,
        "price_source": price_source,
        "recommendation": rec,
        "has_benchmark_data": bool(benchmarked and instance.name in benchmarked),
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
    pm, _hw, _fmt = predict_for(model, instance, spec, rec, engine_settings=engine_settings, engine=engine)
    pred = pm.predict(f, input_len, output_len, concurrency, arrivals)
    s, mem = rec.settings, rec.memory
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
            f"Uncalibrated: starting efficiency factors for {kind.value} / {engine} (cited in the data file)."
        )
    notes.append(
        "Arrivals: bursts (users re-send at once with fixed lengths, as `accelbench sweep` measures)."
        if arrivals == "bursts"
        else "Arrivals: steady (spread out; other requests' prefills interleave with decode)."
    )
    if pred.batch < concurrency:
        notes.append(
            f"Only {pred.batch} of {concurrency} requests run at once (max_num_seqs {pm.batch_limit}, "
            f"KV cache {pm.kv_tokens:,} tokens); the rest queue, which TTFT includes."
        )
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
    if slo is not None:
        slo_met = slo.met(pred.ttft * 1000, pred.tpot * 1000, pred.e2e * 1000)
        cap = max(concurrency, pm.batch_limit)
        max_c = _max_concurrency_for(pm, f, slo, input_len, output_len, cap, arrivals)
        if max_c and hourly is not None:
            p2 = pm.predict(f, input_len, output_len, max_c, arrivals)
            usd_m_slo = hourly / (p2.out_tps * 3600) * 1e6 if p2.out_tps > 0 else None
    times = TimeBreakdown(
        decode_step_ms=pred.decode_step * 1000,
        decode_weights_ms=pred.d_weights * 1000,
        decode_kv_ms=pred.d_kv * 1000,
        decode_compute_ms=pred.d_compute * 1000,
        decode_allreduce_ms=pred.d_allreduce * 1000,
        decode_overhead_ms=pred.d_overhead * 1000,
        decode_bound=bound,
        prefill_ms=pred.prefill * 1000,
        prefill_bound=pred.prefill_bound,
        prefill_interference_ms=pred.interference * 1000,
        queue_ms=pred.queue * 1000,
        ridge_flops_per_byte=pm.ridge,
        achievable_bandwidth_gbps=bw_eff,
        achievable_tflops=pm.flops_peak * f.compute_efficiency / 1e12,
    )
    util = (mem.weights_gib + mem.overhead_gib) / mem.usable_gib * 100 if mem.usable_gib else None
    return Estimate(
        **base,
        feasible=True,
        quantization_required=s.quantization is not None,
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
        slo_met=slo_met,
        max_concurrency_meeting_slo=max_c,
        usd_per_million_output_tokens_at_slo=usd_m_slo,
        explanation=explanation,
        factors=f,
        calibration=ref,
        times=times,
        notes=notes,
    )


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


# --------------------------------------------------------------------------------------------- the catalog
def _row(e: Estimate) -> EstimateRow:
    return EstimateRow(**{k: getattr(e, k) for k in EstimateRow.model_fields})


def store_context(
    store: Store, *, use_calibrations: bool = True, region: str | None = None
) -> tuple[CalibrationSet | None, dict[str, Any], set[str]]:
    """(active calibrations, best known prices, instance types with stored runs) from a store, in three
    queries, so a catalog-wide estimate stays fast."""
    from accelbench.catalog import price_map

    calibrations = CalibrationSet.from_store(store) if use_calibrations else None
    prices: dict[str, Any] = dict(price_map(store=store, region=region) if region else price_map(store=store))
    return calibrations, prices, store.benchmarked_instance_types()


def _model(model: ModelSpec | str) -> ModelSpec:
    if isinstance(model, str):
        from accelbench.modelspec import load_model_spec

        return load_model_spec(model)
    return model


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
    benchmarked: set[str] | None = None,
    store: Store | None = None,
    use_calibrations: bool = True,
    limit: int | None = None,
    include_infeasible: bool = True,
    arrivals: str = "bursts",
) -> EstimateTable:
    """Estimates for every catalog instance matching the filters, ranked by cost per 1M output tokens.

    ``accelerator`` (or ``accelerator_type``) keeps one tier; ``instance_type`` keeps one instance.
    With ``store``, stored prices win over the snapshot, active calibrations apply (unless
    ``use_calibrations`` is false) and rows say whether the store has runs on the instance.
    With ``slo``, each row also gets the highest concurrency meeting it, and the summary names the
    cheapest instance that meets it (cost per 1M output tokens at that concurrency).
    """
    started = time.perf_counter()
    model = _model(model)
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
    if store is not None:
        st_cal, st_prices, st_bench = store_context(store, use_calibrations=use_calibrations)
        calibrations = calibrations if calibrations is not None else st_cal
        prices = prices if prices is not None else st_prices
        benchmarked = benchmarked if benchmarked is not None else st_bench
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
            benchmarked=benchmarked,
            arrivals=arrivals,
        )
        if est.calibration is not None:
            used_refs[(est.calibration.accelerator, est.calibration.engine)] = est.calibration
        if est.feasible or include_infeasible:
            rows.append(_row(est))
    feasible = [r for r in rows if r.feasible]
    infeasible = [r for r in rows if not r.feasible]
    feasible.sort(
        key=lambda r: (
            r.usd_per_million_output_tokens if r.usd_per_million_output_tokens is not None else math.inf,
            r.tpot_ms or math.inf,
        )
    )
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


def is_local(instance_name: str | None) -> bool:
    return (instance_name or "").strip().lower() in (LOCAL_INSTANCE, "this", "localhost")


__all__ = [
    "CalibrationSet",
    "PerfModel",
    "Prediction",
    "build_perf_model",
    "efficiency_data",
    "estimate",
    "estimate_catalog",
    "estimate_local",
    "parse_slo",
]
