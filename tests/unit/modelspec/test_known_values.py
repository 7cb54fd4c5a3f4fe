"""Parameter counts and KV-cache sizes of the shipped presets against published figures.

Published figures and where they come from:
- Qwen2.5-7B: 7.62 B parameters (model card: 7.61 B truncated; 7,615,616,512 exactly), 57,344 B BF16 KV/token
  (2 x 28 layers x 4 KV heads x 128 x 2 B);
- Llama-3.1-8B: 8.03 B; Llama-3.1-70B: 70.6 B;
- Mixtral-8x7B: 46.7 B total, 12.9 B active (Mistral's announcement; embedding table counted);
- DeepSeek-V3: 671 B total, 37 B active (the paper); the weights README says 36.6 B activated including the
  0.9 B output head, i.e. without the input-embedding lookup. MLA caches kv_lora_rank + qk_rope_head_dim =
  576 values per token and layer: 61 x 576 x 2 B = 70,272 B BF16;
- Gemma-2: 9.24 B / 27.2 B, tied embeddings, half the layers slide over 4,096 tokens;
- SmolLM2-135M: 134,515,008 parameters (the sum of the tensors in its GGUF file).
"""

from __future__ import annotations

import pytest

from accelbench.domain.model import AttentionKind
from accelbench.modelspec import load_model_spec, preset_names


def b(n: int, digits: int = 2) -> float:
    return round(n / 1e9, digits)


def test_qwen25_7b_parameters_and_kv() -> None:
    m = load_model_spec("qwen2.5-7b-instruct")
    assert b(m.parameters.total) == 7.62
    assert m.parameters.total == 7_615_616_512
    assert m.kv_bytes_per_token(2) == 57_344
    assert m.attention_kind == AttentionKind.gqa
    assert m.qkv_bias  # Qwen2 has q/k/v biases: 28 x (3584 + 2 x 512) of them
    assert m.sliding_window is None  # use_sliding_window is false in the published config


def test_llama31_8b_parameters() -> None:
    m = load_model_spec("llama-3.1-8b-instruct")
    assert b(m.parameters.total) == 8.03
    assert m.parameters.total == 8_030_261_248
    assert m.kv_bytes_per_token(2) == 131_072
    assert not m.tie_word_embeddings


def test_mixtral_total_and_active() -> None:
    m = load_model_spec("mixtral-8x7b-instruct-v0.1")
    assert b(m.parameters.total, 1) == 46.7
    assert b(m.parameters.active, 1) == 12.9
    assert m.moe is not None and m.moe.num_experts == 8 and m.moe.experts_per_token == 2
    # the same count without the input-embedding lookup (DeepSeek's convention)
    assert b(m.parameters.active_matmul, 2) == 12.75


def test_deepseek_v3_total_active_and_mla_kv() -> None:
    m = load_model_spec("deepseek-v3")
    assert round(m.parameters.total / 1e9) == 671
    assert round(m.parameters.active_matmul / 1e9) == 37
    assert b(m.parameters.active_matmul, 1) == 36.6  # the weights README's figure
    assert m.attention_kind == AttentionKind.mla
    assert m.mla is not None and m.mla.cached_dim == 576
    assert m.kv_bytes_per_token(2) == 61 * 576 * 2 == 70_272
    assert m.kv_bytes_per_token(1) == 35_136
    # MoE layout: 3 dense layers, 58 MoE layers of 256 routed + 1 shared expert
    assert m.moe is not None
    assert m.moe.first_dense_layers == 3 and m.moe.moe_layers(61) == 58
    assert m.moe.num_shared_experts == 1 and m.moe.router_bias
    # a pre-quantized FP8 checkpoint with 128x128 block scales
    assert m.quantization is not None and m.quantization.method == "fp8" and m.quantization.bits == 8
    # MLA's latent is not sharded by tensor parallelism
    assert m.kv_bytes_per_token_per_rank(8, 2) == 70_272


@pytest.mark.parametrize(
    ("name", "billions", "digits"),
    [
        ("qwen2.5-0.5b-instruct", 0.49, 2),
        ("qwen2.5-1.5b-instruct", 1.54, 2),
        ("qwen2.5-14b-instruct", 14.8, 1),
        ("qwen2.5-72b-instruct", 72.7, 1),
        ("llama-3.1-70b-instruct", 70.6, 1),
        ("mistral-7b-instruct-v0.3", 7.25, 2),
        ("gemma-2-9b-it", 9.24, 2),
        ("gemma-2-27b-it", 27.2, 1),
    ],
)
def test_published_totals(name: str, billions: float, digits: int) -> None:
    assert b(load_model_spec(name).parameters.total, digits) == billions


def test_smollm2_exact_count_and_kv() -> None:
    m = load_model_spec("smollm2-135m-instruct")
    assert m.parameters.total == 134_515_008
    assert m.tie_word_embeddings and m.parameters.lm_head == 0
    assert m.kv_bytes_per_token(2) == 2 * 30 * 3 * 64 * 2 == 23_040


def test_gemma2_sliding_window_layers() -> None:
    m = load_model_spec("gemma-2-9b-it")
    assert m.sliding_window == 4096 and m.sliding_window_layers == 21
    assert m.tie_word_embeddings and m.head_dim == 256
    per_layer = 2 * 8 * 256 * 2
    assert m.kv_bytes_per_token(2) == 42 * per_layer
    # below the window every layer grows; above it only the 21 global layers do
    assert m.kv_bytes_for_tokens(1000) == 1000 * 42 * per_layer
    assert m.kv_bytes_for_tokens(8192) == per_layer * (21 * 8192 + 21 * 4096)
    # the inverse finds the longest sequence that fits a budget
    budget = m.kv_bytes_for_tokens(6000)
    assert m.max_tokens_for_kv_bytes(budget) == 6000


def test_mqa_and_mha_kinds() -> None:
    from accelbench.domain.model import ModelSource
    from accelbench.modelspec import spec_from_config

    base = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "vocab_size": 1000,
    }
    mha = spec_from_config(base, name="t", source=ModelSource.config_dir, ref="t")
    mqa = spec_from_config(
        {**base, "num_key_value_heads": 1}, name="t", source=ModelSource.config_dir, ref="t"
    )
    assert mha.attention_kind == AttentionKind.mha and mha.kv_bytes_per_token(2) == 2 * 4 * 16 * 64 * 2
    assert mqa.attention_kind == AttentionKind.mqa and mqa.kv_bytes_per_token(2) == 2 * 4 * 1 * 64 * 2


def test_every_preset_loads_and_is_generative() -> None:
    names = preset_names()
    assert len(names) >= 14
    for name in names:
        m = load_model_spec(name)
        assert m.is_generative, name
        assert m.parameters.exact, name
        assert m.parameters.active <= m.parameters.total
