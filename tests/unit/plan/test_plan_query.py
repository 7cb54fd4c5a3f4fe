"""One question, one context: the planner's entry points take a ``PlanQuery`` and a ``PlanContext`` whole
(no context: the empty one), and ``recommend`` a ``FitQuery``, not their fields as keywords."""

from __future__ import annotations

from typing import Any

import pytest

from accelbench.domain.estimate import SLO
from accelbench.domain.plan_query import FitQuery, PlanQuery
from accelbench.domain.run import EngineSettings
from accelbench.modelspec import load_model_spec
from accelbench.plan import estimate_catalog, recommend
from accelbench.plan.context import PlanContext
from accelbench.plan.estimate import estimate, perf_setup
from accelbench.plan.ranking import CatalogFilters


def test_the_entry_points_take_the_question_whole_not_its_fields_as_keywords() -> None:
    spec = load_model_spec("qwen2.5-7b-instruct")
    loose: dict[str, Any] = {"input_len": 512, "output_len": 128, "concurrency": 4}
    with pytest.raises(TypeError):
        estimate(spec, "g6.xlarge", **loose)
    with pytest.raises(TypeError):
        perf_setup(spec, "g6.xlarge", **loose)
    with pytest.raises(TypeError):
        estimate_catalog(spec, **loose)


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


def test_no_context_is_the_empty_context() -> None:
    spec = load_model_spec("qwen2.5-7b-instruct")
    asked = PlanQuery(input_len=512, output_len=128, concurrency=8, slo=SLO(tpot_ms=50), goal="cost")
    bare = estimate(spec, "g6.2xlarge", asked)
    empty = estimate(spec, "g6.2xlarge", asked, PlanContext())
    assert bare.model_dump() == empty.model_dump()
    by_query = perf_setup(spec, "g6.2xlarge", PlanQuery(input_len=512, output_len=128))
    with_context = perf_setup(spec, "g6.2xlarge", PlanQuery(input_len=512, output_len=128), PlanContext())
    assert not isinstance(by_query, str) and not isinstance(with_context, str)
    assert by_query.recommendation == with_context.recommendation


def test_the_ranking_takes_its_filters_whole() -> None:
    spec = load_model_spec("qwen2.5-7b-instruct")
    bare = estimate_catalog(
        spec, PlanQuery(input_len=512, output_len=128), filters=CatalogFilters(accelerator="neuron", limit=3)
    )
    whole = estimate_catalog(
        spec,
        PlanQuery(input_len=512, output_len=128),
        PlanContext(),
        filters=CatalogFilters(accelerator="neuron", limit=3),
    )
    drop = {"elapsed_ms"}
    assert bare.model_dump(exclude=drop) == whole.model_dump(exclude=drop)
    assert [r.instance for r in whole.rows] and len(whole.rows) <= 3


def test_recommend_takes_a_fit_query_whole_and_none_is_the_empty_one() -> None:
    spec = load_model_spec("qwen2.5-7b-instruct")
    with pytest.raises(TypeError):
        recommend(spec, "g6.xlarge", **{"max_model_len": 8192, "kv_cache_dtype": "fp8"})
    assert recommend(spec, "g6.xlarge") == recommend(spec, "g6.xlarge", FitQuery())
    asked = recommend(spec, "g6.xlarge", FitQuery(max_model_len=8192, kv_cache_dtype="fp8"))
    assert asked.settings is not None and asked.settings.max_model_len == 8192
