"""vLLM's start-up memory lines from public logs (plan/data/vllm_memory_logs.yaml) against the planner's memory
model: the weights it counts per rank and the KV cache it sizes at the logged settings."""

from __future__ import annotations

import pytest

from accelbench.catalog import get_catalog
from accelbench.plan.memory_logs import KvCheck, check_kv, load_memory_logs, logged_kv


@pytest.fixture(scope="module")
def checks() -> list[KvCheck]:
    catalog = get_catalog()
    return [c for c in (check_kv(e, catalog) for e in load_memory_logs().logs) if isinstance(c, KvCheck)]


def test_every_entry_cites_a_source_quotes_the_log_and_names_a_catalog_gpu_or_none() -> None:
    data = load_memory_logs()
    assert len(data.logs) >= 30
    for e in data.logs:
        assert e.source in data.sources and e.quote.strip()
        assert e.gpu is None or e.gpu in get_catalog().accelerators
        assert e.gpu is not None or e.gpu_name  # a card outside the catalog says what it was


def test_the_weights_the_planner_counts_per_rank_are_those_vllm_loaded(checks: list[KvCheck]) -> None:
    weighed = [c for c in checks if c.weights_ratio is not None]
    assert len(weighed) >= 8
    for c in weighed:
        assert c.weights_ratio == pytest.approx(1.0, abs=0.03), c.log.id


def test_the_kv_cache_the_planner_sizes_is_the_one_vllm_reserved_for_dense_models(
    checks: list[KvCheck],
) -> None:
    # vLLM multiplies gpu_memory_utilization by the memory CUDA reports (79.2 GiB of an H100, 44.4 of an L40S,
    # 22.0 of an L4), not by the part's nominal size: on the nominal 48 the L40S's KV cache came out 41% larger
    # than the one vLLM reserved for Qwen2.5-32B at TP 2
    dense = [c for c in checks if not c.moe and logged_kv(c.log)]
    assert {c.log.gpu for c in dense} >= {"H100-SXM", "L4", "L40S"}
    for c in dense:
        assert c.kv_ratio == pytest.approx(1.0, abs=0.10), (c.log.id, c.planned_gib, c.log.kv_cache_gib)
