"""llama.cpp on a CPU: the GGUF file's own quantization, one process over the whole host (no tensor parallel),
and a KV cache of exactly the context (n_ctx) allocated at start, not vLLM's VLLM_CPU_KVCACHE_SPACE rule."""

from __future__ import annotations

from accelbench.domain.recommendation import MemoryBudget, Recommendation, RefusalCode, ServingSettings
from accelbench.plan.hardware import default_factors
from accelbench.plan.memory import (
    GIB,
    MIN_CONTEXT,
    WeightFormat,
    default_lengths,
    host_allocatable_share,
    native_format,
    online_format,
    round_down_length,
    weight_bytes,
)
from accelbench.plan.recommend.cpu import bandwidth_advisory, host_fit, more_threads_than_vcpus
from accelbench.plan.recommend.tier_steps import Ctx, fmt_gib, gib, params_b, refuse

# llama.cpp's default physical batch (n_ubatch): the compute buffer holds this many rows of attention scores
# and logits in f32
UBATCH = 512
# the process, its threads' stacks and the tokenizer: what a llama.cpp server holds besides its buffers
PROCESS_BYTES = 256 * 1024**2
GGUF_TYPES = {"int8": "Q8_0", "int4": "Q4_0"}
KV_BYTES = 2.0  # llama.cpp's default cache type is f16


def _weight_format(ctx: Ctx) -> WeightFormat | Recommendation:
    """The GGUF file's format: a GGUF checkpoint's own, or the one asked for (a GGUF quantized so)."""
    model, q, pre = ctx.model, ctx.quantization, ctx.model.quantization
    if pre is not None and pre.method == "gguf":
        if q not in (None, "native", "none", "gguf") and q not in GGUF_TYPES:
            return _unservable_format(
                ctx,
                f"Quantization {q} was asked for, but the checkpoint is a {pre.scheme} GGUF file, which "
                "llama.cpp runs as it is.",
                "Leave quantization unset, or prepare a GGUF file quantized as you want.",
            )
        if q in GGUF_TYPES:
            ctx.reasons.append(f"{q} on llama.cpp: a {GGUF_TYPES[q]} GGUF file of {model.name}.")
            return online_format(q)
        ctx.reasons.append(f"The GGUF file's own quantization ({pre.scheme}) is what llama.cpp runs.")
        return native_format(model)
    if q in GGUF_TYPES:
        ctx.reasons.append(
            f"{q} on llama.cpp: a {GGUF_TYPES[q]} GGUF file of {model.name} (llama.cpp multiplies it with "
            "8-bit integer dot products)."
        )
        ctx.warnings.append(
            f"Serve a {GGUF_TYPES[q]} GGUF file of {model.name}: llama.cpp runs the file's own quantization "
            "and does not quantize at load."
        )
        return online_format(q)
    if q == "fp8":
        return _unservable_format(
            ctx,
            "llama.cpp has no FP8 weight type.",
            "Use int8 (a Q8_0 GGUF file) or int4 (Q4_0).",
            "Or serve with vllm-cpu / on a GPU.",
        )
    if q in ("awq", "gptq", "compressed-tensors"):
        return _unservable_format(
            ctx,
            f"llama.cpp runs GGUF files, not {q} checkpoints.",
            "Convert the model to GGUF and quantize it (int8 = Q8_0, int4 = Q4_0).",
        )
    if pre is not None:
        ctx.reasons.append(
            f"The checkpoint is {pre.scheme}; llama.cpp runs a GGUF conversion of it, planned at 16 bits "
            "(ask int8 or int4 for a Q8_0 / Q4_0 file)."
        )
        return WeightFormat("bf16", 16, None, None, "BF16 (GGUF)")
    ctx.reasons.append("A 16-bit GGUF file (F16 / BF16): llama.cpp runs the file's own format.")
    return native_format(model, "fp16" if q == "fp16" else None)


def _unservable_format(ctx: Ctx, reason: str, *way_forward: str) -> Recommendation:
    """The refusal of a weight format llama.cpp does not run (as asked, or as the checkpoint is)."""
    return refuse(ctx, RefusalCode.unsupported_quantization, reason, list(way_forward))


def compute_buffer_bytes(model_heads: int, vocab: int, n_ctx: int) -> float:
    """llama.cpp's compute buffer: one physical batch of attention scores (n_ubatch x n_ctx x heads) and of
    logits (n_ubatch x vocab), f32."""
    return UBATCH * (n_ctx * model_heads + vocab) * 4.0


def recommend_llamacpp(ctx: Ctx) -> Recommendation:
    """llama.cpp on a CPU: the vLLM settings it lacks refused, the GGUF format, threads, the context host RAM
    holds beside the weights and buffers, one request at a time."""
    model, hw, inst = ctx.model, ctx.hw, ctx.instance
    factors = ctx.factors or default_factors("cpu", "llamacpp")
    host = inst.memory_gib
    share = host_allocatable_share(host)
    allocatable = host * share * GIB
    ctx.reasons.append(
        f"CPU instance: host RAM is the serving memory. Allocatable: {host:g} GiB x {share} = "
        f"{host * share:.2f} GiB (0.92 of hosts >= 64 GiB, else 0.85)."
    )
    refused = _vllm_only_settings(ctx)
    if refused is not None:
        return refused
    got = _weight_format(ctx)
    if isinstance(got, Recommendation):
        return got
    fmt = got
    wb = weight_bytes(model, fmt)
    ctx.reasons.insert(
        0,
        f"Weights: {fmt_gib(wb.total)} in {fmt.label} ({params_b(model.parameters.total)} parameters"
        + (f", {params_b(model.parameters.active)} active per token" if model.is_moe else "")
        + ").",
    )
    if inst.numa_nodes > 1:
        ctx.warnings.append(
            f"{inst.name} has {inst.numa_nodes} NUMA nodes and llama.cpp runs one process over them: pass "
            "--numa distribute so its threads and pages spread over the sockets."
        )
    refused = _threads(ctx)
    if refused is not None:
        return refused
    got_ctx = _context(ctx, wb.total, allocatable, host * share)
    if isinstance(got_ctx, Recommendation):
        return got_ctx
    n_ctx = got_ctx
    kv_per_token = model.kv_bytes_per_token(KV_BYTES)
    heads = model.num_attention_heads
    kv_bytes = n_ctx * kv_per_token
    buffers = PROCESS_BYTES + compute_buffer_bytes(heads, model.vocab_size, n_ctx)
    ctx.reasons.append(
        f"KV cache {fmt_gib(kv_bytes)} (f16, {n_ctx:,} tokens x {kv_per_token / 1024:,.0f} KiB), allocated at "
        f"start; compute buffer {fmt_gib(buffers - PROCESS_BYTES)} (n_ubatch {UBATCH} of attention scores "
        "and logits)."
    )
    ctx.reasons.append("One request decodes at a time (llama-cpp-python's server); the others queue.")
    d_in, d_out = default_lengths(n_ctx)
    in_len, out_len = ctx.input_len or d_in, ctx.output_len or d_out
    adv = bandwidth_advisory(model, hw, wb, in_len, factors)
    ctx.warnings.append(adv.message)
    used = wb.total + buffers + kv_bytes
    memory = MemoryBudget(
        unit="host",
        units=1,
        unit_memory_gib=host,
        utilization=share,
        usable_gib=round(host * share, 2),
        weights_gib=gib(wb.total),
        overhead_gib=gib(buffers),
        kv_cache_gib=gib(kv_bytes),
        free_gib=gib(allocatable - used),
        kv_bytes_per_token=int(kv_per_token),
        kv_cache_tokens=n_ctx,
        host_memory_gib=host,
        host_allocatable_gib=round(host * share, 2),
        host_peak_gib=gib(used),
    )
    settings = ServingSettings(
        engine="llamacpp",
        threads=ctx.threads,
        tensor_parallel_size=1,
        max_model_len=n_ctx,
        max_num_seqs=1,
        dtype="bfloat16",
        quantization=None,  # the GGUF file's own: llama.cpp has no flag for it
        checkpoint_quantization=fmt.checkpoint_method,
        weight_format=fmt.name,
        weight_bits=fmt.bits,
        concurrency_at_max_len=1,
        default_input_len=in_len,
        default_output_len=out_len,
    )
    return host_fit(ctx, settings, memory, adv)


def _vllm_only_settings(ctx: Ctx) -> Recommendation | None:
    """The refusal for a setting llama.cpp does not have: a KV dtype or space, a scheduler chunk, TP, a batch."""
    for name, value, why in (
        ("kv_cache_dtype", ctx.kv_cache_dtype not in (None, "auto"), "the cache is f16"),
        (
            "kv_cache_space_gib",
            ctx.kv_cache_space_gib is not None,
            "llama.cpp sizes its cache from the context",
        ),
        ("max_num_batched_tokens", ctx.max_num_batched_tokens is not None, "llama.cpp batches 512 rows"),
    ):
        if value:
            return refuse(
                ctx,
                RefusalCode.does_not_fit,
                f"{name} is a vLLM setting that llama.cpp does not have ({why}).",
                [f"Remove {name}, or plan with --engine vllm-cpu."],
            )
    if ctx.tp is not None and ctx.tp > 1:
        return refuse(
            ctx,
            RefusalCode.no_valid_tensor_parallel,
            f"Tensor parallel {ctx.tp}: llama.cpp on a CPU runs one process over the whole host.",
            [
                "Remove --tensor-parallel-size (or give 1), or plan with --engine vllm-cpu (one rank per socket)."
            ],
        )
    if ctx.max_num_seqs is not None and ctx.max_num_seqs > 1:
        return refuse(
            ctx,
            RefusalCode.does_not_fit,
            f"max_num_seqs {ctx.max_num_seqs}: llama-cpp-python's server decodes one request at a time.",
            ["Give max_num_seqs 1 (the rest queue), or plan with --engine vllm-cpu for batching."],
        )
    return None


def _threads(ctx: Ctx) -> Recommendation | None:
    """The threads: the given count (refused above the vCPUs), else every vCPU."""
    inst = ctx.instance
    cores = inst.cores
    if ctx.threads is not None:
        if ctx.threads > inst.vcpus:
            return more_threads_than_vcpus(ctx)
        ctx.reasons.append(f"{ctx.threads} threads as given (of {cores} physical cores).")
    else:
        ctx.reasons.append(
            f"Threads: all {inst.vcpus} vCPUs (accelbench passes them; llama-cpp-python would use half); the "
            f"{cores} physical cores set the matrix rate."
        )
    return None


def _context(ctx: Ctx, weights: float, allocatable: float, usable_gib: float) -> int | Recommendation:
    """n_ctx: the given context (refused when host RAM does not hold it), the model's full one, or what
    fits rounded down to a standard length."""
    model, inst = ctx.model, ctx.instance
    # ---- memory: weights + process + compute buffer + a KV cache of exactly n_ctx tokens
    kv_per_token = model.kv_bytes_per_token(KV_BYTES)
    heads = model.num_attention_heads
    fixed = weights + PROCESS_BYTES + UBATCH * model.vocab_size * 4.0
    per_token = kv_per_token + UBATCH * heads * 4.0
    left = allocatable - fixed
    fits_tokens = int(left / per_token) if left > 0 else 0
    model_max = model.max_position_embeddings
    if fits_tokens < MIN_CONTEXT:
        return refuse(
            ctx,
            RefusalCode.does_not_fit,
            f"{model.name} does not fit {inst.name} with llama.cpp: weights {fmt_gib(weights)} + buffers "
            f"{fmt_gib(fixed - weights)} leave room for {max(fits_tokens, 0):,} tokens of context in the "
            f"{usable_gib:.2f} GiB allocatable (at least {MIN_CONTEXT:,} needed).",
            [
                "Choose a CPU instance with more memory (candidates below).",
                "Or serve a smaller GGUF file (int4 = Q4_0).",
            ],
        )
    if ctx.max_model_len is not None:
        n_ctx = min(ctx.max_model_len, model_max)
        if n_ctx > fits_tokens:
            return refuse(
                ctx,
                RefusalCode.context_does_not_fit,
                f"A {n_ctx:,}-token context needs {fmt_gib(n_ctx * per_token)} of KV cache and attention "
                f"buffer beside the weights; {inst.name} has room for {fits_tokens:,} tokens.",
                [
                    f"Ask for max_model_len {round_down_length(fits_tokens) or fits_tokens:,} or less.",
                    "Or choose a CPU instance with more memory.",
                ],
            )
        ctx.reasons.append(f"Context (n_ctx) {n_ctx:,} as given; room for {fits_tokens:,} tokens.")
    elif fits_tokens >= model_max:
        n_ctx = model_max
        ctx.reasons.append(f"Context (n_ctx) {n_ctx:,}: the model's full context fits.")
    else:
        n_ctx = round_down_length(fits_tokens)
        ctx.reasons.append(
            f"Context (n_ctx) {n_ctx:,}: memory holds {fits_tokens:,} tokens (model supports {model_max:,}); "
            "rounded down to a standard length."
        )
    return n_ctx
