"""Other tools' result files read into BenchmarkSummary (tests/data/<tool>, each with its source in a README):
per-request records recomputed under accelbench's definitions and checked against the tool's own statistics,
statistics-only files mapped with the definition differences kept under the tool's names, and refusals that name
the file, what was expected and what was found."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from accelbench.bench.importers import IMPORTERS, read_file
from accelbench.errors import NotFoundError, UserInputError

DATA = Path(__file__).resolve().parents[2] / "data"
AIPERF = DATA / "aiperf" / "run1"


def _aiperf_stats() -> dict[str, Any]:
    return json.loads((AIPERF / "profile_export_aiperf.json").read_text())["records"]


def test_registered_tools() -> None:
    assert IMPORTERS.names() == ["aiperf", "genai-bench", "guidellm", "inference-perf", "llm-d-report"]
    with pytest.raises(NotFoundError, match="Did you mean 'guidellm'"):
        IMPORTERS.get("guidelm")


def test_aiperf_records_recomputed_match_aiperfs_own_statistics() -> None:
    got = read_file("aiperf", AIPERF / "profile_export.jsonl")
    (cell,) = got.cells
    s, stats = cell.summary, _aiperf_stats()
    assert cell.from_records and cell.concurrency == 100 and got.model == "openai/gpt-oss-20b"
    assert (s.completed, s.failed, len(s.requests)) == (89, 11, 100)
    assert all("RequestCancellationError" in r.error for r in s.requests if not r.success)
    # AIPerf's percentiles are numpy's linear interpolation, like accelbench's: the recomputed figures equal its own
    for ours, theirs in (("ttft_ms", "ttft"), ("e2el_ms", "request_latency"), ("itl_ms", "inter_chunk_latency"),
                         ("tpot_ms", "inter_token_latency")):  # fmt: skip
        st = getattr(s, ours)
        assert st.mean == pytest.approx(stats[theirs]["avg"], rel=1e-9), ours
        assert st.p50 == pytest.approx(stats[theirs]["p50"], rel=1e-9), ours
        assert st.p99 == pytest.approx(stats[theirs]["p99"], rel=1e-9), ours
    assert s.itl_ms.count == stats["inter_chunk_latency"]["count"]
    assert s.total_output_tokens == stats["total_osl"]["avg"]
    assert s.total_reasoning_tokens == stats["total_reasoning_tokens"]["avg"]
    assert s.output_throughput == pytest.approx(stats["output_token_throughput"]["avg"], rel=1e-6)
    assert {m.name for m in cell.tool_metrics} == {"time_to_second_token", "output_token_throughput_per_user"}
    assert not any(m.comparable for m in cell.tool_metrics)
    assert any("inter_token_latency" in n and "TPOT" in n for n in s.notes)


def test_aiperf_statistics_alone(tmp_path: Path) -> None:
    shutil.copy(AIPERF / "profile_export_aiperf.json", tmp_path)
    (cell,) = read_file("aiperf", tmp_path / "profile_export_aiperf.json").cells
    s, stats = cell.summary, _aiperf_stats()
    assert not cell.from_records and s.requests == []
    assert (s.completed, s.failed) == (89, 11)
    assert s.ttft_ms.p90 == stats["ttft"]["p90"] and s.tpot_ms.mean == stats["inter_token_latency"]["avg"]
    assert s.itl_ms.mean == stats["inter_chunk_latency"]["avg"]
    assert any("no per-request records" in n for n in s.notes)


def test_guidellm_statistics_and_its_definitions() -> None:
    got = read_file("guidellm", DATA / "guidellm" / "benchmarks.json")
    assert (got.tool, got.tool_version, got.model) == ("guidellm", "0.8.0.dev18", "e2e-mock-model")
    rates = [c.summary.config.request_rate for c in got.cells]
    assert rates == [2.0, 4.0] and all(c.concurrency is None for c in got.cells)
    raw = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())["benchmarks"][0]["metrics"]
    s = got.cells[0].summary
    assert s.ttft_ms.mean == raw["time_to_first_token_ms"]["successful"]["mean"]
    # GuideLLM's inter-token latency is a per-request token average: accelbench's TPOT
    assert s.tpot_ms.mean == raw["inter_token_latency_ms"]["successful"]["mean"]
    assert s.e2el_ms.mean == pytest.approx(raw["request_latency"]["successful"]["mean"] * 1000)
    assert s.itl_ms.count == 0  # per-chunk gaps are not in GuideLLM's files
    tpot = {m.name: m for m in got.cells[0].tool_metrics}["time_per_output_token_ms"]
    assert not tpot.comparable and "first token" in tpot.difference
    assert tpot.values["mean"] == raw["time_per_output_token_ms"]["successful"]["mean"]
    assert any("nearest-rank" in n for n in s.notes)


def _guidellm_request(start: float, ttft: float, last: float, out: int, prompt: int = 40) -> dict[str, Any]:
    """One request in GuideLLM's serialized GenerativeRequestStats layout."""
    return {
        "type_": "generative_request_stats",
        "request_id": f"r{start}",
        "info": {"timings": {"targeted_start": start, "request_start": start, "first_token_iteration": start + ttft,
                             "last_token_iteration": start + last, "request_end": start + last + 0.001,
                             "token_iterations": out}, "error": None},
        "input_metrics": {"text_tokens": prompt, "total_tokens": prompt},
        "output_metrics": {"text_tokens": out, "total_tokens": out},
        "output": "x" * out,
    }  # fmt: skip


def test_guidellm_records_are_recomputed(tmp_path: Path) -> None:
    data = json.loads((DATA / "guidellm" / "benchmarks.json").read_text())
    bench = data["benchmarks"][0]
    t0 = 1_700_000_000.0
    bench["requests"] = {
        "successful": [_guidellm_request(t0, 0.010, 0.110, 11), _guidellm_request(t0 + 0.5, 0.030, 0.230, 21)],
        "errored": [{**_guidellm_request(t0 + 1.0, 0, 0, 0), "info": {"timings": {"request_start": t0 + 1.0},
                                                                      "error": "HTTP 500"}}],
        "incomplete": [],
        "total": None,
    }  # fmt: skip
    bench["metrics"]["request_totals"] = {"successful": 2, "errored": 1, "incomplete": 0, "total": 3}
    data["benchmarks"] = [bench]
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(data))
    (cell,) = read_file("guidellm", path).cells
    s = cell.summary
    assert cell.from_records and (s.completed, s.failed) == (2, 1)
    assert s.errors == {"HTTP 500": 1}
    assert s.ttft_ms.mean == pytest.approx(20.0)
    assert s.ttft_ms.p90 == pytest.approx(28.0)  # interpolated between 10 and 30, not GuideLLM's nearest rank
    assert s.tpot_ms.mean == pytest.approx((100 / 10 + 200 / 20) / 2)  # (E2EL - TTFT) / (tokens - 1)
    assert s.e2el_ms.max == pytest.approx(230.0)
    assert [r.start_s for r in s.requests] == pytest.approx([0.0, 0.5, 1.0])


def test_inference_perf_stage_and_the_summary_refused() -> None:
    got = read_file("inference-perf", DATA / "inference_perf" / "stage_1_lifecycle_metrics.json")
    (cell,) = got.cells
    raw = json.loads((DATA / "inference_perf" / "stage_1_lifecycle_metrics.json").read_text())
    s = cell.summary
    assert cell.concurrency is None and s.config.request_rate == 37.97
    assert s.completed == raw["successes"]["count"]
    lat = raw["successes"]["latency"]
    assert s.ttft_ms.p50 == pytest.approx(lat["time_to_first_token"]["median"] * 1000)
    assert s.tpot_ms.mean == pytest.approx(lat["time_per_output_token"]["mean"] * 1000)
    assert s.itl_ms.count == 0  # per-token, not per-chunk: kept under inference-perf's name
    itl = {m.name: m for m in cell.tool_metrics}["inter_token_latency"]
    assert not itl.comparable and itl.values["mean"] == pytest.approx(
        lat["inter_token_latency"]["mean"] * 1000
    )
    assert s.output_throughput == raw["successes"]["throughput"]["output_tokens_per_sec"]
    summary_file = DATA / "inference_perf" / "summary_lifecycle_metrics.json"
    with pytest.raises(UserInputError) as exc:
        read_file("inference-perf", summary_file)
    assert str(summary_file) in exc.value.message and "stage_N_lifecycle_metrics.json" in exc.value.message


def test_genai_bench_records_and_metadata() -> None:
    path = DATA / "genai_bench" / "D_100_100_text-to-text_num_concurrency_1_time_1s.json"
    got = read_file("genai-bench", path)
    (cell,) = got.cells
    raw = json.loads(path.read_text())
    s = cell.summary
    assert (got.engine, got.engine_version, got.accelerator, got.accelerator_count) == (
        "sglang",
        "v0.6.0",
        "H100",
        4,
    )
    assert (cell.concurrency, cell.input_len, s.config.output_len) == (1, 100, 100)
    ttfts = [r["ttft"] for r in raw["individual_request_metrics"]]
    assert s.ttft_ms.mean == pytest.approx(sum(ttfts) / len(ttfts) * 1000)
    # 2 of 32 records kept: counts and throughputs are genai-bench's
    assert (s.completed, s.num_prompts) == (32, 32)
    assert s.output_throughput == raw["aggregated_metrics"]["mean_output_throughput_tokens_per_s"]
    assert any("2 of 32" in n for n in s.notes)


@pytest.mark.parametrize("tool", ["guidellm", "aiperf", "inference-perf", "genai-bench", "llm-d-report"])
def test_refusals_name_file_expected_and_found(tool: str, tmp_path: Path) -> None:
    not_json = tmp_path / "results.json"
    not_json.write_text("{ this is not json")
    other = DATA / "inference_perf" / "stage_0_lifecycle_metrics.json"
    if tool == "inference-perf":
        other = DATA / "guidellm" / "benchmarks.json"
    for path in (not_json, other, tmp_path / "missing.json"):
        with pytest.raises(UserInputError) as exc:
            read_file(tool, path)
        msg = exc.value.message
        assert str(path) in msg and "expected" in msg and "found" in msg, msg


def test_a_bad_number_deep_in_a_file_is_named(tmp_path: Path) -> None:
    data = json.loads((DATA / "inference_perf" / "stage_0_lifecycle_metrics.json").read_text())
    data["successes"]["latency"]["time_to_first_token"]["p90"] = "fast"
    path = tmp_path / "stage_0_lifecycle_metrics.json"
    path.write_text(json.dumps(data))
    with pytest.raises(
        UserInputError, match=r"successes\.latency\.time_to_first_token\.p90 is the string 'fast'"
    ):
        read_file("inference-perf", path)


def _chunk(text: str | None, *, role: bool = False, usage: dict[str, int] | None = None) -> str:
    delta: dict[str, Any] = {"role": "assistant"} if role else {"content": text}
    choices = [] if usage else [{"index": 0, "delta": delta}]
    return json.dumps({"choices": choices, **({"usage": usage} if usage else {})})


def _inference_perf_request(start: float, times: list[float], out: int) -> dict[str, Any]:
    """One request as inference-perf's reportgen writes it to per_request_lifecycle_metrics.json: a role chunk,
    one chunk per text piece, then the usage chunk."""
    chunks = [_chunk(None, role=True), *(_chunk("ab") for _ in times), _chunk(None, usage={"completion_tokens": out,
              "prompt_tokens": 30})]  # fmt: skip
    chunk_times = [start + 0.001, *(start + t for t in times), start + times[-1] + 0.002]
    return {
        "start_time": start,
        "end_time": start + times[-1] + 0.003,
        "request": "{}",
        "response": "ab" * len(times),
        "info": {"request_metrics": {"text": {"input_tokens": 30}}, "input_tokens": 30,
                 "response_metrics": {"output_tokens": out, "server_usage": {"completion_tokens": out,
                                      "prompt_tokens": 30}, "response_chunks": chunks, "chunk_times": chunk_times,
                                      "output_token_times": []}},
        "error": None,
    }  # fmt: skip


def test_inference_perf_per_request_records_recomputed(tmp_path: Path) -> None:
    rows = [
        _inference_perf_request(100.0, [0.020, 0.030, 0.045], 6),
        _inference_perf_request(100.5, [0.040, 0.050, 0.060], 6),
        {"start_time": 101.0, "end_time": 101.2, "request": "{}", "response": None,
         "info": {"request_metrics": {"text": {"input_tokens": 30}}}, "error": {"error_type": "HTTPError",
                                                                               "error_msg": "503"}},
    ]  # fmt: skip
    path = tmp_path / "per_request_lifecycle_metrics.json"
    path.write_text(json.dumps(rows))
    shutil.copy(DATA / "inference_perf" / "stage_0_lifecycle_metrics.json", tmp_path)
    (cell,) = read_file("inference-perf", path).cells
    s = cell.summary
    assert cell.from_records and (s.completed, s.failed) == (2, 1) and s.errors == {"HTTPError: 503": 1}
    assert s.config.request_rate == 1.0  # the one stage beside it
    assert s.ttft_ms.mean == pytest.approx(30.0)  # the role chunk does not count
    assert s.itl_ms.count == 4 and s.itl_ms.max == pytest.approx(15.0)  # one gap per text chunk
    assert s.e2el_ms.max == pytest.approx(60.0)  # to the last text chunk, not the usage chunk
    assert s.tpot_ms.mean == pytest.approx((25 / 5 + 20 / 5) / 2)
    assert s.total_output_tokens == 12 and [r.start_s for r in s.requests] == pytest.approx([0.0, 0.5, 1.0])
    shutil.copy(DATA / "inference_perf" / "stage_1_lifecycle_metrics.json", tmp_path)
    with pytest.raises(UserInputError, match="the records of 2 stages together"):
        read_file("inference-perf", path)


def test_llm_d_report_of_another_harness(tmp_path: Path) -> None:
    import yaml

    path = DATA / "llm_d_report" / "br_v0_2_1_example.yaml"
    got = read_file("llm-d-report", path)
    assert (got.tool, got.tool_version, got.model) == ("inference-perf", "0.3.0", "Qwen/Qwen3-0.6B")
    assert (got.engine, got.accelerator, got.accelerator_count) == ("llm-d", "NVIDIA-H100-80GB-HBM3", 8)
    (cell,) = got.cells
    s = cell.summary
    assert (cell.concurrency, cell.input_len, s.config.request_rate) == (None, 2148, 10.0)
    assert (s.completed, s.failed) == (500, 0)
    assert s.ttft_ms.p99 == pytest.approx(0.05029489721637218 * 1000)  # seconds in the report
    assert s.tpot_ms.count == 0 and s.itl_ms.count == 0  # harnesses differ: kept under the report's names
    tpot = {m.name: m for m in cell.tool_metrics}["time_per_output_token"]
    assert not tpot.comparable and "inference-perf" in tpot.difference
    broken = yaml.safe_load(path.read_text())
    broken["results"]["request_performance"]["aggregate"]["requests"]["total"] = -1
    bad = tmp_path / "report.yaml"
    bad.write_text(yaml.safe_dump(broken))
    with pytest.raises(
        UserInputError, match=r"breaking the schema: results\.request_performance\.aggregate\.requests\.total"
    ):
        read_file("llm-d-report", bad)


def test_aiperf_current_release_generated_here() -> None:
    """AIPerf 0.13's layout (metrics at the top level, request_start_ns, benchmark_phase), from a real run of it
    against the in-repo stream server (tests/data/aiperf/README.md)."""
    gen = DATA / "aiperf" / "generated"
    stats = json.loads((gen / "profile_export_aiperf.json").read_text())
    got = read_file("aiperf", gen / "profile_export.jsonl")
    (cell,) = got.cells
    s = cell.summary
    assert (got.tool_version, got.model, cell.concurrency) == ("0.13.0", "fixture-model", 2)
    assert cell.from_records and (s.completed, s.failed) == (12, 0)
    for ours, theirs in (("ttft_ms", "time_to_first_token"), ("e2el_ms", "request_latency"),
                         ("itl_ms", "inter_chunk_latency"), ("tpot_ms", "inter_token_latency")):  # fmt: skip
        assert getattr(s, ours).mean == pytest.approx(stats[theirs]["avg"], rel=1e-9), ours
        assert getattr(s, ours).p50 == pytest.approx(stats[theirs]["p50"], rel=1e-9), ours
    # AIPerf counts input tokens with its tokenizer; accelbench takes the server's usage, and says so
    assert s.total_input_tokens == stats["total_usage_prompt_tokens"]["avg"] != stats["total_isl"]["avg"]
    assert any("usage.prompt_tokens" in n for n in s.notes)
    # named by its statistics file, the records beside it are read all the same
    (by_stats,) = read_file("aiperf", gen / "profile_export_aiperf.json").cells
    assert by_stats.from_records and by_stats.summary.ttft_ms == s.ttft_ms


def test_inference_perf_current_release_generated_here() -> None:
    """inference-perf 0.7.0 run against the in-repo stream server (tests/data/inference_perf/README.md): its
    records recomputed under accelbench's definitions give its own TTFT and TPOT, and an E2EL that ends at the
    last text chunk, before its request latency (which runs to the end of the response)."""
    gen = DATA / "inference_perf" / "generated"
    raw = json.loads((gen / "stage_0_lifecycle_metrics.json").read_text())["successes"]["latency"]
    got = read_file("inference-perf", gen / "stage_0_lifecycle_metrics.json")
    (stage,) = got.cells
    assert (got.model, got.engine, stage.summary.model_id) == (
        "fixture-model",
        "vllm",
        "fixture-model",
    )  # config.yaml
    (records,) = read_file("inference-perf", gen / "per_request_lifecycle_metrics.json").cells
    assert stage.summary.config.request_rate == records.summary.config.request_rate == 4.0
    assert stage.summary.completed == records.summary.completed == 20
    for st in (stage.summary, records.summary):
        assert st.ttft_ms.mean == pytest.approx(raw["time_to_first_token"]["mean"] * 1000, rel=1e-9)
        assert st.ttft_ms.p90 == pytest.approx(raw["time_to_first_token"]["p90"] * 1000, rel=1e-9)
        assert st.tpot_ms.mean == pytest.approx(raw["time_per_output_token"]["mean"] * 1000, rel=1e-9)
    assert stage.summary.e2el_ms.mean == pytest.approx(raw["request_latency"]["mean"] * 1000)
    assert records.summary.e2el_ms.mean < raw["request_latency"]["mean"] * 1000
    assert records.summary.itl_ms.count == 20 * 7 and stage.summary.itl_ms.count == 0


def test_genai_bench_current_release_generated_here() -> None:
    """genai-bench 0.0.5 run against the in-repo stream server (tests/data/genai_bench/README.md)."""
    path = DATA / "genai_bench" / "generated" / "D32_8_text-to-text_num_concurrency_2_time_1s.json"
    raw = json.loads(path.read_text())["aggregated_metrics"]
    got = read_file("genai-bench", path)
    (cell,) = got.cells
    s = cell.summary
    assert (got.tool_version, got.model, got.engine, cell.concurrency, cell.input_len) == (
        "0.0.5", "fixture-model", "vllm", 2, 32,
    )  # fmt: skip
    assert (s.completed, s.duration_s) == (30, raw["run_duration"])
    assert s.request_throughput == pytest.approx(30 / raw["run_duration"])
    for ours, theirs in (("ttft_ms", "ttft"), ("e2el_ms", "e2e_latency")):  # numpy-interpolated, as ours
        assert getattr(s, ours).mean == pytest.approx(raw["stats"][theirs]["mean"] * 1000, rel=1e-9)
        assert getattr(s, ours).p90 == pytest.approx(raw["stats"][theirs]["p90"] * 1000, rel=1e-9)
    # genai-bench drops a request's TPOT when its output took under 1 ms; accelbench keeps it
    tpot = {m.name: m for m in cell.tool_metrics}["tpot"]
    assert not tpot.comparable and "1 ms" in tpot.difference
    assert s.tpot_ms.count == 30 and tpot.values["mean"] == pytest.approx(raw["stats"]["tpot"]["mean"] * 1000)
