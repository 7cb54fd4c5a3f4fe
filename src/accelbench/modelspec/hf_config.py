"""Turn a Hugging Face ``config.json`` (as a dict) into a ``ModelSpec``.

Field names differ between architectures (``num_local_experts`` vs ``n_routed_experts``, ``n_layer`` vs
``num_hidden_layers`` ...); this module is the one place that knows them. Architecture facts that a config
does not state (Qwen2's q/k/v biases, Gemma's four norms per layer and tied embeddings, which Gemma-2 layers
slide) are written here with the model type they belong to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.domain.model import (
    MLASpec,
    ModelSource,
    ModelSpec,
    ModelTask,
    MoESpec,
    QuantizationInfo,
)
from accelbench.errors import UserInputError
from accelbench.modelspec.params import Shape, count_parameters
from accelbench.modelspec.quant import detect_quantization

# Decoder families whose module layout params.py reproduces exactly.
EXACT_MODEL_TYPES = {
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3_text",
    "deepseek_v2",
    "deepseek_v3",
    "phi3",
    "granite",
    "olmo2",
    "smollm3",
}
QKV_BIAS_TYPES = {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"}
TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3_text", "gemma3"}
NON_GATED_TYPES = {"gpt2", "gpt_neox", "gptj", "falcon", "opt", "bloom", "phi", "starcoder2", "gpt_bigcode"}
LAYERNORM_BIAS_TYPES = {
    "gpt2",
    "gpt_neox",
    "gptj",
    "falcon",
    "opt",
    "bloom",
    "phi",
    "starcoder2",
    "gpt_bigcode",
}
ENCODER_TYPES = {
    "bert",
    "roberta",
    "xlm-roberta",
    "distilbert",
    "mpnet",
    "nomic_bert",
    "electra",
    "deberta",
    "deberta-v2",
    "albert",
    "camembert",
    "modernbert",
    "new",  # gte-*-v1.5 custom code
}

GENERATIVE_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel", "ForCausalLMPipe")
CLASSIFY_SUFFIXES = (
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForQuestionAnswering",
    "ForMultipleChoice",
    "ForImageClassification",
)
PIPELINE_TASKS = {
    "text-generation": ModelTask.generate,
    "text2text-generation": ModelTask.generate,
    "image-text-to-text": ModelTask.generate,
    "conversational": ModelTask.generate,
    "feature-extraction": ModelTask.embed,
    "sentence-similarity": ModelTask.embed,
    "text-classification": ModelTask.classify,
    "token-classification": ModelTask.classify,
    "zero-shot-classification": ModelTask.classify,
    "fill-mask": ModelTask.other,
    "text-ranking": ModelTask.rerank,
    "text-to-image": ModelTask.diffusion,
    "image-to-image": ModelTask.diffusion,
    "automatic-speech-recognition": ModelTask.other,
}


def _first(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return default


def decide_task(
    config: dict[str, Any],
    *,
    pipeline_tag: str | None = None,
    sentence_transformers: bool = False,
    diffusers: bool = False,
) -> tuple[ModelTask, str]:
    """What the model does, and why we think so. Explicit signals (pipeline tag, sentence-transformers or
    diffusers files) win over the architecture name, because embedding models are often built on a
    ``...ForCausalLM`` backbone."""
    archs = [str(a) for a in (config.get("architectures") or [])]
    arch = archs[0] if archs else ""
    model_type = str(config.get("model_type") or "")
    if diffusers:
        return ModelTask.diffusion, "the directory is a diffusers pipeline (model_index.json)"
    if sentence_transformers:
        return (
            ModelTask.embed,
            "the checkpoint is packaged for sentence-transformers (modules.json / "
            "config_sentence_transformers.json): an embedding model",
        )
    if pipeline_tag and pipeline_tag in PIPELINE_TASKS and PIPELINE_TASKS[pipeline_tag] != ModelTask.generate:
        task = PIPELINE_TASKS[pipeline_tag]
        return task, f"its pipeline tag is {pipeline_tag!r}"
    lowered = arch.lower()
    if "reward" in lowered:
        return ModelTask.reward, f"architecture {arch} is a reward model (scores, does not generate)"
    if arch.endswith(CLASSIFY_SUFFIXES):
        if "rerank" in str(config.get("_name_or_path", "")).lower():
            return ModelTask.rerank, f"architecture {arch} is a cross-encoder reranker"
        return ModelTask.classify, f"architecture {arch} is a classifier (a label per input, no generation)"
    if arch.endswith("ForMaskedLM"):
        return ModelTask.other, f"architecture {arch} is a masked language model (fill-mask, not generation)"
    if arch.endswith(GENERATIVE_SUFFIXES):
        return ModelTask.generate, f"architecture {arch} generates text"
    if "embed" in lowered or arch.endswith("Model") or model_type in ENCODER_TYPES:
        return (
            ModelTask.embed,
            f"architecture {arch or model_type} is an encoder backbone without a language-model head "
            "(an embedding model)",
        )
    if pipeline_tag == "text-generation":
        return ModelTask.generate, "its pipeline tag is 'text-generation'"
    return ModelTask.other, f"architecture {arch or model_type or 'unknown'} is not a known text generator"


def _sliding(cfg: dict[str, Any], model_type: str, num_layers: int, max_pos: int) -> tuple[int | None, int]:
    """(window, number of sliding layers)."""
    window = _first(cfg, "sliding_window", "sliding_window_size")
    if not window or int(window) <= 0:
        return None, 0
    window = int(window)
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        n = sum(1 for t in layer_types if "sliding" in str(t))
    elif model_type == "gemma2":
        n = (num_layers + 1) // 2  # even layers slide, odd layers attend globally (Gemma2DecoderLayer)
    elif model_type in ("gemma3", "gemma3_text"):
        pattern = int(cfg.get("sliding_window_pattern") or 6)
        n = num_layers - num_layers // pattern  # every pattern-th layer is global
    elif model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        # Qwen configs always carry a window but only use it when use_sliding_window is true, and then only
        # from layer max_window_layers on.
        if not cfg.get("use_sliding_window"):
            return None, 0
        n = max(0, num_layers - int(cfg.get("max_window_layers") or 0))
    elif cfg.get("use_sliding_window") is False:
        return None, 0
    else:
        n = num_layers  # Mistral-7B-v0.1, Phi-3: every layer slides
    if window >= max_pos or n == 0:
        return None, 0
    return window, n


def _moe(cfg: dict[str, Any], model_type: str, hidden: int, intermediate: int) -> MoESpec | None:
    experts = _first(cfg, "num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts")
    if not experts or int(experts) <= 1:
        return None
    top_k = int(_first(cfg, "num_experts_per_tok", "moe_top_k", "top_k", default=2))
    expert_inter = int(_first(cfg, "moe_intermediate_size", "expert_intermediate_size", default=intermediate))
    shared_n = int(_first(cfg, "n_shared_experts", "num_shared_experts", default=0) or 0)
    shared_inter = 0
    shared_gate = False
    if model_type == "qwen2_moe":
        shared_inter = int(cfg.get("shared_expert_intermediate_size") or 0)
        shared_gate = shared_inter > 0
    elif shared_n:
        shared_inter = shared_n * expert_inter
    first_dense = int(_first(cfg, "first_k_dense_replace", default=0) or 0)
    freq = int(_first(cfg, "moe_layer_freq", "decoder_sparse_step", default=1) or 1)
    return MoESpec(
        num_experts=int(experts),
        experts_per_token=top_k,
        expert_intermediate_size=expert_inter,
        num_shared_experts=shared_n if model_type != "qwen2_moe" else (1 if shared_inter else 0),
        shared_intermediate_size=shared_inter,
        shared_expert_gate=shared_gate,
        first_dense_layers=first_dense,
        layer_freq=freq,
        router_bias=str(cfg.get("topk_method") or "") == "noaux_tc",
    )


@dataclass(frozen=True)
class CheckpointFacts:
    """What a checkpoint says beside its config.json (``hub.read_model_dir``): its size, the model card's
    pipeline tag, sentence-transformers or diffusers files, and an old ``quantize_config.json``."""

    checkpoint_bytes: int | None = None
    pipeline_tag: str | None = None
    sentence_transformers: bool = False
    diffusers: bool = False
    extra_quant_config: dict[str, Any] | None = None


def spec_from_config(
    config: dict[str, Any],
    *,
    name: str,
    source: ModelSource,
    ref: str,
    hf_id: str | None = None,
    revision: str | None = None,
    facts: CheckpointFacts = CheckpointFacts(),
) -> ModelSpec:
    """Build a ``ModelSpec`` from a config dict. Raises ``UserInputError`` when essential fields are missing."""
    if not isinstance(config, dict):
        raise UserInputError(f"{ref}: config.json is not a JSON object.")
    notes: list[str] = []
    task, task_reason = decide_task(
        config,
        pipeline_tag=facts.pipeline_tag,
        sentence_transformers=facts.sentence_transformers,
        diffusers=facts.diffusers,
    )
    top = config
    cfg = _language_config(config, notes)
    archs = [str(a) for a in (top.get("architectures") or [])]
    architecture = archs[0] if archs else str(cfg.get("model_type") or "unknown")
    model_type = str(cfg.get("model_type") or top.get("model_type") or "unknown")
    common, max_pos = _shape_fields(cfg, top, model_type, ref)
    exact = model_type in EXACT_MODEL_TYPES and "text_config" not in config
    if not exact and task == ModelTask.generate:
        notes.append(
            f"model type {model_type!r} is counted with the generic decoder formula; "
            "the parameter count may be off by biases or extra modules"
        )
    shape = Shape(
        **common,
        learned_positions=max_pos if model_type in ("gpt2", "opt", "gpt_bigcode") else 0,
        exact=exact,
    )
    quant: QuantizationInfo | None = detect_quantization(top, facts.extra_quant_config)
    if quant is None and cfg is not top:
        quant = detect_quantization(cfg)
    dtype = str(_first(top, "torch_dtype", "dtype", default=cfg.get("torch_dtype") or "bfloat16"))
    if common["mla"] is not None and top.get("num_nextn_predict_layers"):
        notes.append(
            f"{top['num_nextn_predict_layers']} multi-token-prediction layer(s) ship with the checkpoint and "
            "are not counted (they serve speculative decoding only)"
        )
    window, n_sliding = _sliding(cfg, model_type, common["num_layers"], max_pos)
    return ModelSpec(
        **common,
        name=name,
        source=source,
        ref=ref,
        hf_id=hf_id,
        revision=revision,
        architecture=architecture,
        model_type=model_type,
        task=task,
        task_reason=task_reason,
        max_position_embeddings=max_pos,
        sliding_window=window,
        sliding_window_layers=n_sliding,
        quantization=quant,
        torch_dtype=dtype,
        parameters=count_parameters(shape),
        checkpoint_bytes=facts.checkpoint_bytes,
        notes=notes,
    )


def _language_config(config: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The part of the config that shapes the language model: ``text_config`` of a vision-language model (the
    vision tower is extra and not counted), else the config itself."""
    if not isinstance(config.get("text_config"), dict):
        return config
    cfg = {**config.get("text_config", {})}
    cfg.setdefault("architectures", config.get("architectures"))
    notes.append("vision-language model: the vision encoder's parameters are not counted")
    return cfg


def _dimensions(cfg: dict[str, Any], ref: str) -> tuple[int, int, int, int]:
    """hidden size, layers, attention heads and vocabulary: without them the model cannot be sized."""
    hidden = _first(cfg, "hidden_size", "n_embd", "d_model", "dim")
    layers = _first(cfg, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = _first(cfg, "num_attention_heads", "n_head", "num_heads", "n_heads")
    vocab = _first(cfg, "vocab_size", "padded_vocab_size")
    missing = [
        k
        for k, v in (("hidden_size", hidden), ("num_hidden_layers", layers), ("num_attention_heads", heads))
        if v is None
    ]
    if vocab is None:
        missing.append("vocab_size")
    if missing:
        raise UserInputError(
            f"{ref}: config.json lacks {', '.join(missing)}; cannot size the model.",
            hint="Give the model's original config.json (or a preset name: `accelbench model list`).",
        )
    return int(hidden), int(layers), int(heads), int(vocab)


def _tied(cfg: dict[str, Any], top: dict[str, Any], model_type: str) -> bool:
    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = top.get("tie_word_embeddings")
    if tie is None:
        # transformers' PretrainedConfig defaults to tied; decoder families that untie say so in their configs
        tie = model_type in TIED_BY_DEFAULT or model_type not in EXACT_MODEL_TYPES
    return bool(tie)


def _biases(cfg: dict[str, Any], model_type: str) -> tuple[bool, bool, bool]:
    """Whether the q/k/v projections, the output projection and the MLP carry biases."""
    qkv_bias = model_type in QKV_BIAS_TYPES or bool(cfg.get("attention_bias"))
    o_bias = bool(cfg.get("attention_bias")) and model_type not in QKV_BIAS_TYPES
    if model_type in NON_GATED_TYPES:
        qkv_bias = o_bias = bool(cfg.get("bias", True)) if model_type != "falcon" else bool(cfg.get("bias"))
    mlp_bias = bool(cfg.get("mlp_bias")) or (model_type in NON_GATED_TYPES and o_bias)
    return qkv_bias, o_bias, mlp_bias


def _mla(cfg: dict[str, Any]) -> MLASpec | None:
    """Multi-head latent attention (DeepSeek-V2/V3), when the config has a KV LoRA rank."""
    if not cfg.get("kv_lora_rank"):
        return None
    return MLASpec(
        q_lora_rank=_first(cfg, "q_lora_rank"),
        kv_lora_rank=int(cfg["kv_lora_rank"]),
        qk_nope_head_dim=int(cfg.get("qk_nope_head_dim") or 128),
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 64),
        v_head_dim=int(cfg.get("v_head_dim") or 128),
    )


def _shape_fields(
    cfg: dict[str, Any], top: dict[str, Any], model_type: str, ref: str
) -> tuple[dict[str, Any], int]:
    """The fields parameter counting needs, which are the ``ModelSpec``'s own (one set of values for both),
    and the maximum position."""
    hidden, layers, heads, vocab = _dimensions(cfg, ref)
    kv_heads = int(_first(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads) or heads)
    if cfg.get("multi_query") is True:
        kv_heads = 1
    head_dim = int(_first(cfg, "head_dim", "kv_channels", default=hidden // heads) or hidden // heads)
    non_gated = model_type in NON_GATED_TYPES
    intermediate = int(
        _first(cfg, "intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size", default=0)
        or (4 * hidden if non_gated else 0)
    )
    max_pos = int(
        _first(
            cfg, "max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", default=2048
        )
    )
    qkv_bias, o_bias, mlp_bias = _biases(cfg, model_type)
    norms_per_layer = 4 if model_type in ("gemma2", "gemma3", "gemma3_text") else 2
    mla = _mla(cfg)
    if mla is not None:
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    common: dict[str, Any] = {
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_layers": layers,
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "vocab_size": vocab,
        "tie_word_embeddings": _tied(cfg, top, model_type),
        "qkv_bias": qkv_bias,
        "o_bias": o_bias,
        "mlp_bias": mlp_bias,
        "mlp_gated": not non_gated,
        "norms_per_layer": norms_per_layer,
        "norm_bias": model_type in LAYERNORM_BIAS_TYPES,
        "qk_norm": model_type in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "olmo2"),
        "moe": _moe(cfg, model_type, hidden, intermediate),
        "mla": mla,
    }
    return common, max_pos
