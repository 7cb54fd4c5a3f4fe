"""Read a model spec from a GGUF file's metadata and tensor table (the ``gguf`` package, memory-mapped).

Shapes come from the ``<arch>.*`` keys; parameter counts come from the tensors themselves (exact whatever the
architecture), and the checkpoint size is the sum of the tensors' stored bytes, so a Q4_1 file is planned as
the 4-bit-plus-scales checkpoint it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
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
from accelbench.modelspec.hf_config import decide_task

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


class _Meta:
    """The ``<arch>.*`` metadata of one GGUF file, read by key with a default."""

    def __init__(self, reader: Any, arch: str) -> None:
        self.reader, self.arch = reader, arch

    def __call__(self, key: str, default: Any = None) -> Any:
        v = _value(self.reader, f"{self.arch}.{key}")
        return default if v is None else v

    def first_int(self, key: str, default: Any) -> int:
        """A per-layer list keeps its first value (the count is the same for every layer)."""
        v = self(key, default)
        return int(v[0] if isinstance(v, list) else v)


#: the tally's parts, which ParameterCounts carries under the same names
_COUNTED_PARTS = ("total", "embedding", "lm_head", "attention", "mlp", "routed_experts", "norms", "other")


@dataclass
class _Tally:
    """The tensor table summed by role: parameters, stored bytes and the element count of each tensor type."""

    total: int = 0
    embedding: int = 0
    lm_head: int = 0
    attention: int = 0
    mlp: int = 0
    routed_experts: int = 0
    norms: int = 0
    other: int = 0
    linear_params: int = 0
    linear_bytes: int = 0
    total_bytes: int = 0
    type_counts: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, n: int, nbytes: int, type_name: str) -> None:
        self.total_bytes += nbytes
        self.total += n
        self.type_counts[type_name] = self.type_counts.get(type_name, 0) + n
        linear = False
        if name == "token_embd.weight":
            self.embedding += n
        elif name == "output.weight":
            self.lm_head += n
        elif "norm" in name:
            self.norms += n
        elif _EXPERT_TENSOR.search(name):
            self.routed_experts += n
            self.mlp += n
            linear = True
        elif ".attn_" in name:
            self.attention += n
            linear = True
        elif ".ffn_" in name and "gate_inp" not in name:
            self.mlp += n
            linear = True
        else:
            self.other += n
        if linear:
            self.linear_params += n
            self.linear_bytes += nbytes

    def counts(self, experts: int, used: int) -> ParameterCounts:
        inactive = self.routed_experts * (experts - used) // experts if experts and used else 0
        active = self.total - inactive
        tied = self.lm_head == 0
        return ParameterCounts(
            **{part: getattr(self, part) for part in _COUNTED_PARTS},
            active=active,
            active_matmul=active - self.embedding + (self.embedding if tied else 0),
            exact=True,
            counted_from="gguf",
        )

    def main_type(self) -> str:
        """The dominant stored type of the tensors (F32 norms aside), which names the file (e.g. Q4_1)."""
        linear_types = {k: v for k, v in self.type_counts.items() if k not in ("F32",)}
        return max(linear_types, key=lambda k: linear_types[k]) if linear_types else "F32"


def _open(path: Path) -> tuple[Any, Any, str]:
    """The ``gguf`` module, a reader of ``path`` and its architecture, or a clear error."""
    try:
        import gguf  # heavy: numpy-backed reader, only when a GGUF file is read
    except ImportError as exc:  # a declared dependency; only a broken install gets here
        raise UserInputError("Reading GGUF files needs the 'gguf' package.") from exc
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:
        raise UserInputError(f"{path}: not a readable GGUF file ({exc}).") from exc
    arch = str(_value(reader, "general.architecture") or "")
    if not arch:
        raise UserInputError(f"{path}: GGUF metadata has no general.architecture.")
    return gguf, reader, arch


def _moe(a: _Meta, intermediate: int) -> MoESpec | None:
    experts = int(a("expert_count", 0) or 0)
    if experts <= 1:
        return None
    shared = int(a("expert_shared_count", 0) or 0)
    expert_ff = int(a("expert_feed_forward_length", intermediate) or intermediate)
    return MoESpec(
        num_experts=experts,
        experts_per_token=max(1, int(a("expert_used_count", 0) or 0)),
        expert_intermediate_size=expert_ff,
        num_shared_experts=shared,
        shared_intermediate_size=shared * expert_ff,
        first_dense_layers=int(a("leading_dense_block_count", 0) or 0),
    )


def _mla(a: _Meta, head_dim: int) -> MLASpec | None:
    if not a("attention.kv_lora_rank"):
        return None
    rope = int(a("rope.dimension_count", 64))
    return MLASpec(
        q_lora_rank=a("attention.q_lora_rank"),
        kv_lora_rank=int(a("attention.kv_lora_rank")),
        qk_nope_head_dim=head_dim - rope,
        qk_rope_head_dim=rope,
        v_head_dim=int(a("attention.value_length", head_dim - rope)),
    )


def _sliding_layers(a: _Meta, layers: int) -> tuple[int | None, int]:
    """The sliding window and how many layers use it (gemma2 alternates; gemma3 has one global layer in six)."""
    window = a("attention.sliding_window")
    if not window:
        return None, 0
    n_sliding = (layers + 1) // 2 if a.arch == "gemma2" else layers
    if a.arch == "gemma3":
        n_sliding = layers - layers // 6
    return int(window), n_sliding


def _quantization(gguf: Any, tally: _Tally, main_type: str) -> QuantizationInfo | None:
    if main_type in ("F32", "F16", "BF16"):
        return None
    bits = 8.0 * tally.linear_bytes / tally.linear_params if tally.linear_params else 16.0
    return QuantizationInfo(
        method="gguf",
        bits=round(bits, 3),
        group_size=int(gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[main_type]][0]),
        scheme=f"GGUF {main_type} ({bits:.2f} bits/weight incl. scales)",
        embeddings_quantized=True,
    )


def spec_from_gguf(path: Path, *, ref: str | None = None) -> ModelSpec:
    """Build a ``ModelSpec`` from a GGUF file."""
    gguf, reader, arch = _open(path)
    a = _Meta(reader, arch)
    hf_arch, model_type = GGUF_ARCHS.get(arch, (f"{arch} (GGUF)", arch))
    hidden = int(a("embedding_length"))
    layers = int(a("block_count"))
    heads = int(a("attention.head_count"))
    kv_heads = a.first_int("attention.head_count_kv", heads)
    head_dim = int(a("attention.key_length", hidden // heads))
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    intermediate = a.first_int("feed_forward_length", 0)
    tally = _Tally()
    for t in reader.tensors:
        tally.add(t.name, int(t.n_elements), int(t.n_bytes), t.tensor_type.name)
    main_type = tally.main_type()
    window, n_sliding = _sliding_layers(a, layers)
    name = str(_value(reader, "general.basename") or _value(reader, "general.name") or path.stem)
    size_label = _value(reader, "general.size_label")
    finetune = _value(reader, "general.finetune")
    task, reason = decide_task({"architectures": [hf_arch], "model_type": model_type})
    notes = [f"read from GGUF metadata ({len(reader.tensors)} tensors, file type {main_type})"]
    if finetune:
        notes.append(f"fine-tune: {finetune}")
    return ModelSpec(
        name=path.stem if not size_label else f"{name}-{size_label}",
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
        vocab_size=int(a("vocab_size") or (len(tokens.data) if tokens is not None else 0)),
        max_position_embeddings=int(a("context_length", 2048)),
        tie_word_embeddings=tally.lm_head == 0,
        qkv_bias=any(t.name.endswith("attn_q.bias") for t in reader.tensors),
        sliding_window=window,
        sliding_window_layers=n_sliding,
        moe=_moe(a, intermediate),
        mla=_mla(a, head_dim),
        quantization=_quantization(gguf, tally, main_type),
        torch_dtype="bfloat16",
        parameters=tally.counts(int(a("expert_count", 0) or 0), int(a("expert_used_count", 0) or 0)),
        checkpoint_bytes=tally.total_bytes,
        notes=notes,
    )
