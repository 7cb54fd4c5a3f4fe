"""Result files in vllm bench serve's layout: written by accelbench and read back exactly; vLLM's own files
(with and without the per-request arrays) read into a BenchmarkSummary."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from accelbench.bench import run_benchmark
from accelbench.bench.results_io import read_result, to_vllm_dict, write_result
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig, GoodputSLO
from accelbench.errors import UserInputError
from tests.support.stream_server import Script, StreamServer

# The top-level keys `vllm bench serve --save-result --save-detailed` writes for a generation benchmark.
VLLM_KEYS = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
    "burstiness", "max_concurrency", "duration", "completed", "failed", "total_input_tokens",
    "total_output_tokens", "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
    "input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times", "generated_texts",
    "errors", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
    "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms",
}  # fmt: skip


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from tests.support.stream_server import make_tokenizer_dir

    tok = make_tokenizer_dir(tmp_path_factory.mktemp("tok"))
    with StreamServer(Script(ttft_ms=3, itl_ms=1), tokenizer_dir=tok) as server:
        endpoint = Endpoint(base_url=server.base_url, served_model="fixture-model", tokenizer=str(tok))
        config = BenchConfig(input_len=50, output_len=5, num_prompts=6, max_concurrency=2, label="io",
                             goodput=GoodputSLO(ttft_ms=1000))  # fmt: skip
        return run_benchmark(endpoint, config)


def test_layout_has_vllms_keys_and_units(summary) -> None:  # type: ignore[no-untyped-def]
    data = to_vllm_dict(summary)
    assert set(data) >= VLLM_KEYS
    assert data["request_rate"] == "inf" and data["backend"] == "openai-chat"
    assert data["completed"] == 6 and len(data["ttfts"]) == 6 and len(data["itls"][0]) == 4
    assert data["ttfts"][0] == summary.requests[0].ttft_s  # seconds
    assert data["median_ttft_ms"] == summary.ttft_ms.median  # milliseconds
    assert data["input_lens"] == [50] * 6 and data["output_lens"] == [5] * 6
    assert data["request_goodput"] == summary.request_goodput
    assert data["accelbench"]["format"] == 1


def test_roundtrip_is_exact(summary, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_result(summary, tmp_path / "out" / "r.json")
    json.loads(path.read_text())  # plain JSON (no NaN/Infinity literals)
    back = read_result(path)
    assert back == summary
    assert math.isinf(back.config.request_rate)


def vllm_file(detailed: bool) -> dict:
    """What vLLM 0.32's serve.py writes (two successes, one failure), p99 only as by default."""
    data = {
        "date": "20261130-101500", "endpoint_type": "openai-chat", "backend": "openai-chat", "label": None,
        "model_id": "smol", "tokenizer_id": "/models/smol", "num_prompts": 3, "request_rate": "inf",
        "burstiness": 1.0, "max_concurrency": 2, "duration": 2.0, "completed": 2, "failed": 1,
        "total_input_tokens": 256, "total_output_tokens": 8, "request_throughput": 1.0, "request_goodput": None,
        "output_throughput": 4.0, "total_token_throughput": 132.0,
        "max_output_tokens_per_s": 6.0, "max_concurrent_requests": 2, "rtfx": 0.0,
        "mean_ttft_ms": 150.0, "median_ttft_ms": 150.0, "std_ttft_ms": 50.0, "p99_ttft_ms": 199.0,
        "mean_tpot_ms": 25.0, "median_tpot_ms": 25.0, "std_tpot_ms": 5.0, "p99_tpot_ms": 29.9,
        "mean_itl_ms": 25.0, "median_itl_ms": 25.0, "std_itl_ms": 5.0, "p99_itl_ms": 30.0,
    }  # fmt: skip
    if detailed:
        data.update(
            {
                "input_lens": [128, 128, 0], "output_lens": [4, 4, 0],
                "ttfts": [0.1, 0.2, 0.0], "itls": [[0.02, 0.02, 0.02], [0.03, 0.03, 0.03], []],
                "latencies": [0.16, 0.29, 0.0], "start_times": [5000.0, 5000.5, 5001.0],
                "queue_times": [0.0, 0.0, 0.4], "generated_texts": ["a b c d", "e f g h", ""],
                "errors": ["", "", "Traceback (most recent call last):\n ...\naiohttp.ClientPayloadError: cut"],
            }
        )  # fmt: skip
    return data


def test_read_vllms_detailed_file(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(vllm_file(True)))
    s = read_result(path)
    assert s.completed == 2 and s.failed == 1 and s.model_id == "smol"
    assert s.config.endpoint == "chat" and s.config.max_concurrency == 2 and math.isinf(s.config.request_rate)
    assert s.config.input_len == 128 and s.config.output_len == 4
    assert len(s.requests) == 3 and s.requests[1].start_s == pytest.approx(0.5)
    assert s.requests[2].error.endswith("ClientPayloadError: cut") and not s.requests[2].success
    assert s.errors == {"aiohttp.ClientPayloadError: cut": 1}
    # vLLM's own statistics win; the rest is recomputed from the arrays
    assert s.ttft_ms.p99 == 199.0 and s.ttft_ms.median == 150.0
    assert s.ttft_ms.count == 2 and s.ttft_ms.max == pytest.approx(200.0)
    assert s.tpot_ms.p99 == 29.9
    assert s.date == "2026-11-30T10:15:00"
    assert any("Imported from a vllm bench serve result" in n for n in s.notes)


def test_read_vllms_summary_only_file_and_append_file(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(vllm_file(False)))
    s = read_result(path)
    assert s.requests == [] and s.ttft_ms.median == 150.0 and s.ttft_ms.p50 == 150.0 and s.ttft_ms.count == 2
    assert s.config.input_len == 128 and s.config.output_len == 4
    assert any("--save-detailed" in n for n in s.notes)
    appended = tmp_path / "appended.json"
    appended.write_text(json.dumps(vllm_file(False)) + "\n" + json.dumps(vllm_file(False)))
    assert read_result(appended).completed == 2


@pytest.mark.parametrize("content", ["[1, 2]", '{"foo": 1}', "not json at all"])
def test_not_a_result_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(UserInputError):
        read_result(path)
    with pytest.raises(UserInputError, match="does not exist"):
        read_result(tmp_path / "missing.json")


def test_read_a_file_written_by_vllms_own_client() -> None:
    """A file written by vLLM 0.32.0's own `vllm bench serve --save-result --save-detailed` (kept in tests/data)."""
    path = Path(__file__).resolve().parents[2] / "data" / "vllm_bench" / "in128-c4-r0.json"
    raw = json.loads(path.read_text())
    s = read_result(path)
    assert (
        s.completed == raw["completed"]
        and s.failed == raw["failed"]
        and len(s.requests) == raw["num_prompts"]
    )
    assert s.config.endpoint == "chat" and s.config.max_concurrency == raw["max_concurrency"]
    assert s.ttft_ms.median == pytest.approx(raw["median_ttft_ms"])
    assert s.tpot_ms.mean == pytest.approx(raw["mean_tpot_ms"])
    assert s.itl_ms.median == pytest.approx(raw["median_itl_ms"])
    # statistics vLLM did not write are recomputed from its per-request arrays, the same way
    assert s.ttft_ms.p50 == pytest.approx(raw["median_ttft_ms"])
    assert s.total_output_tokens == raw["total_output_tokens"]
    assert [r.output_tokens for r in s.requests] == raw["output_lens"]
