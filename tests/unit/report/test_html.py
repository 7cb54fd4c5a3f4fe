"""The HTML report without a browser: self-contained, escaped, every section and chart with the right data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import plotly

from accelbench.domain.bench import TelemetrySample
from accelbench.domain.catalog import PriceTier
from accelbench.report.compare import HourlyPrice
from accelbench.report.document import (
    CellLatencies,
    Prediction,
    ReportData,
    TelemetrySeries,
    build_report,
    telemetry_series,
)
from accelbench.report.html import (
    cdf_figure,
    charts,
    compared_rows,
    concurrency_figure,
    cost_rows,
    render_html,
    telemetry_figure,
    write_html,
)
from tests.support.report_data import make_result, make_run, run_data


def _report(*, label_a: str = "gpu", with_telemetry: bool = True, single: bool = False) -> ReportData:
    env = {
        "cpu": {
            "model": "Xeon 8488C",
            "usable_cpus": 8,
            "isa": {"present": ["AMX-BF16"], "matrix_engine": "AMX"},
        }
    }
    a = make_run(
        "ra", label=label_a, model="m", engine="vllm", engine_version="0.19.0", instance_type="g6.xlarge",
        accelerator_count=1, accelerator_name="L4", environment=env,
    )  # fmt: skip
    b = make_run("rb", label="cpu", model="m", engine="vllm-cpu", engine_version="0.32.0", environment=env,
                 extra={"isa_trace": {"verdict": "AMX kernels ran: 2,000 brg_matmul avx512_core_amx"}})  # fmt: skip
    ra = [
        make_result(
            "ra", il, c, repeat=rep, tpot=9.0 + c + rep, total_tps=100.0 * c * (1 + rep), output_tps=40.0 * c
        )
        for il in (128, 512)
        for c in (1, 4, 16)
        for rep in (0, 1)
    ]
    rb = [
        make_result("rb", il, c, tpot=27.0 + c, total_tps=40.0 * c, output_tps=20.0 * c)
        for il in (128, 512)
        for c in (1, 4, 16)
    ]
    price = HourlyPrice(usd_per_hour=0.8048, tier=PriceTier.on_demand, source="snapshot")
    runs = [run_data(a, ra, price=price)] + ([] if single else [run_data(b, rb)])
    latencies = [
        CellLatencies(
            run_id=r,
            input_len=128,
            concurrency=c,
            ttft_ms=[10.0, 30.0, 20.0],
            tpot_ms=[1.0, 2.0],
            e2e_ms=[5.0, 9.0, 7.0],
        )
        for r in ("ra",) + (() if single else ("rb",))
        for c in (1, 4)
    ]
    telemetry = []
    if with_telemetry:
        samples = [
            TelemetrySample(t_s=i, wall=1000.0 + i, values={"vllm:num_requests_running": float(i % 4),
                            "vllm:num_requests_waiting": 0.0, "vllm:kv_cache_usage_perc": 0.25})
            for i in range(5)
        ]  # fmt: skip
        telemetry = [telemetry_series("ra", samples)] + ([] if single else [telemetry_series("rb", [])])
    return build_report(
        runs,
        latencies=latencies,
        telemetry=telemetry,
        predictions=[
            Prediction(
                run_id="ra", input_len=128, concurrency=1, metric="TPOT p50 ms", predicted=8.0, measured=10.0
            )
        ],
    )


def _outside_plotly_bundle(html: str) -> str:
    start = html.index("<script>")
    return html[:start] + html[html.index("</script>", start) :]


def test_self_contained_nothing_loaded_by_url() -> None:
    html = render_html(_report())
    assert html.count(plotly.offline.get_plotlyjs()[:200]) == 1  # the bundle is embedded inline, once
    page = _outside_plotly_bundle(html)
    assert not re.search(r"<(script|img|iframe|link|source|video|audio)[^>]*\s(src|href)=", page, re.I)
    assert "@import" not in page and "url(" not in page
    assert "cdn." not in page and "fonts.googleapis" not in page
    assert not re.search(r"https?://", page)


def test_sections_findings_tables_and_embedded_json(tmp_path: Path) -> None:
    data = _report()
    path = write_html(data, tmp_path / "x" / "report.html")
    html = path.read_text(encoding="utf-8")
    for section in ("compared", "findings", "results", "charts", "cost", "predicted", "notes"):
        assert f'<section id="{section}">' in html
    for f in data.comparison.findings:
        assert f.text.replace("'", "&#39;") in html
    assert " decodes " in html and "than the baseline" in html
    embedded = re.search(r'<script type="application/json" id="comparison-data">(.*?)</script>', html, re.S)
    assert embedded is not None
    assert json.loads(embedded.group(1)) == data.comparison.model_dump(mode="json")
    # results: 2 runs x 2 input lengths x 3 concurrencies
    table = html[html.index('id="results-table"') : html.index("</table>", html.index('id="results-table"'))]
    assert table.count("<tr") == 1 + 12
    assert "decode speed vs baseline" in table
    # predicted vs measured: measured 10 over predicted 8 = +25%
    assert "+25%" in html


def test_what_was_compared_rows() -> None:
    rows = dict(compared_rows(_report()))
    assert rows["Engine"] == ["vllm 0.19.0", "vllm-cpu 0.32.0"]
    assert rows["Instance type"] == ["g6.xlarge", "none (local machine)"]
    assert rows["Machine"] == ["Xeon 8488C (8 CPUs)", "Xeon 8488C (8 CPUs)"]
    assert rows["Accelerators"] == ["1 x L4", "—"]
    assert rows["CPU flags"] == ["AMX-BF16", "AMX-BF16"]
    assert rows["CPU matrix path"] == ["AMX", "AMX"]
    assert rows["ISA trace"] == ["—", "AMX kernels ran: 2,000 brg_matmul avx512_core_amx"]
    assert rows["Hourly price"] == ["$0.805/h (on-demand, snapshot)", "none (no instance type)"]


def test_cost_rows_only_for_priced_runs() -> None:
    rows = cost_rows(_report())
    assert [r[:3] for r in rows] == [["gpu", "128", "1"], ["gpu", "128", "4"], ["gpu", "128", "16"],
                                     ["gpu", "512", "1"], ["gpu", "512", "4"], ["gpu", "512", "16"]]  # fmt: skip
    # gpu at 128 x 16: output 640 tok/s -> 0.8048 / 640 / 3600 x 1e6 = $0.349
    assert rows[2][5] == "$0.349"


def test_concurrency_figures_plot_mean_of_medians_with_range() -> None:
    data = _report()
    fig = concurrency_figure(data, "tpot_p50_ms", "t", "y")
    assert [t.name for t in fig.data] == [
        "gpu · input 128",
        "gpu · input 512",
        "cpu · input 128",
        "cpu · input 512",
    ]
    gpu128 = fig.data[0]
    assert list(gpu128.x) == [1, 4, 16]
    assert list(gpu128.y) == [10.5, 13.5, 25.5]  # mean of repeats 9+c and 10+c
    assert list(gpu128.error_y.array) == [0.5, 0.5, 0.5] and list(gpu128.error_y.arrayminus) == [
        0.5,
        0.5,
        0.5,
    ]
    assert fig.data[2].error_y.array is None  # one repeat: no range
    assert fig.layout.xaxis.type == "log"  # 1..16 spans 16x
    tput = concurrency_figure(data, "total_token_throughput", "t", "y")
    assert list(tput.data[0].y) == [150.0, 600.0, 2400.0]


def test_cdf_figure_sorted_values_and_fractions() -> None:
    fig = cdf_figure(_report())
    assert fig is not None
    assert len(fig.data) == 2 * 2 * 3  # runs x cells x metrics
    ttft = fig.data[0]
    assert list(ttft.x) == [10.0, 20.0, 30.0]
    assert list(ttft.y) == [1 / 3, 2 / 3, 1.0]
    assert ttft.name == "gpu · input 128 · c=1"


def test_telemetry_figure_and_absent_runs_noted() -> None:
    data = _report()
    fig = telemetry_figure(data)
    assert fig is not None
    assert len(fig.data) == 3  # running, waiting, KV-cache for the one run that has them
    assert list(fig.data[0].x) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert list(fig.data[2].y) == [25.0] * 5  # fraction -> percent
    chart = next(c for c in charts(data) if c["id"] == "chart-telemetry")
    assert chart["note"] is not None and "No server telemetry for cpu" in chart["note"]
    assert telemetry_figure(_report(with_telemetry=False)) is None
    none = next(c for c in charts(_report(with_telemetry=False)) if c["id"] == "chart-telemetry")
    assert none["html"] is None and "No server telemetry for gpu, cpu" in none["note"]


def test_telemetry_series_matches_prefixed_and_labelled_gauges() -> None:
    s = telemetry_series(
        "r",
        [
            TelemetrySample(t_s=0, wall=50.0, values={'vllm:num_requests_running{model_name="m"}': 2.0}),
            TelemetrySample(t_s=0, wall=49.0, values={"vllm:gpu_cache_usage_perc": 0.5}),
        ],
    )
    assert s.t_s == [0.0, 1.0]  # ordered by wall time
    assert s.values["running"] == [None, 2.0]
    assert s.values["kv_cache_pct"] == [50.0, None]
    assert not TelemetrySeries(run_id="x").has("running")


def test_single_run_has_no_ratio_columns() -> None:
    html = render_html(_report(single=True))
    assert "decode speed vs baseline" not in html
    assert "(baseline)" not in html
    assert "gpu&#39;s TPOT grows" in html


def test_labels_are_escaped_everywhere() -> None:
    html = render_html(_report(label_a="</script><script>alert(1)</script>"))
    page = _outside_plotly_bundle(html)
    assert "<script>alert(1)" not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in page
