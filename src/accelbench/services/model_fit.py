"""Whether a model fits an instance (``recommend``) and where the accelerator's memory goes (``memory
breakdown``), as the CLI asks: the model named (a preset, a hub id, a path) is read first, and the answer comes
with the model's own longest context, which the verdict's sentence is said against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from accelbench.domain.recommendation import MemoryBreakdown, Recommendation
from accelbench.domain.run import EngineSettings
from accelbench.modelspec import load_model_spec
from accelbench.plan import memory_breakdown
from accelbench.plan.recommend.tier_steps import verdict_sentence
from accelbench.services.keywords import keywords
from accelbench.services.planning import recommendation

T = TypeVar("T")

__all__ = [
    "BreakdownRequest",
    "FitOutcome",
    "RecommendRequest",
    "breakdown",
    "recommend_for",
    "verdict_sentence",
]


@dataclass(frozen=True)
class BreakdownRequest:
    """A model (preset, hub id, path) on an instance, with the settings asked for (else the planner's)."""

    model: str
    instance: str
    quantization: str | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str | None = None


@dataclass(frozen=True)
class RecommendRequest(BreakdownRequest):
    """The breakdown's question, with the typical lengths and the engine settings the answer must keep."""

    input_len: int | None = None
    output_len: int | None = None
    engine_settings: EngineSettings | None = None
    engine: str | None = None


@dataclass(frozen=True)
class FitOutcome(Generic[T]):
    """The planner's answer about a model, with the model's own longest context (its verdict is said
    against it)."""

    answer: T
    model_max: int


def _answer(req: BreakdownRequest, ask: Callable[..., T]) -> FitOutcome[T]:
    """``ask`` (the recommendation or the breakdown) for the model named, read first, with the settings asked."""
    spec = load_model_spec(req.model)
    return FitOutcome(
        answer=ask(spec, req.instance, **keywords(req, "model", "instance")),
        model_max=spec.max_position_embeddings,
    )


def recommend_for(req: RecommendRequest) -> FitOutcome[Recommendation]:
    return _answer(req, recommendation)


def breakdown(req: BreakdownRequest) -> FitOutcome[MemoryBreakdown]:
    return _answer(req, memory_breakdown)
