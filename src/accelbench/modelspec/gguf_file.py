"""Read a model spec from a GGUF file's metadata and tensor table (the ``gguf`` package, memory-mapped).

Shapes come from the ``<arch>.*`` keys; parameter counts come from the tensors themselves (exact whatever the
architecture), and the checkpoint size is the sum of the tensors' stored bytes, so a Q4_1 file is planned as
the 4-bit-plus-scales checkpoint it is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from accelbench.domain.model import (
    MLASpec,
    ModelSource,
    ModelSpec,
    MoESpec,
    ParameterCounts,
    QuantizationInfo,
)
from accelbench.errors import UserInputError
from accelbench.modelspec.config import decide_task

# GGUF architecture -> (HF architecture, HF model_type)
GGUF_ARCHS: dict[str, tuple[str, str]] = {
    "llama": ("LlamaForCausalLM", "llama"),
    "mistral": ("MistralForCausalLM", "mistral"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "qwen2moe": ("Qwen2MoeForCausalLM", "qwen2_moe"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
    "qwen3moe": ("Qwen3MoeForCausalLM", "qwen3_moe"),
    "gemma": ("GemmaForCausalLM", "gemma"),
    "gemma2": ("Gemma2ForCausalLM", "gemma2"),
    "gemma3": ("Gemma3ForCausalLM", "gemma3_text"),
    "phi3": ("Phi3ForCausalLM", "phi3"),
    "deepseek2": ("DeepseekV3ForCausalLM", "deepseek_v3"),
    "granite": ("GraniteForCausalLM", "granite"),
    "olmo2": ("Olmo2ForCausalLM", "olmo2"),
    "bert": ("BertModel", "bert"),
    "nomic-bert": ("NomicBertModel", "nomic_bert"),
}

_EXPERT_TENSOR = re.compile(r"\.ffn_(gate|up|down)_exps\.")


def _value(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        return None
    try:
        return field.contents()
    except Exception:  # a malformed field must not hide the rest of the metadata
        return None


def spec_from_gguf(path: Path, *, ref: str | None = None) -> ModelSpec:
    """Build a ``ModelSpec`` from a GGUF file."""
    try:
        import gguf
    except ImportError as exc:  # a declared dependency; only a broken install gets here
        raise UserInputError("Reading GGUF files needs the 'gguf' package.") from exc
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:
        raise UserInputError(f"{path}: not a readable GGUF file ({exc}).") from exc
    arch = str(_value(reader, "general.architecture") or "")
    if not arch:
        raise UserInputError(f"{path}: GGUF metadata has no general.architecture.")

    def a(key: str, default: Any = None) -> Any:
        v = _value(reader, f"{arch}.{key}")
        return default if v is None else v

    hf_arch, model_type = GGUF_ARCHS.get(arch, (f"{arch} (GGUF)", arch))
    hidden = int(a("embedding_length"))
    layers = int(a("block_count"))
    heads = int(a("attention.head_count"))
    kv_raw = a("attention.head_count_kv", heads)
    kv_heads = int(kv_raw[0] if isinstance(kv_raw, list) else kv_raw)
    head_dim = int(a("attention.key_length", hidden // heads))
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    vocab = int(a("vocab_size") or (len(tokens.data) if tokens is not None else 0))
    ff = a("feed_forward_length", 0)
    intermediate = int(ff[0] if isinstance(ff, list) else ff)
    max_pos = int(a("context_length", 2048))

    total = active = embedding = lm_head = attention = mlp = routed = norms = other = 0
    linear_bytes = linear_params = 0
    total_bytes = 0
    type_counts: dict[str, int] = {}
    experts = int(a("expert_count", 0) or 0)
    used = int(a("expert_used_count", 0) or 0)
    for t in reader.tensors:
        n = int(t.n_elements)
        nbytes = int(t.n_bytes)
        total_bytes += nbytes
        total += n
        name = t.name
        tname = t.tensor_type.name
        type_counts[tname] = type_counts.get(tname, 0) + n
        if name == "token_embd.weight":
            embedding += n
        elif name == "output.weight":
            lm_head += n
        elif "norm" in name:
            norms += n
        elif _EXPERT_TENSOR.search(name):
            routed += n
            mlp += n
            linear_params += n
            linear_bytes += nbytes
        elif ".attn_" in name:
            attention += n
            linear_params += n
            linear_bytes += nbytes
        elif ".ffn_" in name and "gate_inp" not in name:
            mlp += n
            linear_params += n
            linear_bytes += nbytes
        else:
            other += n
    inactive = routed * (experts - used) // experts if experts and used else 0
    active = total - inactive
    tied = lm_head == 0
    active_matmul = active - embedding + (embedding if tied else 0)
    counts = ParameterCounts(
        total=total,
        active=active,
        active_matmul=active_matmul,
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        mlp=mlp,
        routed_experts=routed,
        norms=norms,
        other=other,
        exact=True,
        counted_from="gguf",
    )
    moe = None
    if experts > 1:
        shared = int(a("expert_shared_count", 0) or 0)
        expert_ff = int(a("expert_feed_forward_length", intermediate) or intermediate)
        moe = MoESpec(
            num_experts=experts,
            experts_per_token=max(1, used),
            expert_intermediate_size=expert_ff,
            num_shared_experts=shared,
            shared_intermediate_size=shared * expert_ff,
            first_dense_layers=int(a("leading_dense_block_count", 0) or 0),
        )
    mla = None
    if a("attention.kv_lora_rank"):
        rope = int(a("rope.dimension_count", 64))
        mla = MLASpec(
            q_lora_rank=a("attention.q_lora_rank"),
            kv_lora_rank=int(a("attention.kv_lora_rank")),
            qk_nope_head_dim=head_dim - rope,
            qk_rope_head_dim=rope,
            v_head_dim=int(a("attention.value_length", head_dim - rope)),
        )
    window = a("attention.sliding_window")
    n_sliding = 0
    if window:
        n_sliding = (layers + 1) // 2 if arch == "gemma2" else layers
        if arch == "gemma3":
            n_sliding = layers - layers // 6
    # The dominant quantized type of the linear layers names the file (e.g. Q4_1, with Q8_0 embeddings).
    linear_types = {k: v for k, v in type_counts.items() if k not in ("F32",)}
    main_type = max(linear_types, key=lambda k: linear_types[k]) if linear_types else "F32"
    bits = 8.0 * linear_bytes / linear_params if linear_params else 16.0
    quant = None
    if main_type not in ("F32", "F16", "BF16"):
        quant = QuantizationInfo(
            method="gguf",
            bits=round(bits, 3),
            group_size=int(gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[main_type]][0]),
            scheme=f"GGUF {main_type} ({bits:.2f} bits/weight incl. scales)",
            embeddings_quantized=True,
        )
    name = str(_value(reader, "general.basename") or _value(reader, "general.name") or path.stem)
    size_label = _value(reader, "general.size_label")
    finetune = _value(reader, "general.finetune")
    display = path.stem if not size_label else f"{name}-{size_label}"
    task, reason = decide_task({"architectures": [hf_arch], "model_type": model_type})
    notes = [f"read from GGUF metadata ({len(reader.tensors)} tensors, file type {main_type})"]
    if finetune:
        notes.append(f"fine-tune: {finetune}")
    return ModelSpec(
        name=display,
        source=ModelSource.gguf,
        ref=ref or str(path),
        architecture=hf_arch,
        model_type=model_type,
        task=task,
        task_reason=reason,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=vocab,
        max_position_embeddings=max_pos,
        tie_word_embeddings=tied,
        qkv_bias=any(t.name.endswith("attn_q.bias") for t in reader.tensors),
        sliding_window=int(window) if window else None,
        sliding_window_layers=n_sliding,
        moe=moe,
        mla=mla,
        quantization=quant,
        torch_dtype="bfloat16",
        parameters=counts,
        checkpoint_bytes=total_bytes,
        notes=notes,
    )
