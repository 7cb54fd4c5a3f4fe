"""Detect a pre-quantized checkpoint from its ``quantization_config`` (or an old ``quantize_config.json``).

Knows the formats vLLM loads: AWQ, GPTQ (and its Marlin / GPTQModel variants), compressed-tensors (W8A8,
W4A16, W4A8, FP8), FP8 (DeepSeek-style block scales and dynamic per-tensor), bitsandbytes (4-bit NF4/FP4
and LLM.int8), MXFP4 and NVIDIA ModelOpt. An unknown ``quant_method`` is still reported (method and bits when
the config says them) so the planner never mistakes a quantized checkpoint for a BF16 one.
"""

from __future__ import annotations

from typing import Any

from accelbench.domain.model import QuantizationInfo


def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None and v is not False else None
    except (TypeError, ValueError):
        return None


def _ignored(qc: dict[str, Any], *keys: str) -> list[str]:
    for key in keys:
        val = qc.get(key)
        if isinstance(val, list):
            return [str(x) for x in val]
    return []


def _compressed_tensors(qc: dict[str, Any]) -> QuantizationInfo:
    groups = qc.get("config_groups") or {}
    w_bits: int | None = None
    a_bits: int | None = None
    w_type = "int"
    group_size: int | None = None
    strategy = None
    for group in groups.values() if isinstance(groups, dict) else []:
        weights = (group or {}).get("weights") or {}
        acts = (group or {}).get("input_activations") or None
        if weights:
            w_bits = _int(weights.get("num_bits")) or w_bits
            w_type = str(weights.get("type") or w_type)
            group_size = _int(weights.get("group_size")) or group_size
            strategy = weights.get("strategy") or strategy
        if acts:
            a_bits = _int(acts.get("num_bits")) or a_bits
        break  # one group describes the scheme of every targeted Linear in published checkpoints
    bits = w_bits or 8
    if w_type == "float":
        scheme = f"FP{bits}" + (" W8A8" if a_bits else " weight-only")
    else:
        scheme = f"W{bits}A{a_bits or 16}"
    if strategy:
        scheme += f" ({strategy})"
    return QuantizationInfo(
        method="compressed-tensors",
        bits=bits,
        group_size=group_size,
        activation_bits=a_bits,
        scheme=scheme,
        ignored_modules=_ignored(qc, "ignore"),
    )


def detect_quantization(
    config: dict[str, Any], extra: dict[str, Any] | None = None
) -> QuantizationInfo | None:
    """The checkpoint's quantization from ``config["quantization_config"]``, else ``extra`` (the contents
    of a separate ``quantize_config.json``/``quant_config.json``), else None."""
    qc = config.get("quantization_config") or config.get("compression_config") or extra
    if not isinstance(qc, dict) or not qc:
        return None
    method = str(qc.get("quant_method") or qc.get("quant_type") or "").lower().replace("_", "-")
    if not method and ("w_bit" in qc or "q_group_size" in qc):
        method = "awq"
    if not method and ("bits" in qc and "desc_act" in qc):
        method = "gptq"
    if method in ("awq", "awq-marlin"):
        bits = _int(qc.get("bits") or qc.get("w_bit")) or 4
        group = _int(qc.get("group_size") or qc.get("q_group_size")) or 128
        return QuantizationInfo(
            method="awq",
            bits=bits,
            group_size=group,
            scheme=f"W{bits}A16 (AWQ, group {group})",
            ignored_modules=_ignored(qc, "modules_to_not_convert"),
        )
    if method in ("gptq", "gptq-marlin", "gptqmodel"):
        bits = _int(qc.get("bits")) or 4
        gptq_group = _int(qc.get("group_size"))
        label = f"W{bits}A16 (GPTQ" + (
            f", group {gptq_group})" if gptq_group and gptq_group > 0 else ", per channel)"
        )
        return QuantizationInfo(
            method="gptq",
            bits=bits,
            group_size=gptq_group if gptq_group and gptq_group > 0 else None,
            scheme=label,
            ignored_modules=_ignored(qc, "modules_to_not_convert"),
        )
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    if method in ("fp8", "fbgemm-fp8"):
        block = qc.get("weight_block_size")
        act = str(qc.get("activation_scheme") or "dynamic")
        scheme = "FP8" + (
            f" block {block[0]}x{block[1]}" if isinstance(block, list) and len(block) == 2 else ""
        )
        scheme += f", {act} activations"
        return QuantizationInfo(
            method="fp8",
            bits=8,
            group_size=int(block[0]) * int(block[1]) if isinstance(block, list) and len(block) == 2 else None,
            activation_bits=8,
            scheme=scheme,
            ignored_modules=_ignored(qc, "modules_to_not_convert", "ignored_layers"),
        )
    if method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            kind = str(qc.get("bnb_4bit_quant_type") or "fp4").upper()
            return QuantizationInfo(
                method="bitsandbytes",
                bits=4,
                group_size=64,  # bitsandbytes' 4-bit blocksize
                scheme=f"W4A16 ({kind}, bitsandbytes)",
                ignored_modules=_ignored(qc, "llm_int8_skip_modules"),
            )
        return QuantizationInfo(
            method="bitsandbytes",
            bits=8,
            scheme="LLM.int8 (bitsandbytes)",
            ignored_modules=_ignored(qc, "llm_int8_skip_modules"),
        )
    if method == "mxfp4":
        return QuantizationInfo(
            method="mxfp4",
            bits=4,
            group_size=32,
            scheme="MXFP4 (4-bit, e8m0 scale per 32)",
            ignored_modules=_ignored(qc, "modules_to_not_convert"),
        )
    if method == "modelopt":
        algo = str(qc.get("quant_algo") or (qc.get("quantization") or {}).get("quant_algo") or "FP8").upper()
        bits = 4 if "FP4" in algo or "INT4" in algo else 8
        return QuantizationInfo(
            method="modelopt",
            bits=bits,
            group_size=16 if "NVFP4" in algo else None,
            activation_bits=bits if "FP" in algo else None,
            scheme=f"{algo} (ModelOpt)",
            ignored_modules=_ignored(qc, "exclude_modules"),
        )
    if method == "gguf":
        return QuantizationInfo(method="gguf", bits=_int(qc.get("bits")) or 4, scheme="GGUF")
    other_bits = _int(qc.get("bits") or qc.get("w_bit") or qc.get("num_bits"))
    return QuantizationInfo(
        method=method or "unknown",
        bits=other_bits or 8,
        group_size=_int(qc.get("group_size")),
        scheme=f"{method or 'unknown'} ({other_bits or '?'}-bit)",
    )
