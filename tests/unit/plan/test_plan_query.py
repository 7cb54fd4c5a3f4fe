"""One question, one context: the planner's entry points take a ``PlanQuery`` and a ``PlanContext`` (or the same
fields as keywords, for callers that have them loose) and give the same answer either way."""

from __future__ import annotations

import pytest

from accelbench.domain.estimate import SLO
from accelbench.domain.plan_query import FitQuery, PlanQuery
from accelbench.domain.run import EngineSettings
from accelbench.modelspec import load_model_spec
from accelbench.plan import estimate_catalog, recommend
from accelbench.plan.calibrations import CalibrationSet
from accelbench.plan.context import PlanContext, query_and_context
from accelbench.plan.estimate import estimate, perf_setup
from accelbench.plan.ranking import CatalogFilters


def test_keywords_split_into_the_question_and_the_context() -> None:
    calibrations = CalibrationSet.from_rows([])
    query, context = query_and_context(
        None, None, {"input_len": 256, "output_len": 64, "concurrency": 4, "calibrations": calibrations}
    )
    assert query == PlanQuery(input_len=256, output_len=64, concurrency=4)
    assert context == PlanContext(calibrations=calibrations)


def test_an_unknown_keyword_or_both_forms_at_once_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        query_and_context(None, None, {"input_len": 1, "output_len": 1, "concurency": 4})
    with pytest.raises(TypeError):
        query_and_context(PlanQuery(input_len=1, output_len=1), None, {"concurrency": 4})
    with pytest.raises(TypeError):
        query_and_context(None, PlanContext(), {"input_len": 1, "output_len": 1, "prices": {}})


def test_a_query_at_one_setting_leaves_nothing_for_a_goal() -> None:
    settings = EngineSettings(tensor_parallel_size=2)
    asked = PlanQuery(input_len=512, output_len=128, goal="cost", alternatives=True, allow_quantization=True)
    at = asked.at(quantization="fp8", engine_settings=settings)
    assert (at.quantization, at.engine_settings, at.goal, at.alternatives, at.allow_quantization) == (
        "fp8",
        settings,
        None,
        False,
        False,
    )
    assert at.traffic == asked.traffic


def test_the_query_and_the_keywords_give_the_same_estimate() -> None:
    spec = load_model_spec("qwen2.5-7b-instruct")
    slo = SLO(tpot_ms=50)
    loose = estimate(spec, "g6.2xlarge", input_len=512, output_len=128, concurrency=8, slo=slo, goal="cost")
    whole = estimate(
        spec, "g6.2xlarge", PlanQuery(input_len=512, output_len=128, concurrency=8, slo=slo, goal="cost")
    )
    assert loose.model_dump() == whole.model_dump()
    by_query = perf_setup(spec, "g6.2xlarge", PlanQuery(input_len=512, output_len=128))
    by_keywords = perf_setup(spec, "g6.2xlarge", input_len=512, output_len=128)
    assert not isinstance(by_query, str) and not isinstance(by_keywords, str)
    assert by_query.recommendation == by_keywords.recommendation


def test_the_ranking_takes_filters_or_the_same_keywords() -> None:
    spec = load_model_spec("qwen2.5-7b-instruct")
    loose = estimate_catalog(
        spec, input_len=512, output_len=128, concurrency=1, accelerator="neuron", limit=3
    )
    whole = estimate_catalog(
        spec,
        PlanQuery(input_len=512, output_len=128),
        filters=CatalogFilters(accelerator="neuron", limit=3),
    )
    drop = {"elapsed_ms"}
    assert loose.model_dump(exclude=drop) == whole.model_dump(exclude=drop)
    assert [r.instance for r in whole.rows] and len(whole.rows) <= 3


def test_recommend_takes_a_fit_query_or_the_same_keywords() -> None:
    spec = load_model_spec("qwen2.5-7b-instruct")
    loose = recommend(spec, "g6.xlarge", max_model_len=8192, kv_cache_dtype="fp8")
    whole = recommend(spec, "g6.xlarge", FitQuery(max_model_len=8192, kv_cache_dtype="fp8"))
    assert loose == whole
