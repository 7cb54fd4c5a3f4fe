"""`accelbench compare` and `accelbench report` over the store (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.report.compare import compare_runs
from accelbench.report.compare_csv import COLUMNS, read_compare_csv
from accelbench.store.repo import Store
from tests.support.report_data import make_summary

runner = CliRunner(env={"COLUMNS": "240"})

G6_XLARGE_ON_DEMAND = 0.8048  # the catalog's shipped us-east-1 snapshot


def seed(store: Store) -> tuple[str, str]:
    """A GPU run on g6.xlarge (priced from the catalog) and a local CPU run (no price)."""
    gpu = store.create_run(
        kind="sweep", label="gpu", model="smol", engine="vllm", engine_version="0.19.0",
        instance_type="g6.xlarge", accelerator_type="gpu", accelerator_name="L4", accelerator_count=1,
    )  # fmt: skip
    cpu = store.create_run(
        kind="sweep", label="cpu", model="smol", engine="vllm-cpu", engine_version="0.32.0"
    )
    for run, tpot, ttft in ((gpu, 9.0, 50.0), (cpu, 27.0, 200.0)):
        for conc in (1, 4):
            store.save_result(
                run.id, input_len=128, concurrency=conc, repeat=0,
                summary=make_summary(128, conc, tpot_ms=tpot * (1 + 0.1 * conc), ttft_ms=ttft, telemetry_start=None),
            )  # fmt: skip
    return gpu.id, cpu.id


def test_compare_json_carries_ratios_findings_and_cost(store: Store) -> None:
    gpu, cpu = seed(store)
    res = runner.invoke(app, ["compare", gpu, cpu, "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["baseline"] == gpu and [r["id"] for r in data["runs"]] == [gpu, cpu]
    assert data["matched"] == [[128, 1], [128, 4]]
    (pair,) = data["pairs"]
    # the same figures the library computes
    expected = compare_runs(store, [gpu, cpu])
    assert pair["decode_speedup_a_over_b"] == pytest.approx(expected.pairs[0].decode_speedup_a_over_b)
    assert pair["decode_speedup_a_over_b"] == pytest.approx(pair["tpot_b_ms"] / pair["tpot_a_ms"])
    assert [f["text"] for f in data["findings"]] == [f.text for f in expected.findings]
    decode = next(f for f in data["findings"] if f["kind"] == "decode_speedup")
    assert decode["figures"]["decode_speedup_a_over_b"] == pytest.approx(pair["decode_speedup_a_over_b"])
    assert f"{pair['decode_speedup_a_over_b']:.1f}x faster on gpu than on cpu" in decode["text"]
    # cost: catalog price for g6.xlarge, blank for the local run
    g4 = next(c for c in data["cells"] if c["run_id"] == gpu and c["concurrency"] == 4)
    assert g4["hourly_usd"] == G6_XLARGE_ON_DEMAND
    assert g4["cost_per_1m_tokens_usd"] == pytest.approx(
        G6_XLARGE_ON_DEMAND / g4["output_throughput"] / 3600 * 1e6
    )
    assert g4["cost_per_request_usd"] == pytest.approx(G6_XLARGE_ON_DEMAND / g4["request_throughput"] / 3600)
    c4 = next(c for c in data["cells"] if c["run_id"] == cpu and c["concurrency"] == 4)
    assert c4["hourly_usd"] is None and c4["cost_per_1m_tokens_usd"] is None
    assert any("has no instance type" in n for n in data["notes"])


def test_compare_table(store: Store) -> None:
    gpu, cpu = seed(store)
    res = runner.invoke(app, ["compare", gpu, cpu])
    assert res.exit_code == 0, res.output
    assert "Runs compared" in res.stdout and "Findings" in res.stdout
    assert "faster on gpu than on cpu" in res.stdout
    assert "Ratios per input length" in res.stdout


def test_compare_csv_to_stdout_and_file(store: Store, tmp_path: Path) -> None:
    gpu, cpu = seed(store)
    res = runner.invoke(app, ["compare", gpu, cpu[:12], "--format", "csv"])
    assert res.exit_code == 0, res.output
    comments, rows = read_compare_csv(res.stdout)
    assert comments[0].startswith("# accelbench ")
    assert list(rows[0]) == list(COLUMNS)
    assert [(r["run_id"], r["concurrency"]) for r in rows] == [(gpu, "1"), (gpu, "4"), (cpu, "1"), (cpu, "4")]
    assert (
        rows[0]["throughput_per_accelerator_tok_s"] != ""
        and rows[2]["throughput_per_accelerator_tok_s"] == ""
    )

    out = tmp_path / "sub" / "compare.csv"
    res = runner.invoke(app, ["compare", gpu, cpu, "--format", "csv", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stdout == ""
    assert read_compare_csv(out.read_text())[1] == rows


def test_compare_tier_without_price(store: Store) -> None:
    gpu, cpu = seed(store)
    res = runner.invoke(app, ["compare", gpu, cpu, "--format", "json", "--tier", "reserved_3yr"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["tier"] == "reserved_3yr"
    assert all(c["cost_per_1m_tokens_usd"] is None for c in data["cells"])
    assert any("g6.xlarge" in n and "3-year reserved" in n for n in data["notes"])


def test_compare_needs_two_runs(store: Store) -> None:
    gpu, _ = seed(store)
    res = runner.invoke(app, ["compare", gpu])
    assert res.exit_code == 1
    assert "Compare needs at least 2 runs; got 1." in res.output
    assert "accelbench report" in res.output  # the hint points at the single-run report


def test_compare_unknown_run(store: Store) -> None:
    gpu, _ = seed(store)
    res = runner.invoke(app, ["compare", gpu, "no-such-run"])
    assert res.exit_code != 0
    assert "No run 'no-such-run'" in res.output
    assert "Traceback" not in res.output


def test_report_writes_html_markdown_and_pngs(store: Store, tmp_path: Path) -> None:
    gpu, cpu = seed(store)
    out = tmp_path / "rep"
    res = runner.invoke(app, ["report", gpu, cpu, "--out", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    paths = json.loads(res.stdout)
    assert paths["html"] == str(out / "report.html") and paths["markdown"] == str(out / "report.md")
    names = sorted(Path(p).name for p in paths["images"])
    # no telemetry was stored (telemetry_start=None): no telemetry chart
    assert names == [
        "latency_cdf.png",
        "throughput_vs_concurrency.png",
        "tpot_vs_concurrency.png",
        "ttft_vs_concurrency.png",
    ]
    for p in paths["images"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert "![Median TPOT vs concurrency](tpot_vs_concurrency.png)" in md
    assert "faster on gpu than on cpu" in md
    html = (out / "report.html").read_text()
    assert "faster on gpu than on cpu" in html and 'id="chart-tpot"' in html


def test_report_single_run_prints_paths(store: Store, tmp_path: Path) -> None:
    gpu, _ = seed(store)
    res = runner.invoke(app, ["report", gpu, "--out", str(tmp_path / "one")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == str(tmp_path / "one" / "report.html") and lines[1] == str(
        tmp_path / "one" / "report.md"
    )
    assert all(Path(line).exists() for line in lines)


def test_report_out_is_a_file(store: Store, tmp_path: Path) -> None:
    gpu, _ = seed(store)
    f = tmp_path / "taken"
    f.write_text("x")
    res = runner.invoke(app, ["report", gpu, "--out", str(f)])
    assert res.exit_code == 1 and "is a file" in res.output
