"""The measurement engine: one benchmark against an OpenAI-compatible streaming server.

Usable as a library::

    from accelbench.bench import run_benchmark, load_tokenizer
    from accelbench.domain.load import BenchConfig
    from accelbench.domain.endpoint import Endpoint

    endpoint = Endpoint(base_url="http://127.0.0.1:8000", served_model="smol")
    summary = run_benchmark(endpoint, BenchConfig(input_len=128, output_len=32, num_prompts=40,
                                                  max_concurrency=4))
    print(summary.ttft_ms.p50, summary.output_throughput)

A sweep loads the tokenizer once (``load_tokenizer``) and passes it to every ``run_benchmark`` call.

The names below are imported when first used (PEP 562), so importing one light submodule (``bench.intervals``,
``bench.metrics``) does not pay for the client, the tokenizers and numpy's dataset code: every command's start-up
time depends on it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.bench.datasets import DATASETS, Dataset, Prompt, build_dataset
    from accelbench.bench.runner import arun_benchmark, run_benchmark
    from accelbench.bench.tokenizer import LocalTokenizer, ServerTokenizer, Tokenizer, load_tokenizer

_EXPORTS = {
    "DATASETS": "datasets",
    "Dataset": "datasets",
    "Prompt": "datasets",
    "build_dataset": "datasets",
    "arun_benchmark": "runner",
    "run_benchmark": "runner",
    "LocalTokenizer": "tokenizer",
    "ServerTokenizer": "tokenizer",
    "Tokenizer": "tokenizer",
    "load_tokenizer": "tokenizer",
}

__all__ = [
    "DATASETS",
    "Dataset",
    "LocalTokenizer",
    "Prompt",
    "ServerTokenizer",
    "Tokenizer",
    "arun_benchmark",
    "build_dataset",
    "load_tokenizer",
    "run_benchmark",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'accelbench.bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"accelbench.bench.{module}"), name)
    globals()[name] = value
    return value
