"""A cell's figures carry the 95% interval of their repeats and requests, and the tables show it compactly."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from accelbench.bench.intervals import BASIS_REPEATS, BASIS_REQUESTS
from accelbench.domain.results import ResultInfo
from accelbench.domain.run import CellStatus
from accelbench.report.tables import aggregate_results, format_metric, table_rows


def result(repeat: int, tpot: float, ci: list[float] | None, *, conc: int = 1) -> ResultInfo:
    summary: dict[str, Any] = {"tpot_ms": {"count": 100, "p50": tpot, "p50_ci95": ci}}
    if ci is not None:
        summary["output_throughput_ci95"] = [48.0, 52.0]
    return ResultInfo(
        id=repeat + 10 * conc,
        run_id="run-a",
        input_len=128,
        concurrency=conc,
        repeat=repeat,
        status=CellStatus.completed,
        tpot_p50_ms=tpot,
        output_throughput=50.0,
        summary=summary,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_a_cell_json_has_its_interval_beside_its_mean() -> None:
    cells = aggregate_results([result(0, 20.0, [19.6, 20.4]), result(1, 20.2, [19.8, 20.6])])
    body = json.loads(cells[0].model_dump_json())
    tpot = body["tpot_p50_ms"]
    assert set(tpot) >= {"mean", "min", "max", "n", "values", "ci95", "ci95_basis"}
    assert tpot["ci95"][0] < tpot["mean"] < tpot["ci95"][1]
    assert tpot["ci95_basis"] == BASIS_REPEATS
    assert body["output_throughput"]["ci95"][0] < 50.0 < body["output_throughput"]["ci95"][1]


def test_one_repeat_rests_on_its_requests_and_old_results_have_none() -> None:
    one = aggregate_results([result(0, 20.0, [19.0, 21.0])])[0]
    assert one.tpot_p50_ms is not None
    assert one.tpot_p50_ms.ci95 == [19.0, 21.0] and one.tpot_p50_ms.ci95_basis == BASIS_REQUESTS
    old = aggregate_results([result(0, 20.0, None), result(1, 21.0, None)])[0]
    assert old.tpot_p50_ms is not None and old.tpot_p50_ms.ci95 is None


def test_tables_show_the_interval_compactly_and_flag_wide_ones() -> None:
    tight = aggregate_results([result(0, 20.0, [19.4, 20.6])])[0]
    assert format_metric(tight.tpot_p50_ms, 2, with_range=False) == "20.00 +-3%"
    assert format_metric(tight.tpot_p50_ms, 2, with_range=False, with_ci=False) == "20.00"
    wide = aggregate_results([result(0, 20.0, [17.0, 23.0], conc=2)])[0]
    assert format_metric(wide.tpot_p50_ms, 2, with_range=False) == "20.00 +-15% (wide)"
    row = table_rows([tight])[0]
    assert "20.00 +-3%" in row


def test_the_results_csv_carries_each_interval() -> None:
    from accelbench.report.tables import csv_header, csv_rows

    cells = aggregate_results([result(0, 20.0, [19.6, 20.4])])
    header = csv_header(with_range=False)
    row = dict(zip(header, csv_rows(cells, with_range=False)[0], strict=True))
    assert (
        row["tpot_p50_ms"] == 20.0
        and row["tpot_p50_ms_ci95_low"] == 19.6
        and row["tpot_p50_ms_ci95_high"] == 20.4
    )
    assert row["ttft_p50_ms_ci95_low"] == ""
