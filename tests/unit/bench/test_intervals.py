"""The 95% intervals: checked against textbook cases, a brute-force bootstrap and their coverage of known truths."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelbench.bench.intervals import (
    BASIS_REPEATS,
    BASIS_REQUESTS,
    benchmark_intervals,
    cell_interval,
    cell_replicates,
    half_width_pct,
    is_wide,
    percentile_interval,
    pooled_intervals,
    stat_intervals,
)
from accelbench.bench.metrics import compute_metrics, request_columns
from accelbench.bench.results_io import to_vllm_dict
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord


def test_median_of_a_normal_sample_matches_the_textbook_interval() -> None:
    # the sample median of n draws from N(mu, sigma) has standard error sqrt(pi / 2) * sigma / sqrt(n)
    rng = np.random.default_rng(3)
    n, sigma = 4000, 10.0
    x = rng.normal(100.0, sigma, n)
    lo, hi = stat_intervals(x)["median"]
    textbook = 1.959964 * math.sqrt(math.pi / 2) * sigma / math.sqrt(n)
    assert lo < float(np.median(x)) < hi
    assert (hi - lo) / 2 == pytest.approx(textbook, rel=0.2)
    # the mean's interval is the textbook sigma / sqrt(n) one
    mlo, mhi = stat_intervals(x)["mean"]
    assert (mhi - mlo) / 2 == pytest.approx(1.959964 * np.std(x) / math.sqrt(n), rel=1e-6)


def test_exact_percentile_bootstrap_agrees_with_drawing_resamples() -> None:
    rng = np.random.default_rng(11)
    x = np.sort(rng.lognormal(0.0, 0.6, 301))
    draws = x[rng.integers(0, x.size, size=(8000, x.size))]
    for q in (50, 90, 99):
        brute = np.percentile(np.percentile(draws, q, axis=1), (2.5, 97.5))
        lo, hi = percentile_interval(x, q)
        step = float(np.median(np.diff(x[int(x.size * q / 100) - 5 : int(x.size * q / 100) + 5]))) * 2.5
        assert lo == pytest.approx(brute[0], abs=step)
        assert hi == pytest.approx(brute[1], abs=step)


def test_the_median_interval_covers_the_true_median_about_95_percent() -> None:
    rng = np.random.default_rng(5)
    true_median = math.exp(3.0)  # lognormal(3, 0.5)
    hits = 0
    trials = 400
    for _ in range(trials):
        lo, hi = stat_intervals(rng.lognormal(3.0, 0.5, 300))["median"]
        hits += lo <= true_median <= hi
    assert 0.91 <= hits / trials <= 0.99


def test_pooled_itl_interval_resamples_requests_and_covers_the_truth() -> None:
    # each request has its own speed, so its gaps move together: an interval that treated gaps as independent
    # would be far too narrow
    rng = np.random.default_rng(9)

    def sample(n: int) -> tuple[np.ndarray, np.ndarray]:
        speeds = rng.normal(20.0, 3.0, n)
        gaps = [rng.normal(s, 1.0, 50) for s in speeds]
        return np.concatenate(gaps), np.full(n, 50)

    big, _ = sample(40000)
    truth = float(np.median(big))
    hits = 0
    trials = 200
    for _ in range(trials):
        pooled, sizes = sample(200)
        lo, hi = pooled_intervals(pooled, sizes)["median"]
        hits += lo <= truth <= hi
    assert 0.89 <= hits / trials <= 0.99
    naive = stat_intervals(pooled)["median"]
    assert (hi - lo) > 3 * (naive[1] - naive[0])


def test_one_repeat_is_marked_requests_only_and_repeats_widen_with_disagreement() -> None:
    assert cell_interval([20.0], [(19.0, 21.0)]) == ((19.0, 21.0), BASIS_REQUESTS)
    assert cell_interval([20.0, 20.5], [None, None]) == (None, None)
    close, basis = cell_interval([20.0, 20.1, 19.9], [(19.5, 20.5)] * 3)
    apart, _ = cell_interval([18.0, 20.0, 22.0], [(17.5, 18.5), (19.5, 20.5), (21.5, 22.5)])
    assert basis == BASIS_REPEATS
    assert close is not None and apart is not None
    assert close[0] < 20.0 < close[1]
    assert apart[1] - apart[0] > 2 * (close[1] - close[0])


def test_the_same_data_gives_the_same_interval() -> None:
    values, cis = [10.0, 11.0, 10.5], [(9.5, 10.5), (10.4, 11.7), (10.0, 11.0)]
    assert cell_interval(values, cis) == cell_interval(list(values), list(cis))
    a = cell_replicates(values, cis, salt=0)
    assert np.array_equal(a, cell_replicates(values, cis, salt=0))
    assert not np.array_equal(a, cell_replicates(values, cis, salt=1))


def test_half_width_and_wide() -> None:
    assert half_width_pct(20.0, [19.4, 20.6]) == pytest.approx(3.0)
    assert not is_wide(20.0, [19.0, 21.0])
    assert is_wide(20.0, [17.0, 23.0])
    assert half_width_pct(None, [1.0, 2.0]) is None


def _record(i: int, ttft: float, gap: float, out: int = 16) -> RequestRecord:
    return RequestRecord(
        index=i,
        prompt_len=32,
        output_tokens=out,
        output_tokens_source="usage",
        start_s=i * 0.01,
        ttft_s=ttft,
        itl_s=[gap] * (out - 1),
        latency_s=ttft + gap * (out - 1),
        success=True,
    )


def test_every_result_carries_intervals_beside_its_figures() -> None:
    rng = np.random.default_rng(2)
    records = [_record(i, float(rng.lognormal(-2, 0.3)), float(rng.normal(0.02, 0.002))) for i in range(200)]
    m = compute_metrics(records, 10.0)
    for metric in (m.ttft_ms, m.tpot_ms, m.itl_ms, m.e2el_ms):
        for stat in ("mean", "median", "p90", "p99"):
            lo, hi = getattr(metric, f"{stat}_ci95")
            assert lo <= getattr(metric, stat) <= hi
    assert m.output_throughput_ci95 is not None
    assert m.output_throughput_ci95[0] <= m.output_throughput <= m.output_throughput_ci95[1]
    lo, hi = m.request_throughput_ci95
    # the requests' latencies move a rerun's wall time, so request throughput has a width too
    assert lo < m.request_throughput < hi
    assert m.ci95_method
    summary = BenchmarkSummary(
        date="2026-01-01T00:00:00", config=BenchConfig(), requests=records, **m.model_dump()
    )
    out = to_vllm_dict(summary)
    assert out["median_tpot_ms_ci95"] == m.tpot_ms.median_ci95
    assert out["p99_ttft_ms_ci95"] == m.ttft_ms.p99_ci95
    assert out["output_throughput_ci95"] == m.output_throughput_ci95


def _closed_loop_run(
    rng: np.random.Generator, streams: int, per_stream: int, out: int
) -> tuple[float, float, float]:
    """One closed-loop run of ``streams`` streams each sending ``per_stream`` requests back to back, every
    request ``out`` tokens long and its latency drawn at random: (output tokens/s, interval low, high)."""
    lat = rng.lognormal(math.log(0.5), 0.4, size=(streams, per_stream))
    duration = float(lat.sum(axis=1).max())
    records = [_record(i, 0.05, (x - 0.05) / (out - 1), out) for i, x in enumerate(lat.ravel())]
    m = compute_metrics(records, duration)
    assert m.output_throughput_ci95 is not None
    return m.output_throughput, m.output_throughput_ci95[0], m.output_throughput_ci95[1]


def test_a_fixed_output_length_still_gives_throughput_an_honest_width() -> None:
    # every request carries the same tokens, so only the latencies move a rerun's throughput: the interval's
    # half-width must match the spread of the figure over independent reruns of the same server
    rng = np.random.default_rng(11)
    runs = [_closed_loop_run(rng, streams=4, per_stream=50, out=16) for _ in range(300)]
    figures = np.array([r[0] for r in runs])
    half_widths = np.array([(r[2] - r[1]) / 2 for r in runs])
    assert half_widths.min() > 0
    spread = 1.96 * float(figures.std())
    assert 0.6 * spread < float(np.median(half_widths)) < 1.6 * spread
    # two reruns of the same server: their intervals overlap (no detectable difference) nine times in ten
    pairs = list(zip(runs[::2], runs[1::2], strict=True))
    overlap = sum(1 for a, b in pairs if a[1] <= b[2] and b[1] <= a[2])
    assert overlap >= 0.9 * len(pairs)


def test_no_requests_no_intervals() -> None:
    assert benchmark_intervals(request_columns([]), 1.0) == {}
    m = compute_metrics([], 1.0)
    assert m.tpot_ms.median_ci95 is None and m.ci95_method is None


def test_pooled_intervals_keep_requests_without_gaps_and_match_the_pooled_figures() -> None:
    rng = np.random.default_rng(4)
    groups = [rng.normal(10.0, 1.0, int(k)) for k in rng.integers(0, 6, 300)]  # some requests have no gap
    sizes = np.array([g.size for g in groups])
    pooled = np.concatenate(groups)
    found = pooled_intervals(pooled, sizes, scale=1000.0)
    for q in (50, 90, 99):
        lo, hi = found[f"p{q}"]
        assert lo <= float(np.percentile(pooled, q)) * 1000.0 * (1 + 1e-6) and hi >= lo
    lo, hi = found["mean"]
    assert lo < float(pooled.mean()) * 1000.0 < hi
