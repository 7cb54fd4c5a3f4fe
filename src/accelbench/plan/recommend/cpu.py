"""CPU recommendations: host RAM as serving memory, VLLM_CPU_KVCACHE_SPACE, TP over NUMA nodes, the dense-model ceiling and the memory-bandwidth advisory."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.limits import CPU_DENSE_CEILING, CPU_DENSE_WARN
from accelbench.domain.model import ModelSpec
from accelbench.domain.recommendation import (
    Attempt,
    BandwidthAdvisory,
    MemoryBudget,
    Recommendation,
    RefusalCode,
    ServingSettings,
)
from accelbench.errors import UserInputError
from accelbench.plan.cpu_topology import topology_of
from accelbench.plan.hardware import Hardware, cpu_peak_gbps, default_factors
from accelbench.plan.memory import (
    GIB,
    WeightBytes,
    WeightFormat,
    decode_read_bytes,
    host_allocatable_share,
    max_seq_tokens,
    native_format,
    online_format,
    overhead_bytes,
    seed_cpu_kv_space_gib,
    weight_bytes,
)
from accelbench.plan.recommend.tier_steps import (
    CPU_KV_MIN,
    CPU_MAX_NUM_SEQS,
    Ctx,
    Fit,
    base_fields,
    context_and_batch,
    fmt_gib,
    gib,
    matches_checkpoint,
    params_b,
    refuse,
    verdict_for,
)

# --------------------------------------------------------------------------------------------- CPU
CPU_QUANT = {"int8": "W8A8", "int4": "W4A8"}


def bandwidth_advisory(
    model: ModelSpec,
    hw: Hardware,
    weights: WeightBytes,
    kv_tokens: int,
    factors: EfficiencyFactors,
    busy_cores: int | None = None,
    nodes: int | None = None,
) -> BandwidthAdvisory:
    """Bytes one decode step reads at batch 1 over what the CPU can stream: a floor under TPOT.

    The bytes are the performance model's (``decode_read_bytes``: one row of an untied input embedding, not
    the table; the routed experts one token picks), and ``kv_tokens`` the smallest context a decode step
    sees (the prompt), so the floor never exceeds the predicted TPOT. ``busy_cores``: the cores the engine's
    threads occupy (``plan/cpu_topology.py``) when fewer than the instance's, ``nodes`` the NUMA nodes they
    run on (each has its share of the memory channels)."""
    dense, expert = decode_read_bytes(model, weights)
    moe = model.moe
    touched = moe.experts_per_token / moe.num_experts if moe is not None and moe.num_experts else 1.0
    per_step = dense + expert * touched + model.kv_bytes_for_tokens(kv_tokens, 2)
    cores, cores_bw = hw.physical_cores, hw.cores_bandwidth_gbps
    if busy_cores is not None and 0 < busy_cores < cores:
        cores, cores_bw = busy_cores, cores_bw * busy_cores / cores
    share = hw.nodes_share(nodes)
    ceiling, peak = hw.memory_ceiling_gbps * share, hw.socket_bandwidth_gbps * share
    achievable = factors.bandwidth_efficiency * cpu_peak_gbps(ceiling, cores_bw)
    floor_ms = per_step / (achievable * 1e9) * 1000 if achievable > 0 else math.inf
    limited = _bandwidth_limit(hw, cpu_peak_gbps(ceiling, cores_bw) < ceiling)
    sockets = f"{hw.sockets} socket(s)' {peak:,.0f} GB/s"
    if share < 1:
        sockets = (
            f"{nodes or 1} of its {hw.numa_nodes} NUMA nodes' {peak:,.0f} GB/s (of "
            f"{hw.socket_bandwidth_gbps:,.0f} GB/s in {hw.sockets} socket(s))"
        )
    measured = (
        f"the {hw.measured_read_gbps:,.0f} GB/s of DRAM reads measured on {hw.instance.name} with every vCPU "
        f"reading ({hw.instance.memory_read_source or 'catalog'})"
        if hw.measured_read_gbps
        else ""
    )
    why = {
        "cores": f"its {cores} busy cores pull about {cores_bw:,.0f} GB/s, less than "
        + (measured if hw.ceiling_is_measured else f"the {sockets}"),
        "measured": f"{measured}, below the {sockets} peak, and less than its {cores} busy cores could pull "
        f"({cores_bw:,.0f} GB/s)",
        "socket": f"{factors.bandwidth_efficiency:.0%} of {peak:,.0f} GB/s: the {sockets} peak, less than its "
        f"{cores} busy cores could pull ({cores_bw:,.0f} GB/s)",
    }[limited]
    message = (
        f"Decode on a CPU is memory-bandwidth-bound: every output token reads {per_step / 1e9:.2f} GB "
        f"({'active ' if model.is_moe else ''}weights + one KV cache of {kv_tokens:,} tokens). "
        f"This instance reaches about {achievable:,.0f} GB/s ({why}), so TPOT cannot go "
        f"below {floor_ms:.1f} ms (at most {1000 / floor_ms:.1f} tokens/s per sequence)."
    )
    return BandwidthAdvisory(
        bytes_per_token=int(per_step),
        socket_bandwidth_gbps=round(hw.socket_bandwidth_gbps, 1),
        cores_bandwidth_gbps=round(cores_bw, 1),
        measured_read_gbps=hw.measured_read_gbps,
        achievable_bandwidth_gbps=round(achievable, 1),
        limited_by=limited,
        tpot_floor_ms=round(floor_ms, 3),
        tokens_per_s_ceiling=round(1000 / floor_ms, 2),
        message=message,
    )


def _bandwidth_limit(hw: Hardware, cores_bind: bool) -> Literal["socket", "measured", "cores"]:
    if cores_bind:
        return "cores"
    return "measured" if hw.ceiling_is_measured else "socket"


@dataclass(frozen=True)
class _Host:
    """Host RAM as serving memory: its size, the share vLLM may allocate, and the fixed overhead per rank."""

    gib: float
    share: float
    allocatable: float
    overhead: float


def recommend_cpu(ctx: Ctx) -> Recommendation:
    """vLLM on CPU: the weight format, the dense-model ceiling, TP over NUMA nodes, threads, the KV-cache
    space, then the context and batch it holds."""
    model = ctx.model
    factors = ctx.factors or default_factors("cpu", "vllm-cpu")
    host_gib = ctx.instance.memory_gib
    share = host_allocatable_share(host_gib)
    host = _Host(host_gib, share, host_gib * share * GIB, overhead_bytes(model))
    ctx.reasons.append(
        f"CPU instance: host RAM is the serving memory. Allocatable: {host_gib:g} GiB x {share} = "
        f"{host_gib * share:.2f} GiB (0.92 of hosts >= 64 GiB, else 0.85)."
    )
    if ctx.kv_cache_dtype and ctx.kv_cache_dtype != "auto":
        ctx.warnings.append("kv_cache_dtype is GPU-only and is not set on CPU (the KV cache is BF16).")
    fmt = _weight_format(ctx)
    if isinstance(fmt, Recommendation):
        return fmt
    wb = weight_bytes(model, fmt)
    ctx.reasons.insert(
        0,
        f"Weights: {fmt_gib(wb.total)} in {fmt.label} ({params_b(model.parameters.total)} parameters"
        + (f", {params_b(model.parameters.active)} active per token" if model.is_moe else "")
        + ").",
    )
    ctx.reasons.append("dtype bfloat16: the CPU kernels are BF16 ones (FP16 is unstable on CPU).")
    refused = _dense_ceiling(ctx, fmt, wb, host, factors)
    if refused is not None:
        return refused
    tp = _tensor_parallel(ctx)
    if isinstance(tp, Recommendation):
        return tp
    refused = _threads(ctx, tp)
    if refused is not None:
        return refused
    topo = topology_of(ctx.instance, "vllm-cpu", ctx.threads, tp=tp)
    busy, nodes = topo.busy_cores, topo.nodes
    adv = bandwidth_advisory(model, ctx.hw, wb, 1024, factors, busy, nodes)
    kv_space = _kv_space(ctx, host, wb, tp, adv)
    if isinstance(kv_space, Recommendation):
        return kv_space
    kv_bytes_budget = kv_space * GIB
    fit = Fit(tp, wb.total, host.overhead, kv_bytes_budget, max_seq_tokens(model, kv_bytes_budget, tp, 2.0))
    if ctx.max_model_len and fit.max_tokens < ctx.max_model_len:
        return refuse(
            ctx,
            RefusalCode.context_does_not_fit,
            f"A {ctx.max_model_len:,}-token context needs {fmt_gib(model.kv_bytes_for_tokens(ctx.max_model_len))} "
            f"of KV cache; {kv_space} GiB holds {fit.max_tokens:,} tokens.",
            ["Ask for a shorter max_model_len, or choose a CPU instance with more memory."],
            bandwidth=adv,
        )
    max_len, seqs, c_max, in_len, out_len, more = context_and_batch(ctx, fit, 2.0, CPU_MAX_NUM_SEQS)
    # The seed's CPU concurrency: KV space / (KV per token x (input + output)), clamped 1..64.
    ctx.reasons += more
    adv = bandwidth_advisory(model, ctx.hw, wb, in_len, factors, busy, nodes)
    ctx.warnings.append(adv.message)
    used = wb.total + host.overhead * tp + kv_bytes_budget * tp
    memory = MemoryBudget(
        unit="host",
        units=1,
        unit_memory_gib=host.gib,
        utilization=share,
        usable_gib=round(host.gib * share, 2),
        weights_gib=gib(wb.total),
        overhead_gib=gib(host.overhead * tp),
        kv_cache_gib=float(kv_space * tp),
        free_gib=gib(host.allocatable - used),
        kv_bytes_per_token=model.kv_bytes_per_token(2),
        kv_cache_tokens=fit.max_tokens,
        host_memory_gib=host.gib,
        host_allocatable_gib=round(host.gib * share, 2),
        host_peak_gib=gib(used),
    )
    settings = ServingSettings(
        engine=ctx.engine or "vllm-cpu",
        threads=ctx.threads,
        max_num_batched_tokens=ctx.max_num_batched_tokens,
        tensor_parallel_size=tp,
        max_model_len=max_len,
        max_num_seqs=seqs,
        dtype="bfloat16",
        **fmt.serving_fields(),
        kv_cache_space_gib=kv_space,
        omp_threads_bind="auto",
        concurrency_at_max_len=c_max,
        default_input_len=in_len,
        default_output_len=out_len,
    )
    return host_fit(ctx, settings, memory, adv)


def _weight_format(ctx: Ctx) -> WeightFormat | Recommendation:
    """The format the weights are served in on a CPU: the checkpoint's where vLLM has CPU kernels for it,
    int8/int4 as compressed-tensors W8A8/W4A8; FP8 and checkpoints without CPU kernels are refused."""
    model, q = ctx.model, ctx.quantization
    if model.quantization is not None:
        return _prequantized_format(ctx)
    if q == "fp8":
        return refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            "FP8 weights have no CPU kernels in vLLM.",
            [
                "Use int8 (a compressed-tensors W8A8 checkpoint) or int4 (W4A8) on CPU.",
                "Or choose a GPU with FP8 (L4, L40S, H100, H200, B200).",
            ],
        )
    if q in ("int8", "int4"):
        ctx.reasons.append(
            f"{q} on CPU means a compressed-tensors {CPU_QUANT[q]} checkpoint (vLLM has CPU kernels for it); "
            f"the runtime passes --quantization compressed-tensors."
        )
        ctx.warnings.append(
            f"Serve a {CPU_QUANT[q]} compressed-tensors checkpoint of {model.name}; vLLM on CPU does not "
            "quantize BF16 weights at load time."
        )
        return online_format(q)
    if q in ("awq", "gptq", "compressed-tensors"):
        return refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"Quantization {q} needs a checkpoint quantized with it; {model.name} is not.",
            ["Use such a checkpoint, or ask for int8 / int4 (compressed-tensors W8A8 / W4A8)."],
        )
    if q == "fp16":
        ctx.warnings.append("FP16 is unstable on CPU; the weights are served in BF16.")
    return native_format(model)


def _prequantized_format(ctx: Ctx) -> WeightFormat | Recommendation:
    """A pre-quantized checkpoint on CPU: compressed-tensors integer schemes, AWQ/GPTQ on x86; else refused."""
    model, inst, q = ctx.model, ctx.instance, ctx.quantization
    pre = model.quantization
    assert pre is not None
    method = pre.method
    if method == "compressed-tensors" and not pre.scheme.startswith("FP"):
        fmt = native_format(model)
        ctx.reasons.append(f"Pre-quantized {pre.scheme} checkpoint: compressed-tensors has CPU kernels.")
    elif method in ("awq", "gptq") and inst.arch == "x86_64":
        fmt = native_format(model)
        ctx.warnings.append(
            f"{pre.scheme} on CPU runs on x86 weight-only kernels that are slower than W8A8; a "
            "compressed-tensors W8A8 checkpoint is the better CPU format."
        )
    else:
        return refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"vLLM on CPU has no kernels for this checkpoint's quantization ({pre.scheme}"
            + (f" on {inst.arch}" if method in ("awq", "gptq") else "")
            + ").",
            [
                f"Use the BF16 checkpoint of {model.name}, or a compressed-tensors W8A8 / W4A8 one.",
                "GGUF files serve on CPUs with the llamacpp runtime."
                if method == "gguf"
                else "Or choose a GPU instance.",
            ],
        )
    if q not in (None, "native") and not matches_checkpoint(pre, q):
        return refuse(
            ctx,
            RefusalCode.unsupported_quantization,
            f"Quantization {q} was asked for, but the checkpoint is already {pre.scheme}.",
            ["Leave quantization unset to serve the checkpoint as it is."],
        )
    return fmt


def _dense_ceiling(
    ctx: Ctx, fmt: WeightFormat, wb: WeightBytes, host: _Host, factors: EfficiencyFactors
) -> Recommendation | None:
    """The dense-model ceiling (speed, not memory): an unquantized model above 13 B parameters per token is
    refused, one near it warned about."""
    model = ctx.model
    size_params = model.parameters.active if model.is_moe else model.parameters.total
    if not fmt.quantized and size_params > CPU_DENSE_CEILING:
        adv = bandwidth_advisory(model, ctx.hw, wb, 1024, factors)
        alts = []
        for qq in ("int8", "int4"):
            b = weight_bytes(model, online_format(qq)).total
            fits_mem = b + host.overhead + CPU_KV_MIN * GIB <= host.allocatable
            alts.append(
                f"Serve a compressed-tensors {CPU_QUANT[qq]} checkpoint (quantization {qq}): weights "
                f"{fmt_gib(b)}, {'fits' if fits_mem else 'does not fit'} this instance's memory."
            )
        alts.append("Or choose a GPU instance (candidates below).")
        what = "active parameters per token" if model.is_moe else "parameters"
        return refuse(
            ctx,
            RefusalCode.dense_too_large_for_cpu,
            f"{model.name} has {params_b(size_params)} {what} unquantized: above 13 B, CPU decode reads "
            f"{wb.total * (size_params / model.parameters.total) / 1e9:.0f} GB per token and is too slow to "
            f"serve ({adv.tpot_floor_ms:.0f} ms per token at best here).",
            alts,
            bandwidth=adv,
        )
    if not fmt.quantized and size_params >= CPU_DENSE_WARN:
        ctx.warnings.append(
            f"{params_b(size_params)} parameters unquantized is heavy for a CPU: expect low tokens/s per "
            "request; a W8A8 (int8) checkpoint halves the bytes read per token."
        )
    return None


def _tensor_parallel(ctx: Ctx) -> int | Recommendation:
    """Tensor parallel on CPU is one rank per NUMA node: the given degree when it divides the heads and the
    nodes allow it, else the node count (1 when the heads do not split over the nodes)."""
    model, inst = ctx.model, ctx.instance
    tp = max(1, inst.numa_nodes)
    if ctx.tp is not None:
        if ctx.tp > tp:
            return refuse(
                ctx,
                RefusalCode.no_valid_tensor_parallel,
                f"Tensor parallel {ctx.tp} on CPU is one rank per NUMA node; {inst.name} has {tp}.",
                [f"Give --tensor-parallel-size {tp} or less."],
            )
        if ctx.tp > 1 and (
            model.num_attention_heads % ctx.tp or (model.mla is None and model.num_kv_heads % ctx.tp)
        ):
            return refuse(
                ctx,
                RefusalCode.no_valid_tensor_parallel,
                f"Tensor parallel {ctx.tp} does not divide {model.num_attention_heads} attention / "
                f"{model.num_kv_heads} KV heads.",
                ["Use tensor parallel 1."],
            )
        tp = ctx.tp
    elif (best := cpu_tp_degrees(model, tp)[-1]) < tp:
        ctx.warnings.append(
            f"{model.num_attention_heads} attention / {model.num_kv_heads} KV heads do not split over "
            f"{tp} NUMA nodes: serving on {best} node{'s' if best > 1 else ''} (TP {best}); the other nodes' "
            "memory bandwidth stays unused."
        )
        tp = best
    ctx.reasons.append(
        f"Tensor parallel {tp} as given (the instance has {inst.numa_nodes} NUMA node(s))."
        if ctx.tp is not None
        else f"Tensor parallel {tp} of {inst.numa_nodes} NUMA node(s): one rank per node keeps its weights in "
        "local memory; threads inside a node come from OpenMP (VLLM_CPU_OMP_THREADS_BIND=auto)."
    )
    return tp


def cpu_tp_degrees(model: ModelSpec, nodes: int) -> list[int]:
    """Tensor-parallel degrees on a CPU of ``nodes`` NUMA nodes, smallest first: one rank per node, on a number
    of nodes that divides the instance's and the model's attention and KV heads (Xeon 6's sub-NUMA clusters
    give 2, 3 or 6 nodes: Llama's 32 heads split over 2 of 6, not 3)."""
    return [
        d
        for d in range(1, max(1, nodes) + 1)
        if nodes % d == 0
        and model.num_attention_heads % d == 0
        and (d == 1 or model.mla is not None or model.num_kv_heads % d == 0)
    ]


def more_threads_than_vcpus(ctx: Ctx) -> Recommendation:
    """The refusal for more engine threads than the instance has vCPUs (vLLM CPU's and llama.cpp's alike)."""
    inst = ctx.instance
    return refuse(
        ctx,
        RefusalCode.does_not_fit,
        f"{ctx.threads} threads asked for; {inst.name} has {inst.vcpus} vCPUs.",
        [f"Give --threads {inst.cores} (one per physical core) or less."],
    )


def _threads(ctx: Ctx, tp: int) -> Recommendation | None:
    """The OpenMP threads: the given count (refused above the vCPUs), or what vLLM binds by default."""
    inst = ctx.instance
    cores = inst.cores
    if ctx.threads is not None:
        if ctx.threads > inst.vcpus:
            return more_threads_than_vcpus(ctx)
        ctx.reasons.append(
            f"{ctx.threads} OpenMP threads as given"
            + (
                f": more than the {cores} physical cores, so the extra hyperthreads share cores "
                "(they add no matrix or bandwidth throughput)."
                if ctx.threads > cores
                else f" (of {cores} physical cores)."
            )
        )
    else:
        bound = topology_of(inst, "vllm-cpu", tp=tp).bound_threads
        ctx.reasons.append(
            f"Threads: {bound}, as vLLM's CPU backend binds them by default: one per physical core ({cores})"
            + (f", less {cores - bound} it keeps for its scheduler process." if bound < cores else ".")
        )
    return None


def _kv_space(
    ctx: Ctx, host: _Host, wb: WeightBytes, tp: int, adv: BandwidthAdvisory
) -> int | Recommendation:
    """VLLM_CPU_KVCACHE_SPACE (GiB per rank): the given value, or the seed rule lowered to what the weights and
    overhead leave; refused when it does not fit."""
    model, inst = ctx.model, ctx.instance
    seed_kv = seed_cpu_kv_space_gib(host.gib)
    left = host.allocatable - wb.total - host.overhead * tp
    # vLLM's CPU worker reserves VLLM_CPU_KVCACHE_SPACE per tensor-parallel rank (per NUMA node), so with
    # TP > 1 the host holds TP times that value.
    left_per_rank_gib = int(left / GIB / tp) if left > 0 else 0
    kv_space = min(seed_kv, left_per_rank_gib)
    usable = host.gib * host.share
    if ctx.kv_cache_space_gib is not None:
        if ctx.kv_cache_space_gib != int(ctx.kv_cache_space_gib) or ctx.kv_cache_space_gib < 1:
            raise UserInputError(
                f"kv_cache_space_gib {ctx.kv_cache_space_gib:g}: VLLM_CPU_KVCACHE_SPACE is a whole number of GiB.",
                hint="Give a whole number of GiB, at least 1.",
            )
        kv_space = int(ctx.kv_cache_space_gib)
        if kv_space > left / GIB / tp:
            return refuse(
                ctx,
                RefusalCode.does_not_fit,
                f"VLLM_CPU_KVCACHE_SPACE {kv_space:g} GiB per rank (x {tp}) does not fit beside the weights "
                f"{fmt_gib(wb.total)} and overhead {fmt_gib(host.overhead * tp)} in the {usable:.2f} GiB "
                "allocatable.",
                [
                    f"Give --kv-cache-space-gib {max(left_per_rank_gib, 1)} or less.",
                    "Or choose a CPU instance with more memory.",
                ],
            )
    if kv_space < 1 and ctx.kv_cache_space_gib is None:
        return refuse(
            ctx,
            RefusalCode.does_not_fit,
            f"{model.name} does not fit {inst.name}: weights {fmt_gib(wb.total)} + overhead "
            f"{fmt_gib(host.overhead * tp)} "
            + (
                f"leave {left / GIB:.2f} GiB of the {usable:.2f} GiB allocatable, less than the 1 GiB "
                "minimum KV cache per rank."
                if left > 0
                else f"exceed the {usable:.2f} GiB allocatable by {-left / GIB:.2f} GiB."
            ),
            [
                "Choose a CPU instance with more memory (candidates below).",
                "Or serve a compressed-tensors W8A8 (int8) / W4A8 (int4) checkpoint.",
            ],
            bandwidth=adv,
        )
    if ctx.kv_cache_space_gib is not None:
        ctx.reasons.append(f"KV-cache space {kv_space:g} GiB (VLLM_CPU_KVCACHE_SPACE, per rank) as given.")
    else:
        ctx.reasons.append(
            f"KV-cache space {kv_space} GiB (VLLM_CPU_KVCACHE_SPACE, per rank): clamp(int({host.gib:g} x "
            f"{host.share} x 0.35), 4, 128) = {seed_kv} GiB"
            + (
                f", lowered to the {left_per_rank_gib} GiB the weights and overhead leave"
                if kv_space < seed_kv
                else ""
            )
            + "."
        )
    if kv_space < seed_kv and ctx.kv_cache_space_gib is None:
        ctx.warnings.append(
            f"Only {kv_space} GiB is left for the KV cache after the weights (the rule gives {seed_kv}); "
            "long contexts and high concurrency will be limited."
        )
    return kv_space


def host_fit(
    ctx: Ctx, settings: ServingSettings, memory: MemoryBudget, bandwidth: BandwidthAdvisory
) -> Recommendation:
    """A CPU recommendation that fits in host RAM (vLLM CPU's and llama.cpp's alike)."""
    return Recommendation(
        **base_fields(ctx, fits=True, verdict=verdict_for(ctx, settings.max_model_len)),
        settings=settings,
        memory=memory,
        bandwidth=bandwidth,
        reasons=ctx.reasons,
        warnings=ctx.warnings,
        attempts=[
            Attempt(
                weight_format=settings.weight_format,
                fits=True,
                tensor_parallel_size=settings.tensor_parallel_size,
                max_model_len=settings.max_model_len,
                reason="host RAM",
            )
        ],
    )
