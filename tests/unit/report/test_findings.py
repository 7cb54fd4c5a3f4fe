"""Findings from known numbers: every sentence checked word for word, every number traced to a figure."""

from __future__ import annotations

import re

import pytest

from accelbench.domain.instance_types import PriceTier
from accelbench.report.compare_runs import Comparison, HourlyPrice, build_comparison
from accelbench.report.findings import generate_findings
from tests.support.report_data import make_result, make_run, run_data
from tests.unit.report.test_compare import PRICE_A, two_runs


def price(usd: float, tier: PriceTier = PriceTier.on_demand) -> HourlyPrice:
    return HourlyPrice(usd_per_hour=usd, tier=tier, source="test")


def texts(cmp: Comparison) -> list[str]:
    return [f.text for f in cmp.findings]


def test_a_faster_gap_widens_tpot_and_ttft_grow() -> None:
    (a, ra), (b, rb) = two_runs()
    cmp = build_comparison([run_data(a, ra, price=PRICE_A), run_data(b, rb)])
    assert texts(cmp) == [
        "At input 128 and concurrency 1, B decodes 3.1x slower than the baseline A (TPOT 27.9 ms vs 9.0 ms).",
        "At input 128, under load (concurrency 1 → 16) B's TPOT grows 33% (27.9 → 37.1 ms) while the baseline A's "
        "grows 12% (9.0 → 10.1 ms).",
        "At input 128, B's total throughput is 2.0x lower than that of the baseline A at concurrency 1 and 4.1x "
        "lower at concurrency 16: A's lead grows under load (600.0 tok/s vs 2,460.0 tok/s at 16).",
        "At input 128, from concurrency 1 to 16 TTFT grows 250% on B (120.0 → 420.0 ms) and 40% on the baseline A "
        "(50.0 → 70.0 ms).",
        "At input 128 and concurrency 1, one request gets 50.0 tok/s of output end to end on B vs 100.0 tok/s on "
        "the baseline A; at concurrency 16 B delivers 300.0 tok/s of output in aggregate vs 1,230.0 tok/s on A.",
        "Cost is compared only where a price is known: B ran on a machine without an instance type, so no price "
        "applies.",
    ]
    decode = cmp.findings[0]
    assert decode.kind == "decode_speedup" and decode.input_len == 128 and decode.runs == ["run-a", "run-b"]
    assert decode.figures["decode_speedup_a_over_b"] == pytest.approx(27.9 / 9.0)
    assert decode.figures["faster"] == "run-a"
    assert decode.figures["baseline"] == "run-a" and decode.figures["direction"] == "slower"
    assert decode.figures["factor"] == pytest.approx(27.9 / 9.0)
    assert decode.figures["tpot_a_ms"] == 9.0 and decode.figures["tpot_b_ms"] == 27.9
    gap = cmp.findings[2]
    assert gap.figures["trend"] == "widens"
    assert gap.figures["ratio_a_over_b_low"] == pytest.approx(2.0)
    assert gap.figures["ratio_a_over_b_high"] == pytest.approx(4.1)
    # the JSON carries the same figures as the pair fields
    (pair,) = cmp.pairs
    assert pair.decode_speedup_a_over_b == decode.figures["decode_speedup_a_over_b"]
    assert pair.throughput_gaps[-1].ratio_a_over_b == gap.figures["ratio_a_over_b_high"]


def test_b_faster_gap_narrows_tpot_falls_and_cost() -> None:
    a = make_run("ra", label="cpu-a", instance_type="x.large")
    b = make_run("rb", label="gpu-b", instance_type="y.large")
    ra = [
        make_result("ra", 512, 1, tpot=30.0, ttft=400.0, total_tps=100.0, output_tps=33.3),
        make_result("ra", 512, 8, tpot=29.0, ttft=396.0, total_tps=600.0, output_tps=200.0),
    ]
    rb = [
        make_result("rb", 512, 1, tpot=10.0, ttft=100.0, total_tps=400.0, output_tps=100.0),
        make_result("rb", 512, 8, tpot=12.0, ttft=150.0, total_tps=1500.0, output_tps=750.0),
    ]
    cmp = build_comparison([run_data(a, ra, price=price(1.0)), run_data(b, rb, price=price(4.0))])
    assert texts(cmp) == [
        "At input 512 and concurrency 1, gpu-b decodes 3.0x faster than the baseline cpu-a (TPOT 10.0 ms vs "
        "30.0 ms).",
        "At input 512, under load (concurrency 1 → 8) gpu-b's TPOT grows 20% (10.0 → 12.0 ms) while the baseline "
        "cpu-a's falls 3% (30.0 → 29.0 ms).",
        "At input 512, gpu-b's total throughput is 4.0x higher than that of the baseline cpu-a at concurrency 1 "
        "and 2.5x higher at concurrency 8: gpu-b's lead shrinks under load (1,500.0 tok/s vs 600.0 tok/s at 8).",
        "At input 512, from concurrency 1 to 8 TTFT grows 50% on gpu-b (100.0 → 150.0 ms) and falls 1% on the "
        "baseline cpu-a (400.0 → 396.0 ms).",
        "At input 512 and concurrency 1, one request gets 100.0 tok/s of output end to end on gpu-b vs 33.3 tok/s "
        "on the baseline cpu-a; at concurrency 8 gpu-b delivers 750.0 tok/s of output in aggregate vs 200.0 tok/s "
        "on cpu-a.",
        # 1.00 $/h / 200 tok/s / 3600 x 1e6 = $1.39; 4.00 $/h / 750 tok/s = $1.48
        "At input 512 and concurrency 8, at on-demand prices, gpu-b serves 1M output tokens for $1.48: 1.1x more "
        "expensive than the baseline cpu-a ($1.39).",
    ]
    cost = cmp.findings[-1]
    assert cost.figures["cost_per_1m_tokens_a_usd"] == pytest.approx(1.0 / 200 / 3600 * 1e6)
    assert cost.figures["cost_per_1m_tokens_b_usd"] == pytest.approx(4.0 / 750 / 3600 * 1e6)
    assert cost.figures["cheaper"] == "ra"
    assert cmp.findings[0].figures["faster"] == "rb"


def test_parity_and_gap_that_holds() -> None:
    a, b = make_run("ra", label="v1"), make_run("rb", label="v2")
    ra = [
        make_result("ra", 128, 1, tpot=20.0, total_tps=100.0),
        make_result("ra", 128, 4, tpot=22.0, total_tps=300.0),
    ]
    rb = [
        make_result("rb", 128, 1, tpot=20.4, total_tps=101.0),
        make_result("rb", 128, 4, tpot=22.0, total_tps=302.0),
    ]
    cmp = build_comparison([run_data(a, ra), run_data(b, rb)])
    t = texts(cmp)
    assert (
        t[0]
        == "At input 128 and concurrency 1, v2 decodes as fast as the baseline v1 (TPOT 20.4 ms vs 20.0 ms)."
    )
    assert t[2] == (
        "At input 128, v2's total throughput stays on par with that of the baseline v1 from concurrency 1 to 4 "
        "(302.0 tok/s vs 300.0 tok/s at 4)."
    )
    assert t[3] == (
        "At input 128, from concurrency 1 to 4 TTFT stays flat on v2 (100.0 → 100.0 ms) and stays flat on the "
        "baseline v1 (100.0 → 100.0 ms)."
    )
    assert (
        t[-1] == "No cost figures: v1 and v2 ran on machines without an instance type, so no price applies."
    )


def test_lead_that_holds() -> None:
    a, b = make_run("ra", label="A"), make_run("rb", label="B")
    ra = [make_result("ra", 128, 1, total_tps=200.0), make_result("ra", 128, 4, total_tps=610.0)]
    rb = [make_result("rb", 128, 1, total_tps=100.0), make_result("rb", 128, 4, total_tps=300.0)]
    cmp = build_comparison([run_data(a, ra), run_data(b, rb)])
    gap = next(f for f in cmp.findings if f.kind == "throughput_gap")
    assert gap.text == (
        "At input 128, B's total throughput is 2.0x lower than that of the baseline A at concurrency 1 and 2.0x "
        "lower at concurrency 4: A's lead holds under load (300.0 tok/s vs 610.0 tok/s at 4)."
    )


def test_lead_reverses_and_failures() -> None:
    a, b = make_run("ra", label="v1"), make_run("rb", label="v2")
    ra = [
        make_result("ra", 128, 1, tpot=10.0, total_tps=200.0),
        make_result("ra", 128, 4, tpot=30.0, total_tps=300.0),
    ]
    rb = [
        make_result("rb", 128, 1, tpot=20.0, total_tps=100.0),
        make_result("rb", 128, 4, tpot=21.0, total_tps=600.0, failed=2),
    ]
    cmp = build_comparison([run_data(a, ra), run_data(b, rb)])
    t = texts(cmp)
    assert t[1] == (
        "At input 128, under load (concurrency 1 → 4) v2's TPOT grows 5% (20.0 → 21.0 ms) while the baseline v1's "
        "grows 200% (10.0 → 30.0 ms)."
    )
    assert t[2] == (
        "At input 128, the total-throughput lead changes hands under load: v2's total throughput is 2.0x lower "
        "than that of the baseline v1 at concurrency 1 and 2.0x higher at concurrency 4 (600.0 tok/s vs 300.0 "
        "tok/s at 4)."
    )
    assert "v2 failed 2 of 22 requests (9.1%), all at input 128, concurrency 4." in t


def test_single_concurrency_gap_and_each_request() -> None:
    a, b = make_run("ra", label="v1"), make_run("rb", label="v2")
    cmp = build_comparison(
        [
            run_data(a, [make_result("ra", 128, 4, total_tps=300.0, output_tps=150.0)]),
            run_data(b, [make_result("rb", 128, 4, total_tps=900.0, output_tps=450.0)]),
        ]
    )
    t = texts(cmp)
    assert (
        "At input 128 and concurrency 4, v2's total throughput is 3.0x higher than that of the baseline v1 "
        "(900.0 tok/s vs 300.0 tok/s)." in t
    )
    assert (
        "At input 128 and concurrency 4, each request gets 112.5 tok/s of output end to end on v2 vs 37.5 tok/s on "
        "the baseline v1." in t
    )
    assert not any(f.kind in ("tpot_growth", "ttft_growth") for f in cmp.findings)


def test_no_match() -> None:
    a, b = make_run("ra", label="v1"), make_run("rb", label="v2")
    cmp = build_comparison(
        [run_data(a, [make_result("ra", 128, 4)]), run_data(b, [make_result("rb", 256, 4)])]
    )
    assert cmp.findings[0].kind == "no_match"
    assert cmp.findings[0].text == (
        "No (input length, concurrency) cell was measured by both v1 and v2, so no ratios are given for them."
    )


def test_missing_price_for_an_instance() -> None:
    a = make_run("ra", label="A", instance_type="g6.xlarge")
    b = make_run("rb", label="B", instance_type="r8g.4xlarge")
    cmp = build_comparison(
        [
            run_data(a, [make_result("ra", 128, 1)], price=price(0.8, PriceTier.reserved_3yr)),
            run_data(b, [make_result("rb", 128, 1)]),
        ],
        tier=PriceTier.reserved_3yr,
    )
    assert cmp.findings[-1].text == (
        "Cost is compared only where a price is known: no 3-year reserved price is known for B (r8g.4xlarge)."
    )


def test_single_run() -> None:
    run = make_run("r", label="cpu", instance_type="r8g.4xlarge")
    results = [
        make_result("r", 128, 1, tpot=27.3, ttft=214.0, total_tps=150.0, output_tps=29.7),
        make_result("r", 128, 4, tpot=27.2, ttft=214.0, total_tps=484.0, output_tps=96.8),
    ]
    cmp = build_comparison([run_data(run, results, price=price(0.8064))])
    assert texts(cmp) == [
        "At input 128, cpu's TPOT stays flat (27.3 → 27.2 ms) from concurrency 1 to 4.",
        "At input 128, cpu's total throughput rises 3.2x from concurrency 1 to 4 (150.0 tok/s → 484.0 tok/s) "
        "while concurrency rises 4.0x.",
        "At input 128, cpu's TTFT stays flat (214.0 → 214.0 ms) from concurrency 1 to 4.",
        "At input 128 and concurrency 1, one request gets 29.7 tok/s of output end to end on cpu; at concurrency 4 it delivers "
        "96.8 tok/s of output in aggregate.",
        # 0.8064 / 96.8 / 3600 x 1e6 = 2.3140...
        "At input 128 and concurrency 4, at on-demand prices ($0.806/h), cpu serves 1M output tokens for $2.31.",
    ]
    assert cmp.findings[-1].figures["cost_per_1m_tokens_usd"] == pytest.approx(0.8064 / 96.8 / 3600 * 1e6)


def test_findings_regenerate_identically() -> None:
    (a, ra), (b, rb) = two_runs()
    cmp = build_comparison([run_data(a, ra), run_data(b, rb)])
    assert generate_findings(cmp) == cmp.findings


_NUMBER = re.compile(r"(?<![\w.])\$?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)")


def _printed(value: float, token: str) -> bool:
    decimals = len(token.split(".")[1]) if "." in token else 0
    return f"{value:,.{decimals}f}" == token


@pytest.mark.parametrize("scenario", ["widen", "narrow", "single"])
def test_every_number_in_a_sentence_is_a_figure(scenario: str) -> None:
    """Nothing canned: each number printed in a finding is one of its figures (or its input length) rounded."""
    if scenario == "widen":
        (a, ra), (b, rb) = two_runs()
        cmp = build_comparison([run_data(a, ra, price=PRICE_A), run_data(b, rb, price=price(1.0))])
    elif scenario == "narrow":
        a, b = make_run("ra", label="a"), make_run("rb", label="b")
        ra = [
            make_result("ra", 256, c, tpot=30.0 + c, ttft=300.0 * c, total_tps=100.0 * c, failed=c % 3)
            for c in (2, 8, 32)
        ]
        rb = [
            make_result("rb", 256, c, tpot=10.0 + c / 2, ttft=90.0 * c, total_tps=500.0 * c**0.5)
            for c in (2, 8, 32)
        ]
        cmp = build_comparison([run_data(a, ra), run_data(b, rb)])
    else:
        run = make_run("r", label="solo")
        cmp = build_comparison(
            [
                run_data(
                    run,
                    [make_result("r", 64, c, tpot=5.0 + c, total_tps=321.0 * c) for c in (1, 2, 4)],
                    price=price(2.0),
                )
            ]
        )
    assert cmp.findings
    for f in cmp.findings:
        values = [v for v in f.figures.values() if isinstance(v, int | float)]
        if f.input_len is not None:
            values.append(f.input_len)
        for match in _NUMBER.finditer(f.text):
            token = match.group(1)
            if f.text[match.end(1) : match.end(1) + 1] == "M":  # "1M output tokens" is a unit
                continue
            assert any(_printed(float(v), token) for v in values), (token, f.text, f.figures)


def test_failures_over_several_cells_name_the_worst() -> None:
    run = make_run("r", label="a")
    results = [make_result("r", 256, c, total_tps=100.0 * c, failed=f) for c, f in ((2, 2), (8, 3), (32, 6))]
    cmp = build_comparison([run_data(run, results)])
    (f,) = [f for f in cmp.findings if f.kind == "failures"]
    # 10 successful per cell: 11 failed of 41
    assert (
        f.text
        == "a failed 11 of 41 requests (26.8%) in 3 cells; the most at input 256, concurrency 32 (6 of 16)."
    )
    assert f.figures["failed_pct"] == pytest.approx(11 / 41 * 100)
