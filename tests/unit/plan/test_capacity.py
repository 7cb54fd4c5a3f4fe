"""The planner's capacity at an SLO (``plan/capacity_prediction.py``): the measurement's question (the highest concurrency
or Poisson rate whose percentile of every named metric meets its target), its monotone behaviour, known cases
on a hand-built engine, the queueing pieces, and ``services.plan.capacity_plan``."""

from __future__ import annotations

import math

import pytest

from accelbench.domain.capacity import CapacitySLO
from accelbench.domain.estimate import SLO, EfficiencyFactors
from accelbench.domain.plan_query import PlanQuery
from accelbench.modelspec import load_model_spec
from accelbench.plan import estimate
from accelbench.plan.capacity_prediction import (
    RateModel,
    level_prediction,
    predict_capacity,
)
from accelbench.plan.estimate import PerfSetup, perf_setup
from accelbench.plan.load_population import closed_loop_population
from accelbench.plan.perf_model import PerfModel
from accelbench.plan.queueing import Wait, erlang_c, md1, poisson
from accelbench.services.planning import capacity_plan

#: (model, instance, input, output, targets): a CPU, a GPU, an 8-GPU and a Neuron deployment
CASES = [
    ("smollm2-135m-instruct", "m8i.2xlarge", 128, 32, {"tpot": 50.0, "ttft": 1000.0}),
    ("qwen2.5-1.5b-instruct", "g6.xlarge", 512, 128, {"tpot": 25.0, "ttft": 800.0}),
    ("llama-3.1-8b-instruct", "p5.48xlarge", 1024, 256, {"tpot": 30.0, "ttft": 2000.0, "e2el": 12000.0}),
    ("llama-3.1-8b-instruct", "inf2.48xlarge", 512, 128, {"tpot": 60.0, "ttft": 3000.0}),
]


def setup_of(model: str, instance: str, i: int, o: int) -> PerfSetup:
    s = perf_setup(load_model_spec(model), instance, PlanQuery(input_len=i, output_len=o))
    assert isinstance(s, PerfSetup), s
    return s


def slo(targets: dict[str, float], percentile: float = 90.0, attainment: float = 0.5) -> CapacitySLO:
    return CapacitySLO(targets=targets, percentile=percentile, attainment=attainment)


# --------------------------------------------------------------------------------------------- monotone
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[1])
@pytest.mark.parametrize("load", ["concurrency", "request_rate"])
def test_a_tighter_slo_or_a_higher_percentile_never_predicts_more(case: tuple, load: str) -> None:
    model, instance, i, o, targets = case
    s = setup_of(model, instance, i, o)

    def cap(t: dict[str, float], pct: float = 90.0, att: float = 0.5) -> float:
        r = predict_capacity(s.perf, s.factors, input_len=i, output_len=o, slo=slo(t, pct, att), load=load)
        return r.max_load or 0.0

    base = cap(targets)
    assert base > 0, f"{instance}: the SLO should be reachable"
    for scale in (0.95, 0.8, 0.6, 0.4):
        tighter = cap({k: v * scale for k, v in targets.items()})
        assert tighter <= base
        base = tighter
    by_pct = [cap(targets, pct) for pct in (10, 50, 75, 90, 95, 99, 99.9)]
    assert by_pct == sorted(by_pct, reverse=True), by_pct
    by_att = [cap(targets, 90, att) for att in (0.1, 0.5, 0.9, 0.99)]
    assert by_att == sorted(by_att, reverse=True), by_att
    for metric in targets:  # one target tightened alone
        assert cap({**targets, metric: targets[metric] / 2}) <= cap(targets)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[1])
def test_a_rate_prediction_is_below_saturation(case: tuple) -> None:
    model, instance, i, o, targets = case
    s = setup_of(model, instance, i, o)
    rm = RateModel(s.perf, s.factors, i, o)
    # the saturation throughput is no more than a full batch's closed-loop throughput
    full = s.perf.predict(s.factors, i, o, rm.slots, "steady")
    assert rm.saturation <= full.rps * (1 + 1e-9)
    loose = {k: v * 100 for k, v in targets.items()}
    for t in (targets, loose):
        r = predict_capacity(s.perf, s.factors, input_len=i, output_len=o, slo=slo(t), load="request_rate")
        assert r.max_load is not None and 0 < r.max_load < rm.saturation
        assert r.saturation == rm.saturation
    # a loose SLO is held up to (just below) saturation; past it a level is over-saturated
    assert r.max_load == pytest.approx(0.99 * rm.saturation, rel=2e-3)
    over = level_prediction(
        s.perf,
        s.factors,
        input_len=i,
        output_len=o,
        level=1.01 * rm.saturation,
        load="request_rate",
        slo=slo(loose),
    )
    assert over.oversaturated and over.met is False


def test_latency_grows_with_the_rate_and_the_percentile() -> None:
    s = setup_of("qwen2.5-1.5b-instruct", "g6.xlarge", 512, 128)
    rm = RateModel(s.perf, s.factors, 512, 128)
    target = slo({"ttft": 1e9, "tpot": 1e9, "e2el": 1e9, "itl": 1e9})
    for load, levels in (
        ("concurrency", [1, 2, 4, 8, 16, 32, 64]),
        ("request_rate", [rm.saturation * x for x in (0.05, 0.2, 0.5, 0.8, 0.95)]),
    ):
        prev: dict[str, float] = {}
        # a Poisson rate only: a closed loop's TTFT can fall where its waves spread out (PerfModel.predict)
        for level in levels if load == "request_rate" else ():
            lp = level_prediction(
                s.perf, s.factors, input_len=512, output_len=128, level=level, load=load, slo=target
            )
            for m in ("ttft", "tpot", "e2el"):
                assert lp.percentiles[m] >= prev.get(m, 0.0) * (1 - 1e-6), (load, level, m)
            prev = lp.percentiles
        for level in levels:
            qs = [
                level_prediction(
                    s.perf,
                    s.factors,
                    input_len=512,
                    output_len=128,
                    level=level,
                    load=load,
                    slo=slo(target.targets, q),
                ).percentiles
                for q in (50, 90, 99)
            ]
            for m in ("ttft", "tpot", "itl", "e2el"):
                assert qs[0][m] <= qs[1][m] <= qs[2][m], (load, level, m)


def test_the_median_closed_loop_capacity_agrees_with_the_estimate() -> None:
    """Judged at the median TPOT, the capacity is the concurrency ``estimate --slo`` finds for the typical
    request (the same wave model), within one user."""
    model = load_model_spec("smollm2-135m-instruct")
    for instance, tpot in (("m8i.2xlarge", 40.0), ("m8i.2xlarge", 55.0), ("g6.xlarge", 8.0)):
        e = estimate(
            model, instance, PlanQuery(input_len=128, output_len=32, concurrency=1, slo=SLO(tpot_ms=tpot))
        )
        s = setup_of("smollm2-135m-instruct", instance, 128, 32)
        r = predict_capacity(
            s.perf,
            s.factors,
            input_len=128,
            output_len=32,
            slo=slo({"tpot": tpot}, 50, 0.01),
            load="concurrency",
        )
        assert e.max_concurrency_meeting_slo is not None and r.max_load is not None
        assert abs(r.max_load - e.max_concurrency_meeting_slo) <= 1, (instance, tpot)


# --------------------------------------------------------------------------------------------- known cases
def toy_engine(slots: int = 64, chunk: int = 1 << 20) -> tuple[PerfModel, EfficiencyFactors]:
    """An engine whose decode step is exactly 10 ms + 4 ms per running request (the weights take 10 ms to read,
    nothing else costs time) and whose prefill is one weight read: the batching fixture's cost model."""
    pm = PerfModel(
        tp=1,
        bw_peak=1e9,
        flops_peak=1e30,
        link=1e12,
        dense_read=1e7,  # 10 ms at 1 GB/s
        expert_bytes=0.0,
        moe_e=0,
        moe_k=0,
        decode_flops_per_token=1.0,
        prefill_flops_per_token=1.0,
        head_flops=1.0,
        attn_coef=0.0,
        kv_per_token=0.0,
        window=None,
        window_share=0.0,
        allreduce_bytes_per_token=0.0,
        n_allreduce=0,
        min_allreduce_us=0.0,
        batch_limit=slots,
        kv_tokens=1 << 30,
        chunk=chunk,
    )
    f = EfficiencyFactors(
        bandwidth_efficiency=1.0,
        compute_efficiency=1.0,
        step_overhead_ms=0.0,
        per_sequence_overhead_ms=4.0,
        request_overhead_ms=5.0,
        prefill_interference=0.5,
        allreduce_latency_us=0.0,
        request_serial_ms=2.0,
    )
    return pm, f


def test_known_closed_loop_capacity() -> None:
    """TPOT = 10 + 4 x C ms for C <= 64 slots: TPOT <= 50 ms holds up to exactly 10 users, at any percentile;
    above the slots TPOT stops growing, so a TPOT-only SLO past them is met up to the bound."""
    pm, f = toy_engine()
    for pct in (50, 90, 99):
        r = predict_capacity(pm, f, input_len=32, output_len=64, slo=slo({"tpot": 50.0}, pct, 0.95))
        assert r.max_load == 10 and r.at_max is not None
        assert r.at_max.percentiles["tpot"] == pytest.approx(50.0)
    r = predict_capacity(pm, f, input_len=32, output_len=64, slo=slo({"tpot": 300.0}), max_load=500)
    assert r.max_load == 500 and r.notes
    # TTFT in a wave of C: the first request is prefilled alone (5 ms server + 10 ms), the k-th also waits for
    # the others' prefill (one 10 ms chunk) and the k - 1 arrivals the server took before it (2 ms each)
    c = 10
    lp = level_prediction(
        pm, f, input_len=32, output_len=64, level=c, load="concurrency", slo=slo({"ttft": 1e6})
    )
    # p90 of ten equal shares lies on the boundary between the 9th and 10th: numpy's linear interpolation over
    # many waves puts it a tenth of the way from the 9th (41 ms) to the 10th (43 ms)
    assert lp.percentiles["ttft"] == pytest.approx(5 + 10 + 10 + (9 - 1) * 2 + 0.1 * 2)
    cap = predict_capacity(pm, f, input_len=32, output_len=64, slo=slo({"ttft": 25 + 2 * 4 + 0.01}, 90, 0.5))
    assert cap.max_load == 5  # p90 of a wave of 5 is its 5th request, 25 + 4 x 2 = 33 ms; of 6 its 6th, 35 ms


def test_a_two_user_wave_at_p50_lies_halfway_between_the_stalled_request_and_the_other() -> None:
    """Half the requests of a 2-user loop are the one whose decode waits for the other's prefill: their p50,
    as numpy takes it over many waves, is the mean of the two (on the real vLLM CPU engine, 512/32 tokens:
    27-34 ms alone, 38-46 ms with two users; the 512-token prefill is what stalls)."""
    from accelbench.modelspec import load_model_spec

    setup = perf_setup(
        load_model_spec("smollm2-135m-instruct"), "m7i.xlarge", PlanQuery(input_len=512, output_len=32)
    )
    assert isinstance(setup, PerfSetup)
    pm, f = setup.perf, setup.factors
    pop = closed_loop_population(pm, f, 512, 32, 2)
    lo, hi = pop.quantile("tpot", 0.25), pop.quantile("tpot", 0.75)
    assert lo < hi  # the stalled first request and the other
    lp = level_prediction(
        pm, f, input_len=512, output_len=32, level=2, load="concurrency", slo=slo({"tpot": 1e6}, 50.0)
    )
    assert lp.percentiles["tpot"] == pytest.approx((lo + hi) / 2 * 1000)


def test_known_rate_capacity() -> None:
    """Open loop on the toy engine: Little's law gives the mean batch b = rate x E2E(b) with TPOT = 10 + 4 b ms,
    so TPOT <= 50 ms (b = 10) holds up to 10 / E2E(10) requests/s, E2E(10) = 15 ms to the first token + 63 x
    50 ms of decode (and the newcomers' one-weight-read prefills stalling it a little)."""
    pm, f = toy_engine()
    f = f.model_copy(update={"request_serial_ms": 0.0, "prefill_interference": 0.0})
    rm = RateModel(pm, f, 32, 64)
    assert rm.e2e(10) == pytest.approx((5 + 10 + 63 * (10 + 4 * 10)) / 1000, rel=0.05)
    r = predict_capacity(
        pm, f, input_len=32, output_len=64, slo=slo({"tpot": 50.0}, 50, 0.01), load="request_rate"
    )
    assert r.max_load is not None and r.at_max is not None
    assert r.max_load == pytest.approx(10 / rm.e2e(10), rel=2e-3)
    assert r.at_max.batch == pytest.approx(10, rel=5e-3) and r.at_max.percentiles["tpot"] <= 50.0
    assert rm.slots == 64 and rm.saturation == pytest.approx(64 / rm.e2e(64))


def test_one_slot_is_an_md1_queue() -> None:
    """One slot (llama.cpp's server): requests queue for it; the wait's mean is the M/D/1 one."""
    pm, f = toy_engine(slots=1)
    f = f.model_copy(update={"request_serial_ms": 0.0})
    rm = RateModel(pm, f, 32, 64)
    service = rm.e2e(1)
    assert rm.saturation == pytest.approx(1 / service)
    rate = 0.5 / service
    (p_wait, mean), _ = rm._waits(rate)
    assert p_wait == pytest.approx(0.5) and p_wait * mean == pytest.approx(0.5 * service / (2 * (1 - 0.5)))
    low = level_prediction(
        pm,
        f,
        input_len=32,
        output_len=64,
        level=0.1 / service,
        load="request_rate",
        slo=slo({"ttft": 1e6}, 99),
    )
    high = level_prediction(
        pm,
        f,
        input_len=32,
        output_len=64,
        level=0.9 / service,
        load="request_rate",
        slo=slo({"ttft": 1e6}, 99),
    )
    assert high.percentiles["ttft"] > 5 * low.percentiles["ttft"]


def test_queueing_pieces() -> None:
    assert erlang_c(1, 0.3) == pytest.approx(0.3)
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(4, 4.0) == 1.0 and erlang_c(8, 0.0) == 0.0
    assert md1(0.5, 2.0) == (0.5, 2.0)  # waits half the time, 2 / (2 x 0.5) when it does
    w = Wait(((0.4, 3.0),))
    assert w.quantile(0.5) == 0.0  # 60% never wait
    assert w.quantile(0.9) == pytest.approx(3.0 * math.log(0.4 / 0.1), rel=1e-6)
    two = Wait(((1.0, 1.0), (1.0, 2.0)))  # the sum of two exponentials: mean 3
    assert two.cdf(0.0) == 0.0 and two.cdf(50.0) == pytest.approx(1.0)
    median = two.quantile(0.5)
    assert two.cdf(median) == pytest.approx(0.5, abs=1e-9)
    pmf = poisson(3.0)
    assert sum(w for _, w in pmf) == pytest.approx(1.0)
    assert sum(k * w for k, w in pmf) == pytest.approx(3.0)


# --------------------------------------------------------------------------------------------- the service
def test_capacity_plan_predicts_both_loads() -> None:
    target = slo({"tpot": 50.0, "ttft": 1000.0}, 90, 0.95)
    hourly, users = capacity_plan("m8i.2xlarge", "smollm2-135m-instruct", 128, 32, target, "concurrency")
    _, rate = capacity_plan("m8i.2xlarge", "smollm2-135m-instruct", 128, 32, target, "request_rate")
    assert hourly and hourly > 0
    assert users is not None and users >= 1 and users == int(users)
    assert rate is not None and rate > 0
    # the two agree on the throughput: the rate sustained is about what that many users send
    s = setup_of("smollm2-135m-instruct", "m8i.2xlarge", 128, 32)
    closed = s.perf.predict(s.factors, 128, 32, int(users), "bursts")
    assert 0.5 < rate / closed.rps < 2.0
    # ITL and E2EL are judged too; a stricter percentile never predicts more
    _, itl = capacity_plan("m8i.2xlarge", "smollm2-135m-instruct", 128, 32, slo({"itl": 60.0}), "concurrency")
    assert itl is not None
    _, strict = capacity_plan(
        "m8i.2xlarge",
        "smollm2-135m-instruct",
        128,
        32,
        slo({"tpot": 50.0, "ttft": 1000.0}, 99, 0.99),
        "concurrency",
    )
    assert strict is not None and strict <= users
    assert capacity_plan("m8i.2xlarge", "smollm2-135m-instruct", 128, 32, None, "concurrency")[1] is None
    assert capacity_plan(None, "smollm2-135m-instruct", 128, 32, target, "concurrency") == (None, None)
    _, bounded = capacity_plan(
        "m8i.2xlarge", "smollm2-135m-instruct", 128, 32, slo({"tpot": 1e5}), "concurrency", max_load=40
    )
    assert bounded == 40
    # a model the planner cannot read offline: priced, no prediction
    assert capacity_plan("m8i.2xlarge", "no-such-model-anywhere", 128, 32, target, "concurrency")[1] is None
