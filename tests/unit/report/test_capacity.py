"""Capacity at an SLO in the report and in comparisons: the table's real numbers, the finding's exact sentence,
the charts (plotly in the HTML, PNG in the Markdown) with the SLO line, the max load and the knee marked, the
probe table, and a comparison of sweeps left exactly as it was."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accelbench.catalog import price_for
from accelbench.domain.capacity import CapacitySLO, Probe
from accelbench.domain.run import RunStatus
from accelbench.report.capacity_results import (
    CAPACITY_COLUMNS,
    answer_sentence,
    capacity_rows,
    fmt_usd_per_million,
    prediction_sentence,
    probe_rows,
    slo_label,
)
from accelbench.report.compare_csv import CAPACITY_COLUMNS as CSV_CAPACITY_COLUMNS
from accelbench.report.compare_csv import COLUMNS, read_compare_csv, write_compare_csv
from accelbench.report.compare_runs import build_comparison, compare_runs, comparison_json
from accelbench.report.document import build_report
from accelbench.report.files import load_report
from accelbench.report.html import capacity_page, render_html
from accelbench.report.html_capacity_figures import capacity_compare_figure, capacity_figure
from accelbench.report.markdown import render_markdown, write_markdown, write_pngs
from accelbench.report.plots import capacity_compare_figure as capacity_compare_png
from accelbench.report.plots import capacity_curve_figure
from accelbench.store.repo import Store
from tests.support.report_data import make_result, make_run, run_data
from tests.unit.report.capacity_data import (
    G6,
    M8I,
    SLOW,
    TPOT_50,
    Level,
    capacity_run_data,
    store_capacity_run,
)

G6_HOURLY, M8I_HOURLY = 0.9776, 0.42336


def _g6(**kw: object) -> object:
    return capacity_run_data(
        "g6run", G6, instance_type="g6.2xlarge", hourly=G6_HOURLY, label="gpu", knee=24, predicted=20, **kw
    )


def _m8i(**kw: object) -> object:
    return capacity_run_data(
        "m8irun",
        M8I,
        instance_type="m8i.2xlarge",
        hourly=M8I_HOURLY,
        label="cpu",
        engine="vllm-cpu",
        knee=4,
        **kw,
    )


def _sweep_run() -> object:
    run = make_run("sw", label="sweep", model="smol", engine="vllm", instance_type="g6.xlarge")
    return run_data(run, [make_result("sw", 128, c, tpot=9.0 + c, total_tps=100.0 * c) for c in (1, 4, 16)])


# ------------------------------------------------------------------------------------------ the answer
def test_the_finding_sentence_is_exactly_the_issue_s() -> None:
    cmp = build_comparison([_g6(), _m8i()])  # type: ignore[list-item]
    capacity = [f for f in cmp.findings if f.kind == "capacity"]
    assert [f.text for f in capacity] == [
        "At p90 TPOT <= 50 ms, g6.2xlarge sustains 24 users at $0.41/1M output tokens; "
        "m8i.2xlarge 3 users at $2.10/1M."
    ]
    # capacity comes first, before the cell-by-cell findings, and quotes its figures unrounded
    assert cmp.findings[0].kind == "capacity"
    figures = capacity[0].figures
    assert figures["g6run_max_load"] == 24 and figures["m8irun_max_load"] == 3
    assert figures["g6run_usd_per_million_output_tokens"] == pytest.approx(G6_HOURLY / 662.0 / 3600 * 1e6)
    assert figures["m8irun_usd_per_million_output_tokens"] == pytest.approx(2.10)
    # the planner's 20 users against 24 measured: (20 / 24 - 1) = -17%
    (pred,) = [f for f in cmp.findings if f.kind == "capacity_prediction"]
    assert pred.text == (
        "For g6.2xlarge at p90 TPOT <= 50 ms, the planner predicted 20 users against 24 users measured (-17%)."
    )
    assert pred.figures["prediction_error_pct"] == pytest.approx((20 / 24 - 1) * 100)


def test_the_capacity_table_holds_the_real_numbers() -> None:
    cmp = build_comparison([_g6(), _m8i()])  # type: ignore[list-item]
    g6, m8i = cmp.capacity
    assert (
        g6.max_load == 24
        and g6.output_tokens_per_s_at_max == 662.0
        and g6.total_tokens_per_s_at_max == 1330.0
    )
    assert g6.usd_per_million_output_tokens == pytest.approx(G6_HOURLY / 662.0 / 3600 * 1e6)
    assert g6.usd_per_million_total_tokens == pytest.approx(G6_HOURLY / 1330.0 / 3600 * 1e6)
    assert g6.predicted_max_load == 20 and g6.prediction_error_pct == pytest.approx(-100 / 6)
    assert m8i.max_load == 3 and m8i.knee == 4 and m8i.predicted_max_load is None
    assert list(CAPACITY_COLUMNS) == [
        "run", "instance", "engine", "SLO", "load", "max load", "out tok/s at max", "$/1M output",
        "$/1M total", "predicted", "knee",
    ]  # fmt: skip
    assert capacity_rows(cmp.capacity) == [
        ["gpu", "g6.2xlarge", "vllm", "p90 TPOT <= 50 ms", "concurrency", "24 users", "662.0", "$0.41", "$0.20",
         "20 users (-17%)", "24 users"],
        ["cpu", "m8i.2xlarge", "vllm-cpu", "p90 TPOT <= 50 ms", "concurrency", "3 users", "56.0", "$2.10", "$1.07",
         "-", "4 users"],
    ]  # fmt: skip


def test_answer_prediction_and_probe_table_of_one_search() -> None:
    (c,) = build_comparison([_g6()]).capacity  # type: ignore[list-item]
    assert answer_sentence(c) == (
        "At p90 TPOT <= 50 ms (attainment >= 95%), g6.2xlarge sustains 24 users, 662.0 output tok/s and "
        "1,330.0 total tok/s, at $0.41/1M output tokens and $0.20/1M total tokens ($0.978/h)."
    )
    assert prediction_sentence(c) == (
        "The planner predicted 20 users; measured 24 users (prediction -17% against the measured)."
    )
    rows = probe_rows(c)
    # by level, the re-measure of 24 right after its first measurement
    assert [(r[0], r[1]) for r in rows] == [("3", "1"), ("6", "1"), ("12", "1"), ("24", "1"), ("24", "2"),
                                             ("32", "1"), ("48", "1")]  # fmt: skip
    assert rows[3][4] == "44.00" and rows[3][8] == "662.0" and rows[3][-2:] == ["yes", "meets the SLO"]
    assert rows[5][4] == "63.00" and rows[5][-2] == "no"


def test_one_run_meeting_nothing_is_said_plainly() -> None:
    slow = capacity_run_data("slow", SLOW, instance_type="m7i.xlarge", hourly=0.2016, label="old")
    cmp = build_comparison([_g6(), slow])  # type: ignore[list-item]
    (f,) = [f for f in cmp.findings if f.kind == "capacity"]
    assert f.text == (
        "At p90 TPOT <= 50 ms, g6.2xlarge sustains 24 users at $0.41/1M output tokens; "
        "m7i.xlarge meets it at no load measured (even 1 user misses it)."
    )
    row = capacity_rows(cmp.capacity)[1]
    assert row[5:9] == ["none met", "-", "-", "-"]
    assert answer_sentence(cmp.capacity[1]).startswith(
        "At p90 TPOT <= 50 ms, m7i.xlarge meets the SLO at no load"
    )


def test_different_slos_and_loads_are_called_out() -> None:
    p99 = CapacitySLO(targets={"tpot": 50.0}, percentile=99.0)
    rate = [
        Level(2, 30.0, 200.0, 150.0, 300.0),
        Level(4, 45.0, 300.0, 290.0, 580.0),
        Level(8, 80.0, 900.0, 400.0, 800.0),
    ]
    cmp = build_comparison(
        [
            _g6(),  # type: ignore[list-item]
            capacity_run_data("b", M8I, instance_type="m8i.2xlarge", hourly=M8I_HOURLY, slo=p99),
            capacity_run_data("c", rate, instance_type="inf2.8xlarge", hourly=1.96786, load="request_rate"),
        ]
    )
    texts = [f.text for f in cmp.findings if f.kind.startswith("capacity")]
    assert texts[0] == "At p90 TPOT <= 50 ms, g6.2xlarge sustains 24 users at $0.41/1M output tokens."
    assert texts[1] == "At p99 TPOT <= 50 ms, m8i.2xlarge sustains 3 users at $2.10/1M output tokens."
    usd = fmt_usd_per_million(1.96786 / 290.0 / 3600 * 1e6)
    assert texts[2] == f"At p90 TPOT <= 50 ms, inf2.8xlarge sustains 4 requests/s at {usd}/1M output tokens."
    assert texts[3] == (
        "The capacity searches used different SLOs and loads (g6.2xlarge: p90 TPOT <= 50 ms, concurrency; "
        "m8i.2xlarge: p99 TPOT <= 50 ms, concurrency; inf2.8xlarge: p90 TPOT <= 50 ms, request rate): their "
        "capacities do not compare directly."
    )
    assert capacity_rows(cmp.capacity)[2][4:6] == ["request_rate", "4 requests/s"]


def test_a_rate_search_mixes_rates_in_its_cell_so_no_ratio_rests_on_it() -> None:
    rate = [Level(1, 20.0, 100.0, 60.0, 120.0), Level(2, 30.0, 200.0, 120.0, 240.0)]
    a = capacity_run_data("ra", rate, instance_type="g6.2xlarge", hourly=G6_HOURLY, load="request_rate")
    b = capacity_run_data("rb", rate, instance_type="m8i.2xlarge", hourly=M8I_HOURLY, load="request_rate")
    cmp = build_comparison([a, b])
    assert cmp.pairs == [] and cmp.matched == []
    assert any("searched request rates" in n for n in cmp.notes)
    assert [f.kind for f in cmp.findings][:1] == ["capacity"]
    assert not any(f.kind == "decode_speedup" for f in cmp.findings)


def test_knee_searches_without_an_slo() -> None:
    a = capacity_run_data("a", G6, instance_type="g6.2xlarge", hourly=G6_HOURLY, slo=None, knee=24)
    b = capacity_run_data("b", M8I, instance_type="m8i.2xlarge", hourly=M8I_HOURLY, slo=None, knee=4)
    cmp = build_comparison([a, b])
    (f,) = [f for f in cmp.findings if f.kind == "capacity"]
    assert (
        f.text
        == "Without an SLO, g6.2xlarge's throughput stops growing at 24 users; m8i.2xlarge's at 4 users (the knee)."
    )
    assert capacity_rows(cmp.capacity)[0][3:6] == ["none (knee search)", "concurrency", "-"]
    assert answer_sentence(cmp.capacity[0]) == (
        "Without an SLO, g6.2xlarge's throughput stops growing at 24 users (662.0 output tok/s): the knee."
    )


def test_labels_and_dollars() -> None:
    assert slo_label(CapacitySLO(targets={"tpot": 50, "ttft": 1000}, percentile=95)) == (
        "p95 TPOT <= 50 ms, TTFT <= 1000 ms"
    )
    assert [fmt_usd_per_million(v) for v in (0.41, 2.1, 0.041, 12.345, None)] == [
        "$0.41", "$2.10", "$0.041", "$12.35", "-",
    ]  # fmt: skip


def test_prices_follow_the_comparison_s_tier_and_two_runs_on_one_instance_are_told_apart() -> None:
    a = _g6()
    b = capacity_run_data("g6b", G6[:4], instance_type="g6.2xlarge", hourly=None, label="gpu2")
    cmp = build_comparison([a, b])  # type: ignore[list-item]
    assert [c.hardware for c in cmp.capacity] == ["g6.2xlarge (gpu)", "g6.2xlarge (gpu2)"]
    assert cmp.capacity[1].usd_per_million_output_tokens is None
    (f,) = [f for f in cmp.findings if f.kind == "capacity"]
    assert f.text.endswith("g6.2xlarge (gpu2) 24 users (no price).")


# --------------------------------------------------------------------------------------------- charts
def test_the_curve_has_one_point_per_probe_the_slo_line_the_max_load_and_the_knee() -> None:
    (c,) = build_comparison([_g6()]).capacity  # type: ignore[list-item]
    fig = capacity_figure(c)
    assert fig is not None
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"probes (by load)", "re-measures", "SLO p90 TPOT <= 50 ms", "max load: 24 users",
                            "knee: 24 users"}  # fmt: skip
    line = by_name["probes (by load)"]
    assert list(line.x) == [95.0, 180.0, 340.0, 662.0, 690.0, 700.0]  # output tok/s, by level 3..48
    assert list(line.y) == [20.0, 24.0, 31.0, 44.0, 63.0, 91.0]  # p90 TPOT
    assert list(line.marker.symbol) == ["circle"] * 4 + ["x", "x"]  # 32 and 48 miss the SLO
    assert list(by_name["re-measures"].x) == [662.0] and list(by_name["re-measures"].y) == [46.0]
    assert list(by_name["SLO p90 TPOT <= 50 ms"].y) == [50.0, 50.0]
    star = by_name["max load: 24 users"]
    assert (list(star.x), list(star.y), star.marker.symbol) == ([662.0], [44.0], "star")
    assert by_name["knee: 24 users"].marker.symbol == "diamond-open"


def test_a_two_metric_slo_draws_one_panel_per_metric() -> None:
    slo = CapacitySLO(targets={"tpot": 50.0, "ttft": 500.0}, percentile=90.0)
    (c,) = build_comparison(
        [capacity_run_data("a", G6, instance_type="g6.2xlarge", hourly=G6_HOURLY, slo=slo, knee=24)]
    ).capacity
    fig = capacity_figure(c)
    assert fig is not None
    slo_lines = [t for t in fig.data if t.name.startswith("SLO")]
    assert [(t.name, list(t.y), t.xaxis) for t in slo_lines] == [
        ("SLO p90 TPOT <= 50 ms", [50.0, 50.0], "x"),
        ("SLO p90 TTFT <= 500 ms", [500.0, 500.0], "x2"),
    ]
    ttft = next(t for t in fig.data if t.name == "probes (by load)" and t.xaxis == "x2")
    assert list(ttft.y) == [150.0, 180.0, 240.0, 420.0, 900.0, 1900.0]
    png = capacity_curve_figure(c)
    assert len(png.axes) == 2
    assert [ax.get_ylabel() for ax in png.axes] == ["p90 TPOT (ms)", "p90 TTFT (ms)"]


def test_the_compare_chart_sets_runs_side_by_side() -> None:
    cmp = build_comparison([_g6(), _m8i()])  # type: ignore[list-item]
    fig = capacity_compare_figure(cmp.capacity)
    assert fig is not None
    bars = fig.data[0]
    assert list(bars.x) == ["g6.2xlarge", "m8i.2xlarge"] and list(bars.y) == [662.0, 56.0]
    assert list(bars.text) == ["24 users · $0.41/1M out", "3 users · $2.10/1M out"]
    curves = {t.name: t for t in fig.data[1:]}
    assert list(curves["m8i.2xlarge"].x) == [56.0, 62.0, 70.0] and list(curves["m8i.2xlarge"].y) == [
        41.0,
        55.0,
        72.0,
    ]
    assert list(curves["SLO 50 ms"].y) == [50.0, 50.0]
    assert list(curves["m8i.2xlarge max load: 3 users"].x) == [56.0]
    assert capacity_compare_figure(cmp.capacity[:1]) is None
    png = capacity_compare_png(cmp.capacity)
    bar_ax, curve_ax = png.axes
    assert [round(p.get_height(), 6) for p in bar_ax.patches] == [662.0, 56.0]
    assert [t.get_text() for t in bar_ax.texts] == ["24 users\n$0.41/1M out", "3 users\n$2.10/1M out"]
    assert any(list(line.get_ydata()) == [50, 50] for line in curve_ax.lines)  # the SLO line


# --------------------------------------------------------------------------------------------- the report
def _between(html: str, start: str, end: str) -> str:
    i = html.index(start)
    return html[i : html.index(end, i)]


def test_html_report_of_a_stored_capacity_run(store: Store) -> None:
    run = store_capacity_run(store, G6, label="gpu", instance_type="g6.2xlarge", knee=24, predicted=20)
    data = load_report(store, [run])
    html = render_html(data)
    hourly = price_for("g6.2xlarge").usd_per_hour  # type: ignore[union-attr]
    assert '<a href="#capacity">Capacity</a>' in html and '<section id="capacity">' in html
    section = _between(html, '<section id="capacity">', "</section>")
    table = _between(section, 'id="capacity-table"', "</table>")
    assert table.count("<tr>") == 2
    for cell in ("24 users", "662.0", fmt_usd_per_million(hourly / 662 / 3600 * 1e6),
                 fmt_usd_per_million(hourly / 1330 / 3600 * 1e6), "20 users (-17%)", "p90 TPOT &lt;= 50 ms"):  # fmt: skip
        assert f">{cell}</td>" in table, cell
    assert "g6.2xlarge sustains 24 users, 662.0 output tok/s" in section
    assert (
        "The planner predicted 20 users; measured 24 users (prediction -17% against the measured)." in section
    )
    # the curve: a plotly div with its markers, drawn from the embedded figure
    assert 'id="chart-capacity-1"' in section and 'id="chart-capacity-compare"' not in section
    for marker in ("max load: 24 users", "knee: 24 users", "probes (by load)", "re-measures", '"star"'):
        assert marker in section, marker
    assert "SLO p90 TPOT \\u003c= 50 ms" in section or "SLO p90 TPOT <= 50 ms" in section
    probes = _between(section, 'id="probes-1"', "</table>")
    assert probes.count("<tr>") == 1 + len(G6)
    # the finding, and the comparison's JSON with the capacity
    assert "At p90 TPOT &lt;= 50 ms, g6.2xlarge sustains 24 users at " in html
    embedded = re.search(r'<script type="application/json" id="comparison-data">(.*?)</script>', html, re.S)
    assert embedded is not None
    (cap,) = json.loads(embedded.group(1))["capacity"]
    assert cap["max_load"] == 24 and len(cap["probes"]) == len(G6)


def test_html_report_compares_capacity_runs_on_one_chart(store: Store) -> None:
    a = store_capacity_run(store, G6, label="gpu", instance_type="g6.2xlarge", knee=24)
    b = store_capacity_run(store, M8I, label="cpu", instance_type="m8i.2xlarge", engine="vllm-cpu", knee=4)
    html = render_html(load_report(store, [a, b]))
    section = _between(html, '<section id="capacity">', "</section>")
    assert 'id="chart-capacity-compare"' in section
    assert 'id="chart-capacity-1"' in section and 'id="chart-capacity-2"' in section
    hourly_g6 = price_for("g6.2xlarge").usd_per_hour  # type: ignore[union-attr]
    hourly_m8i = price_for("m8i.2xlarge").usd_per_hour  # type: ignore[union-attr]
    g6_usd = fmt_usd_per_million(hourly_g6 / 662 / 3600 * 1e6)
    m8i_usd = fmt_usd_per_million(hourly_m8i / 56 / 3600 * 1e6)
    sentence = (
        f"At p90 TPOT &lt;= 50 ms, g6.2xlarge sustains 24 users at {g6_usd}/1M output tokens; "
        f"m8i.2xlarge 3 users at {m8i_usd}/1M."
    )
    assert sentence in html
    for label in (f"24 users · {g6_usd}/1M out", f"3 users · {m8i_usd}/1M out"):  # the bars' labels
        assert label.replace("/", "\\u002f") in section, label  # as plotly writes it in the figure's JSON


def test_markdown_report_of_capacity_runs(store: Store, tmp_path: Path) -> None:
    a = store_capacity_run(store, G6, label="gpu", instance_type="g6.2xlarge", knee=24, predicted=20)
    b = store_capacity_run(store, M8I, label="cpu", instance_type="m8i.2xlarge", knee=4)
    md, images = write_markdown(load_report(store, [a, b]), tmp_path)
    names = {p.name for p in images}
    assert {"capacity_curve_1.png", "capacity_curve_2.png", "capacity_compare.png"} <= names
    for p in images:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = md.read_text()
    section = text[text.index("## Capacity at the SLO") : text.index("## Latency vs throughput")]
    assert "| gpu | g6.2xlarge | vllm | p90 TPOT <= 50 ms | concurrency | 24 users | 662.0 |" in section
    assert "![Capacity at the SLO, per run](capacity_compare.png)" in section
    assert "![Latency vs throughput: gpu](capacity_curve_1.png)" in section
    assert "The planner predicted 20 users; measured 24 users" in section
    assert "| 32 | 1 | 30 |" in section  # a probe row
    charts = text[text.index("## Latency vs throughput") :]
    assert "capacity_" not in charts  # shown once, in the capacity section


def test_a_search_still_running_claims_no_answer(store: Store) -> None:
    # a run spec's capacity: section (slo as metric -> ms, percentile beside it), the search half way
    spec = {"capacity": {"load": "concurrency", "slo": {"tpot": 50.0}, "percentile": 99.0, "attainment": 0.9}}
    run = store_capacity_run(
        store, G6[:3], label="gpu", instance_type="g6.2xlarge", kind="run", status=RunStatus.benchmarking,
        partial=True, spec=spec,
    )  # fmt: skip
    cmp = compare_runs(store, [run], min_runs=1)
    (c,) = cmp.capacity
    assert not c.finished and c.max_load is None and len(c.probes) == 3
    assert c.slo is not None and c.slo.percentile == 99.0 and c.slo.attainment == 0.9
    assert capacity_rows(cmp.capacity)[0][5] == "unfinished"
    assert not [f for f in cmp.findings if f.kind.startswith("capacity")]
    assert any("has not finished (status benchmarking): 3 probe(s) so far" in n for n in cmp.notes)
    assert "has not finished: 3 probe(s) measured so far" in render_html(load_report(store, [run]))


# ------------------------------------------------------------------------------------ sweeps unchanged
def test_a_sweep_only_comparison_is_unchanged(tmp_path: Path) -> None:
    sweep = _sweep_run()
    other = run_data(
        make_run("sw2", label="cpu", model="smol", engine="vllm-cpu"),
        [make_result("sw2", 128, c, tpot=30.0 + c, total_tps=40.0 * c) for c in (1, 4, 16)],
    )
    cmp = build_comparison([sweep, other])  # type: ignore[list-item]
    assert cmp.capacity == []
    data = comparison_json(cmp)
    assert list(data) == ["generated_at", "accelbench_version", "tier", "baseline", "runs", "cells", "matched",
                          "scaling", "pairs", "findings", "notes", "like_for_like", "mismatches",
                          "like_for_like_notes", "verdicts"]  # fmt: skip
    assert not any(f.kind.startswith("capacity") for f in cmp.findings)
    assert not any("capacity" in n or "request rates" in n for n in cmp.notes)
    comments, rows = read_compare_csv(write_compare_csv(cmp))
    assert list(rows[0]) == list(COLUMNS)
    assert not any("capacity" in c for c in comments)
    report = build_report([sweep, other])  # type: ignore[list-item]
    html = render_html(report)
    assert 'id="capacity"' not in html and "#capacity" not in html and "chart-capacity" not in html
    assert capacity_page(report.comparison) is None
    images = write_pngs(report, tmp_path)
    assert list(images) == ["Latency vs throughput", "Median TPOT vs concurrency",
                            "Total token throughput vs concurrency", "Median TTFT vs concurrency",
                            "Per-request latency CDFs", "Server telemetry over time", "Devices: 1", "Devices: 2"]  # fmt: skip
    assert "Capacity" not in render_markdown(report, images)


def test_a_sweep_s_rows_and_figures_do_not_move_beside_a_capacity_run() -> None:
    alone = build_comparison([_sweep_run()])  # type: ignore[list-item]
    beside = build_comparison([_sweep_run(), _g6()])  # type: ignore[list-item]

    def figures(cmp: object) -> list[dict[str, object]]:
        return [c.model_dump(exclude={"result_ids"}) for c in cmp.cells_of("sw")]  # type: ignore[attr-defined]

    assert figures(alone) == figures(beside)
    _, rows_alone = read_compare_csv(write_compare_csv(alone))
    comments, rows_beside = read_compare_csv(write_compare_csv(beside))
    assert list(rows_beside[0]) == list(COLUMNS) + list(CSV_CAPACITY_COLUMNS)
    sweep_rows = [r for r in rows_beside if r["run_id"] == "sw"]
    assert [{k: r[k] for k in COLUMNS} for r in sweep_rows] == rows_alone
    assert all(r[k] == "" for r in sweep_rows for k in CSV_CAPACITY_COLUMNS)
    assert any(
        c.startswith("# capacity g6run (gpu): p90 TPOT <= 50 ms, attainment >= 0.95, load concurrency")
        for c in comments
    )


def test_compare_csv_capacity_columns() -> None:
    cmp = build_comparison([_g6(), _m8i()])  # type: ignore[list-item]
    _, rows = read_compare_csv(write_compare_csv(cmp))
    g6 = {r["concurrency"]: r for r in rows if r["run_id"] == "g6run"}
    row = g6["24"]
    assert row["capacity_slo"] == "p90 TPOT <= 50 ms" and row["capacity_load"] == "concurrency"
    assert float(row["capacity_max_load"]) == 24 and float(row["capacity_output_tok_s_at_max"]) == 662
    assert (
        float(row["capacity_total_tok_s_at_max"]) == 1330 and float(row["capacity_hourly_usd"]) == G6_HOURLY
    )
    assert float(row["capacity_usd_per_1m_output_tokens"]) == pytest.approx(G6_HOURLY / 662 / 3600 * 1e6)
    assert float(row["capacity_usd_per_1m_total_tokens"]) == pytest.approx(G6_HOURLY / 1330 / 3600 * 1e6)
    assert float(row["capacity_predicted_max_load"]) == 20
    assert float(row["capacity_prediction_error_pct"]) == pytest.approx(-100 / 6)
    assert float(row["capacity_knee"]) == 24
    assert [g6[c]["capacity_level_met"] for c in ("3", "24", "32", "48")] == [
        "true",
        "true",
        "false",
        "false",
    ]
    m8i = [r for r in rows if r["run_id"] == "m8irun"]
    assert [float(r["capacity_usd_per_1m_output_tokens"]) for r in m8i] == pytest.approx([2.10] * len(m8i))
    assert {r["capacity_predicted_max_load"] for r in m8i} == {""}


def test_the_compare_page_block() -> None:
    page = capacity_page(build_comparison([_g6(), _m8i()]))  # type: ignore[list-item]
    assert page is not None
    assert page["rows"][0][5] == "24 users" and page["rows"][1][7] == "$2.10"
    chart = page["chart"]
    assert chart["data"][0]["type"] == "bar" and chart["data"][0]["y"] == [662.0, 56.0]
    single = capacity_page(build_comparison([_g6(), _sweep_run()]))  # type: ignore[list-item]
    assert single is not None
    assert any(t.get("name") == "max load: 24 users" for t in single["chart"]["data"])
    assert TPOT_50.label() == "p90 tpot <= 50 ms"  # the domain's own spelling stays as it was


def test_a_capacity_runs_own_results_md_carries_its_answer_and_probes() -> None:
    """The run directory's results.md (written when a run ends) says the capacity, the prediction and the
    probes; a sweep's has no such section."""
    from accelbench.report.sweep_outputs import render_markdown as results_md

    g6 = _g6()
    text = results_md([g6.run], [])
    assert "## Capacity at the SLO" in text
    assert "sustains 24 users" in text and "The planner predicted 20 users" in text
    assert text.count("| yes |") + text.count("| no |") == len(g6.run.extra["capacity"]["probes"])
    assert "## Capacity at the SLO" not in results_md([_sweep_run().run], [])


# ------------------------------------------------------------------------------------------ devices at the answer
def _device_cell(
    concurrency: int,
    repeat: int,
    gpu_util: float,
    energy_j: float | None,
    tokens: int,
    power: float | None = 70.0,
) -> object:
    """A stored probe whose device telemetry has a GPU (and the host CPU beside it)."""
    from accelbench.domain.device import DeviceKind, DeviceSample, DeviceTelemetry

    samples = [
        DeviceSample(t_s=t, device="gpu0", kind=DeviceKind.gpu, util_pct=gpu_util, memory_used_bytes=20 * 2**30,
                     memory_total_bytes=24 * 2**30, power_w=power,
                     energy_j=None if energy_j is None else energy_j * t / 2.0)
        for t in (0.0, 1.0, 2.0)
    ] + [DeviceSample(t_s=t, device="cpu", kind=DeviceKind.cpu, util_pct=30.0) for t in (0.0, 2.0)]  # fmt: skip
    tel = DeviceTelemetry.build(samples, sources=["nvml", "cpu:/proc/stat"], missing=[], interval_s=1.0)
    r = make_result("cap-1", 256, concurrency, repeat=repeat)
    return r.model_copy(
        update={"summary": {"total_output_tokens": tokens, "device_telemetry": tel.model_dump(mode="json")}}
    )


def test_the_devices_at_the_capacity_are_read_from_the_answer_s_own_probe() -> None:
    from accelbench.domain.capacity import CapacityResult, Probe
    from accelbench.report.capacity_results import answer_level, devices_at_capacity, devices_sentence

    slo = CapacitySLO(targets={"tpot": 50.0}, percentile=90, attainment=0.9)
    probes = [Probe(level=4, met=True), Probe(level=8, met=True), Probe(level=8, repeat=1, met=True),
              Probe(level=16, met=False)]  # fmt: skip
    result = CapacityResult(load="concurrency", slo=slo, max_load=8, probes=probes)
    stored = [_device_cell(4, 0, 40.0, 100.0, 500), _device_cell(8, 0, 70.0, 140.0, 900),
              _device_cell(8, 1, 75.0, 150.0, 1200), _device_cell(16, 0, 99.0, 200.0, 1300)]  # fmt: skip
    [gpu] = devices_at_capacity(result, stored)  # the serving device only; the re-measure at 8 is the answer
    assert gpu.device == "gpu0" and gpu.util_mean_pct == pytest.approx(75.0)
    assert gpu.memory_used_peak_gib == pytest.approx(20.0) and gpu.memory_total_gib == pytest.approx(24.0)
    assert gpu.tokens_per_joule == pytest.approx(
        1200 / 150.0
    ) and gpu.joules_per_output_token == pytest.approx(0.125)
    text = devices_sentence([gpu], result.load, answer_level(result))
    assert text == ("At 8 users, gpu0 ran at 75% mean utilisation (75% peak), 20.00 GiB of 24.0 GiB in use at "
                    "most, 70 W; 8.00 output tokens per joule (0.125 J per output token).")  # fmt: skip

    # a rate search stores its probes as cell 0, one repeat per probe, in the order measured
    rate = CapacityResult(load="request_rate", slo=slo, max_load=2.5,
                          probes=[Probe(level=1.0, met=True), Probe(level=2.5, met=True), Probe(level=4.0, met=False)])  # fmt: skip
    cells = [
        _device_cell(0, i + 1, 30.0 + 10 * i, None, 100, power=None) for i in range(3)
    ]  # no power source
    [at_rate] = devices_at_capacity(rate, cells)
    assert at_rate.util_mean_pct == pytest.approx(40.0) and at_rate.tokens_per_joule is None
    assert devices_sentence([at_rate], rate.load, answer_level(rate)).endswith(  # type: ignore[union-attr]
        "no power or energy source, so no tokens per joule."
    )
    # no answer, or no telemetry with the answer's probe: nothing is claimed
    assert devices_at_capacity(CapacityResult(load="concurrency", slo=slo, probes=probes), stored) == []
    assert devices_at_capacity(result, [make_result("cap-1", 256, 8, repeat=1)]) == []


def test_the_answer_shows_how_sure_each_level_is_compactly() -> None:
    from accelbench.report.capacity_results import confidence_sentence, probe_columns, range_text
    from accelbench.report.comparison import CapacityRun

    def _probe(level: float, confidence: float, repeat: int = 1) -> Probe:
        return Probe(level=level, repeat=repeat, met=confidence >= 0.5, confidence=confidence)

    probes = [_probe(8, 1.0), _probe(15, 0.8), _probe(15, 0.6, 2), _probe(16, 0.35), _probe(17, 0.02)]
    run = CapacityRun(
        run_id="r", name="r", hardware="g6.xlarge", load="concurrency", slo=CapacitySLO(targets={"tpot": 50.0}),
        slo_label="p90 TPOT <= 50 ms", finished=True, max_load=15, probes=probes,
    )  # fmt: skip
    assert confidence_sentence(run) == (
        "How sure the SLO holds, by level: 8 100% · 15 70% (2 runs) · 16 35% · 17 2%."
    )
    assert range_text(run) == "8-16 with 90% confidence"
    cols, rows = probe_columns(run), probe_rows(run)
    sure = cols.index("SLO sure")
    assert cols[-2:] == ["met", "why"] and [r[sure] for r in rows] == ["100%", "80%", "60%", "35%", "2%"]
    assert confidence_sentence(run.model_copy(update={"slo": None})) is None


def test_the_capacity_command_says_the_range_and_how_sure_each_level_is() -> None:
    from accelbench.cli.capacity import render
    from accelbench.cli.common import console
    from accelbench.domain.capacity import CapacityResult

    probes = [
        Probe(level=lv, repeat=rp, met=c >= 0.5, confidence=c)
        for lv, rp, c in [
            (8, 1, 1.0),
            (14, 1, 0.95),
            (15, 1, 0.8),
            (15, 2, 0.6),
            (16, 1, 0.35),
            (17, 1, 0.02),
        ]
    ]
    result = CapacityResult(
        load="concurrency", slo=CapacitySLO(targets={"tpot": 50.0}), max_load=15, probes=probes,
        output_tokens_per_s_at_max=300.0,
    )  # fmt: skip
    with console.capture() as out:
        render(result, None)
    text = " ".join(out.get().split())
    assert "15 users (14-16 with 90% confidence), 300.0 output tokens/s" in text
    assert "How sure the SLO holds, by level: 8 100% · 14 95% · 15 70% (2 runs) · 16 35% · 17 2%." in text
