"""Load plans: stages of concurrency or rate back to back in one benchmark, with ramp-up, figures per stage."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from accelbench.bench import run_benchmark
from accelbench.bench import stages as st
from accelbench.bench.tokenizer import LocalTokenizer
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig, LoadStage
from tests.support.stream_server import Script, StreamServer


def _peak_in_flight(records, lo: float, hi: float) -> int:  # type: ignore[no-untyped-def]
    """Most requests in flight at once among those sent in [lo, hi)."""
    rs = [r for r in records if lo <= r.start_s < hi]
    events = sorted([(r.start_s, 1) for r in rs] + [(r.start_s + r.latency_s, -1) for r in rs])
    peak = cur = 0
    for _, step in events:
        cur += step
        peak = max(peak, cur)
    return peak


def test_the_allowed_level_follows_the_plan_and_its_ramp() -> None:
    plan = [LoadStage(duration_s=2, concurrency=2), LoadStage(duration_s=4, concurrency=4, ramp_up_s=2)]
    assert st.stage_starts(plan) == [0.0, 2.0, 6.0]
    assert st.allowed(plan, 0.5) == (2, 2.0)
    assert st.allowed(plan, 2.1) == (1, 2.5)  # the ramp adds a slot every 0.5 s
    assert st.allowed(plan, 3.2) == (3, 3.5)
    assert st.allowed(plan, 4.5) == (4, 6.0)
    assert st.allowed(plan, 6.0)[0] == 0
    assert [st.stage_of(plan, t) for t in (0.0, 1.99, 2.0, 5.9)] == [0, 0, 1, 1]


def test_rate_offsets_keep_each_stage_rate_and_the_ramp_is_exact() -> None:
    plan = [LoadStage(duration_s=20, request_rate=5), LoadStage(duration_s=20, request_rate=20, ramp_up_s=10)]
    offs = st.rate_offsets(plan, burstiness=math.inf, seed=0, cap=10_000)  # even gaps: counts are exact
    first = [t for t in offs if t < 20]
    second = [t for t in offs if t >= 20]
    assert len(first) == 100  # 5/s for 20 s, the first at 0
    assert len(second) == pytest.approx(20 * (20 - 10 / 2), abs=1)  # the ramp costs half its length
    ramp = [t for t in second if t < 30]
    assert len(ramp) == pytest.approx(20 * 10 / 2, abs=1)  # linear rise: half the arrivals of a full rate
    assert len([t for t in ramp if t < 25]) == pytest.approx(len(ramp) / 4, abs=1)  # quadratic cumulative
    assert offs == sorted(offs) and len(st.rate_offsets(plan, 1.0, 0, cap=50)) == 50
    assert st.rate_offsets(plan, 1.0, 3, 10_000) == st.rate_offsets(plan, 1.0, 3, 10_000)  # from the seed


def test_a_concurrency_plan_holds_each_stage_level_and_reports_each_stage(tok_dir: Path) -> None:
    tok = LocalTokenizer(tok_dir)
    config = BenchConfig(
        input_len=40,
        output_len=8,
        num_prompts=5000,
        stages=[LoadStage(duration_s=1.0, concurrency=1), LoadStage(duration_s=1.0, concurrency=3)],
    )
    with StreamServer(Script(ttft_ms=5, itl_ms=3), tokenizer_dir=tok_dir) as server:
        s = run_benchmark(
            Endpoint(base_url=server.base_url, served_model=server.model), config, tokenizer=tok
        )
    assert not s.interrupted and s.failed == 0
    assert [m.stage for m in s.per_stage] == [0, 1]
    assert s.per_stage[0].load == "concurrency 1" and s.per_stage[1].load == "concurrency 3"
    assert all(r.stage in (0, 1) for r in s.requests)
    assert sum(m.sent for m in s.per_stage) == len(s.requests)
    assert _peak_in_flight(s.requests, 0.0, 1.0) == 1  # never more than the stage allows
    assert _peak_in_flight(s.requests, 1.0, 2.0) <= 3
    assert s.per_stage[1].sent > s.per_stage[0].sent  # three at a time send more than one at a time
    assert max(r.planned_send_s for r in s.requests) < 2.0  # nothing is sent after the plan
    # the bytes leave when the event loop runs the request's task, a moment after the decision
    assert max(r.start_s for r in s.requests) < 2.1
    assert any("Load plan: 2 stage(s) over 2 s" in n for n in s.notes)


def test_a_rate_plan_sends_at_its_times(tok_dir: Path) -> None:
    tok = LocalTokenizer(tok_dir)
    config = BenchConfig(
        input_len=40,
        output_len=4,
        num_prompts=1000,
        burstiness=math.inf,
        stages=[LoadStage(duration_s=1.0, request_rate=10), LoadStage(duration_s=1.0, request_rate=30)],
    )
    with StreamServer(Script(ttft_ms=1, itl_ms=1), tokenizer_dir=tok_dir) as server:
        s = run_benchmark(
            Endpoint(base_url=server.base_url, served_model=server.model), config, tokenizer=tok
        )
    assert [m.sent for m in s.per_stage] == [10, 30]
    planned = sorted(r.planned_send_s for r in s.requests)
    assert planned == pytest.approx(
        st.rate_offsets(config.stages or [], math.inf, config.seed, 1000), abs=1e-9
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"stages": [{"duration_s": 1, "concurrency": 2}, {"duration_s": 1, "request_rate": 3}]}, "not both"),
        ({"stages": [{"duration_s": 1}]}, "either concurrency or request_rate"),
        ({"stages": [{"duration_s": 1, "concurrency": 2, "ramp_up_s": 3}]}, "longer than the stage"),
        ({"stages": [{"duration_s": 1, "concurrency": 2}], "duration_s": 5}, "leave duration_s"),
    ],
)
def test_plans_that_cannot_run_are_refused(fields, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError, match=message):
        BenchConfig(**fields)
