"""How sure a capacity answer is: each level's chance of meeting the SLO, and the range the answer lies in."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from accelbench.bench.capacity_confidence import (
    confidence_range,
    evidence_confidence,
    evidence_of,
    level_confidence,
    range_phrase,
)
from accelbench.domain.capacity import Probe, SloEvidence


def slo_confidence(*args: Any) -> float:
    """The chance the SLO holds on a resample of the requests (``evidence_of``'s arguments)."""
    return evidence_confidence(evidence_of(*args))


def _chance(median_ms: float, target: float = 100.0, n: int = 400) -> float:
    rng = np.random.default_rng(1)
    vals = list(rng.normal(median_ms, 10.0, n))
    meeting = sum(1 for v in vals if v <= target)
    return slo_confidence({"tpot": vals}, {"tpot": target}, 50.0, meeting, n, 0.0)


def test_a_level_far_inside_the_slo_is_sure_and_one_far_outside_is_a_sure_miss() -> None:
    assert _chance(80.0) > 0.99
    assert _chance(120.0) < 0.01
    # half the requests within the target: the median is as likely in as out
    vals = [90.0] * 50 + [110.0] * 50
    assert 0.35 < slo_confidence({"tpot": vals}, {"tpot": 100.0}, 50.0, 50, 100, 0.0) < 0.6


def test_attainment_counts_and_every_condition_must_hold() -> None:
    vals = [50.0] * 100
    assert slo_confidence({"ttft": vals}, {"ttft": 100.0}, 90.0, 100, 100, 0.95) == pytest.approx(1.0)
    # 95 of 100 meeting against a 95% floor: about even; 85 of 100: a sure miss
    assert 0.3 < slo_confidence({"ttft": vals}, {"ttft": 100.0}, 90.0, 95, 100, 0.95) < 0.7
    assert slo_confidence({"ttft": vals}, {"ttft": 100.0}, 90.0, 85, 100, 0.95) < 0.01


def _probe(level: float, confidence: float, repeat: int = 1) -> Probe:
    return Probe(level=level, repeat=repeat, met=confidence >= 0.5, confidence=confidence)


def test_the_range_runs_from_a_sure_pass_to_below_the_first_sure_miss() -> None:
    probes = [
        _probe(8, 1.0),
        _probe(14, 0.95),
        _probe(15, 0.7),
        _probe(16, 0.4),
        _probe(16, 0.2, 2),
        _probe(17, 0.02),
    ]
    assert level_confidence(probes)[16] == pytest.approx(0.3)
    rng = confidence_range(probes, 15, "concurrency")
    assert rng == [14, 16]
    assert range_phrase(rng) == "14-16 with 90% confidence"
    # a request rate: the high end is the highest level measured below the first sure miss
    assert confidence_range(probes, 15, "request_rate") == [14, 16]
    # nothing above is a sure miss: only the low end is known
    assert range_phrase(confidence_range(probes[:4], 15, "concurrency")).startswith("at least 14 with 90%")
    assert confidence_range([], 15, "concurrency") is None


def test_the_answer_reads_with_its_confidence() -> None:
    from accelbench.domain.capacity import CapacitySLO
    from accelbench.report.capacity_results import answer_sentence
    from accelbench.report.comparison import CapacityRun

    probes = [_probe(8, 1.0), _probe(14, 0.95), _probe(15, 0.7), _probe(16, 0.4), _probe(17, 0.02)]
    run = CapacityRun(
        run_id="r", name="r", hardware="g6.xlarge", load="concurrency", slo=CapacitySLO(targets={"tpot": 50.0}),
        slo_label="p90 TPOT <= 50 ms", finished=True, max_load=15, output_tokens_per_s_at_max=300.0,
        total_tokens_per_s_at_max=900.0, probes=probes,
    )  # fmt: skip
    assert "sustains 15 users (14-16 with 90% confidence)," in answer_sentence(run)


def test_a_comparison_of_capacities_says_whether_they_differ() -> None:
    from types import SimpleNamespace

    from accelbench.domain.capacity import CapacitySLO
    from accelbench.report.comparison import CapacityRun
    from accelbench.report.verdict_phrases import capacity_difference_findings

    def run(name: str, answer: int, sure: int, miss: int) -> CapacityRun:
        probes = [_probe(sure, 0.97), _probe(answer, 0.8), _probe(miss, 0.03)]
        return CapacityRun(
            run_id=name, name=name, hardware=name, load="concurrency", slo=CapacitySLO(targets={"tpot": 50.0}),
            slo_label="p90 TPOT <= 50 ms", finished=True, max_load=answer, probes=probes,
        )  # fmt: skip

    apart = SimpleNamespace(capacity=[run("a", 15, 14, 17), run("b", 30, 28, 32)])
    [f] = capacity_difference_findings(apart)  # type: ignore[arg-type]
    assert f.kind == "capacity_difference" and f.figures["differ"] == "yes"
    assert f.text.startswith("At p90 TPOT <= 50 ms, b holds more load than a (30 vs 15)")
    close = SimpleNamespace(capacity=[run("a", 15, 14, 17), run("b", 16, 15, 18)])
    [g] = capacity_difference_findings(close)  # type: ignore[arg-type]
    assert g.figures["differ"] == "no" and "show no detectable difference" in g.text


def test_the_repeats_of_a_level_pool_as_one_sample() -> None:
    from accelbench.bench.capacity_confidence import evidence_of, pooled_confidence, pooled_met

    def probe(vals: list[float], repeat: int) -> Probe:
        meeting = sum(1 for v in vals if v <= 100.0)
        e = evidence_of({"tpot": vals}, {"tpot": 100.0}, 90.0, meeting, len(vals), 0.9)
        return Probe(level=15, repeat=repeat, met=float(np.percentile(vals, 90)) <= 100.0, evidence=e)

    rng = np.random.default_rng(3)
    a, b = list(rng.normal(80, 15, 100)), list(rng.normal(80, 15, 100))
    both = pooled_confidence([probe(a, 1), probe(b, 2)])
    one = slo_confidence({"tpot": a + b}, {"tpot": 100.0}, 90.0, sum(v <= 100 for v in a + b), 200, 0.9)
    assert both == pytest.approx(one)
    # 92 and 89 of 100 within: the second misses the SLO, the 181 of 200 pooled meet it
    near = [probe([50.0] * 92 + [150.0] * 8, 1), probe([50.0] * 89 + [150.0] * 11, 2)]
    assert [p.met for p in near] == [True, False] and pooled_met(near)
    assert not pooled_met([*near, probe([50.0] * 85 + [150.0] * 15, 3)])
    # a repeat whose server fell behind makes the level a sure miss; probes without counts are averaged
    behind = near[1].model_copy(update={"oversaturated": True})
    assert pooled_confidence([near[0], behind]) == 0.0 and not pooled_met([near[0], behind])
    assert level_confidence([_probe(16, 0.4), _probe(16, 0.2, 2)])[16] == pytest.approx(0.3)


def test_a_sure_miss_is_judged_on_the_weakest_condition_not_the_product() -> None:
    from accelbench.bench.capacity_confidence import evidence_confidence, evidence_of

    # one target judged twice (its p90 and a 90% attainment floor on the same requests), 88 of 101 within
    e = evidence_of({"tpot": [50.0] * 88 + [150.0] * 13}, {"tpot": 100.0}, 90.0, 88, 101, 0.9)
    each = evidence_confidence(e, upper=True)
    assert evidence_confidence(e) == pytest.approx(each * each)
    assert evidence_confidence(e) < 0.1 < each  # the product alone would call it a sure miss

    def probe(level: float, e: SloEvidence) -> Probe:
        return Probe(level=level, met=False, confidence=evidence_confidence(e), evidence=e)

    sure = evidence_of({"tpot": [50.0] * 101}, {"tpot": 100.0}, 90.0, 101, 101, 0.9)
    far = evidence_of({"tpot": [50.0] * 60 + [150.0] * 41}, {"tpot": 100.0}, 90.0, 60, 101, 0.9)
    probes = [Probe(level=14, met=True, confidence=1.0, evidence=sure), probe(15, e), probe(17, far)]
    assert confidence_range(probes, 14, "concurrency") == [14, 16]
