"""llama.cpp plans on a CPU: the GGUF file's own format, one process, a KV cache of exactly n_ctx tokens."""

from __future__ import annotations

import pytest

from accelbench.domain.plan_query import FitQuery, PlanQuery
from accelbench.domain.recommendation import RefusalCode
from accelbench.domain.run import EngineSettings
from accelbench.modelspec import load_model_spec
from accelbench.plan import estimate, recommend
from accelbench.plan.memory import GIB
from accelbench.plan.recommend.llamacpp import PROCESS_BYTES, UBATCH


@pytest.fixture(scope="module")
def llama2():
    return load_model_spec("llama-2-7b")


def test_a_q4_0_7b_model_fits_an_8_gib_graviton_with_a_4k_context_where_vllms_rule_refuses(llama2) -> None:
    """A 4,096-token f16 cache of Llama-2-7B is 2 GiB: beside 3.7 GiB of Q4_0 weights it fits 6.8 GiB, as the
    published interactive run on c7g.xlarge shows; vLLM's whole-GiB VLLM_CPU_KVCACHE_SPACE rule leaves 1 GiB."""
    vllm = recommend(llama2, "c7g.xlarge", FitQuery(quantization="int4", max_model_len=4096))
    assert not vllm.fits and vllm.refusal is not None
    assert vllm.refusal.code == RefusalCode.context_does_not_fit
    cpp = recommend(
        llama2, "c7g.xlarge", FitQuery(quantization="int4", max_model_len=4096, engine="llamacpp")
    )
    assert cpp.fits and cpp.settings is not None and cpp.memory is not None
    s, mem = cpp.settings, cpp.memory
    assert (s.engine, s.tensor_parallel_size, s.max_num_seqs, s.max_model_len) == ("llamacpp", 1, 1, 4096)
    assert s.quantization is None and s.weight_format == "int4"  # the file's own: no flag to pass
    assert s.kv_cache_space_gib is None
    assert mem.kv_cache_tokens == 4096
    assert mem.kv_cache_gib == pytest.approx(4096 * llama2.kv_bytes_per_token(2) / GIB, abs=0.01)
    buffers = PROCESS_BYTES + UBATCH * (4096 * llama2.num_attention_heads + llama2.vocab_size) * 4
    assert mem.overhead_gib == pytest.approx(buffers / GIB, abs=0.01)
    assert mem.free_gib > 0
    assert any("Q4_0 GGUF" in w for w in cpp.warnings)


def test_without_a_context_asked_llamacpp_takes_the_longest_standard_one_memory_holds(llama2) -> None:
    r = recommend(llama2, "c7g.xlarge", FitQuery(quantization="int4", engine="llamacpp"))
    assert r.fits and r.settings is not None
    assert r.settings.max_model_len == llama2.max_position_embeddings  # 4,096 fits
    small = recommend(
        load_model_spec("llama-3.1-8b-instruct"),
        "c7g.xlarge",
        FitQuery(quantization="int4", engine="llamacpp"),
    )
    assert small.fits and small.settings is not None
    assert small.settings.max_model_len < 131072 and small.memory is not None and small.memory.free_gib >= 0
    assert any("rounded down to a standard length" in x for x in small.reasons)


def test_a_context_that_does_not_fit_is_refused_with_the_longest_that_does(llama2) -> None:
    r = recommend(
        load_model_spec("llama-3.1-8b-instruct"),
        "c7g.xlarge",
        FitQuery(quantization="int4", max_model_len=65536, engine="llamacpp"),
    )
    assert not r.fits and r.refusal is not None and r.refusal.code == RefusalCode.context_does_not_fit
    assert "room for" in r.refusal.reason
    assert any("max_model_len" in w and "or less" in w for w in r.refusal.way_forward)


@pytest.mark.parametrize(
    ("settings", "quantization", "what"),
    [
        (EngineSettings(tensor_parallel_size=2), "int4", "Tensor parallel 2"),
        (EngineSettings(kv_cache_space_gib=4), "int4", "kv_cache_space_gib"),
        (EngineSettings(max_num_seqs=8), "int4", "max_num_seqs 8"),
        (EngineSettings(), "fp8", "no FP8"),
        (EngineSettings(), "awq", "GGUF files"),
    ],
)
def test_settings_llamacpp_does_not_have_are_refused_with_the_way_forward(
    llama2, settings, quantization, what
) -> None:
    r = recommend(
        llama2,
        "c7g.8xlarge",
        FitQuery(quantization=quantization, engine_settings=settings, engine="llamacpp"),
    )
    assert not r.fits and r.refusal is not None
    assert what in r.refusal.reason and r.refusal.way_forward


def test_the_estimate_runs_the_gguf_format_and_one_request_at_a_time(llama2) -> None:
    e = estimate(
        llama2,
        "c7g.8xlarge",
        PlanQuery(input_len=128, output_len=64, concurrency=4, quantization="int4", engine="llamacpp"),
    )
    assert e.recommendation.settings is not None and e.recommendation.settings.max_num_seqs == 1
    one = estimate(
        llama2,
        "c7g.8xlarge",
        PlanQuery(input_len=128, output_len=64, concurrency=1, quantization="int4", engine="llamacpp"),
    )
    assert e.tpot_ms is not None and one.tpot_ms is not None
    assert e.tpot_ms == pytest.approx(one.tpot_ms, rel=0.05)  # no batching: the others wait in the queue
    bf16 = estimate(
        llama2, "c7g.8xlarge", PlanQuery(input_len=128, output_len=64, concurrency=1, engine="llamacpp")
    )
    assert bf16.tpot_ms is not None and bf16.tpot_ms > 2 * one.tpot_ms  # 4-bit file read, not 16-bit
