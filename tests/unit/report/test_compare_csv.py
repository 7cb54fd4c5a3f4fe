"""The compare CSV: exact columns, comment header, blanks (never zeros) and the cost formulas."""

from __future__ import annotations

import pytest

from accelbench.domain.instance_types import PriceTier
from accelbench.report.compare_csv import COLUMNS, read_compare_csv, write_compare_csv
from accelbench.report.compare_runs import HourlyPrice, build_comparison
from tests.support.report_data import make_result, make_run, run_data

EXPECTED_COLUMNS = [
    "run_id", "model", "instance_type", "accelerator_count", "framework", "framework_version", "tp_degree",
    "quantization", "concurrency", "input_len", "output_len",
    "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p95_ms", "tpot_p99_ms",
    "itl_p50_ms", "itl_p95_ms", "itl_p99_ms", "e2e_p50_ms", "e2e_p95_ms", "e2e_p99_ms",
    "output_throughput_tok_s", "total_throughput_tok_s", "throughput_per_accelerator_tok_s", "requests_per_s",
    "successful", "failed", "success_rate",
    "accelerator_util_avg_pct", "accelerator_util_peak_pct", "accelerator_memory_avg_gib",
    "accelerator_memory_peak_gib", "hourly_usd", "cost_per_request_usd", "cost_per_1m_tokens_usd",
    "accelerator_telemetry", "energy_j", "tokens_per_joule", "joules_per_output_token",
    # per table metric: its 95% interval, then against the baseline ratio, interval, verdict, repeats needed
    *(
        f"{metric}_{what}"
        for metric in ("ttft_p50_ms", "tpot_p50_ms", "itl_p50_ms", "e2el_p50_ms", "output_throughput",
                       "total_token_throughput")
        for what in ("ci95_low", "ci95_high", "ratio", "ratio_ci95_low", "ratio_ci95_high", "verdict",
                     "repeats_needed")
    ),
    # each verdict (and the cost per 1M output tokens') in the words every view uses
    *(
        f"{metric}_vs_baseline"
        for metric in ("ttft_p50_ms", "tpot_p50_ms", "itl_p50_ms", "e2el_p50_ms", "output_throughput",
                       "total_token_throughput", "cost_per_1m_tokens_usd")
    ),
]  # fmt: skip


def _comparison():
    gpu = make_run(
        "gpu-1", label="gpu", model="org/model-8b", instance_type="g6.12xlarge", accelerator_count=4,
        engine="vllm", engine_version="0.19.0", tp_degree=4, quantization="fp8",
    )  # fmt: skip
    cpu = make_run(
        "cpu-1", label="cpu", model="org/model-8b", instance_type="r8g.4xlarge", accelerator_count=0,
        engine="vllm-cpu", engine_version="0.32.0", tp_degree=1,
    )  # fmt: skip
    local = make_run("loc-1", label="laptop", model="org/model-8b", engine="llamacpp")
    util = {"means": {"accelerator_util_pct": 71.5, "accelerator_memory_used_gib": 20.0},
            "peaks": {"accelerator_util_pct": 99.0, "accelerator_memory_used_gib": 21.5}}  # fmt: skip
    gr = [
        make_result("gpu-1", 128, 1, tpot=9.0, total_tps=800.0, output_tps=400.0, rps=4.0, telemetry=util),
        make_result("gpu-1", 128, 8, tpot=10.0, total_tps=4000.0, output_tps=2000.0, rps=16.0, failed=2),
    ]
    cr = [
        make_result("cpu-1", 128, 1, tpot=27.0, total_tps=200.0, output_tps=100.0, rps=1.0),
        make_result("cpu-1", 128, 8, tpot=36.0, total_tps=900.0, output_tps=450.0, rps=3.0),
    ]
    lr = [make_result("loc-1", 128, 1, tpot=30.0, total_tps=150.0, output_tps=75.0, rps=0.5)]
    price = lambda usd: HourlyPrice(usd_per_hour=usd, tier=PriceTier.reserved_1yr, source="test")  # noqa: E731
    return build_comparison(
        [run_data(gpu, gr, price=price(7.2)), run_data(cpu, cr, price=price(0.72)), run_data(local, lr)],
        tier=PriceTier.reserved_1yr,
    )


def test_columns_are_exactly_the_issues() -> None:
    assert list(COLUMNS) == EXPECTED_COLUMNS
    _, rows = read_compare_csv(write_compare_csv(_comparison()))
    assert rows and list(rows[0]) == EXPECTED_COLUMNS


def test_comment_header_says_what_was_compared() -> None:
    text = write_compare_csv(_comparison())
    comments, _ = read_compare_csv(text)
    assert text.startswith("# accelbench ")
    assert "#   gpu-1 (gpu): model org/model-8b, vllm 0.19.0, g6.12xlarge" in comments
    assert "#   cpu-1 (cpu): model org/model-8b, vllm-cpu 0.32.0, r8g.4xlarge" in comments
    assert "#   loc-1 (laptop): model org/model-8b, llamacpp, local machine" in comments
    assert "# cells matched on (input_len x concurrency): 128x1" in comments
    assert any(c.startswith("# cost: 1-year reserved prices;") for c in comments)
    assert any("loc-1 has no instance type" in c for c in comments)
    # every comment line precedes the header row
    lines = text.splitlines()
    header_at = lines.index(",".join(EXPECTED_COLUMNS))
    assert all(line.startswith("#") for line in lines[:header_at])
    assert not any(line.startswith("#") for line in lines[header_at:])


def test_rows_values_and_blanks() -> None:
    _, rows = read_compare_csv(write_compare_csv(_comparison()))
    assert [(r["run_id"], r["input_len"], r["concurrency"]) for r in rows] == [
        ("gpu-1", "128", "1"), ("gpu-1", "128", "8"), ("cpu-1", "128", "1"), ("cpu-1", "128", "8"),
        ("loc-1", "128", "1"),
    ]  # fmt: skip
    g1, g8, c1, c8, loc = rows
    assert g1["model"] == "org/model-8b" and g1["framework"] == "vllm" and g1["framework_version"] == "0.19.0"
    assert (g1["accelerator_count"], g1["tp_degree"], g1["quantization"]) == ("4", "4", "fp8")
    assert g1["output_len"] == "128"
    assert (
        float(g1["tpot_p50_ms"]) == 9.0
        and float(g1["tpot_p95_ms"]) == 13.5
        and float(g1["tpot_p99_ms"]) == 18.0
    )
    assert float(g1["throughput_per_accelerator_tok_s"]) == 200.0  # 800 / 4
    assert float(g1["accelerator_util_avg_pct"]) == 71.5 and float(g1["accelerator_util_peak_pct"]) == 99.0
    assert (
        float(g1["accelerator_memory_avg_gib"]) == 20.0 and float(g1["accelerator_memory_peak_gib"]) == 21.5
    )
    # 7.2 $/h: per request 7.2 / 4 / 3600 = 0.0005; per 1M output tokens 7.2 / 400 / 3600 x 1e6 = 5.0
    assert float(g1["hourly_usd"]) == 7.2
    assert float(g1["cost_per_request_usd"]) == pytest.approx(0.0005)
    assert float(g1["cost_per_1m_tokens_usd"]) == pytest.approx(5.0)
    assert (g8["successful"], g8["failed"]) == ("10", "2")
    assert float(g8["success_rate"]) == pytest.approx(10 / 12)
    # CPU instance: 0 accelerators -> per-accelerator blank, not a division by zero; no telemetry -> blank
    assert c1["accelerator_count"] == "0"
    assert c1["throughput_per_accelerator_tok_s"] == ""
    for col in ("accelerator_util_avg_pct", "accelerator_util_peak_pct", "accelerator_memory_avg_gib",
                "accelerator_memory_peak_gib"):  # fmt: skip
        assert c1[col] == "" and c8[col] == "" and g8[col] == ""
    assert float(c8["cost_per_1m_tokens_usd"]) == pytest.approx(0.72 / 450 / 3600 * 1e6)
    # local machine: no instance type -> no price, cost blank (never invented), count unknown -> blank
    assert loc["instance_type"] == "" and loc["accelerator_count"] == ""
    assert (
        loc["hourly_usd"] == "" and loc["cost_per_request_usd"] == "" and loc["cost_per_1m_tokens_usd"] == ""
    )
    assert loc["throughput_per_accelerator_tok_s"] == ""
    assert loc["tp_degree"] == "" and loc["quantization"] == ""
