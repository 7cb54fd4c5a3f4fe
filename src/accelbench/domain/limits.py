"""Serving limits that more than one layer applies (the planner's refusals and the deployment guards), and the
bounds on every size a caller controls in a benchmark (a spec, an API body, a flag).

The CPU dense ceiling: a dense unquantized model reads all its weights for every output token, so on a CPU
socket's DRAM bandwidth a 13B BF16 model (26 GB per token) stays well under 10 tokens/s. Above
``CPU_DENSE_CEILING`` parameters such a model is refused on CPU (int8 / int4 checkpoints, MoE models and GPU
instances are the ways forward); above ``CPU_DENSE_WARN`` it is served with a warning.
"""

from __future__ import annotations

CPU_DENSE_CEILING = 13e9
CPU_DENSE_WARN = 8e9

# ---- the sizes a benchmark may ask for. Above these a request cannot be a real benchmark (no model serves a
# 10^9-token answer, no server holds 10^9 requests in flight) and would only exhaust this machine's memory:
# the load generator keeps one prompt and one record per request.
MAX_TOKENS = 1_048_576  # input, output and shared-prefix tokens per request: the longest context served today
MAX_CONCURRENCY = 4096  # requests in flight at once (engines cap their batch far lower: vLLM 256-1024)
MAX_PROMPTS = 100_000  # requests in one benchmark (one sweep cell)
MAX_WARMUPS = 1_000
MAX_TURNS = 100  # turns of one multi-turn conversation
MAX_LEVELS = 64  # values in a sweep's input_lens or concurrency list
MAX_SWEEP_REQUESTS = 1_000_000  # every request of a sweep: cells x repeats x prompts, plus the warm-ups
#: prompt tokens one benchmark (one sweep cell) sends: prompts x input length (about 4 bytes of text per token:
#: 200 MB at most, which a burst, every prompt made before the clock starts, may hold at once)
MAX_CELL_PROMPT_TOKENS = 50_000_000
MAX_TIMEOUT_S = 86_400.0  # one request may take a day, not longer

# ---- text a caller sends (a spec, an API body): a label is a name, not a document
MAX_LABEL_CHARS = 200
MAX_NAME_CHARS = 1_000  # a model name, a path, a URL
MAX_ARGS = 64  # extra engine flags, extra environment variables
MAX_ARG_CHARS = 4_096
MAX_BODY_BYTES = 1_048_576  # one API request body
