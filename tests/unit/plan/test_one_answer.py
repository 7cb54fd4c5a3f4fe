"""One answer from the planner: recommend and estimate agree on precision and context for the same question,
and the sentences that explain a context come from the same figures (the shipped catalog and presets)."""

from __future__ import annotations

from accelbench.domain.plan_query import FitQuery, PlanQuery
from accelbench.domain.recommendation import Verdict
from accelbench.modelspec import load_model_spec
from accelbench.plan import recommend
from accelbench.plan.estimate import estimate
from accelbench.plan.recommend.tier_steps import verdict_sentence


def test_a_shorter_context_is_explained_once_and_never_as_the_full_context() -> None:
    spec = load_model_spec("qwen2.5-7b-instruct")
    rec = recommend(spec, "g6.xlarge")
    assert rec.verdict == Verdict.clamped and rec.settings is not None and rec.memory is not None
    assert not any("full context fits" in r for r in rec.reasons), rec.reasons
    (context,) = [r for r in rec.reasons if r.startswith("Max model len")]
    kv = f"{rec.memory.kv_cache_tokens:,}"
    said = verdict_sentence(
        rec.verdict.value,
        max_len=rec.settings.max_model_len,
        model_max=spec.max_position_embeddings,
        kv_tokens=rec.memory.kv_cache_tokens,
        at_max=rec.settings.concurrency_at_max_len,
    )
    # the verdict and the reason quote the same KV budget and the same length, and neither says memory
    # is short when one full-length sequence fits
    assert kv in context and kv in said
    assert f"{rec.settings.max_model_len:,}" in context
    assert "too little memory" not in said and "fewer than 4 at once" in said


def test_recommend_never_shortens_the_context_below_the_request_it_was_given() -> None:
    spec = load_model_spec("llama-3.1-8b-instruct")
    rec = recommend(spec, "g5.xlarge", FitQuery(input_len=10_000, output_len=1_000))
    est = estimate(
        spec, "g5.xlarge", PlanQuery(input_len=10_000, output_len=1_000, concurrency=1, goal="cost")
    )
    assert rec.fits and rec.settings is not None and est.feasible
    assert rec.settings.max_model_len >= 11_000
    assert (est.weight_format, est.max_model_len) == (rec.settings.weight_format, rec.settings.max_model_len)


def test_estimate_keeps_the_checkpoint_precision_where_recommend_does() -> None:
    # BF16 fits g6e.12xlarge's four L40S only at TP 4; at TP 2 the fallback chain would pick FP8, which is
    # cheaper per token, but the checkpoint's precision fits, so the estimate must not choose it unasked
    spec = load_model_spec("llama-3.1-70b-instruct")
    rec = recommend(spec, "g6e.12xlarge")
    est = estimate(spec, "g6e.12xlarge", PlanQuery(input_len=512, output_len=128, concurrency=1, goal="cost"))
    assert rec.settings is not None and rec.settings.quantization is None
    assert est.feasible and not est.quantization_required and est.like_for_like
    assert (est.weight_format, est.max_model_len, est.tensor_parallel_size) == (
        rec.settings.weight_format,
        rec.settings.max_model_len,
        rec.settings.tensor_parallel_size,
    )
    asked = estimate(
        spec,
        "g6e.12xlarge",
        PlanQuery(input_len=512, output_len=128, concurrency=1, goal="cost", allow_quantization=True),
    )
    assert asked.weight_format == "fp8"  # chosen only when the caller lets the goal choose it


def test_an_invalid_tensor_parallel_size_gets_the_valid_sizes_and_alternatives_of_its_kind_first() -> None:
    from accelbench.domain.instance_types import AcceleratorType
    from accelbench.domain.run import EngineSettings

    spec = load_model_spec("qwen2.5-7b-instruct")  # 28 attention and 4 KV heads
    three = EngineSettings(tensor_parallel_size=3)
    small = recommend(spec, "g6.xlarge", FitQuery(engine_settings=three))
    assert not small.fits and small.refusal is not None
    (advice,) = [w for w in small.refusal.way_forward if "--tensor-parallel-size" in w]
    assert "--tensor-parallel-size 1:" in advice and "or less" not in advice
    kinds = [a.accelerator_type for a in small.alternatives]
    assert kinds and kinds[0] == AcceleratorType.gpu
    assert kinds == sorted(kinds, key=lambda k: k != AcceleratorType.gpu), kinds  # the GPUs, then the rest
    # the reason is said once: in the refusal, not again among the reasons that led to it
    assert small.refusal.reason not in small.reasons
    four = recommend(spec, "g6.12xlarge", FitQuery(engine_settings=three))
    assert four.refusal is not None
    assert any("--tensor-parallel-size 1, 2 or 4:" in w for w in four.refusal.way_forward)


def test_every_tier_names_the_sizes_it_can_run_when_a_size_is_refused() -> None:
    from accelbench.domain.run import EngineSettings

    spec = load_model_spec("qwen2.5-7b-instruct")
    for instance, tp, sizes in (
        ("m7i.2xlarge", 2, "1:"),
        ("r7i.48xlarge", 3, "1 or 2:"),
        ("inf2.xlarge", 3, "2:"),
    ):
        rec = recommend(
            spec,
            instance,
            FitQuery(engine_settings=EngineSettings(tensor_parallel_size=tp)),
            suggest_alternatives=False,
        )
        assert rec.refusal is not None, instance
        assert rec.refusal.way_forward == [
            f"Give --tensor-parallel-size {sizes} the "
            + ("only size" if "or" not in sizes else "sizes")
            + f" {instance} can run this model at; or choose a larger instance."
        ]
