"""The Markdown report: same content as the HTML, PNG charts next to it, linked by relative path."""

from __future__ import annotations

from pathlib import Path

from accelbench.report.markdown import render_markdown, write_markdown
from tests.unit.report.test_html import _report

PNG = b"\x89PNG\r\n\x1a\n"


def test_writes_markdown_and_every_chart(tmp_path: Path) -> None:
    data = _report()
    md, images = write_markdown(data, tmp_path)
    assert md == tmp_path / "report.md"
    assert sorted(p.name for p in images) == [
        "latency_cdf.png",
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
        "## What was compared",
        "## Findings",
        "## Results",
        "## Charts",
        "## Cost",
        "## Predicted vs measured",
        "## Notes",
    ]
    assert text.startswith("# accelbench report: gpu vs cpu\n")
    for f in data.comparison.findings:
        assert f"- {f.text}" in text
    assert "| Instance type | g6.xlarge | none (local machine) |" in text
    assert "| ISA trace | — | AMX kernels ran: 2,000 brg_matmul avx512_core_amx |" in text
    # results table: header + separator + 12 rows
    results = text[text.index("## Results") : text.index("## Charts")]
    assert sum(1 for line in results.splitlines() if line.startswith("|")) == 2 + 12
    assert "| 128 | 16 | gpu |" in results
    # cost: gpu at 128 x 16 is 0.8048 / 640 / 3600 x 1e6 = $0.349 per 1M output tokens
    cost = text[text.index("## Cost") : text.index("## Predicted")]
    assert "| gpu | 128 | 16 | $0.805 |" in cost and "$0.349" in cost
    assert "| gpu | 128 | 1 | TPOT p50 ms | 8.0 | 10.0 | +25% |" in text
    assert "No server telemetry for cpu" in text


def test_without_telemetry_or_records(tmp_path: Path) -> None:
    data = _report(with_telemetry=False)
    data.latencies = []
    md, images = write_markdown(data, tmp_path)
    assert sorted(p.name for p in images) == [
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
