"""The Markdown report: same content as the HTML, PNG charts next to it, linked by relative path."""

from __future__ import annotations

from pathlib import Path

from accelbench.report.document import build_report
from accelbench.report.markdown import render_markdown, write_markdown
from tests.unit.report.test_html import _report

PNG = b"\x89PNG\r\n\x1a\n"


def test_writes_markdown_and_every_chart(tmp_path: Path) -> None:
    data = _report()
    md, images = write_markdown(data, tmp_path)
    assert md == tmp_path / "report.md"
    assert sorted(p.name for p in images) == [
        "latency_cdf.png",
        "latency_throughput.png",
        "telemetry.png",
        "throughput_vs_concurrency.png",
        "tpot_vs_concurrency.png",
        "ttft_vs_concurrency.png",
    ]
    text = md.read_text(encoding="utf-8")
    for p in images:
        assert p.read_bytes()[:8] == PNG and p.stat().st_size > 5_000
        assert f"]({p.name})" in text  # relative link, works wherever the folder is copied


def test_same_content_as_the_html(tmp_path: Path) -> None:
    data = _report()
    md, _ = write_markdown(data, tmp_path)
    text = md.read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Headline",
        "## Results",
        "## Latency vs throughput",
        "## Charts",
        "## Telemetry",
        "## Device telemetry",
        "## Predicted vs measured",
        "## Environment",
        "## Like for like",
        "## Findings",
        "## Cost",
        "## Notes",
    ]
    assert text.startswith("# accelbench report: gpu vs cpu\n")
    # it opens with the answer: right after the title's line, the headline's title in bold, then its sentences
    assert data.headline is not None
    lines = text.splitlines()
    assert lines[2].startswith("Generated ") and lines[4] == "## Headline"
    assert lines[6] == f"**{data.headline.title}**"
    assert lines[8 : 8 + len(data.headline.lines)] == [f"- {x}" for x in data.headline.lines]
    for f in data.comparison.findings:
        assert f"- {f.text}" in text
    assert "| Instance type | g6.xlarge | none (local machine) |" in text
    assert "| ISA trace | — | AMX kernels ran: 2,000 brg_matmul avx512_core_amx |" in text
    # the percentile table (p50/p90/p99), then each run against the baseline: header + separator + 12 rows each
    results = text[text.index("## Results") : text.index("### Each run against the baseline")]
    assert sum(1 for line in results.splitlines() if line.startswith("|")) == 2 + 12
    assert "| Run | Input | Conc. | TTFT p50 (ms) | TTFT p90 (ms) | TTFT p99 (ms) |" in results
    assert "| gpu | 128 | 16 | 100.0 (100.0-100.0) |" in results
    baseline = text[text.index("### Each run against the baseline") : text.index("## Latency vs throughput")]
    assert sum(1 for line in baseline.splitlines() if line.startswith("|")) == 2 + 12
    assert "| 128 | 16 | gpu |" in baseline
    assert (
        "](latency_throughput.png)" in text[text.index("## Latency vs throughput") : text.index("## Charts")]
    )
    # cost: gpu at 128 x 16 is 0.8048 / 640 / 3600 x 1e6 = $0.349 per 1M output tokens
    cost = text[text.index("## Cost") : text.index("## Notes")]
    assert "| gpu | 128 | 16 | $0.805 |" in cost and "$0.349" in cost
    assert "| gpu | 128 | 1 | TPOT p50 ms | 8.0 | 10.0 | +25% |" in text
    assert "No server telemetry for cpu" in text


def test_without_telemetry_or_records(tmp_path: Path) -> None:
    data = _report(with_telemetry=False)
    data.latencies = []
    md, images = write_markdown(data, tmp_path)
    assert sorted(p.name for p in images) == [
        "latency_throughput.png",
        "throughput_vs_concurrency.png",
        "tpot_vs_concurrency.png",
        "ttft_vs_concurrency.png",
    ]
    text = md.read_text()
    assert not (tmp_path / "telemetry.png").exists()
    assert "No server telemetry: the engines exposed no running/waiting/KV-cache gauges." in text
    assert "No per-request records were stored for these runs." in text


def test_pipes_in_names_do_not_break_tables() -> None:
    data = _report(label_a="gpu|fast")
    text = render_markdown(data, {})
    header = next(line for line in text.splitlines() if "(baseline)" in line)
    assert header == "|  | gpu\\|fast (baseline) | cpu |"
    assert header.count("|") - header.count("\\|") == 4  # 3 columns: label + 2 runs


def test_device_telemetry_with_cell_windows(tmp_path: Path) -> None:
    from tests.support.report_data import make_run, run_data
    from tests.unit.test_device_chart import _two_cells

    data = build_report([run_data(make_run("run-1", label="cpu-run"), _two_cells())])
    md, images = write_markdown(data, tmp_path)
    assert "devices_1.png" in {p.name for p in images}
    assert (tmp_path / "devices_1.png").read_bytes()[:8] == PNG
    text = md.read_text(encoding="utf-8")
    part = text[text.index("## Device telemetry") : text.index("## Predicted vs measured")]
    assert "![Device telemetry: cpu-run](devices_1.png)" in part
    # one row per device and cell repeat, in the order the cells ran
    rows = [line for line in part.splitlines() if line.startswith("| in ")]
    assert [r.split(" | ")[0] for r in rows] == ["| in 256 / c 4 / r1", "| in 512 / c 8 / r1"]
    assert "- RAPL: /sys/class/powercap is absent (no powercap driver)" in part


def test_slo_columns_and_what_they_rest_on(tmp_path: Path) -> None:
    from tests.unit.report.test_html import SLO_30

    data = _report(slo=SLO_30)
    text = render_markdown(data, {})
    results = text[text.index("## Results") : text.index("### Each run against the baseline")]
    header = next(line for line in results.splitlines() if line.startswith("| Run |"))
    assert header.endswith(
        "| SLO attainment | SLO met | Goodput tok/s | Goodput req/s | Top failure reason |"
    )
    assert "SLO: p99 tpot <= 30 ms (attainment >= 90%; given)." in results
    assert "lower bounds (>=)" in results  # no per-request records: read from the stored percentiles
    head = text[: text.index("## Results")]
    assert "- gpu: At input 512 the SLO holds up to concurrency 4 and breaks at 16" in head
