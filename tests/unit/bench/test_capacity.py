"""Capacity at an SLO against an engine whose capacity is known exactly: the fixture's continuous-batching
engine costs step_ms + per_seq_ms x running per step, with a fixed number of slots (tests/support/batching_engine.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from accelbench.bench.capacity_search import (
    SearchBounds,
    judge,
    knee,
    price,
    requests_for,
    run_capacity,
    search,
)
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.capacity import CapacityResult, Probe, parse_slo
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
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
    result = run_capacity(endpoint, base(), SearchBounds(load="concurrency", slo=slo, start=2, max_load=64))
    assert result.max_load is not None and abs(result.max_load - 8) <= 1, result.probes
    assert len(result.probes) <= 12
    levels = {p.level for p in result.probes}
    assert any(p.met for p in result.probes) and any(p.met is False for p in result.probes)
    assert result.output_tokens_per_s_at_max and result.output_tokens_per_s_at_max > 0
    assert max(levels) <= 64


def test_the_knee_lands_where_the_slots_run_out(engine_server) -> None:
    _, endpoint, _ = engine_server
    result = run_capacity(endpoint, base(), SearchBounds(load="concurrency", slo=None, start=2, max_load=64))
    assert result.max_load is None and result.knee is not None
    assert SLOTS / 2 <= result.knee <= 2 * SLOTS, [(p.level, p.output_tokens_per_s) for p in result.probes]


def test_request_rate_load_finds_the_rate_the_engine_can_serve(engine_server) -> None:
    _, endpoint, _ = engine_server
    # at full batch a step is 10 + 48 = 58 ms and serves 12 requests x 12 tokens in 12 steps (0.7 s): at most
    # 17 requests/s; a TTFT target of 400 ms breaks once arrivals outrun that and the queue grows
    slo = parse_slo("ttft:400", percentile=90, attainment=0.9)
    result = run_capacity(
        endpoint, base(), SearchBounds(load="request_rate", slo=slo, start=4, max_load=200, max_probes=12)
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


# ------------------------------------------------------------------ the boundary measured again by its evidence
TARGET_MS = 50.0


def simulated(
    attainment: Callable[[float], float], seed: int, *, exact: bool = False
) -> Callable[[float, int], Probe]:
    """A server whose true share of requests within a 50 ms TPOT target at each concurrency is
    ``attainment(level)``: each judged request draws its TPOT (40 ms within, 60 ms beyond; ``exact``: that
    share of them exactly, in a random order), and the search judges the benchmark as it judges a real one."""
    rng = np.random.default_rng(seed)
    slo = parse_slo(f"tpot:{TARGET_MS:g}", percentile=90, attainment=0.9)

    def measure(level: float, repeat: int) -> Probe:
        n = requests_for(slo.percentile)
        if exact:
            within = rng.permutation(np.arange(n) < round(attainment(level) * n))
        else:
            within = rng.random(n) < attainment(level)
        wave = [True] * int(level)  # a closed loop's first wave, left out of the judging
        records = [
            RequestRecord(
                index=i,
                prompt_len=8,
                output_tokens=11,
                start_s=i * 0.01,
                ttft_s=0.01,
                latency_s=0.01 + 10 * (0.040 if ok else 0.060),
                success=True,
            )
            for i, ok in enumerate([*wave, *within])
        ]
        summary = BenchmarkSummary(date="2026-01-01T00:00:00+00:00", config=BenchConfig(), requests=records)
        return judge(summary, level=level, load="concurrency", slo=slo, repeat=repeat)

    return measure


SLO_90 = parse_slo(f"tpot:{TARGET_MS:g}", percentile=90, attainment=0.9)


def cliff(level: float) -> float:
    """Clear evidence: nearly every request within the target up to 15 users, half of them beyond."""
    return 0.99 if level <= 15 else 0.5


def slope(level: float) -> float:
    """Thin evidence: the true share crosses the 90% floor between 15 (92.5%) and 16 (87.5%), closer to it
    than a hundred requests tell apart (about 3% either way)."""
    return 0.9 + 0.05 * (15.5 - level)


def _search(
    attainment: Callable[[float], float], seed: int, max_probes: int = 20, *, exact: bool = False
) -> CapacityResult:
    return search(
        simulated(attainment, seed, exact=exact),
        load="concurrency", slo=SLO_90, start=4, max_load=64, max_probes=max_probes,
    )  # fmt: skip


def test_clear_evidence_at_the_boundary_is_not_measured_again() -> None:
    for seed in range(3):
        r = _search(cliff, seed)
        assert r.max_load == 15 and r.max_load_range == [15, 15]
        assert all(p.repeat == 1 for p in r.probes), [(p.level, p.repeat) for p in r.probes]
        assert {lv.level: lv.repeats for lv in r.levels} == {p.level: 1 for p in r.probes}
        at = {lv.level: lv for lv in r.levels}
        assert at[15].confidence is not None and at[15].confidence > 0.9 and at[15].met
        assert at[16].confidence is not None and at[16].confidence < 0.1 and at[16].met is False
        assert not any("more repeats" in n for n in r.notes)


def test_thin_evidence_at_the_boundary_is_measured_again_until_it_is_clear_or_the_budget_ends() -> None:
    from accelbench.bench.capacity_confidence import LEVEL, SURE_MISS, level_confidence

    repeated = 0
    for seed in range(6):
        r = _search(slope, seed)
        assert r.max_load is not None
        more = [p for p in r.probes if p.repeat > 1]
        repeated += bool(more)
        # only the answer and the level above it are measured again, and each repeat is recorded
        at = {lv.level: lv for lv in r.levels}
        for p in more:
            assert at[p.level].repeats >= p.repeat
        conf = level_confidence(r.probes)
        above = min((lv for lv in at if lv > r.max_load), default=None)
        thin = [lv for lv in (r.max_load, above) if lv is not None and SURE_MISS < conf[lv] < LEVEL]
        if thin:  # still thin: only because the budget ran out, and the result says so
            assert len(r.probes) == 20, (seed, thin)
            assert any("more repeats needed: raise --max-probes" in n for n in r.notes), r.notes
        assert r.max_load_range is not None
    assert repeated >= 3  # near 90% a hundred requests often leave the SLO unsettled


def test_a_level_at_the_floor_stays_thin_and_the_note_names_its_confidence() -> None:
    def edge(level: float) -> float:  # 15 sits on the floor: 91 of 101 requests within, every time
        return 0.99 if level <= 14 else 0.901 if level == 15 else 0.5

    r = _search(edge, seed=1, max_probes=8, exact=True)
    assert len(r.probes) == 8
    fifteen = [p for p in r.probes if p.level == 15]
    assert [p.repeat for p in fifteen] == [1, 2, 3]
    assert r.max_load == 15 and r.levels[-2].level == 15 and r.levels[-2].repeats == 3
    [note] = [n for n in r.notes if "more repeats needed" in n]
    assert note.startswith("The SLO holds at 15 with ") and "% confidence (3 measurements)" in note
    assert note.endswith("; more repeats needed: raise --max-probes (all 8 were used).")


def test_the_range_contains_the_true_capacity_in_most_seeds() -> None:
    inside = 0
    seeds = range(20)
    for seed in seeds:
        r = _search(slope, seed)
        assert r.max_load_range is not None
        low, high = r.max_load_range
        inside += (low is None or low <= 15) and (high is None or high >= 15)
    # a 90% range: 18 of these 20 seeds (16 while a sure miss was judged on the product of the conditions)
    assert inside >= 18, inside


def test_a_resumed_search_with_repeats_replays_without_measuring() -> None:
    first = _search(slope, seed=2)
    assert any(p.repeat > 1 for p in first.probes)

    def refuse(level: float, repeat: int) -> Probe:
        raise AssertionError(f"measured {level} again (repeat {repeat})")

    again = search(
        refuse, load="concurrency", slo=SLO_90, start=4, max_load=64, max_probes=20, done=first.probes
    )
    assert again.max_load == first.max_load and again.max_load_range == first.max_load_range


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
