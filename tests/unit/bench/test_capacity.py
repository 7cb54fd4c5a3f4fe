"""Capacity at an SLO against an engine whose capacity is known exactly: the fixture's continuous-batching
engine costs step_ms + per_seq_ms x running per step, with a fixed number of slots (tests/support/batching_engine.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from accelbench.bench.capacity import knee, price, run_capacity, search
from accelbench.domain.bench import BenchConfig, Endpoint
from accelbench.domain.capacity import CapacityResult, Probe, parse_slo
from accelbench.errors import UserInputError
from tests.support.batching_engine import BatchingEngine
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

STEP_MS, PER_SEQ_MS, SLOTS = 10.0, 4.0, 12  # steps long enough that a shared machine's timer jitter is small


@pytest.fixture
def engine_server(tmp_path: Path):
    tok = make_tokenizer_dir(tmp_path / "tok")
    engine = BatchingEngine(slots=SLOTS, step_ms=STEP_MS, per_seq_ms=PER_SEQ_MS)
    with StreamServer(Script(), engine=engine, tokenizer_dir=tok, record=False) as server:
        yield (
            server,
            Endpoint(base_url=server.base_url, served_model="fixture-model", tokenizer=str(tok)),
            engine,
        )


def base() -> BenchConfig:
    return BenchConfig(input_len=64, output_len=12, ignore_eos=True, scrape_metrics=False, num_prompts=1)


def test_finds_the_exact_concurrency_for_a_tpot_slo_within_one_level(engine_server) -> None:
    _, endpoint, _ = engine_server
    # TPOT = 10 + 4 x C ms while C <= 12: a 44 ms median target holds up to C = 8 (42 ms) and breaks at 9
    # (46 ms); judged at the median with 2 ms either side, so a busy machine's timer jitter cannot move it
    slo = parse_slo("tpot:44", percentile=50, attainment=0.5)
    result = run_capacity(endpoint, base(), load="concurrency", slo=slo, start=2, max_load=64)
    assert result.max_load is not None and abs(result.max_load - 8) <= 1, result.probes
    assert len(result.probes) <= 12
    levels = {p.level for p in result.probes}
    assert any(p.met for p in result.probes) and any(p.met is False for p in result.probes)
    assert result.output_tokens_per_s_at_max and result.output_tokens_per_s_at_max > 0
    assert max(levels) <= 64


def test_the_knee_lands_where_the_slots_run_out(engine_server) -> None:
    _, endpoint, _ = engine_server
    result = run_capacity(endpoint, base(), load="concurrency", slo=None, start=2, max_load=64)
    assert result.max_load is None and result.knee is not None
    assert SLOTS / 2 <= result.knee <= 2 * SLOTS, [(p.level, p.output_tokens_per_s) for p in result.probes]


def test_request_rate_load_finds_the_rate_the_engine_can_serve(engine_server) -> None:
    _, endpoint, _ = engine_server
    # at full batch a step is 10 + 48 = 58 ms and serves 12 requests x 12 tokens in 12 steps (0.7 s): at most
    # 17 requests/s; a TTFT target of 400 ms breaks once arrivals outrun that and the queue grows
    slo = parse_slo("ttft:400", percentile=90, attainment=0.9)
    result = run_capacity(
        endpoint, base(), load="request_rate", slo=slo, start=4, max_load=200, max_probes=12
    )
    assert result.max_load is not None, result.probes
    assert 4 <= result.max_load <= 24, [(p.level, p.why) for p in result.probes]
    assert len(result.probes) <= 12


def test_search_logic_on_a_known_curve_and_resume() -> None:
    calls: list[float] = []

    def measure(level: float, repeat: int) -> Probe:
        calls.append(level)
        return Probe(level=level, repeat=repeat, met=level <= 37, output_tokens_per_s=min(level, 40.0))

    slo = parse_slo("tpot:10")
    r = search(measure, load="concurrency", slo=slo, start=4, max_load=1000)
    assert r.max_load == 37 and len(r.probes) <= 12
    # an interrupted search resumes from its stored probes: nothing measured twice
    calls.clear()
    again = search(measure, load="concurrency", slo=slo, start=4, max_load=1000, done=r.probes)
    assert again.max_load == 37 and calls == []
    none = search(
        lambda lv, rp: Probe(level=lv, repeat=rp, met=False, why="too slow"), load="concurrency", slo=slo
    )
    assert none.max_load is None and none.reason and "misses the SLO" in none.reason
    assert price(
        r.model_copy(update={"output_tokens_per_s_at_max": 100.0}), 3.6
    ).usd_per_million_output_tokens == (pytest.approx(10.0))


@pytest.mark.parametrize(("third", "capacity"), [(False, 1), (True, 2)])
def test_a_level_whose_two_measurements_disagree_is_decided_by_a_third(third: bool, capacity: float) -> None:
    """Level 2 sits on the boundary: it misses once and meets once, as noise near an SLO does on a real engine;
    a third measurement decides, and the answer never rests on the one lucky measurement."""
    verdicts = {(1.0, 1): True, (1.0, 2): True, (2.0, 1): False, (2.0, 2): True, (2.0, 3): third}

    def measure(level: float, repeat: int) -> Probe:
        return Probe(level=level, repeat=repeat, met=verdicts.get((level, repeat), False))

    r = search(measure, load="concurrency", slo=parse_slo("tpot:10"), start=2, max_load=64)
    assert r.max_load == capacity
    assert {(p.level, p.repeat) for p in r.probes} >= {(2.0, 1), (2.0, 2), (2.0, 3)}


def test_knee_of_a_saturating_curve() -> None:
    pts = [(c, min(c, 16) * 10.0) for c in (1, 2, 4, 8, 16, 32, 64)]
    assert knee(pts) == 16
    assert knee(pts[:2]) is None


@pytest.mark.parametrize(
    ("text", "kw", "says"),
    [
        ("latency:50", {}, "Unknown SLO metric"),
        ("tpot:-1", {}, "positive"),
        ("tpot:50", {"percentile": 100}, "outside (0, 100)"),
        ("tpot:50", {"percentile": 0}, "outside (0, 100)"),
        ("", {}, "Empty SLO"),
    ],
)
def test_bad_slo_input_is_refused_with_what_to_change(text: str, kw: dict, says: str) -> None:
    with pytest.raises(UserInputError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_slo(text, **kw)


def test_max_load_below_one_is_refused() -> None:
    with pytest.raises(UserInputError, match="at least 1"):
        search(lambda lv, rp: Probe(level=lv), load="concurrency", slo=parse_slo("tpot:5"), max_load=0.5)
    assert isinstance(CapacityResult(load="concurrency"), CapacityResult) and math.isfinite(1.0)
