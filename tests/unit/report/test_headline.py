"""The headline and the per-cell SLO figures (report/headline.py), from records and results with known numbers."""

from __future__ import annotations

import pytest

from accelbench.domain.capacity import CapacitySLO
from accelbench.domain.instance_types import PriceTier
from accelbench.domain.request_record import RequestRecord
from accelbench.errors import UserInputError
from accelbench.report.cell_slo import evaluate_cells, given_slo, run_slo
from accelbench.report.cell_table import cell_table, slo_note
from accelbench.report.compare_runs import build_comparison
from accelbench.report.comparison import HourlyPrice
from accelbench.report.headline import build_headline
from accelbench.report.tables import aggregate_results
from tests.support.report_data import make_result, make_run, run_data


def record(i: int, *, ttft_ms: float, tpot_ms: float, ok: bool = True, out: int = 11) -> RequestRecord:
    ttft = ttft_ms / 1000
    return RequestRecord(
        index=i,
        prompt_len=128,
        max_tokens=out,
        output_tokens=out if ok else 0,
        start_s=i * 0.1,
        planned_send_s=i * 0.1,
        ttft_s=ttft if ok else 0.0,
        itl_s=[tpot_ms / 1000] * (out - 1) if ok else [],
        latency_s=ttft + tpot_ms / 1000 * (out - 1) if ok else 0.0,
        success=ok,
        error="" if ok else "HTTP 500: boom",
    )


def test_attainment_and_goodput_from_known_records() -> None:
    # 10 requests over 10 s: TTFT 100, 200, ..., 800 ms (8 successes), TPOT 10 ms except request 1 (60 ms);
    # two failed. SLO: TTFT <= 500 ms and TPOT <= 50 ms.
    recs = [record(i, ttft_ms=100.0 * (i + 1), tpot_ms=60.0 if i == 1 else 10.0) for i in range(8)]
    recs += [record(8, ttft_ms=0, tpot_ms=0, ok=False), record(9, ttft_ms=0, tpot_ms=0, ok=False)]
    res = make_result("r", 128, 4, completed=8, failed=2)
    cells = aggregate_results([res])
    slo = CapacitySLO(targets={"ttft": 500.0, "tpot": 50.0}, percentile=50, attainment=0.3)
    (e,) = evaluate_cells(cells, [res], slo, {res.id: recs}).values()
    # meeting both: requests 0, 2, 3, 4 (TTFT 100, 300, 400, 500; request 1 misses TPOT) = 4 of 10
    assert e.source == "records" and not e.bound
    assert e.attainment == pytest.approx(0.4)
    assert e.goodput_rps == pytest.approx(4 / 10.0)
    assert e.goodput_tps == pytest.approx(4 * 11 / 10.0)
    # p50 of the successes' TTFT is 450 ms (<= 500) and TPOT 10 ms: met, attainment 40% >= 30%
    assert e.met is True and e.attainment_text() == "40%"
    strict = CapacitySLO(targets={"ttft": 500.0, "tpot": 50.0}, percentile=50, attainment=0.5)
    (e2,) = evaluate_cells(cells, [res], strict, {res.id: recs}).values()
    assert e2.met is False and "attainment 40% < 50%" in e2.why
    tail = CapacitySLO(targets={"ttft": 500.0}, percentile=90, attainment=0.1)
    (e3,) = evaluate_cells(cells, [res], tail, {res.id: recs}).values()
    assert e3.met is False and "p90 TTFT 730.0 ms > 500 ms" in e3.why


def test_the_requests_of_a_staggered_start_are_left_out_of_the_attainment() -> None:
    # four measured requests meet the SLO; two slow ones started within the ramp and are not measured
    recs = [record(i, ttft_ms=100.0, tpot_ms=10.0) for i in range(4)]
    recs += [record(4 + i, ttft_ms=900.0, tpot_ms=10.0).model_copy(update={"ramp": True}) for i in range(2)]
    res = make_result("r", 128, 4, completed=6, failed=0)
    slo = CapacitySLO(targets={"ttft": 500.0}, percentile=90, attainment=0.9)
    (e,) = evaluate_cells(aggregate_results([res]), [res], slo, {res.id: recs}).values()
    assert e.attainment == pytest.approx(1.0) and e.met is True


def test_without_records_the_attainment_is_a_lower_bound_from_percentiles() -> None:
    # make_result: p95 = 1.5 x p50, p99 = 2 x p50; TTFT p50 100 -> p95 150, p99 200
    res = make_result("r", 128, 1, ttft=100.0, tpot=10.0, rps=2.0, output_tps=256.0)
    cells = aggregate_results([res])
    slo = CapacitySLO(targets={"ttft": 160.0}, percentile=95, attainment=0.9)
    (e,) = evaluate_cells(cells, [res], slo, records={}).values()
    assert e.source == "percentiles" and e.bound
    assert e.attainment == pytest.approx(0.95) and e.attainment_text() == ">=95%"
    assert e.goodput_rps == pytest.approx(2.0 * 0.95) and e.goodput_tps == pytest.approx(256.0 * 0.95)
    assert e.met is True  # p95 150 <= 160, and at least 95% >= 90%
    # two targets: one minus what each may miss (TTFT met at p95: 5%; TPOT met at p50 only: 50%)
    two = CapacitySLO(targets={"ttft": 160.0, "tpot": 12.0}, percentile=50, attainment=0.5)
    (e2,) = evaluate_cells(cells, [res], two, records=None).values()
    assert e2.attainment == pytest.approx(0.45)
    assert e2.met is None and "not known exactly" in e2.why
    # ITL is judged per request (its longest gap): the stored gap percentiles cannot say
    itl = CapacitySLO(targets={"itl": 1000.0})
    (e3,) = evaluate_cells(cells, [res], itl).values()
    assert e3.met is None and "ITL" in e3.why


def _sweep(run_id: str, tpots: dict[int, float], *, total: dict[int, float]) -> list:
    return [make_result(run_id, 512, c, tpot=t, total_tps=total[c]) for c, t in tpots.items()]


def test_headline_picks_the_fastest_cell_meeting_the_slo_and_says_where_it_breaks() -> None:
    run = make_run("gpu-run", label="gpu", instance_type="g6.xlarge")
    results = _sweep("gpu-run", {1: 10.0, 8: 30.0, 32: 80.0}, total={1: 400.0, 8: 2000.0, 32: 3000.0})
    price = HourlyPrice(usd_per_hour=0.8, tier=PriceTier.on_demand, source="catalog")
    cmp = build_comparison([run_data(run, results, price=price)])
    cells = aggregate_results(results)
    slo = given_slo("tpot:50", percentile=50, attainment=0.5)
    assert slo is not None
    choice = run_slo(run, slo)
    assert choice is not None and choice.source == "given"
    ev = evaluate_cells(cells, results, slo)
    h = build_headline(cmp, cells, results, slos={run.id: choice}, evaluation=ev)
    (r,) = h.runs
    assert r.best is not None and (r.best.input_len, r.best.concurrency) == (512, 8)
    assert r.best.meets_slo is True
    # output tok/s 1000 at $0.80/h: 0.8 / 1000 / 3600 x 1e6 = $0.2222
    assert r.best.usd_per_1m_output == pytest.approx(0.8 / 1000 / 3600 * 1e6)
    assert r.slo_verdict == "some" and (r.met_cells, r.missed_cells) == (2, 1)
    assert (
        "At input 512 the SLO holds up to concurrency 8 and breaks at 32 (p50 TPOT 80.0 ms > 50 ms)."
        in h.lines
    )
    assert h.title.startswith("Best: input 512, concurrency 8: 1,000.0 output tok/s, $0.22/1M output tokens")
    assert "meeting the SLO" in h.title
    assert any(line.startswith("Cost there: $0.22 per 1M output tokens") for line in h.lines)
    assert "No request failed (30 ended)." in h.lines


def test_headline_without_slo_is_the_highest_throughput_and_names_failures() -> None:
    run = make_run("cpu-run", label="cpu")
    results = [
        make_result("cpu-run", 128, 1, total_tps=100.0),
        make_result("cpu-run", 128, 4, total_tps=300.0, completed=9, failed=1),
    ]
    results[1].summary["errors"] = {"HTTP 500: boom": 1}
    cmp = build_comparison([run_data(run, results, price_note="a local machine has no price")])
    cells = aggregate_results(results)
    h = build_headline(cmp, cells, results)
    (r,) = h.runs
    assert r.best is not None and r.best.concurrency == 4 and r.slo is None
    assert "no SLO is known" in h.lines[0]
    assert "No cost per token: a local machine has no price." in h.lines
    assert "1 of 20 requests failed (5.0%); most at input 128, concurrency 4: " in h.lines[-1]
    assert "HTTP 500: boom" in h.lines[-1]
    assert h.title.endswith("the highest throughput (no SLO known); 5.0% of cpu's requests failed.")


def test_comparison_ratios_name_the_winner_first_never_below_one() -> None:
    a = make_run("a-run", label="cpu", instance_type="m7i.2xlarge")
    b = make_run("b-run", label="gpu", instance_type="g6.xlarge")
    ra = [make_result("a-run", 128, 1, tpot=25.0, total_tps=200.0)]
    rb = [make_result("b-run", 128, 1, tpot=10.0, total_tps=500.0)]
    price_a = HourlyPrice(usd_per_hour=0.4, tier=PriceTier.on_demand, source="catalog")
    price_b = HourlyPrice(usd_per_hour=0.8, tier=PriceTier.on_demand, source="catalog")
    cmp = build_comparison([run_data(a, ra, price=price_a), run_data(b, rb, price=price_b)])
    cells = aggregate_results(ra + rb)
    h = build_headline(cmp, cells, ra + rb)
    by_what = {q.what.split(" ")[0] + q.what.split(" ")[1]: q for q in h.ratios}
    assert all(q.factor >= 1 for q in h.ratios) and len(h.ratios) == 3
    tput = next(q for q in h.ratios if "throughput" in q.what)
    assert (tput.winner, tput.loser) == ("gpu", "cpu") and tput.factor == pytest.approx(2.5)
    assert tput.sentence.startswith("gpu is 2.5x faster than cpu in output throughput")
    cost = next(q for q in h.ratios if "per 1M" in q.what)
    # cpu: 0.4/100 tok/s, gpu: 0.8/250 tok/s -> gpu is 1.25x cheaper
    assert (cost.winner, cost.factor) == ("gpu", pytest.approx(1.25))
    assert "gpu is 1.2x cheaper than cpu" in cost.sentence or "gpu is 1.3x cheaper than cpu" in cost.sentence
    decode = next(q for q in h.ratios if "decoding" in q.what)
    assert decode.sentence.startswith("gpu is 2.5x faster than cpu at decoding (TPOT p50 at input 128")
    assert by_what and h.title.startswith("Best: gpu at input 128, concurrency 1")
    assert any(line.startswith("cpu: ") for line in h.lines) and any(
        line.startswith("gpu: ") for line in h.lines
    )


def test_run_slo_sources() -> None:
    cap = make_run(
        "c", extra={"capacity": {"load": "concurrency", "slo": {"targets": {"tpot": 40.0}, "percentile": 99}}}
    )
    choice = run_slo(cap)
    assert choice is not None and choice.source == "the capacity search's SLO"
    assert choice.slo.targets == {"tpot": 40.0} and choice.slo.percentile == 99
    spec = make_run("s", spec={"capacity": {"slo": {"ttft": 900}, "percentile": 95, "attainment": 0.8}})
    choice = run_slo(spec)
    assert choice is not None and choice.slo.targets == {"ttft": 900.0} and choice.slo.attainment == 0.8
    good = make_run("g", spec={"sweep": {"goodput": {"ttft_ms": 300, "e2el_ms": 4000}}})
    choice = run_slo(good)
    assert choice is not None and choice.source == "the run spec's goodput targets"
    assert choice.slo.targets == {"ttft": 300.0, "e2el": 4000.0}
    given = given_slo("ttft:2000,tpot:100", percentile=99)
    choice = run_slo(good, given)
    assert choice is not None and choice.source == "given" and choice.slo.percentile == 99
    assert run_slo(make_run("n")) is None and given_slo(None) is None and given_slo(" ") is None


def test_bad_slo_says_what_to_write() -> None:
    with pytest.raises(UserInputError) as exc:
        given_slo("ttft_p99<=2000")
    assert "ttft" in (exc.value.hint or "") and "--slo" in (exc.value.hint or "")


def test_cell_table_has_tails_slo_and_the_top_failure_reason() -> None:
    res = make_result("r", 128, 4, ttft=100.0, completed=9, failed=1)
    res.summary["errors"] = {"HTTP 500: boom": 1}
    res.summary["ttft_ms"] = {"count": 9, "p50": 100.0, "p90": 140.0, "p95": 150.0, "p99": 200.0}
    cells = aggregate_results([res])
    slo = CapacitySLO(targets={"ttft": 160.0}, percentile=95, attainment=0.5)
    ev = evaluate_cells(cells, [res], slo)
    headers, rows = cell_table(cells, [res], (50, 90, 99), slo=ev)
    row = dict(zip(headers, rows[0], strict=True))
    assert (
        row["TTFT p50 (ms)"] == "100.0"
        and row["TTFT p90 (ms)"] == "140.0"
        and row["TTFT p99 (ms)"] == "200.0"
    )
    assert "TTFT p95 (ms)" not in headers
    assert row["SLO attainment"] == ">=86%"  # at least 95% of the 9 successes, over 10 requests
    assert row["SLO met"] == "yes" and row["Top failure reason"] == "(1x) HTTP 500: boom"
    headers, rows = cell_table(cells, [res], (95,))
    assert "SLO met" not in headers and "TTFT p95 (ms)" in headers
    note = slo_note(run_slo(make_run("r"), slo), ev)
    assert note is not None and "lower bounds" in note and "given" in note
