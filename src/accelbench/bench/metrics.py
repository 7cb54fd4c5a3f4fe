"""Summary statistics of a benchmark, computed as ``vllm bench serve`` computes them.

- Only successful requests enter the latency statistics and token totals; failed ones are counted with their
  reason.
- TTFT, TTFO, E2EL and ITL come from the client (see ``bench.client`` for what ends each under each
  ``metrics_definition``); TPOT of a request is ``(E2EL - TTFT) / (output_tokens - 1)`` and exists only when it
  produced more than one token.
- TTFO statistics cover the successful requests that produced answer content (not the tool-call-only ones).
- Reasoning and answer token totals add up the requests' split (``RequestRecord.token_split_source``).
- ITL statistics pool the gaps of all requests.
- Statistics are in milliseconds: mean, median, standard deviation (numpy's population ``std``), min, max and the
  50/90/95/99th percentiles with numpy's default linear interpolation. An empty metric is all zeros with
  ``count == 0``.
- Input tokens of a request are the server's ``usage.prompt_tokens`` when it sent one, else the client's count.
- Throughputs divide by the benchmark's wall time, first send to last completion.
- Goodput counts the requests that meet every SLO given; for that test a request with one output token has a
  TPOT of 0 (as in vLLM).
- Peak output tokens per second and peak concurrent requests use vLLM's one-second buckets.
- Each statistic of TTFT, TPOT, ITL and E2EL and each throughput carries its 95% interval (``*_ci95``), from a
  bootstrap over the successful requests (``bench.intervals``).
- A latency metric whose distribution has two modes is named in ``modes`` with each mode's share and median
  (``bench.modes``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from accelbench.bench.intervals import METHOD, RequestColumns, benchmark_intervals
from accelbench.bench.modes import two_modes
from accelbench.domain.bench_summary import MetricStats, PromptTokenCheck, SummaryMetrics
from accelbench.domain.load import GoodputSLO
from accelbench.domain.request_record import RequestRecord

PERCENTILES = (50, 90, 95, 99)


def stats_ms(values_s: Sequence[float]) -> MetricStats:
    """Statistics of values given in seconds, reported in milliseconds."""
    if len(values_s) == 0:
        return MetricStats()
    a = np.asarray(values_s, dtype=np.float64) * 1000.0
    p50, p90, p95, p99 = (float(x) for x in np.percentile(a, PERCENTILES))
    return MetricStats(
        count=int(a.size),
        mean=float(np.mean(a)),
        median=float(np.median(a)),
        std=float(np.std(a)),
        min=float(np.min(a)),
        max=float(np.max(a)),
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
    )


# What compute_metrics returns; BenchmarkSummary extends it with the run's context.
Metrics = SummaryMetrics


def input_tokens(r: RequestRecord) -> int:
    return r.server_prompt_tokens if r.server_prompt_tokens is not None else r.prompt_len


def error_kind(error: str) -> str:
    """The reason a failure is counted under in ``errors``: the message without request-specific numbers
    after its first 200 characters."""
    error = " ".join(error.split())
    return error if len(error) <= 200 else error[:197] + "..."


def peak_rates(records: Sequence[RequestRecord]) -> tuple[float, int]:
    """vLLM's peak output tokens per second and peak concurrent requests (one-second buckets from the first
    successful send; one 'token' per text-carrying chunk, as vLLM counts it)."""
    ok = [r for r in records if r.success]
    if not ok:
        return 0.0, 0
    t_min = min(r.start_s for r in ok)
    t_max = max(r.start_s + r.latency_s for r in ok)
    buckets = int(np.ceil(t_max - t_min)) + 1
    tokens = np.zeros(buckets)
    concurrent = np.zeros(buckets)
    for r in ok:
        t = r.start_s + r.ttft_s
        times = [t]
        for gap in r.itl_s:
            t += gap
            times.append(t)
        for tt in times:
            b = int(tt - t_min)
            if 0 <= b < buckets:
                tokens[b] += 1
        first = int(r.start_s - t_min)
        last = int(r.start_s + r.latency_s - t_min)
        concurrent[first : last + 1] += 1
    return float(tokens.max()), int(concurrent.max())


def peak_in_flight(records: Sequence[RequestRecord]) -> int:
    """The most requests in flight at one instant: every request from its send to its end (failed ones too, they
    held a slot); a request ending at the instant another starts is not counted twice."""
    events = sorted(
        [(r.start_s, 1) for r in records] + [(r.start_s + max(0.0, r.latency_s), -1) for r in records],
        key=lambda e: (e[0], e[1]),  # ends before starts at the same instant
    )
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def prompt_check(records: Sequence[RequestRecord]) -> PromptTokenCheck:
    """The client's expected prompt tokens against the server's usage.prompt_tokens (successful requests with
    both numbers)."""
    devs = [
        r.server_prompt_tokens - r.prompt_len
        for r in records
        if r.success and r.server_prompt_tokens is not None and r.prompt_len > 0
    ]
    if not devs:
        return PromptTokenCheck()
    return PromptTokenCheck(
        checked=len(devs),
        mismatched=sum(1 for d in devs if d != 0),
        max_abs_deviation=max(abs(d) for d in devs),
        mean_deviation=float(np.mean(devs)),
    )


def compute_metrics(
    records: Sequence[RequestRecord], duration_s: float, goodput: GoodputSLO | None = None
) -> Metrics:
    """All summary figures of one benchmark from its request records."""
    m = Metrics()
    ok = [r for r in records if r.success]
    failed = [r for r in records if not r.success]
    m.completed = len(ok)
    m.failed = len(failed)
    m.errors = dict(Counter(error_kind(r.error or "unknown error") for r in failed).most_common())
    ttfts = [r.ttft_s for r in ok]
    e2els = [r.latency_s for r in ok]
    tpots = [tp for r in ok if (tp := r.tpot_s) is not None]
    itls = [gap for r in ok for gap in r.itl_s]
    m.total_input_tokens = sum(input_tokens(r) for r in ok)
    m.total_output_tokens = sum(r.output_tokens for r in ok)
    m.total_reasoning_tokens = sum(r.reasoning_tokens for r in ok)
    m.total_answer_tokens = sum(r.answer_tokens for r in ok)
    dur = duration_s if duration_s > 0 else float("nan")
    if duration_s > 0:
        m.request_throughput = m.completed / dur
        m.output_throughput = m.total_output_tokens / dur
        m.total_token_throughput = (m.total_input_tokens + m.total_output_tokens) / dur
    good_flags: list[bool] | None = None
    if goodput is not None and not goodput.is_empty():
        good_flags = [meets_slo(r, goodput) for r in ok]
        m.request_goodput = sum(good_flags) / dur if duration_s > 0 else 0.0
    m.max_output_tokens_per_s, m.max_concurrent_requests = peak_rates(records)
    m.peak_in_flight = peak_in_flight(records)
    m.ttft_ms = stats_ms(ttfts)
    m.ttfo_ms = stats_ms([t for r in ok if (t := r.ttfo_s) is not None])
    m.tpot_ms = stats_ms(tpots)
    m.itl_ms = stats_ms(itls)
    m.e2el_ms = stats_ms(e2els)
    m.scheduling_lag_ms = stats_ms([max(0.0, r.scheduling_lag_s) for r in records])
    sources = {r.output_tokens_source for r in ok}
    m.output_tokens_source = sources.pop() if len(sources) == 1 else ("mixed" if sources else "none")
    m.prompt_token_check = prompt_check(records)
    attach_intervals(m, ok, duration_s, good_flags)
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("e2el", e2els)):
        if (found := two_modes([v * 1000.0 for v in values])) is not None:
            m.modes[name] = found
    return m


def meets_slo(r: RequestRecord, goodput: GoodputSLO) -> bool:
    """Whether a successful request meets every SLO given (a one-token request has a TPOT of 0, as in vLLM)."""
    tpot = r.tpot_s or 0.0
    if goodput.ttft_ms is not None and r.ttft_s * 1000 > goodput.ttft_ms:
        return False
    if goodput.tpot_ms is not None and tpot * 1000 > goodput.tpot_ms:
        return False
    return goodput.e2el_ms is None or r.latency_s * 1000 <= goodput.e2el_ms


def request_columns(ok: Sequence[RequestRecord], good_flags: Sequence[bool] | None = None) -> RequestColumns:
    """The per-request figures of the successful requests ``ok`` as the interval code takes them."""
    tpots = [r.tpot_s for r in ok]
    return RequestColumns(
        ttft_s=np.array([r.ttft_s for r in ok], dtype=np.float64),
        e2el_s=np.array([r.latency_s for r in ok], dtype=np.float64),
        tpot_s=np.array([t if t is not None else 0.0 for t in tpots], dtype=np.float64),
        has_tpot=np.array([t is not None for t in tpots], dtype=bool),
        itl_s=np.fromiter((g for r in ok for g in r.itl_s), dtype=np.float64),
        itl_counts=np.array([len(r.itl_s) for r in ok], dtype=np.int64),
        input_tokens=np.array([input_tokens(r) for r in ok], dtype=np.float64),
        output_tokens=np.array([r.output_tokens for r in ok], dtype=np.float64),
        good=None if good_flags is None else np.asarray(good_flags, dtype=np.float64),
    )


def attach_intervals(
    m: Metrics, ok: Sequence[RequestRecord], duration_s: float, good_flags: Sequence[bool] | None
) -> None:
    """Set the ``*_ci95`` fields of ``m`` from a bootstrap over its successful requests (``bench.intervals``)."""
    found = benchmark_intervals(request_columns(ok, good_flags), duration_s)
    if not found:
        return
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        st: MetricStats = getattr(m, metric)
        for stat, (lo, hi) in found.get(metric, {}).items():
            setattr(st, f"{stat}_ci95", [lo, hi])
    for key, (lo, hi) in found.get("throughput", {}).items():
        setattr(m, f"{key}_ci95", [lo, hi])
    m.ci95_method = METHOD
