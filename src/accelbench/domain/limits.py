"""Serving limits that more than one layer applies (the planner's refusals and the deployment guards).

The CPU dense ceiling: a dense unquantized model reads all its weights for every output token, so on a CPU
socket's DRAM bandwidth a 13B BF16 model (26 GB per token) stays well under 10 tokens/s. Above
``CPU_DENSE_CEILING`` parameters such a model is refused on CPU (int8 / int4 checkpoints, MoE models and GPU
instances are the ways forward); above ``CPU_DENSE_WARN`` it is served with a warning.
"""

from __future__ import annotations

CPU_DENSE_CEILING = 13e9
CPU_DENSE_WARN = 8e9
