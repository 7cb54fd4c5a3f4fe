"""The measurement engine: one benchmark against an OpenAI-compatible streaming server.

Usable as a library::

    from accelbench.bench import run_benchmark, load_tokenizer
    from accelbench.domain.bench import BenchConfig, Endpoint

    endpoint = Endpoint(base_url="http://127.0.0.1:8000", served_model="smol")
    summary = run_benchmark(endpoint, BenchConfig(input_len=128, output_len=32, num_prompts=40,
                                                  max_concurrency=4))
    print(summary.ttft_ms.p50, summary.output_throughput)

A sweep loads the tokenizer once (``load_tokenizer``) and passes it to every ``run_benchmark`` call.
"""

from accelbench.bench import trace as _trace  # noqa: F401  (registers the trace dataset)
from accelbench.bench.datasets import DATASETS, Dataset, Prompt, build_dataset
from accelbench.bench.runner import arun_benchmark, run_benchmark
from accelbench.bench.tokenizer import LocalTokenizer, ServerTokenizer, Tokenizer, load_tokenizer

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
