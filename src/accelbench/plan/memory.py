"""Memory arithmetic shared by the recommender, the breakdown and the estimator.

Constants follow the seed platform (SEED-SYSTEM-FACTS, Recommender) unless a comment says why not:
- bytes per parameter: fp32 4, fp16/bf16 2, fp8/int8 1, int4 0.5; quantization metadata int8 +2 B and int4
  +4 B per 128 parameters;
- GPU usable memory = device memory x 0.90 (``gpu_memory_utilization``); Neuron 0.85 per core. Not the seed's
  device memory: vLLM multiplies what CUDA reports (``memory_reported_gib``, e.g. 21.96 GiB of a 24 GB L4; the
  seed's nominal size over-counted the KV cache by up to 41%, ``plan/memory_logs.py``);
- overhead (activations, CUDA graphs, allocator) = 1.5 GiB + 3400 x (4 x hidden + intermediate) x 2 bytes;
- host allocatable share 0.92 at >= 64 GiB, else 0.85; CPU KV space = clamp(int(host x share x 0.35), 4, 128);
- standard context lengths 131072 ... 512; default request lengths from the max length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelbench.domain.model import ModelSpec

GIB = float(2**30)
GPU_MEMORY_UTILIZATION = 0.90
NEURON_MEMORY_UTILIZATION = 0.85
STANDARD_LENGTHS = (131072, 65536, 32768, 16384, 8192, 4096, 2048, 1024, 512)
MIN_CONTEXT = 512
CPU_KV_SHARE = 0.35
CPU_KV_MIN_GIB = 4
CPU_KV_MAX_GIB = 128
BLOCK_SIZE = 16

BYTES_PER_PARAM = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
# Scales (and zero points) of the seed's online int8/int4 paths, bytes per 128 weights.
METADATA_BYTES_PER_128 = {"int8": 2.0, "int4": 4.0}
ONLINE_FORMATS = ("fp8", "int8", "int4")


def host_allocatable_share(host_gib: float) -> float:
    """Share of host RAM a serving process may use (the rest is the OS, kubelet, page cache)."""
    return 0.92 if host_gib >= 64 else 0.85


def seed_cpu_kv_space_gib(host_gib: float) -> int:
    """The seed's CPU KV-cache space: clamp(int(host x allocatable x 0.35), 4, 128) GiB.

    96 GiB -> 30, 128 -> 41, 256 -> 82, >= 398 -> 128. ``recommend`` lowers it further when the weights
    leave less than that (small hosts), which the seed did not.
    """
    share = host_allocatable_share(host_gib)
    return max(CPU_KV_MIN_GIB, min(CPU_KV_MAX_GIB, int(host_gib * share * CPU_KV_SHARE)))


def round_down_length(tokens: int) -> int:
    """The largest standard context length <= ``tokens`` (0 when below 512)."""
    for length in STANDARD_LENGTHS:
        if tokens >= length:
            return length
    return 0


def default_lengths(max_len: int) -> tuple[int, int]:
    """(input, output) lengths a typical request is assumed to have, from the max model length (seed)."""
    if max_len >= 16384:
        return 2048, 1024
    if max_len >= 8192:
        return 1024, 512
    if max_len >= 4096:
        return 512, 256
    return max(1, max_len * 2 // 3), max(1, max_len // 3)


@dataclass(frozen=True)
class WeightFormat:
    """How the weights are held in memory."""

    name: str  # bf16, fp16, fp8, int8, int4, or e.g. "awq-4bit" for a pre-quantized checkpoint
    bits: float  # of the quantized linear layers (16 when unquantized)
    online: str | None  # quantization the engine must apply at load (fp8/int8/int4), None otherwise
    checkpoint_method: str | None  # method of a pre-quantized checkpoint
    label: str  # for explanations

    @property
    def quantized(self) -> bool:
        return self.bits < 16

    @property
    def math(self) -> str:
        """Which matrix units prefill uses: fp8 / int8 (W8A8) or bf16 (weight-only formats dequantise)."""
        if self.name == "fp8" or self.checkpoint_method == "fp8":
            return "fp8"
        if self.name == "int8":
            return "int8"
        return "bf16"

    def serving_fields(self) -> dict[str, str | float | None]:
        """The ``ServingSettings`` fields that say this format: the load-time quantization, the checkpoint's
        method, the format's name and its bits."""
        return {
            "quantization": self.online,
            "checkpoint_quantization": self.checkpoint_method,
            "weight_format": self.name,
            "weight_bits": self.bits,
        }


def native_format(model: ModelSpec, dtype: str | None = None) -> WeightFormat:
    """The checkpoint's own format: its quantization, or BF16 (FP16 when asked; FP32 checkpoints are cast to
    BF16 by vLLM's dtype=auto, so they are planned at 2 bytes, not the 4 of the file)."""
    q = model.quantization
    if q is not None:
        bits = q.bits
        name = "fp8" if q.method == "fp8" else f"{q.method}-{bits:g}bit"
        return WeightFormat(name=name, bits=bits, online=None, checkpoint_method=q.method, label=q.scheme)
    if dtype in ("fp16", "float16"):
        return WeightFormat("fp16", 16, None, None, "FP16")
    return WeightFormat("bf16", 16, None, None, "BF16")


def online_format(name: str) -> WeightFormat:
    labels = {"fp8": "FP8 (online, per-channel scales)", "int8": "INT8", "int4": "INT4"}
    return WeightFormat(name, BYTES_PER_PARAM[name] * 8, name, None, labels[name])


@dataclass(frozen=True)
class WeightBytes:
    total: float
    linear: float
    other: float
    metadata: float
    from_checkpoint: bool


def weight_bytes(model: ModelSpec, fmt: WeightFormat) -> WeightBytes:
    """Bytes of weights in memory for a format.

    Quantization converts the decoder's linear layers; embeddings, the output head, norms and routers stay
    in 16 bits (vLLM keeps them so), except in GGUF files that quantize embeddings too. A pre-quantized
    checkpoint whose file size is known is planned at that size (seed rule: actual size when known).
    """
    p = model.parameters
    linear = float(p.decoder_linear)
    other = float(p.total - p.decoder_linear)
    if fmt.checkpoint_method is not None:
        q = model.quantization
        if model.checkpoint_bytes:
            return WeightBytes(float(model.checkpoint_bytes), linear * fmt.bits / 8, other * 2, 0.0, True)
        meta = 0.0
        if q is not None and q.group_size:
            per_group = 2.0 + (0.5 if q.method in ("awq", "gptq") else 0.0)  # fp16 scale (+ packed zero)
            meta = linear / q.group_size * per_group
        other_bytes = other * (fmt.bits / 8 if q is not None and q.embeddings_quantized else 2.0)
        lin = linear * fmt.bits / 8
        return WeightBytes(lin + other_bytes + meta, lin, other_bytes, meta, False)
    if not fmt.quantized:
        total = float(p.total) * 2.0
        return WeightBytes(total, linear * 2.0, other * 2.0, 0.0, False)
    lin = linear * BYTES_PER_PARAM[fmt.name]
    meta = linear / 128.0 * METADATA_BYTES_PER_128.get(fmt.name, 0.0)
    return WeightBytes(lin + other * 2.0 + meta, lin, other * 2.0, meta, False)


def decode_read_bytes(model: ModelSpec, wb: WeightBytes) -> tuple[float, float]:
    """(dense, routed-expert) weight bytes a decode step reads: every weight but the routed experts (of which
    a step touches those its tokens pick) and, for an untied input embedding, one row of the table rather
    than the table. The performance model and the CPU bandwidth floor both read this, so they agree."""
    p = model.parameters
    linear_total = max(p.decoder_linear, 1)
    expert = wb.linear * p.routed_experts / linear_total if p.routed_experts else 0.0
    embed_bytes = 0.0
    if not model.tie_word_embeddings:
        per = (wb.other / max(p.total - p.decoder_linear, 1)) if p.total > p.decoder_linear else 2.0
        embed_bytes = p.embedding * per
    return max(wb.total - expert - embed_bytes, 0.0), expert


def activation_intermediate(model: ModelSpec) -> int:
    inter = model.intermediate_size or int(3.5 * model.hidden_size)
    if model.moe is not None:
        inter = max(inter, model.moe.expert_intermediate_size * model.moe.experts_per_token)
    return inter


def overhead_bytes(model: ModelSpec) -> float:
    """Activations, CUDA graphs and runtime per device (seed): 1.5 GiB + 3400 x (4h + i) x 2 bytes."""
    return 1.5 * GIB + 3400 * (4 * model.hidden_size + activation_intermediate(model)) * 2


def neuron_overhead_bytes(model: ModelSpec) -> float:
    """Per NeuronCore (seed): 2 GiB + clamp(hidden x 2048 x 2 bytes, 1 GiB, 2 GiB)."""
    return 2 * GIB + min(2 * GIB, max(1 * GIB, model.hidden_size * 2048 * 2))


def block_table_bytes(concurrency: int, max_len: int) -> float:
    """vLLM block tables (seed): concurrency x (ceil(len / 16) x 4 + 64) bytes."""
    return concurrency * (math.ceil(max_len / BLOCK_SIZE) * 4 + 64)


def host_load_peak_bytes(weights: float, streamer: bool = False) -> float:
    """Peak host RAM while loading (seed): weights x 1.08 (HF loader) or 1.15 (streamer) + 2 GiB."""
    return weights * (1.15 if streamer else 1.08) + 2 * GIB


def neuron_min_host_gib(weights_gib: float) -> float:
    """Neuron compiles and loads through host RAM (seed): max(64, size x 10 / log2(size + 2) + 32) GiB."""
    return max(64.0, weights_gib * 10 / math.log2(weights_gib + 2) + 32)


def kv_rank_ratio(model: ModelSpec, tp: int) -> float:
    """Share of the whole model's KV bytes one tensor-parallel rank holds (MLA replicates: 1)."""
    if model.mla is not None:
        return 1.0
    return model.kv_heads_per_rank(tp) / model.num_kv_heads


def max_seq_tokens(model: ModelSpec, budget_per_rank: float, tp: int, kv_bytes: float) -> int:
    """Longest single sequence whose KV cache fits a per-rank budget."""
    return model.max_tokens_for_kv_bytes(budget_per_rank / kv_rank_ratio(model, tp), kv_bytes)


def seq_kv_bytes_per_rank(model: ModelSpec, tokens: int, tp: int, kv_bytes: float) -> float:
    return model.kv_bytes_for_tokens(tokens, kv_bytes) * kv_rank_ratio(model, tp)
