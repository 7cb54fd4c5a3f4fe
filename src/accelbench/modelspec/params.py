"""Exact parameter counts from a model's shape.

The formulas follow the module layout of the Hugging Face / vLLM implementations, part by part, so a count can
be checked against the tensors of a real checkpoint (``tests/unit/modelspec`` does that for a GGUF file):

- attention: q/k/v/o projections with their biases where the architecture has them (Qwen2: q/k/v bias only),
  per-head q/k norms (Qwen3, Gemma-3); MLA (DeepSeek-V2/V3): q_a/q_b (or q_proj), kv_a_proj_with_mqa,
  kv_b_proj, o_proj and the two latent norms;
- MLP: gated (3 matrices) or not (2), biases; MoE: routed experts, shared experts (and the Qwen2-MoE shared
  gate), router (and DeepSeek-V3's score-correction bias), leading dense layers (first_k_dense_replace);
- norms: ``norms_per_layer`` vectors per layer plus the final norm, doubled for LayerNorm with bias;
- embeddings: input table, plus an output head unless tied.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.domain.model import MLASpec, MoESpec, ParameterCounts


@dataclass(frozen=True)
class Shape:
    """The shape fields the counts need (a subset of ``ModelSpec``, so counting can happen before it exists)."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    mlp_gated: bool = True
    norms_per_layer: int = 2
    norm_bias: bool = False
    qk_norm: bool = False
    moe: MoESpec | None = None
    mla: MLASpec | None = None
    learned_positions: int = 0
    exact: bool = True


def attention_params(s: Shape) -> int:
    """Attention weights (and biases) of one layer; MLA's internal norms are counted in ``norm_params``."""
    h = s.hidden_size
    if s.mla is not None:
        m = s.mla
        qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = h * m.q_lora_rank + m.q_lora_rank * s.num_attention_heads * qk_dim
        else:
            q = h * s.num_attention_heads * qk_dim
        kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim)
        kv_b = m.kv_lora_rank * s.num_attention_heads * (m.qk_nope_head_dim + m.v_head_dim)
        o = s.num_attention_heads * m.v_head_dim * h
        return q + kv_a + kv_b + o + (h if s.o_bias else 0)
    q_out = s.num_attention_heads * s.head_dim
    kv_out = s.num_kv_heads * s.head_dim
    weights = h * q_out + 2 * h * kv_out + q_out * h
    biases = (q_out + 2 * kv_out if s.qkv_bias else 0) + (h if s.o_bias else 0)
    return weights + biases


def mlp_params(hidden: int, intermediate: int, *, gated: bool, bias: bool) -> int:
    """One MLP (or one expert)."""
    mats = 3 if gated else 2
    weights = mats * hidden * intermediate
    biases = ((2 if gated else 1) * intermediate + hidden) if bias else 0
    return weights + biases


def norm_params(s: Shape) -> int:
    """Every norm vector: per layer, final, per-head q/k norms, MLA latent norms."""
    per_norm = s.hidden_size * (2 if s.norm_bias else 1)
    per_layer = s.norms_per_layer * per_norm
    if s.qk_norm:
        per_layer += 2 * s.head_dim
    if s.mla is not None:
        per_layer += s.mla.kv_lora_rank + (s.mla.q_lora_rank or 0)
    return s.num_layers * per_layer + per_norm


def count_parameters(s: Shape) -> ParameterCounts:
    """Total, active and per-part parameter counts."""
    h = s.hidden_size
    embedding = s.vocab_size * h
    lm_head = 0 if s.tie_word_embeddings else s.vocab_size * h
    attention = s.num_layers * attention_params(s)
    norms = norm_params(s)
    other = s.learned_positions * h
    mlp = 0
    routed = 0
    inactive = 0
    if s.moe is None:
        mlp = s.num_layers * mlp_params(h, s.intermediate_size, gated=s.mlp_gated, bias=s.mlp_bias)
    else:
        moe = s.moe
        n_moe = moe.moe_layers(s.num_layers)
        n_dense = s.num_layers - n_moe
        dense = n_dense * mlp_params(h, s.intermediate_size, gated=s.mlp_gated, bias=s.mlp_bias)
        expert = mlp_params(h, moe.expert_intermediate_size, gated=s.mlp_gated, bias=s.mlp_bias)
        routed = n_moe * moe.num_experts * expert
        shared = 0
        if moe.shared_intermediate_size:
            shared = n_moe * mlp_params(h, moe.shared_intermediate_size, gated=s.mlp_gated, bias=s.mlp_bias)
        router = n_moe * (h * moe.num_experts + (moe.num_experts if moe.router_bias else 0))
        shared_gate = n_moe * h if moe.shared_expert_gate else 0
        mlp = dense + routed + shared
        other += router + shared_gate
        inactive = n_moe * (moe.num_experts - moe.experts_per_token) * expert
    total = embedding + lm_head + attention + mlp + norms + other
    active = total - inactive
    # The input embedding is a row lookup; a tied table still does the output-head product.
    active_matmul = active - embedding + (embedding if s.tie_word_embeddings else 0) - s.learned_positions * h
    return ParameterCounts(
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
        exact=s.exact,
        counted_from="config",
    )
