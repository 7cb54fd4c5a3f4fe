"""Every view of a comparison says the same thing about the same two runs: the report's headline, the compare
findings, the side-by-side tables (the CLI's and the Compare page's), the verdict table and the compare CSV all
read the comparison's one set of verdicts. A difference is written as faster or slower only where its interval
leaves 1 out, with its size and interval; otherwise as "no detectable difference".

The runs here are what gave two answers before: two runs of the same spec, one repeat each, noisy, whose best
configurations are different cells (so the headline set one cell against another) and whose figures differ by
more than the side-by-side table rounded away (so it called a difference inside the noise "1.26x slower")."""

from __future__ import annotations

import numpy as np

from accelbench.bench.metrics import compute_metrics
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.instance_types import PriceTier
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.run import RunStatus
from accelbench.report.compare_csv import read_compare_csv, write_compare_csv
from accelbench.report.compare_runs import compare_runs
from accelbench.report.files import load_report
from accelbench.report.side_by_side import pair_rows, side_by_side_rows
from accelbench.report.verdicts import NO_DIFFERENCE, MetricVerdict
from accelbench.store import Store
from accelbench.web.views import comparison_view

OUTPUT_LEN = 32


def _noisy_summary(concurrency: int, tpot_ms: float, seed: int) -> BenchmarkSummary:
    """One repeat of 16 requests whose TPOT and TTFT spread widely around ``tpot_ms`` and 100 ms."""
    rng = np.random.default_rng(seed)
    records: list[RequestRecord] = []
    t = 0.0
    for i in range(16):
        ttft = 0.1 * float(rng.lognormal(0.0, 0.5))
        tpot = tpot_ms / 1000.0 * float(rng.lognormal(0.0, 0.5))
        latency = ttft + tpot * (OUTPUT_LEN - 1)
        records.append(
            RequestRecord(
                index=i, prompt_len=128, max_tokens=OUTPUT_LEN, output_tokens=OUTPUT_LEN,
                output_tokens_source="usage", start_s=t, planned_send_s=t, ttft_s=ttft,
                itl_s=[tpot] * (OUTPUT_LEN - 1), latency_s=latency, success=True,
            )
        )  # fmt: skip
        if (i + 1) % concurrency == 0:
            t += latency
    duration = max(r.start_s + r.latency_s for r in records)
    metrics = compute_metrics(records, duration)
    return BenchmarkSummary(
        date="2026-01-02T03:04:05",
        config=BenchConfig(input_len=128, output_len=OUTPUT_LEN, num_prompts=16, max_concurrency=concurrency),
        duration_s=duration,
        num_prompts=16,
        requests=records,
        **dict(metrics),
    )


def _stored_pair(store: Store) -> tuple[str, str]:
    """Two runs of one spec, one repeat per cell, the second's TPOT drawn 26% higher at concurrency 1 (measured
    1.67x, inside the noise); their best configurations are different cells."""
    tpots = {"a": {1: 10.0, 2: 20.0, 4: 36.0}, "b": {1: 12.6, 2: 17.0, 4: 40.0}}
    ids = []
    for n, (label, cells) in enumerate(tpots.items()):
        run = store.create_run(kind="run", label=label, model="m", engine="vllm-cpu", spec={})
        for conc, tpot in cells.items():
            summary = _noisy_summary(conc, tpot, seed=100 * n + conc)
            store.save_result(run.id, input_len=128, concurrency=conc, repeat=0, summary=summary)
        store.set_status(run.id, RunStatus.completed)
        ids.append(run.id)
    return ids[0], ids[1]


def _said(v: MetricVerdict) -> str:
    """The words every view must use for one verdict."""
    return v.words


def test_every_view_reads_the_one_comparison(store: Store) -> None:
    a, b = _stored_pair(store)
    cmp = compare_runs(store, [a, b])
    report = load_report(store, [a, b])
    assert report.headline is not None
    headline = report.headline
    assert report.comparison.verdicts == cmp.verdicts  # the report and `compare` judge the same way

    decode = next(v for v in cmp.verdicts if v.metric == "tpot_p50_ms" and v.concurrency == 1)
    assert decode.verdict == NO_DIFFERENCE and decode.ratio > 1.2  # 1.67x the TPOT, inside the noise
    # what gave two answers: the table called that "1.67x slower", the headline set two different cells apart
    row = next(r for r in side_by_side_rows(cmp) if r[:3] == ["128", "1", "b"])
    assert "slower" not in row[-2] and "faster" not in row[-2], row[-2]
    assert not any("at their best configurations" in q.sentence for q in headline.ratios)
    words = _said(decode)
    assert words == NO_DIFFERENCE

    # the findings
    finding = next(f for f in cmp.findings if f.kind == "decode_speedup")
    assert words in finding.text and "slower" not in finding.text and "faster" not in finding.text
    # the side-by-side table (CLI, Compare page, report) and each run against the baseline
    assert row[-2] == words
    assert next(r for r in pair_rows(cmp) if r[1] == "b")[4] == words
    # the CSV
    _, rows = read_compare_csv(write_compare_csv(cmp))
    csv_row = next(r for r in rows if r["run_id"] == b and r["concurrency"] == "1")
    assert csv_row["tpot_p50_ms_verdict"] == decode.verdict
    assert csv_row["tpot_p50_ms_vs_baseline"] == words

    # the Compare page: its tables and findings are the same strings
    page = comparison_view(store, [a, b], PriceTier.on_demand)
    assert next(r for r in page["rows"] if r[:3] == ["128", "1", "b"])[-2] == words
    assert finding.text in page["findings"]

    # the headline: no "faster" or "slower" that a verdict does not support, and none that contradicts one
    verdicts = {(v.concurrency, v.metric): v for v in cmp.verdicts}
    for ratio in headline.ratios:
        assert ratio.verdict is not None, ratio.sentence  # every ratio rests on a matched cell's verdict
        assert ratio.verdict == verdicts[(ratio.verdict.concurrency, ratio.verdict.metric)]
        assert ratio.verdict.words in ratio.sentence
        # the winner is the verdict's better side; with no detectable difference, the one ahead at that cell
        run_ahead = (ratio.verdict.ratio > 1) == (ratio.verdict.direction == "higher is better")
        ahead = ratio.verdict.better or (b if run_ahead else a)
        assert ratio.winner == {a: "a", b: "b"}[ahead]
        if ratio.verdict.verdict not in ("better", "worse"):
            assert "faster" not in ratio.sentence and "slower" not in ratio.sentence, ratio.sentence


def test_a_supported_difference_reads_the_same_everywhere(store: Store) -> None:
    """The same runs with B's TPOT twice A's at concurrency 1: a real difference, said with its interval."""
    a, _ = _stored_pair(store)
    run = store.create_run(kind="run", label="c", model="m", engine="vllm-cpu", spec={})
    for conc, tpot in {1: 25.0, 2: 50.0, 4: 90.0}.items():
        store.save_result(
            run.id, input_len=128, concurrency=conc, repeat=0, summary=_noisy_summary(conc, tpot, 7)
        )
    store.set_status(run.id, RunStatus.completed)
    cmp = compare_runs(store, [a, run.id])
    decode = next(v for v in cmp.verdicts if v.metric == "tpot_p50_ms" and v.concurrency == 1)
    assert decode.verdict == "worse" and decode.better == a
    assert decode.words == "2.1x slower (1.5-3.0x)"  # TPOT 2.1x the baseline's: decoding 2.1x slower
    finding = next(f for f in cmp.findings if f.kind == "decode_speedup")
    assert decode.words in finding.text
    row = next(r for r in side_by_side_rows(cmp) if r[:3] == ["128", "1", "c"])
    assert row[-2] == decode.words
    head = load_report(store, [a, run.id]).headline
    assert head is not None
    decoding = next(q for q in head.ratios if "decoding" in q.what)
    assert decode.words in decoding.sentence and "c is" in decoding.sentence
