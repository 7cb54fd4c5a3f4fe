"""One set of verdicts feeds a comparison's JSON, findings and CSV: a difference inside the noise is written as
no detectable difference, a supported one with its size and interval."""

from __future__ import annotations

import pytest

from accelbench.domain.results import ResultInfo
from accelbench.report.compare_csv import read_compare_csv, write_compare_csv
from accelbench.report.compare_runs import build_comparison, comparison_json
from accelbench.report.headline import build_headline
from accelbench.report.tables import aggregate_results
from tests.support.report_data import make_result, make_run, run_data


def _with_intervals(r: ResultInfo, half_pct: float) -> ResultInfo:
    """The result as a run of today stores it: each figure with its request-level 95% interval."""

    def ci(v: float | None) -> list[float] | None:
        return None if v is None else [v * (1 - half_pct / 100), v * (1 + half_pct / 100)]

    r.summary = {
        "ttft_ms": {"count": 10, "p50": r.ttft_p50_ms, "p50_ci95": ci(r.ttft_p50_ms)},
        "tpot_ms": {"count": 10, "p50": r.tpot_p50_ms, "p50_ci95": ci(r.tpot_p50_ms)},
        "total_token_throughput_ci95": ci(r.total_token_throughput),
        "output_throughput_ci95": ci(r.output_throughput),
    }
    return r


def _comparison(b_tpot: float, half_pct: float):  # type: ignore[no-untyped-def]
    return _built(b_tpot, half_pct)[0]


def _built(b_tpot: float, half_pct: float):  # type: ignore[no-untyped-def]
    runs, stored = _runs(b_tpot, half_pct), []
    for d in runs:
        stored += d.results
    return build_comparison(runs), stored  # type: ignore[arg-type]


def _runs(b_tpot: float, half_pct: float):  # type: ignore[no-untyped-def]
    runs = []
    for run_id, tpot in (("base", 10.0), ("other", b_tpot)):
        results = [
            _with_intervals(
                make_result(run_id, 128, 1, repeat=i, tpot=tpot * (1 + 0.002 * (i - 1))), half_pct
            )
            for i in range(3)
        ]
        runs.append(run_data(make_run(run_id, label=run_id, model="m"), results))
    return runs


def test_noise_is_no_detectable_difference_everywhere() -> None:
    cmp = _comparison(10.2, 5.0)
    [v] = [v for v in cmp.verdicts if v.metric == "tpot_p50_ms"]
    assert v.verdict == "no detectable difference" and v.repeats_needed is not None and v.repeats_needed > 3
    data = comparison_json(cmp)
    assert {"ratio", "ratio_ci95", "verdict", "repeats_needed"} <= set(data["verdicts"][0])
    decode = next(f for f in cmp.findings if f.kind == "decode_speedup")
    assert "no detectable difference" in decode.text and "1.0x" not in decode.text
    assert decode.figures["verdict"] == "no detectable difference"
    _, rows = read_compare_csv(write_compare_csv(cmp))
    other = next(r for r in rows if r["run_id"] == "other")
    base = next(r for r in rows if r["run_id"] == "base")
    assert other["tpot_p50_ms_verdict"] == "no detectable difference"
    assert int(other["tpot_p50_ms_repeats_needed"]) == v.repeats_needed
    assert base["tpot_p50_ms_verdict"] == "" and float(base["tpot_p50_ms_ci95_low"]) < 10.0


def test_a_supported_difference_is_written_with_its_interval() -> None:
    cmp = _comparison(8.0, 1.0)
    [v] = [v for v in cmp.verdicts if v.metric == "tpot_p50_ms"]
    assert v.verdict == "better" and v.direction == "lower is better" and v.repeats_needed is None
    decode = next(f for f in cmp.findings if f.kind == "decode_speedup")
    # TPOT 0.8x the baseline's: decoding 1.25x as fast, said with the interval of that speed-up
    assert "other decodes 25% faster (24-26%) than the baseline base (TPOT 8.0 ms vs 10.0 ms)" in decode.text
    _, rows = read_compare_csv(write_compare_csv(cmp))
    other = next(r for r in rows if r["run_id"] == "other")
    assert other["tpot_p50_ms_verdict"] == "better"
    assert float(other["tpot_p50_ms_ratio_ci95_high"]) < 1.0


def test_the_headline_reads_the_same_verdicts() -> None:
    cmp, results = _built(10.2, 5.0)
    head = build_headline(cmp, aggregate_results(results), results)
    decode = next(r.sentence for r in head.ratios if "decoding" in r.what)
    assert decode.startswith("Between base and other there is no detectable difference (ratio 1.02")
    cmp, results = _built(8.0, 1.0)
    head = build_headline(cmp, aggregate_results(results), results)
    decode = next(r.sentence for r in head.ratios if "decoding" in r.what)
    assert (
        decode.startswith("other is 25% faster (24-26%) than base at decoding")
        and "8.00 vs 10.00 ms" in decode
    )
    # the same output throughput on both: which is on top is a coin toss, and the headline says so
    [stable] = head.stability
    assert "has the highest output throughput at its best configuration in" in stable
    assert stable in head.lines and "swap places in" in stable


def test_the_verdict_table_of_the_cli_and_the_page() -> None:
    from rich.console import Console

    from accelbench.cli.compare import render_comparison
    from accelbench.report.verdict_phrases import VERDICT_TABLE_COLUMNS, verdict_rows

    cmp = _comparison(8.0, 1.0)
    rows = verdict_rows(cmp)
    tpot = next(r for r in rows if r[3] == "TPOT p50 (ms)")
    assert len(tpot) == len(VERDICT_TABLE_COLUMNS)
    assert tpot[:3] == ["other", "128", "1"] and tpot[4].startswith("10.00 +-")
    assert tpot[8] == "better (lower is better)" and tpot[9] == ""
    out = Console(record=True, width=250)
    render_comparison(cmp, out)
    text = out.export_text()
    assert "Is each difference real?" in text and "better (lower is better)" in text


def test_the_report_shows_the_verdicts_and_the_intervals() -> None:
    from accelbench.report.document import build_report
    from accelbench.report.html import render_html
    from accelbench.report.markdown import render_markdown

    data = build_report(_runs(8.0, 1.0))
    md = render_markdown(data, {})
    html = render_html(data)
    for text in (md, html):
        assert "Is each difference real?" in text and "better (lower is better)" in text
        assert "10.00 +-0.6%" in text  # the baseline's TPOT with its interval (3 repeats of +-1%)


def test_cost_has_a_verdict_of_its_own_said_the_same_everywhere() -> None:
    """The same throughput at a 10% higher price: the cost per 1M output tokens is 10% more than the baseline's,
    its interval the output throughput's turned over and scaled by the price ratio; the headline, the cost
    finding and the CSV say it in the same words."""
    from accelbench.domain.instance_types import PriceTier
    from accelbench.report.comparison import HourlyPrice

    runs = _runs(10.0, 1.0)
    for d, usd in zip(runs, (1.0, 1.1), strict=True):
        d.price = HourlyPrice(usd_per_hour=usd, tier=PriceTier.on_demand, source="test")
    cmp = build_comparison(runs)
    [out] = [v for v in cmp.verdicts if v.metric == "output_throughput"]
    [cost] = [v for v in cmp.verdicts if v.metric == "cost_per_1m_tokens_usd"]
    assert cost.ratio == pytest.approx(1.1 / out.ratio)
    assert out.ratio_ci95 is not None and cost.ratio_ci95 == pytest.approx(
        [1.1 / out.ratio_ci95[1], 1.1 / out.ratio_ci95[0]]
    )
    assert cost.verdict == "worse" and cost.better == "base" and cost.words.startswith("10% more expensive (")
    finding = next(f for f in cmp.findings if f.kind == "cost")
    assert cost.words in finding.text and finding.figures["verdict"] == "worse"
    results = [r for d in runs for r in d.results]
    head = build_headline(cmp, aggregate_results(results), results)
    said = next(q.sentence for q in head.ratios if "per 1M" in q.what)
    assert said.startswith(
        f"other is {cost.words} than base per 1M output tokens at input 128, concurrency 1"
    )
    _, rows = read_compare_csv(write_compare_csv(cmp))
    other = next(r for r in rows if r["run_id"] == "other")
    assert other["cost_per_1m_tokens_usd_vs_baseline"] == cost.words
