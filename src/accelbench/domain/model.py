"""Model types: what the planner needs to know about a model (shape, parameters, KV cache, quantization).

A ``ModelSpec`` is built by ``accelbench.modelspec`` from a ``config.json`` directory, a GGUF file, the Hugging
Face cache, a shipped preset or the hub; everything else (recommendations, estimates, runtimes) reads it.

Conventions, because published figures mix them:
- ``ParameterCounts.total`` counts every stored parameter once (a tied embedding once).
- ``active`` counts what one token's forward pass uses, the input embedding table included (Mistral's
  convention: Mixtral-8x7B "12.9B active"); ``active_matmul`` leaves out the input-embedding lookup, which
  is a row read and not a matrix product (DeepSeek's convention: DeepSeek-V3 "36.6B activated, including
  0.9B for the output head", rounded to 37B in the paper). FLOPs use ``active_matmul``.
- KV-cache sizes are bytes per token for the whole model (all layers, all KV heads), before tensor
  parallelism; ``kv_bytes_for_tokens`` caps sliding-window layers at their window.
"""

from __future__ import annotations

import enum
import math
from typing import Any

from pydantic import Field

from accelbench.domain.strict import StrictModel


class ModelTask(enum.StrEnum):
    """What a model does. Only ``generate`` models can be planned for LLM serving."""

    generate = "generate"
    embed = "embed"
    classify = "classify"
    rerank = "rerank"
    reward = "reward"
    diffusion = "diffusion"
    other = "other"


class ModelSource(enum.StrEnum):
    """Where a spec was read from."""

    preset = "preset"
    config_dir = "config_dir"
    gguf = "gguf"
    hf_cache = "hf_cache"
    hub = "hub"
    prepared = "prepared"


class AttentionKind(enum.StrEnum):
    mha = "mha"
    gqa = "gqa"
    mqa = "mqa"
    mla = "mla"


class QuantizationInfo(StrictModel):
    """How a checkpoint is already quantized (read from ``quantization_config`` or a GGUF file type)."""

    method: str = Field(
        description="awq, gptq, compressed-tensors, fp8, bitsandbytes, gguf, or the config's own quant_method."
    )
    bits: float = Field(gt=0, le=32, description="Bits per quantized weight (average for mixed GGUF types).")
    group_size: int | None = Field(
        default=None, description="Weights per scale group; None when per channel."
    )
    activation_bits: int | None = Field(
        default=None, description="Bits of activations for W8A8-style schemes; None when weight-only."
    )
    scheme: str = Field(description="Short human label, e.g. W4A16 (AWQ), W8A8 (int), FP8 block 128x128.")
    ignored_modules: list[str] = Field(
        default_factory=list, description="Modules the checkpoint keeps unquantized (e.g. lm_head)."
    )
    embeddings_quantized: bool = Field(
        default=False, description="Whether the embedding / output head are quantized too (GGUF does)."
    )


class MoESpec(StrictModel):
    """Mixture-of-experts layout."""

    num_experts: int = Field(ge=1, description="Routed experts per MoE layer.")
    experts_per_token: int = Field(ge=1, description="Routed experts each token uses (top-k).")
    expert_intermediate_size: int = Field(ge=1, description="Intermediate size of one routed expert.")
    num_shared_experts: int = Field(default=0, ge=0, description="Experts every token uses (DeepSeek).")
    shared_intermediate_size: int = Field(
        default=0, ge=0, description="Total intermediate size of the shared expert block (0 when none)."
    )
    shared_expert_gate: bool = Field(
        default=False, description="A 1-output gate on the shared expert (Qwen2-MoE)."
    )
    first_dense_layers: int = Field(
        default=0,
        ge=0,
        description="Leading layers with a dense MLP instead of experts (first_k_dense_replace).",
    )
    layer_freq: int = Field(default=1, ge=1, description="Every n-th layer (after the dense ones) is MoE.")
    router_bias: bool = Field(
        default=False, description="Per-expert score-correction bias in the router (DeepSeek-V3)."
    )

    def moe_layers(self, num_layers: int) -> int:
        return sum(
            1
            for i in range(num_layers)
            if i >= self.first_dense_layers and (i - self.first_dense_layers) % self.layer_freq == 0
        )


class MLASpec(StrictModel):
    """Multi-head latent attention (DeepSeek-V2/V3): the KV cache holds a compressed latent per token."""

    q_lora_rank: int | None = Field(default=None, description="Query compression rank (None: full q_proj).")
    kv_lora_rank: int = Field(ge=1, description="KV latent rank; cached per token and layer.")
    qk_nope_head_dim: int = Field(ge=1, description="Per-head query/key dimension without RoPE.")
    qk_rope_head_dim: int = Field(ge=1, description="Decoupled RoPE key dim; cached per token and layer.")
    v_head_dim: int = Field(ge=1, description="Per-head value dimension.")

    @property
    def cached_dim(self) -> int:
        """Elements cached per token and layer: the latent plus the shared RoPE key (vLLM's MLA layout)."""
        return self.kv_lora_rank + self.qk_rope_head_dim


class ParameterCounts(StrictModel):
    """Parameter counts by part, exact for the architectures the reader knows."""

    total: int = Field(ge=0, description="Every stored parameter once (tied embeddings once).")
    active: int = Field(ge=0, description="Parameters one token uses, input embedding table included.")
    active_matmul: int = Field(
        ge=0, description="Parameters in the matrix products of one token (no input-embedding lookup)."
    )
    embedding: int = Field(ge=0, description="Input embedding table.")
    lm_head: int = Field(ge=0, description="Output head; 0 when tied to the embedding.")
    attention: int = Field(ge=0, description="All attention projections (and their biases/norms).")
    mlp: int = Field(ge=0, description="Dense MLPs, shared experts and routed experts together.")
    routed_experts: int = Field(default=0, ge=0, description="Routed expert weights (all experts).")
    norms: int = Field(ge=0, description="Normalisation weights (and biases).")
    other: int = Field(default=0, ge=0, description="Routers, learned positions, anything else.")
    exact: bool = Field(
        default=True, description="False when the architecture is unknown and the count is the generic one."
    )
    counted_from: str = Field(
        default="config", description="config (architecture formulas) or gguf (tensor shapes)."
    )

    @property
    def decoder_linear(self) -> int:
        """Parameters of the decoder's linear layers: what weight quantization converts."""
        return self.attention + self.mlp


class ModelSpec(StrictModel):
    """Everything the planner needs to know about one model."""

    name: str = Field(description="Short name (a preset name, a directory name, a hub id).")
    source: ModelSource = Field(description="Where the spec was read from.")
    ref: str = Field(description="What the user gave: preset name, path or hub id.")
    hf_id: str | None = Field(default=None, description="Hugging Face repository id, when known.")
    revision: str | None = Field(default=None, description="Hub revision (commit), when known.")
    architecture: str = Field(
        description="First entry of config.json 'architectures', e.g. LlamaForCausalLM."
    )
    model_type: str = Field(description="config.json model_type, e.g. llama, qwen2, deepseek_v3.")
    task: ModelTask = Field(default=ModelTask.generate, description="What the model does.")
    task_reason: str | None = Field(
        default=None, description="Why the task was decided (architecture name, pipeline tag, files)."
    )
    hidden_size: int = Field(ge=1, description="Model (residual stream) width.")
    intermediate_size: int = Field(ge=0, description="Dense MLP intermediate size.")
    num_layers: int = Field(ge=1, description="Decoder layers (num_hidden_layers).")
    num_attention_heads: int = Field(ge=1, description="Query heads per layer.")
    num_kv_heads: int = Field(ge=1, description="Key/value heads (== attention heads for MHA, 1 for MQA).")
    head_dim: int = Field(
        ge=1, description="Dimension of one attention head (MLA: nope + rope query/key dimension)."
    )
    vocab_size: int = Field(ge=1, description="Vocabulary size (rows of the embedding table).")
    max_position_embeddings: int = Field(ge=1, description="Longest context the model supports.")
    tie_word_embeddings: bool = Field(
        default=False, description="Whether the output head shares the input embedding matrix."
    )
    qkv_bias: bool = Field(default=False, description="Biases on q/k/v projections (Qwen2).")
    o_bias: bool = Field(default=False, description="Bias on the attention output projection.")
    mlp_bias: bool = Field(default=False, description="Biases on the MLP projections.")
    mlp_gated: bool = Field(default=True, description="SwiGLU/GeGLU (3 matrices) rather than 2.")
    norms_per_layer: int = Field(default=2, ge=0, description="Norm weight vectors per layer.")
    norm_bias: bool = Field(default=False, description="LayerNorm with bias (2 vectors per norm).")
    qk_norm: bool = Field(default=False, description="Per-head RMSNorm on q and k (Qwen3).")
    sliding_window: int | None = Field(
        default=None, description="Window of sliding-window layers, tokens; None when no layer slides."
    )
    sliding_window_layers: int = Field(default=0, ge=0, description="How many layers use the window.")
    moe: MoESpec | None = Field(default=None, description="Mixture-of-experts layout; None for dense models.")
    mla: MLASpec | None = Field(
        default=None, description="Multi-head latent attention layout; None for MHA/GQA/MQA models."
    )
    quantization: QuantizationInfo | None = Field(
        default=None, description="Pre-quantized checkpoint; None for a plain BF16/FP16/FP32 checkpoint."
    )
    torch_dtype: str = Field(default="bfloat16", description="Checkpoint dtype of unquantized tensors.")
    parameters: ParameterCounts = Field(description="Parameter counts (total, active, by part).")
    checkpoint_bytes: int | None = Field(
        default=None, description="Size of the weight files when known (safetensors index or files, GGUF)."
    )
    notes: list[str] = Field(default_factory=list, description="Caveats found while reading the spec.")

    # ------------------------------------------------------------------ derived
    @property
    def is_generative(self) -> bool:
        return self.task == ModelTask.generate

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def attention_kind(self) -> AttentionKind:
        if self.mla is not None:
            return AttentionKind.mla
        if self.num_kv_heads == self.num_attention_heads:
            return AttentionKind.mha
        if self.num_kv_heads == 1:
            return AttentionKind.mqa
        return AttentionKind.gqa

    @property
    def dense_equivalent_parameters(self) -> int:
        """Parameters whose weights every decode step reads at batch size 1 (MoE: active ones)."""
        return self.parameters.active_matmul

    def kv_elements_per_token_layer(self) -> int:
        """Cached elements per token in one full-attention layer (K and V together; MLA latent + RoPE key)."""
        if self.mla is not None:
            return self.mla.cached_dim
        return 2 * self.num_kv_heads * self.head_dim

    def kv_bytes_per_token(self, dtype_bytes: float = 2.0) -> int:
        """KV-cache bytes per token over all layers at full context (no sliding-window cap)."""
        return int(self.num_layers * self.kv_elements_per_token_layer() * dtype_bytes)

    def kv_bytes_for_tokens(self, tokens: int, dtype_bytes: float = 2.0) -> int:
        """KV-cache bytes one sequence of ``tokens`` tokens holds; sliding-window layers keep only the window.

        vLLM's hybrid KV-cache manager (V1) frees blocks that leave the window, so this is what it allocates.
        """
        per_layer = self.kv_elements_per_token_layer() * dtype_bytes
        full_layers = self.num_layers - self.sliding_window_layers
        windowed = min(tokens, self.sliding_window) if self.sliding_window else tokens
        return int(per_layer * (full_layers * tokens + self.sliding_window_layers * windowed))

    def max_tokens_for_kv_bytes(self, budget_bytes: float, dtype_bytes: float = 2.0) -> int:
        """The longest single sequence whose KV cache fits in ``budget_bytes`` (inverse of the above)."""
        if budget_bytes <= 0:
            return 0
        per_layer = self.kv_elements_per_token_layer() * dtype_bytes
        full_layers = self.num_layers - self.sliding_window_layers
        if self.sliding_window and self.sliding_window_layers:
            window_cost = per_layer * self.sliding_window_layers * self.sliding_window
            tokens_if_all_windowed = budget_bytes / (per_layer * self.num_layers)
            if tokens_if_all_windowed <= self.sliding_window:
                return int(tokens_if_all_windowed)
            if full_layers == 0:
                return 10**9  # every layer slides: length is not bounded by the cache
            return int((budget_bytes - window_cost) / (per_layer * full_layers))
        return int(budget_bytes / (per_layer * self.num_layers))

    def kv_heads_per_rank(self, tp: int) -> int:
        """KV heads each tensor-parallel rank stores (MLA: the latent is replicated on every rank)."""
        if self.mla is not None:
            return 1
        return max(1, math.ceil(self.num_kv_heads / tp))

    def kv_bytes_per_token_per_rank(self, tp: int, dtype_bytes: float = 2.0) -> float:
        """Per-rank KV bytes per token: sharded by KV heads; MLA's latent is replicated on every rank."""
        if self.mla is not None:
            return float(self.kv_bytes_per_token(dtype_bytes))
        return self.kv_bytes_per_token(dtype_bytes) * self.kv_heads_per_rank(tp) / self.num_kv_heads

    def summary(self) -> dict[str, Any]:
        """A short dict for tables and explanations."""
        p = self.parameters
        return {
            "name": self.name,
            "architecture": self.architecture,
            "task": self.task.value,
            "parameters_b": round(p.total / 1e9, 3),
            "active_parameters_b": round(p.active / 1e9, 3) if self.is_moe else None,
            "attention": self.attention_kind.value,
            "layers": self.num_layers,
            "heads": f"{self.num_attention_heads}/{self.num_kv_heads}",
            "kv_bytes_per_token_bf16": self.kv_bytes_per_token(2),
            "max_context": self.max_position_embeddings,
            "quantization": self.quantization.scheme if self.quantization else None,
        }
