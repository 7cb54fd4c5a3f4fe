"""Aggregation math on known numbers: mean and min-max of each repeat's median, which repeats count, sums."""

from __future__ import annotations

from typing import Any

import pytest

from accelbench.domain.results import ResultInfo
from accelbench.domain.run import CellStatus
from accelbench.report.tables import (
    METRICS,
    MetricAggregate,
    aggregate_results,
    csv_header,
    csv_rows,
    format_metric,
    markdown_table,
    table_headers,
    table_rows,
)

_ids = iter(range(1, 10_000))


def result(
    input_len: int,
    concurrency: int,
    repeat: int,
    *,
    run_id: str = "run-a",
    status: CellStatus = CellStatus.completed,
    **metrics: Any,
) -> ResultInfo:
    base: dict[str, Any] = {
        "ttft_p50_ms": 100.0,
        "tpot_p50_ms": 20.0,
        "itl_p50_ms": 19.0,
        "e2el_p50_ms": 700.0,
        "output_throughput": 50.0,
        "total_token_throughput": 250.0,
        "request_throughput": 1.0,
        "num_prompts": 10,
        "completed": 10,
        "failed": 0,
    }
    base.update(metrics)
    return ResultInfo(
        id=next(_ids),
        run_id=run_id,
        input_len=input_len,
        concurrency=concurrency,
        repeat=repeat,
        output_len=32,
        status=status,
        **base,
    )


def test_mean_and_range_of_repeat_medians() -> None:
    cells = aggregate_results(
        [
            result(128, 4, 0, ttft_p50_ms=100.0, tpot_p50_ms=20.0, output_throughput=90.0),
            result(128, 4, 1, ttft_p50_ms=130.0, tpot_p50_ms=26.0, output_throughput=60.0),
            result(128, 4, 2, ttft_p50_ms=115.0, tpot_p50_ms=23.0, output_throughput=75.0),
        ]
    )
    assert len(cells) == 1
    c = cells[0]
    assert (c.input_len, c.concurrency, c.repeats, c.repeats_used, c.output_len) == (128, 4, 3, 3, 32)
    assert c.ttft_p50_ms is not None and c.tpot_p50_ms is not None and c.output_throughput is not None
    assert c.ttft_p50_ms.mean == pytest.approx(115.0)
    assert (c.ttft_p50_ms.min, c.ttft_p50_ms.max, c.ttft_p50_ms.n) == (100.0, 130.0, 3)
    assert c.ttft_p50_ms.values == [100.0, 130.0, 115.0]
    assert c.tpot_p50_ms.mean == pytest.approx(23.0)
    assert c.output_throughput.mean == pytest.approx(75.0)
    assert c.output_throughput.spread_pct == pytest.approx(40.0)
    assert (c.completed, c.failed, c.num_prompts) == (30, 0, 30)
    assert c.status == CellStatus.completed


def test_cells_sorted_and_runs_never_mixed() -> None:
    rs = [
        result(512, 1, 0, run_id="gpu", ttft_p50_ms=10.0),
        result(128, 4, 0, run_id="cpu", ttft_p50_ms=200.0),
        result(128, 1, 0, run_id="cpu", ttft_p50_ms=150.0),
        result(128, 1, 0, run_id="gpu", ttft_p50_ms=5.0),
    ]
    cells = aggregate_results(rs)
    assert [(c.run_id, c.input_len, c.concurrency) for c in cells] == [
        ("gpu", 128, 1),
        ("gpu", 512, 1),
        ("cpu", 128, 1),
        ("cpu", 128, 4),
    ]
    assert [c.mean("ttft_p50_ms") for c in cells] == [5.0, 10.0, 150.0, 200.0]


def test_partial_and_failed_repeats() -> None:
    cells = aggregate_results(
        [
            # cell A: two completed repeats and one partial: the partial one does not move the figures
            result(128, 1, 0, ttft_p50_ms=100.0),
            result(128, 1, 1, ttft_p50_ms=110.0),
            result(
                128, 1, 2, status=CellStatus.partial, ttft_p50_ms=999.0, completed=3, failed=0, num_prompts=10
            ),
            # cell B: only a partial repeat: its figures are shown, flagged partial
            result(
                128, 4, 0, status=CellStatus.partial, ttft_p50_ms=300.0, completed=7, failed=1, num_prompts=40
            ),
            # cell C: one failed repeat only
            result(
                512,
                1,
                0,
                status=CellStatus.failed,
                completed=0,
                failed=10,
                ttft_p50_ms=None,
                tpot_p50_ms=None,
                itl_p50_ms=None,
                e2el_p50_ms=None,
                output_throughput=0.0,
                total_token_throughput=0.0,
            ),
        ]
    )
    a, b, c = cells
    assert a.status == CellStatus.completed and a.repeats == 3 and a.repeats_used == 2
    assert a.ttft_p50_ms is not None and a.ttft_p50_ms.mean == pytest.approx(105.0)
    assert a.partial_repeats == 1
    assert (a.completed, a.failed, a.num_prompts) == (23, 0, 30)  # counts include the partial repeat
    assert b.status == CellStatus.partial and b.repeats_used == 1
    assert b.mean("ttft_p50_ms") == 300.0 and b.failed == 1
    assert c.status == CellStatus.failed and c.repeats_used == 0 and c.failed_repeats == 1
    assert c.ttft_p50_ms is None and c.output_throughput is None
    assert (c.completed, c.failed) == (0, 10)


def test_missing_value_in_one_repeat_counts_only_the_others() -> None:
    cells = aggregate_results(
        [
            result(128, 1, 0, tpot_p50_ms=None),
            result(128, 1, 1, tpot_p50_ms=30.0),
            result(128, 1, 2, tpot_p50_ms=40.0),
        ]
    )
    tpot = cells[0].tpot_p50_ms
    assert tpot is not None and tpot.n == 2 and tpot.mean == pytest.approx(35.0)
    assert cells[0].repeats_used == 3


def test_metric_aggregate_rejects_non_finite_and_empty() -> None:
    assert MetricAggregate.of([]) is None
    assert MetricAggregate.of([float("nan")]) is None
    agg = MetricAggregate.of([1.0, float("inf"), 3.0])
    assert agg is not None and agg.mean == 2.0 and agg.n == 2
    assert MetricAggregate.of([5.0]) is not None and MetricAggregate.of([5.0]).spread_pct is None  # type: ignore[union-attr]
    with pytest.raises(KeyError, match="unknown metric"):
        aggregate_results([result(1, 1, 0)])[0].metric("ttft")


def test_display_rows_show_range_only_with_repeats() -> None:
    one = aggregate_results([result(128, 1, 0, ttft_p50_ms=214.04)])
    assert table_rows(one)[0][:3] == ["128", "1", "214.0"]
    two = aggregate_results([result(128, 1, 0, ttft_p50_ms=200.0), result(128, 1, 1, ttft_p50_ms=230.0)])
    assert table_rows(two)[0][2] == "215.0 (200.0-230.0)"
    assert table_rows(two, with_range=False)[0][2] == "215.0"
    assert len(table_headers()) == len(table_rows(two)[0]) == 2 + len(METRICS) + 2
    assert format_metric(None, 1, with_range=True) == "-"
    partial = aggregate_results([result(128, 1, 0, status=CellStatus.partial, failed=2)])
    assert table_rows(partial)[0][-1] == "2 (partial)"
    named = table_rows(one, with_run=True, run_names={"run-a": "cpu"})
    assert named[0][0] == "cpu"


def test_csv_rows_keep_full_precision_and_ranges() -> None:
    cells = aggregate_results([result(128, 1, 0, tpot_p50_ms=27.123456), result(128, 1, 1, tpot_p50_ms=27.5)])
    header = csv_header(with_range=True)
    row = dict(zip(header, csv_rows(cells, with_range=True)[0], strict=True))
    assert row["tpot_p50_ms"] == pytest.approx((27.123456 + 27.5) / 2)
    assert row["tpot_p50_ms_min"] == 27.123456 and row["tpot_p50_ms_max"] == 27.5
    assert row["repeats"] == 2 and row["completed"] == 20 and row["status"] == "completed"
    assert "ttft_p50_ms_min" not in csv_header(with_range=False)


def test_markdown_table_alignment_and_escaping() -> None:
    md = markdown_table(["Name", "TTFT"], [["a|b", "1.0"], ["c", "-"]])
    lines = md.splitlines()
    assert lines[1] == "|---|---:|"
    assert lines[2] == "| a\\|b | 1.0 |"
