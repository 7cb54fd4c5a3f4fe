"""Performance and cost estimates: TTFT, TPOT, E2E, tokens/s and dollars, for one instance or the catalog.

The model (all quantities per tensor-parallel rank):
- decode step = the weight GEMMs, max(weights read / achievable bandwidth, their FLOPs / achievable compute),
  then attention, max(the KV cache of every sequence in the batch / bandwidth, its FLOPs / compute), one
  after the other (a layer's kernels run in sequence) + TP all-reduces + engine overhead (a fixed part per
  step and a part per sequence). The weights a step touches: MoE, the dense part plus the experts the batch
  routes to, 1 - (1 - k/E)^B of them;
- prefill = max(FLOPs / achievable compute, weights / achievable bandwidth): memory-bound below the ridge
  point (compute / bandwidth), compute-bound above; chunked in ``max_num_batched_tokens`` pieces;
- continuous batching, closed loop (C users, each sending the next request when the last ends): the batch is
  min(C, max_num_seqs, what the KV cache holds); TPOT grows with the batch's bytes and compute and with the
  other requests' prefills that stall decode; TTFT grows with the prefills a request waits for (steady
  arrivals: an M/D/1 queue on the prefill path, in the token budget the running decodes leave each step) and,
  above the batch limit, with the queue ((C / batch - 1) x service time). Two arrival patterns: "bursts" (every user
  re-sends at once with fixed lengths, which is what a benchmark sweep does: requests travel in waves, see
  ``PerfModel.predict``) and "steady" (arrivals spread out, prefills interleave with decode);
- CPUs: bandwidth = min(sockets x socket peak, busy cores x per-core bandwidth), the busy cores being those
  the engine's threads occupy (``plan/cpu_topology.py``: vLLM CPU keeps one for its scheduler process);
  compute from the ISA's matrix path (AMX, AVX512-BF16, SVE BFMMLA ...) via the catalog's per-core BF16 rate.
Efficiency factors come from ``plan/data/efficiency.yaml`` (cited) or from a calibration fitted to measured
runs (``accelbench plan calibrate``); an estimate says which.

TPOT is the *typical* (median) request's: ``prefill_interference`` is the share of the mean prefill stall a
median request sees; E2E and throughput use the mean, which is what work conservation gives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.model import ModelSpec
from accelbench.domain.recommendation import Recommendation
from accelbench.plan.cpu_topology import topology_of
from accelbench.plan.hardware import Hardware, cpu_peak_gbps, efficiency_data, llamacpp_int8_tops
from accelbench.plan.memory import (
    WeightFormat,
    decode_read_bytes,
    kv_rank_ratio,
    native_format,
    online_format,
    weight_bytes,
)
from accelbench.plan.queueing import md1_median

if TYPE_CHECKING:
    pass


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


def default_max_num_seqs(hw: Hardware, tp: int, engine: str) -> int:
    """The engine's own batch limit when a deployment does not set one (vLLM engine/arg_utils.py for the
    OpenAI server: CPU 128 x TP; GPUs 1024 on >= 70 GiB GPUs other than A100, else 256; Neuron's default
    compiled batch is small, 8 in the NxD Inference vLLM integration; SGLang sizes it from memory)."""
    if engine == "llamacpp":
        return 1
    if hw.kind == AcceleratorType.cpu:
        return 128 * tp
    if hw.kind == AcceleratorType.neuron:
        return 8
    mem = hw.unit_memory_gib
    if mem >= 70 and not hw.spec.name.upper().startswith("A100"):
        return 1024
    return 256


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
    d_floor: float = 0.0


def _next_pow2(n: float, floor: int = 128) -> int:
    v = floor
    while v < n:
        v *= 2
    return v


def neuron_bucket(n: float, max_len: int = 0) -> int:
    """The compiled length a Neuron graph of ``n`` tokens runs at: NxD Inference's buckets
    (``modules/autobucketing.py`` ``generate_buckets(128, max_length)``) are the powers of two from 128 below
    2 ** round(log2(max_length)), then max_length itself, so a 10,000-token prompt under a 12,800-token limit
    runs the 12,800 graph, not a 16,384 one. Without a known limit (or beyond it, which the engine refuses):
    the next power of two."""
    if max_len <= 0 or n > max_len:
        return _next_pow2(n)
    if max_len <= 128:
        return max_len
    top = 2 ** round(math.log2(max_len))
    v = 128
    while v < top:
        if v >= n:
            return v
        v *= 2
    return max_len


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
    n_layers: int = 1
    # weight-only formats (W4A16, AWQ/GPTQ, FP8 on GPUs without FP8 units, W8A16): the matrix units run in
    # 16 bits on weights dequantised on the fly, which costs compute once the batch is large
    weight_only: bool = False
    # llama.cpp's per-row dot-product kernels (weights not repacked for its GEMM kernels): older builds, or
    # layouts a build does not repack; the planner's own estimates assume a build that repacks (the default
    # since late 2024 on Arm and x86), the public rows of older builds say so
    dot_kernel: bool = False
    # bytes per token and rank that an FP8 GEMM's unfused dequantisation moves (``unfused_fp8_dequant_bytes``):
    # 0 for the fused kernels the planner's own estimates assume; public rows of builds that fell back say so
    unfused_dequant_bytes: float = 0.0
    weight_bits: float = 16.0
    # Neuron compiles static shapes: the decode graph runs the compiled batch (max_num_seqs) whatever the
    # number of live sequences, and the context is padded to its bucket (``neuron_bucket``)
    static_shapes: bool = False
    max_len: int = 0  # the compiled maximum sequence length (max_model_len), the last bucket; 0 = not known
    kind: str = "gpu"

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
        """Two all-reduces per layer: a latency that grows with the ranks a message crosses (ring steps over
        PCIe, one-shot over NVLink still synchronises every rank) and the bytes over the link."""
        if self.tp <= 1:
            return 0.0
        latency = max(f.allreduce_latency_us, self.min_allreduce_us) * 1e-6 * (1 + math.log2(self.tp)) / 2
        per = latency + 2 * (self.tp - 1) / self.tp * tokens * self.allreduce_bytes_per_token / self.link
        return self.n_allreduce * per

    def _matrix_rate(self, f: EfficiencyFactors, tokens: float) -> float:
        """Achievable matrix FLOP/s per rank for a step of ``tokens`` rows: weight-only kernels dequantise
        every weight they use, which halves or worse the rate once the step is compute-bound."""
        fl = self.flops_peak * f.compute_efficiency
        if self.weight_only:
            # 4-bit weights are unpacked and scaled per group; 8-bit ones (FP8 on GPUs without FP8 units,
            # W8A16) only converted: the dequantising costs differ
            fl *= f.weight_only_efficiency if self.weight_bits <= 4.5 else f.fp8_weight_only_efficiency
        if self.dot_kernel:
            fl *= f.dot_kernel_efficiency
        return fl

    def decode_step(
        self, f: EfficiencyFactors, batch: int, ctx: float
    ) -> tuple[float, float, float, float, float, float, float]:
        """(step, weights, kv, compute, all-reduce, overhead, layer floor) in seconds."""
        if self.static_shapes:
            batch = max(batch, self.batch_limit)
            ctx = neuron_bucket(ctx, self.max_len)
        bw = self.bw_peak * f.bandwidth_efficiency
        w = (self.dense_read + self.expert_bytes * self._touched(batch)) / bw
        # paged attention streams each sequence's blocks: a lower share of the bandwidth than weight GEMMs
        kv = batch * self._kv_bytes(ctx) / (bw * f.kv_read_efficiency)
        gemm = batch * self.decode_flops_per_token / self._matrix_rate(f, batch)
        # an unfused dequantisation runs after each GEMM, on its output: in series with it
        dq = batch * self.unfused_dequant_bytes / bw
        # attention multiplies each sequence's query by its own cached keys and values: no weight is shared
        # across the batch, so a weight-only or dot-product kernel's penalty does not apply to it
        attn = batch * self.attn_coef * ctx / (self.flops_peak * f.compute_efficiency)
        ar = self._allreduce(f, batch)
        over = (f.step_overhead_ms + f.per_sequence_overhead_ms * batch) / 1000
        # each layer's kernels take at least their launch-and-sync latency, however little each rank holds:
        # why TP 8 is far from 8x TP 1
        floor = self.n_layers * f.layer_floor_us * 1e-6
        # A layer runs its kernels one after another: the weight GEMMs (bound by reading the weights or by
        # their FLOPs) and then attention (bound by reading batch x context x KV bytes per token, or by its
        # FLOPs). Their times add; a GEMM that is compute-bound does not hide the attention's KV reads, which
        # is what makes a long-context, large batch slower than max(bytes, FLOPs) of the whole step says.
        core = max(max(w, gemm) + dq + max(kv, attn), floor)
        return core + ar + over, w + dq, kv, gemm + attn, ar, over, floor

    def prefill(self, f: EfficiencyFactors, length: int, sequences: int = 1) -> tuple[float, str]:
        """Prefill of ``sequences`` prompts of ``length`` tokens scheduled together, in chunks of at most
        ``max_num_batched_tokens``; each chunk reads the weights once and pays one step overhead."""
        if self.static_shapes:
            length = neuron_bucket(length, self.max_len)
        bw = self.bw_peak * f.bandwidth_efficiency
        # prefill runs large tiles of rows, over which a weight-only kernel's dequantising is amortised
        fl = self.flops_peak * f.compute_efficiency
        if self.dot_kernel:
            # one row of weights against one token at a time: no reuse across the prompt's tokens
            fl *= f.dot_kernel_efficiency
        tokens = length * sequences
        flops = sequences * (
            length * self.prefill_flops_per_token + self.head_flops + self.attn_coef * length * length / 2
        )
        comp = flops / fl
        chunks = max(1, math.ceil(tokens / self.chunk))
        per_chunk = min(tokens, self.chunk)
        weights = (self.dense_read + self.expert_bytes * self._touched(per_chunk)) / bw
        mem = chunks * weights + sequences * self._kv_bytes(length) / bw
        floor = chunks * self.n_layers * f.layer_floor_us * 1e-6
        dq = tokens * self.unfused_dequant_bytes / bw
        t = max(comp, mem, floor) + dq + self._allreduce(f, tokens) + chunks * f.step_overhead_ms / 1000
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
          while the other B - 1 prefills of a wave fit one scheduler step (``max_num_batched_tokens``),
          requests travel in waves. The engine starts the first arrival's prefill alone; the other B - 1
          arrive during it and are prefilled together next, while the first one's decode waits: B - 1 of B
          requests see TTFT = own + the others' prefill and the first a TPOT inflated by that stall, as on
          the local vLLM CPU sweep. Longer waves spread out (their prefills finish a chunk apart, so do
          their re-sends) and the loop settles into the steady regime below. Which
          grouping the first wave gets is a race, and the later waves keep it: the same 512 x 4 demo cell
          measured a TPOT p50 of 41 ms in one run and 57 ms in another (ITL p50 34-36 ms in both);
        - ``steady``: arrivals spread out (e.g. Poisson traffic, or variable lengths at this concurrency):
          each request's decode is stalled by the prefills of the others that land in it (chunked prefill
          shares steps with everyone's decode, which is what raises TPOT with load, strongly on CPUs), of
          which a typical (median) request sees the ``prefill_interference`` share; its TTFT waits for the
          prefills ahead of it (an M/D/1 queue) and runs in the token budget the decodes leave (``_steady``).
        - ``wave``: one wave and nothing after it (every prompt sent at once, a static batch): the first
          wave's TTFT, its prefills in chunks in arrival order, whatever their length.
        Typical values are medians over the requests; throughput and E2E follow from the mean cycle.
        """
        per_seq_tokens = input_len + output_len
        kv_cap = max(1, self.kv_tokens // max(per_seq_tokens, 1))
        batch = max(1, min(concurrency, self.batch_limit, kv_cap))
        ctx = input_len + output_len / 2
        step, w, kv, comp, ar, over, floor = self.decode_step(f, batch, ctx)
        p, bound = self.prefill(f, input_len)
        req = f.request_overhead_ms / 1000
        decode_tokens = max(output_len - 1, 0)
        extra = 0.0  # what the typical request's TPOT gets from other requests' prefills
        # Waves persist only while a wave's other prefills fit one scheduler step: then every request of a
        # wave finishes together and re-sends together. When they need several steps, requests finish
        # their prefills (and so their outputs) one chunk apart, re-send one chunk apart, and the next waves
        # arrive spread out: after the first wave the loop runs as steady arrivals do.
        waves = arrivals == "wave" or (arrivals == "bursts" and (batch - 1) * input_len <= self.chunk)
        if batch == 1:
            ttft = req + p
            tpot = tpot_mean = step
            e2e_mean = ttft + decode_tokens * step
        elif waves:
            p_rest, _ = self.prefill(f, input_len, batch - 1)
            chunks = max(1, math.ceil((batch - 1) * input_len / self.chunk))
            ttft_first = req + p
            # the median request is the ceil((B - 1) / 2)-th of the rest
            ttft_median = self.wave_ttft(f, input_len, 1 + math.ceil((batch - 1) / 2), batch)
            ttft_last = self.wave_ttft(f, input_len, batch, batch)
            # the first request gets a token per chunk of the others' prefill; the rest of it is a stall
            stall = max(p_rest - chunks * step, 0.0) / decode_tokens if decode_tokens else 0.0
            if batch == 2:  # one of each: the median falls between them
                ttft = (ttft_first + ttft_last) / 2
                extra = stall / 2
            else:  # most requests are the ones prefilled after the first
                ttft = ttft_median
            tpot = step + extra
            tpot_mean = step + stall / batch
            e2e_mean = (ttft_first + ttft_last) / 2 + decode_tokens * step
        else:
            ttft, tpot_mean, e2e_mean, extra = self._steady(
                f, input_len, output_len, batch, step, over, p, arrivals
            )
            tpot = step + extra
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
            d_floor=floor,
        )

    def _steady(
        self,
        f: EfficiencyFactors,
        input_len: int,
        output_len: int,
        batch: int,
        step: float,
        over: float,
        p: float,
        arrivals: str = "steady",
    ) -> tuple[float, float, float, float]:
        """Steady arrivals: (typical TTFT, mean TPOT, mean E2E, the typical TPOT's share of other prefills).

        Each of the batch - 1 other slots starts a new request once per cycle (E2E); the share of them that
        lands in this request's decode window is T_dec / E2E, each stalling it by a prefill. A new request's
        TTFT is its own prefill, run in the steps the scheduler gives it, after the prefills ahead of it:
        - vLLM's scheduler fills each step's ``max_num_batched_tokens`` with the running decodes first, one
          token each, and gives a waiting prefill what is left (vllm/v1/core/sched/scheduler.py), so a
          prompt takes ceil(input / (max_num_batched_tokens - running)) steps, each a decode step longer;
        - the prefill path is a queue: the other slots' prefills arrive once per cycle each and take the
          engine ``prefill_cost`` each; a request finding it busy waits as in an M/D/1 queue (an atom at
          zero, an exponential tail of mean S / (2 (1 - rho))), of which the typical request sees the median,
          which grows without bound as the path fills: why TTFT under load rises faster than the load;
        - arriving mid-step, it waits half a step before the scheduler sees it.

        ``bursts`` whose waves have spread (a closed loop of fixed lengths whose other prefills need more than
        one step's budget) do not arrive at random: the prompts one step prefilled together reach their last
        token in the same step and their users re-send together. Each such group (as many prompts as the
        budget holds) arrives while the engine runs the step after the one that finished them, waits for it,
        and is prefilled together in the next: its TTFT is a full step plus the whole group's prefill, and
        the decodes stall once per group by that prefill."""
        req = f.request_overhead_ms / 1000
        decode_tokens = max(output_len - 1, 0)
        budget = max(self.chunk - (batch - 1), 1)
        chunks_own = max(1, math.ceil(input_len / budget))
        cost = self.prefill_cost(f, input_len, batch)
        group, stall, residual = 1, p, 0.5 * step
        if arrivals == "bursts":
            group, stall = self.burst_group(f, input_len, batch)
            chunks_own = max(1, math.ceil(group * input_len / budget))
            residual = step
        own = req + stall + residual + chunks_own * (step - over)
        tpot_mean, mean_extra, ttft = step, 0.0, own
        e2e = own + decode_tokens * step
        for _ in range(8):
            if decode_tokens > 0:
                window = decode_tokens * tpot_mean / e2e if e2e > 0 else 1.0
                mean_extra = (batch - 1) / group * stall * window / decode_tokens
                tpot_mean = step + mean_extra
            rho = (batch - 1) * cost / max(e2e, 1e-12)
            ttft = own + md1_median(rho, cost)
            e2e = ttft + decode_tokens * tpot_mean
        return ttft, tpot_mean, e2e, f.prefill_interference * mean_extra

    def burst_group(self, f: EfficiencyFactors, input_len: int, batch: int) -> tuple[int, float]:
        """A spread closed loop of fixed lengths: (prompts that travel together, their prefill in seconds),
        as many as one step's token budget holds after the running decodes take one token each."""
        budget = max(self.chunk - (batch - 1), 1)
        group = max(1, min(budget // max(input_len, 1), batch))
        return group, self.prefill(f, input_len, group)[0]

    def prefill_cost(self, f: EfficiencyFactors, input_len: int, slots: int) -> float:
        """Seconds of engine time per prefill when the waiting ones are batched into one step's token budget."""
        together = max(1, min(self.chunk // max(input_len, 1), slots))
        t, _ = self.prefill(f, input_len, together)
        return t / together

    def wave_ttft(self, f: EfficiencyFactors, input_len: int, k: int, batch: int) -> float:
        """TTFT of the k-th request (1-based) of a wave of ``batch`` sent at once: the first one's prefill,
        then the others' in ``max_num_batched_tokens`` chunks in arrival order, done with the chunk that holds
        its own; and the server takes arrivals in one at a time (parsing, templating, tokenizing in one event
        loop), so it also waits for the k - 1 before it, whatever the accelerator."""
        req = f.request_overhead_ms / 1000
        p, _ = self.prefill(f, input_len)
        if k <= 1 or batch <= 1:
            return req + p
        p_rest, _ = self.prefill(f, input_len, batch - 1)
        chunks = max(1, math.ceil((batch - 1) * input_len / self.chunk))
        mine = max(1, math.ceil((min(k, batch) - 1) * input_len / self.chunk))
        return req + p + p_rest * min(mine, chunks) / chunks + (k - 1) * f.request_serial_ms / 1000

    @property
    def ridge(self) -> float:
        return self.flops_peak / self.bw_peak if self.bw_peak else 0.0


# bytes an unfused FP8 dequantisation moves per output element beyond a fused kernel's 2-byte BF16 store: the
# GEMM stores FP32 (4 instead of 2), two elementwise multiplies by the per-token and per-channel scales each
# read and write FP32 (8 + 8), and the cast back reads FP32 and writes BF16 (6)
UNFUSED_DEQUANT_BYTES_PER_OUTPUT = 2 + 8 + 8 + 6


def unfused_fp8_dequant_bytes(model: ModelSpec, tp: int) -> float:
    """Bytes per token and rank that FP8 linear layers move when the GEMM cannot apply per-channel and
    per-token scales itself: vLLM's fallback where its CUTLASS FP8 kernels are not built for the GPU
    (``torch._scaled_mm`` into FP32, then ``output * x_scale * weight_scale.t()`` and ``.to(bf16)``, three
    elementwise kernels over every linear layer's output). On Ada (SM89) vLLM builds its CUTLASS FP8 kernels
    only with CUDA 12.4 or later, and its wheels were built with CUDA 12.1 up to late 2024. Per layer, the
    outputs of q/k/v, o, gate/up and down: (heads + 2 kv heads) x head dim + 2 x hidden + 2 x intermediate
    (the routed experts a token uses, and any shared ones, for MoE layers)."""
    inter = model.intermediate_size
    if model.moe is not None:
        moe = model.moe
        inter = moe.experts_per_token * moe.expert_intermediate_size + moe.shared_intermediate_size
    per_layer = (
        (model.num_attention_heads + 2 * model.num_kv_heads) * model.head_dim
        + 2 * model.hidden_size
        + 2 * inter
    )
    return UNFUSED_DEQUANT_BYTES_PER_OUTPUT * per_layer * model.num_layers / max(tp, 1)


def weight_format_from(rec: Recommendation, model: ModelSpec) -> WeightFormat:
    s = rec.settings
    if s is None:
        return native_format(model)
    if s.quantization in ("fp8", "int8", "int4"):
        return online_format(s.quantization)
    if s.engine == "llamacpp" and s.checkpoint_quantization is None and s.weight_format in ("int8", "int4"):
        # a GGUF file quantized so: llama.cpp has no quantization flag, the file's format is what runs
        return online_format(s.weight_format)
    return native_format(model, "fp16" if s.weight_format == "fp16" else None)


@dataclass(frozen=True)
class EngineLimits:
    """What the engine's settings bound: sequences per step (max_num_seqs), tokens the KV cache holds, tokens
    per step (max_num_batched_tokens) and the longest sequence (max_model_len; on Neuron the last compiled
    bucket, 0 when not known)."""

    batch_limit: int
    kv_tokens: int
    chunk: int
    max_len: int = 0


def build_perf_model(
    model: ModelSpec,
    hw: Hardware,
    fmt: WeightFormat,
    *,
    tp: int,
    kv_bytes: float,
    limits: EngineLimits,
    cpu_threads: int | None = None,
    engine: str | None = None,
) -> PerfModel:
    p = model.parameters
    wb = weight_bytes(model, fmt)
    dense, expert = decode_read_bytes(model, wb)  # a decode step reads one row of the input table
    if hw.kind == AcceleratorType.cpu:
        cores = max(1, hw.physical_cores)
        # the cores the engine's threads occupy and the sockets they sit on (plan/cpu_topology.py: what vLLM
        # CPU binds, one NUMA node per rank, or --threads): compute scales with the busy cores, bandwidth is
        # what they can pull, at most their sockets' peak
        topo = topology_of(hw.instance, engine or DEFAULT_ENGINE[hw.kind], cpu_threads, tp=tp)
        share = min(topo.busy_cores, cores) / cores
        sockets_bw = hw.memory_ceiling_gbps * hw.nodes_share(topo.nodes)
        bw = cpu_peak_gbps(sockets_bw, hw.cores_bandwidth_gbps * share) * 1e9 / tp
        flops = hw.tflops_for(fmt.math) * 1e12 / tp * share
    else:
        bw = hw.unit_bandwidth_gbps * 1e9
        flops = hw.tflops_for(fmt.math) * 1e12
    weight_only = fmt.quantized and hw.tflops_for(fmt.math) == hw.unit_bf16_tflops
    int8_tops = llamacpp_int8_tops(hw) if engine == "llamacpp" and hw.kind == AcceleratorType.cpu else None
    if fmt.quantized and int8_tops:
        # llama.cpp quantises the activations to 8 bits and multiplies with integer dot products (SDOT /
        # I8MM on Arm, VNNI vectors on x86): its 4- and 8-bit formats run at that INT8 rate, not as a
        # weight-only kernel that dequantises to BF16
        flops *= int8_tops / hw.tflops_for(fmt.math)
        weight_only = False
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
        link=hw.allreduce_gbps(tp) * 1e9,
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
        batch_limit=max(1, limits.batch_limit),
        kv_tokens=max(1, limits.kv_tokens),
        chunk=max(1, limits.chunk),
        n_layers=model.num_layers,
        weight_only=weight_only,
        weight_bits=fmt.bits,
        static_shapes=hw.kind == AcceleratorType.neuron,
        max_len=limits.max_len if hw.kind == AcceleratorType.neuron else 0,
        kind=hw.kind.value,
    )
