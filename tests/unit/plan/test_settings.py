"""The settings a deployment fixes are inputs: each is kept, every memory figure is recomputed for it, and a
setting that cannot work is refused with the reason."""

from __future__ import annotations

from dataclasses import replace

import pytest

from accelbench.catalog import get_catalog
from accelbench.domain.plan_query import FitQuery, PlanQuery
from accelbench.domain.recommendation import RefusalCode
from accelbench.domain.run import EngineSettings
from accelbench.errors import UserInputError
from accelbench.modelspec import load_model_spec
from accelbench.plan import estimate, recommend
from accelbench.plan.estimate import predict_for
from accelbench.plan.hardware import default_factors

F = default_factors("gpu", "vllm")


def m(name: str):
    return load_model_spec(name)


def test_a_tp_override_recomputes_the_kv_budget_for_that_tp() -> None:
    model = m("llama-3.1-8b-instruct")
    one = recommend(model, "p5.48xlarge")  # 8 x H100: the planner's own fit is TP 1
    eight = recommend(model, "p5.48xlarge", FitQuery(engine_settings=EngineSettings(tensor_parallel_size=8)))
    assert one.settings is not None and one.memory is not None
    assert eight.settings is not None and eight.memory is not None
    assert one.settings.tensor_parallel_size == 1 and eight.settings.tensor_parallel_size == 8
    assert eight.memory.units == 8
    # every GPU holds 1/8 of the weights, so the KV cache grows by more than 8x the one-GPU budget
    assert eight.memory.kv_cache_gib > 8 * one.memory.kv_cache_gib
    assert eight.memory.kv_cache_tokens > 8 * one.memory.kv_cache_tokens
    assert any("as given" in r for r in eight.reasons)
    # the estimate at TP 8 uses that budget: 512 requests of 2,048 + 256 tokens all fit at once
    e = estimate(
        model,
        "p5.48xlarge",
        PlanQuery(
            input_len=2048,
            output_len=256,
            concurrency=256,
            engine_settings=EngineSettings(tensor_parallel_size=8, max_num_seqs=512),
            factors=F,
        ),
    )
    assert e.tensor_parallel_size == 8 and e.batch == 256


@pytest.mark.parametrize(
    ("instance", "tp", "says"),
    [("p5.48xlarge", 16, "has 8"), ("p5.48xlarge", 3, "does not divide"), ("m7i.48xlarge", 4, "NUMA")],
)
def test_a_tp_that_cannot_work_is_refused_with_the_reason(instance: str, tp: int, says: str) -> None:
    r = recommend(
        m("llama-3.1-8b-instruct"),
        instance,
        FitQuery(engine_settings=EngineSettings(tensor_parallel_size=tp)),
    )
    assert not r.fits and r.refusal is not None
    assert r.refusal.code == RefusalCode.no_valid_tensor_parallel and says in r.refusal.reason
    e = estimate(
        m("llama-3.1-8b-instruct"),
        instance,
        PlanQuery(
            input_len=128,
            output_len=32,
            concurrency=1,
            engine_settings=EngineSettings(tensor_parallel_size=tp),
        ),
    )
    assert not e.feasible and says in e.explanation


def test_max_num_seqs_is_kept_and_warned_about_when_the_kv_cache_cannot_hold_it() -> None:
    model = m("qwen2.5-7b-instruct")
    r = recommend(
        model,
        "g6.xlarge",
        FitQuery(input_len=2048, output_len=512, engine_settings=EngineSettings(max_num_seqs=200)),
    )
    assert r.settings is not None and r.settings.max_num_seqs == 200
    assert any("the rest wait" in w for w in r.warnings)
    small = estimate(
        model,
        "g6.xlarge",
        PlanQuery(
            input_len=256,
            output_len=64,
            concurrency=16,
            engine_settings=EngineSettings(max_num_seqs=4),
            factors=F,
        ),
    )
    assert small.batch == 4 and small.times is not None and small.times.queue_ms > 0


def test_max_num_batched_tokens_sets_the_prefill_chunk() -> None:
    model = m("qwen2.5-1.5b-instruct")

    def ttft(chunk: int | None) -> float:
        e = estimate(
            model,
            "g6.xlarge",
            PlanQuery(
                input_len=4096,
                output_len=16,
                concurrency=1,
                engine_settings=EngineSettings(max_num_batched_tokens=chunk) if chunk else None,
                factors=F,
            ),
        )
        assert e.recommendation.settings is not None
        assert e.recommendation.settings.max_num_batched_tokens == chunk
        assert e.ttft_ms is not None
        return e.ttft_ms

    # 4,096 tokens in 256-token chunks: 16 steps, each with its overhead and a pass over the weights
    assert ttft(256) > ttft(8192)
    rec = recommend(model, "g6.xlarge", FitQuery(engine_settings=EngineSettings(max_num_batched_tokens=1024)))
    assert rec.settings is not None and rec.settings.engine_settings().max_num_batched_tokens == 1024


def test_cpu_kv_cache_space_is_exact_and_refused_when_it_does_not_fit() -> None:
    model = m("qwen2.5-7b-instruct")
    r = recommend(
        model, "r8g.4xlarge", FitQuery(engine_settings=EngineSettings(kv_cache_space_gib=10))
    )  # 128 GiB host
    assert r.settings is not None and r.memory is not None
    assert r.settings.kv_cache_space_gib == 10 and r.memory.kv_cache_gib == 10
    default = recommend(model, "r8g.4xlarge")
    assert default.memory is not None and r.memory.kv_cache_tokens < default.memory.kv_cache_tokens
    big = recommend(model, "r8g.4xlarge", FitQuery(engine_settings=EngineSettings(kv_cache_space_gib=200)))
    assert (
        not big.fits and big.refusal is not None and "kv-cache-space-gib" in " ".join(big.refusal.way_forward)
    )
    with pytest.raises(UserInputError, match="whole number"):
        recommend(model, "r8g.4xlarge", FitQuery(engine_settings=EngineSettings(kv_cache_space_gib=2.5)))


def test_cpu_threads_bound_fewer_cores_slow_prefill_and_too_many_are_refused() -> None:
    model = m("qwen2.5-1.5b-instruct")
    f = default_factors("cpu", "vllm-cpu")

    def est(threads: int | None):
        return estimate(
            model,
            "m7i.8xlarge",  # 32 vCPUs = 16 cores x 2 threads
            PlanQuery(
                input_len=1024,
                output_len=32,
                concurrency=1,
                engine_settings=EngineSettings(threads=threads) if threads else None,
                factors=f,
            ),
        )

    all_cores, four = est(None), est(4)
    assert four.recommendation.settings is not None and four.recommendation.settings.threads == 4
    assert four.ttft_ms is not None and all_cores.ttft_ms is not None and four.ttft_ms > 3 * all_cores.ttft_ms
    assert any("physical core" in r for r in all_cores.recommendation.reasons)
    too_many = recommend(model, "m7i.8xlarge", FitQuery(engine_settings=EngineSettings(threads=64)))
    assert not too_many.fits and too_many.refusal is not None and "32 vCPUs" in too_many.refusal.reason


def test_the_engine_is_an_input_and_one_that_cannot_serve_the_tier_is_an_error() -> None:
    model = m("qwen2.5-1.5b-instruct")
    r = recommend(model, "g6.xlarge", FitQuery(engine="sglang"))
    assert r.settings is not None and r.settings.engine == "sglang"
    assert recommend(model, "m7i.xlarge", FitQuery(engine="vllm")).settings.engine == "vllm-cpu"  # type: ignore[union-attr]
    with pytest.raises(UserInputError, match="does not serve gpu"):
        recommend(model, "g6.xlarge", FitQuery(engine="llamacpp"))


def test_the_planner_weighs_every_open_setting_for_the_goal_and_lists_them() -> None:
    model = m("llama-3.1-8b-instruct")
    e = estimate(
        model,
        "p5.48xlarge",
        PlanQuery(input_len=1024, output_len=128, concurrency=4, goal="latency", alternatives=True),
    )
    assert e.goal == "latency" and e.alternatives
    tps = {a.tensor_parallel_size for a in e.alternatives}
    assert tps == {1, 2, 4, 8}
    assert {a.weight_format for a in e.alternatives} == {"bf16", "fp8"}  # H100 has FP8 units
    chosen = [a for a in e.alternatives if a.chosen]
    # the checkpoint's precision is kept when it fits: the fastest BF16 option, FP8 only offered
    native = [a.tpot_ms for a in e.alternatives if a.feasible and a.weight_format == "bf16"]
    assert len(chosen) == 1 and chosen[0].tpot_ms == min(native)
    assert chosen[0].weight_format == "bf16" and e.like_for_like and not e.quantization_required
    allowed = estimate(
        model,
        "p5.48xlarge",
        PlanQuery(
            input_len=1024,
            output_len=128,
            concurrency=4,
            goal="latency",
            alternatives=True,
            allow_quantization=True,
        ),
    )
    picked = [a for a in allowed.alternatives if a.chosen]
    assert picked[0].tpot_ms == min(a.tpot_ms for a in allowed.alternatives if a.feasible)
    fixed = estimate(
        model,
        "p5.48xlarge",
        PlanQuery(
            input_len=1024,
            output_len=128,
            concurrency=4,
            goal="cost",
            alternatives=True,
            engine_settings=EngineSettings(tensor_parallel_size=2),
        ),
    )
    assert {a.tensor_parallel_size for a in fixed.alternatives} == {2}  # a given TP stays fixed
    with pytest.raises(UserInputError, match="goal"):
        estimate(model, "p5.48xlarge", PlanQuery(input_len=8, output_len=8, concurrency=1, goal="speed"))


def test_weight_only_formats_help_decode_at_small_batch_and_lose_when_compute_bound() -> None:
    model = m("llama-3.1-8b-instruct")
    tp1 = EngineSettings(tensor_parallel_size=1)

    def step(instance: str, q: str, c: int) -> float:
        e = estimate(
            model,
            instance,
            PlanQuery(input_len=1024, output_len=256, concurrency=c, quantization=q, engine_settings=tp1),
        )
        assert e.times is not None
        return e.times.decode_step_ms

    # W4A16 on an H100: a quarter of the bytes at batch 1; dequantising every weight once compute-bound
    assert step("p5.4xlarge", "int4", 1) < 0.6 * step("p5.4xlarge", "none", 1)
    assert step("p5.4xlarge", "int4", 256) > step("p5.4xlarge", "none", 256)
    # FP8 on an A100 (no FP8 units) runs as a weight-only kernel; on an H100 it uses the FP8 units
    cat = get_catalog()
    for instance, weight_only in (("p4de.24xlarge", True), ("p5.4xlarge", False)):
        rec = recommend(model, instance, FitQuery(quantization="fp8", engine_settings=tp1))
        inst = cat.instance(instance)
        pm, _, _ = predict_for(model, inst, cat.accelerator(inst.accelerator_name), rec)
        assert pm.weight_only is weight_only
    assert step("p4de.24xlarge", "fp8", 1) < 0.7 * step("p4de.24xlarge", "none", 1)


def test_the_checkpoint_precision_is_the_default_and_quantization_is_offered_not_chosen() -> None:
    """A 7B BF16 model fits an L4: it is planned in BF16 (not 'quantization required'), FP8 is offered with
    its predicted gain and a quality note, and chosen only when asked or allowed (then not like for like)."""
    model = m("qwen2.5-7b-instruct")
    asked = PlanQuery(input_len=512, output_len=128, concurrency=1, goal="cost")
    native = estimate(model, "g6.xlarge", asked)
    assert native.weight_format == "bf16" and not native.quantization_required and native.like_for_like
    offer = [n for n in native.notes if n.startswith("Alternative: FP8 weights")]
    assert offer and "%" in offer[0] and "Quality" in offer[0] and "not like for like" in offer[0]
    for e in (
        estimate(model, "g6.xlarge", replace(asked, allow_quantization=True)),
        estimate(model, "g6.xlarge", replace(asked, quantization="fp8")),
    ):
        assert e.weight_format == "fp8" and not e.quantization_required and not e.like_for_like
        assert any(
            n.startswith("Precision: fp8 weights, not the checkpoint's bf16 (as asked)") for n in e.notes
        )
        assert e.tpot_ms is not None and native.tpot_ms is not None and e.tpot_ms < native.tpot_ms
    # BF16 fits g6e.12xlarge at TP 4, so only an instance where it fits at no degree requires quantization
    big = estimate(m("llama-3.1-70b-instruct"), "g6.12xlarge", asked)
    assert big.feasible and big.quantization_required and not big.like_for_like
    assert any("the checkpoint's precision does not fit" in n for n in big.notes)
