"""The seeded send schedule (vLLM's arrival process) and the summary statistics (vLLM's definitions)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from accelbench.bench.metrics import compute_metrics, peak_rates, stats_ms
from accelbench.bench.schedule import SCHEDULES, send_times
from accelbench.domain.load import GoodputSLO
from accelbench.domain.request_record import RequestRecord


# ------------------------------------------------------------------------------------------------ schedule
def test_infinite_rate_sends_everything_at_once() -> None:
    assert send_times(5, math.inf, 1.0, 0) == [0.0] * 5
    assert send_times(0, 10.0) == []


def test_schedule_is_computed_from_the_seed() -> None:
    a = send_times(100, 20.0, 1.0, seed=7)
    assert a == send_times(100, 20.0, 1.0, seed=7)
    assert a != send_times(100, 20.0, 1.0, seed=8)
    assert all(x < y for x, y in itertools.pairwise(a))
    # scaled like vLLM's: the last request is due at n / rate whatever the seed
    assert a[-1] == pytest.approx(100 / 20.0)
    assert a[0] > 0


def test_burstiness_changes_the_spread_of_gaps() -> None:
    def cv(gamma: float) -> float:
        t = np.array(send_times(20000, 100.0, gamma, seed=1))
        gaps = np.diff(t)
        return float(np.std(gaps) / np.mean(gaps))

    assert cv(1.0) == pytest.approx(1.0, rel=0.05)  # Poisson: exponential gaps
    assert cv(0.25) == pytest.approx(2.0, rel=0.08)  # gamma shape k: cv = 1/sqrt(k)
    assert cv(4.0) == pytest.approx(0.5, rel=0.05)
    even = np.diff(send_times(10, 5.0, math.inf, 0))
    assert np.allclose(even, 0.2)


def test_bad_rates_and_unknown_schedule() -> None:
    with pytest.raises(ValueError):
        send_times(3, -1.0)
    assert "gamma" in SCHEDULES
    with pytest.raises(Exception, match="Did you mean 'gamma'"):
        send_times(3, 1.0, kind="gama")


# ------------------------------------------------------------------------------------------------- metrics
def rec(i: int, *, ok: bool = True, ttft: float = 0.1, itl: list[float] | None = None, out: int = 4,
        start: float = 0.0, server_pt: int | None = None, prompt_len: int = 10, error: str = "",
        planned: float | None = None) -> RequestRecord:  # fmt: skip
    itl = [0.02] * (out - 1) if itl is None else itl
    return RequestRecord(
        index=i, prompt_len=prompt_len, server_prompt_tokens=server_pt, output_tokens=out if ok else 0,
        output_tokens_source="usage" if ok else "none", start_s=start,
        planned_send_s=start if planned is None else planned, ttft_s=ttft if ok else 0.0, itl_s=itl if ok else [],
        latency_s=ttft + sum(itl) if ok else 0.0, success=ok, error=error,
    )  # fmt: skip


def test_stats_ms_is_numpy_linear_in_ms() -> None:
    values = [0.010, 0.020, 0.030, 0.045, 0.100]
    st = stats_ms(values)
    a = np.array(values) * 1000
    assert st.count == 5
    assert st.mean == pytest.approx(a.mean()) and st.median == pytest.approx(np.median(a))
    assert st.std == pytest.approx(np.std(a))  # population std, as vLLM
    for p in (50, 90, 95, 99):
        assert getattr(st, f"p{p}") == pytest.approx(np.percentile(a, p))
    assert st.p90 == pytest.approx(45 + 0.6 * 55)  # linear interpolation between 45 and 100
    assert stats_ms([]).count == 0 and stats_ms([]).p99 == 0.0


def test_compute_metrics_as_vllm_defines_them() -> None:
    records = [
        rec(0, ttft=0.1, itl=[0.02, 0.02, 0.02], out=4, start=0.0, server_pt=12),
        rec(1, ttft=0.2, itl=[0.05], out=2, start=0.1),
        rec(2, ttft=0.3, itl=[], out=1, start=0.2),  # one token: no TPOT
        rec(3, ok=False, error="HTTP 500: boom", start=0.3),
        rec(4, ok=False, error="HTTP 500: boom", start=0.3),
        rec(5, ok=False, error="timeout: no complete response within 1 s", start=0.4),
    ]
    m = compute_metrics(records, duration_s=2.0)
    assert m.completed == 3 and m.failed == 3
    assert m.errors == {"HTTP 500: boom": 2, "timeout: no complete response within 1 s": 1}
    assert m.total_input_tokens == 12 + 10 + 10  # the server's count where it sent one
    assert m.total_output_tokens == 7
    assert m.request_throughput == pytest.approx(1.5)
    assert m.output_throughput == pytest.approx(3.5)
    assert m.total_token_throughput == pytest.approx((32 + 7) / 2.0)
    assert m.request_goodput is None
    assert m.ttft_ms.count == 3 and m.ttft_ms.mean == pytest.approx(200.0)
    # TPOT = (E2EL - TTFT) / (out - 1), only for out > 1
    assert m.tpot_ms.count == 2
    assert sorted([m.tpot_ms.min, m.tpot_ms.max]) == pytest.approx([20.0, 50.0])
    # ITL pools every gap of every successful request
    assert m.itl_ms.count == 4 and m.itl_ms.mean == pytest.approx((0.02 * 3 + 0.05) / 4 * 1000)
    assert m.e2el_ms.max == pytest.approx(300.0)
    assert m.output_tokens_source == "usage"


def test_goodput_counts_requests_meeting_every_slo() -> None:
    records = [
        rec(0, ttft=0.1, itl=[0.01] * 3, out=4),  # ttft 100, tpot 10, e2el 130
        rec(1, ttft=0.3, itl=[0.01] * 3, out=4),  # ttft too slow
        rec(2, ttft=0.1, itl=[0.05] * 3, out=4),  # tpot too slow
        rec(3, ttft=0.1, itl=[], out=1),  # one token: tpot counts as 0
    ]
    m = compute_metrics(records, 2.0, GoodputSLO(ttft_ms=200, tpot_ms=20))
    assert m.request_goodput == pytest.approx(2 / 2.0)
    m2 = compute_metrics(records, 2.0, GoodputSLO(e2el_ms=140))
    assert m2.request_goodput == pytest.approx(2 / 2.0)  # 130 ms and 100 ms meet it


def test_peak_rates_use_one_second_buckets() -> None:
    records = [
        rec(0, ttft=0.05, itl=[0.2] * 5, out=6, start=0.0),  # tokens at 0.05, 0.25, ... 1.05 s
        rec(1, ttft=0.05, itl=[0.2] * 5, out=6, start=0.5),  # tokens at 0.55, 0.75, ... 1.55 s
        rec(2, ok=False, start=3.0),
    ]
    tokens, concurrent = peak_rates(records)
    assert tokens == 8  # second 0: 5 + 3 tokens
    assert concurrent == 2


def test_scheduling_lag_and_source_mix() -> None:
    records = [rec(0, start=0.010, planned=0.0), rec(1, start=0.5, planned=0.499)]
    records[1].output_tokens_source = "tokenizer"
    m = compute_metrics(records, 1.0)
    assert m.scheduling_lag_ms.max == pytest.approx(10.0) and m.scheduling_lag_ms.min == pytest.approx(1.0)
    assert m.output_tokens_source == "mixed"
    empty = compute_metrics([], 0.0)
    assert empty.completed == 0 and empty.request_throughput == 0.0 and empty.output_tokens_source == "none"


def test_prompt_check() -> None:
    records = [
        rec(0, server_pt=10),
        rec(1, server_pt=12),
        rec(2, server_pt=None),
        rec(3, ok=False, server_pt=3),
    ]
    check = compute_metrics(records, 1.0).prompt_token_check
    assert check.checked == 2 and check.mismatched == 1 and check.max_abs_deviation == 2
    assert check.mean_deviation == pytest.approx(1.0)
