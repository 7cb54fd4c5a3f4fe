"""The files a sweep writes into --out: results.md, results.csv, results.json, per-repeat JSON in vLLM's
save-result layout (read back), PNG plots; for one run and for several."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from accelbench.bench.results_io import read_result
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.report.sweep_outputs import write_sweep_outputs
from accelbench.store.repo import Store
from tests.support.summaries import make_summary


def seed_run(store: Store, *, label: str, tpot_base: float, partial_last: bool = False) -> str:
    run = store.create_run(
        kind="sweep",
        status=RunStatus.completed,
        label=label,
        served_model="smol",
        base_url="http://127.0.0.1:1",
        engine="vllm",
        engine_version="0.32.0",
        spec={"sweep": {"input_lens": [128, 512], "concurrency": [1, 4], "repeats": 2, "output_len": 32}},
        environment={
            "cpu": {"model": "AMD EPYC", "arch": "x86_64"},
            "command": "accelbench sweep --repeats 2",
        },
    )
    for il in (128, 512):
        for c in (1, 4):
            for rep in (0, 1):
                last = (il, c, rep) == (512, 4, 1)
                store.save_result(
                    run.id,
                    input_len=il,
                    concurrency=c,
                    repeat=rep,
                    summary=make_summary(
                        input_len=il,
                        concurrency=c,
                        tpot=tpot_base + c + rep,  # repeats differ by 1 ms
                        ttft=100.0 * (il / 128),
                        failed=2 if last and partial_last else 0,
                    ),
                    status=CellStatus.partial if last and partial_last else CellStatus.completed,
                )
    return run.id


def test_one_run_outputs(store: Store, tmp_path: Path) -> None:
    run_id = seed_run(store, label="cpu", tpot_base=26.0, partial_last=True)
    out = write_sweep_outputs(store, run_id, tmp_path / "out")
    names = sorted(p.relative_to(tmp_path / "out").as_posix() for p in out.all_paths())
    assert "results.md" in names and "results.csv" in names and "results.json" in names
    assert "tpot_vs_concurrency.png" in names and "throughput_vs_concurrency.png" in names
    assert "ttft_vs_concurrency.png" in names
    assert len(out.repeat_files) == 8
    assert "repeats/input512_conc4_rep2.json" in names

    rows = list(csv.DictReader(out.csv.open()))
    assert [(r["input_len"], r["concurrency"]) for r in rows] == [
        ("128", "1"),
        ("128", "4"),
        ("512", "1"),
        ("512", "4"),
    ]
    r0 = rows[0]
    assert float(r0["tpot_p50_ms"]) == pytest.approx(27.5)  # mean of 27 and 28
    assert (float(r0["tpot_p50_ms_min"]), float(r0["tpot_p50_ms_max"])) == (27.0, 28.0)
    assert float(r0["ttft_p50_ms"]) == pytest.approx(100.0)
    assert float(r0["output_throughput"]) == pytest.approx(32.0)  # 10 requests x 32 tokens / 10 s
    assert (r0["completed"], r0["failed"], r0["repeats"]) == ("20", "0", "2")
    # the cell with a partial repeat: figures from the completed repeat only, failures still counted
    r3 = rows[3]
    assert r3["repeats"] == "1" and float(r3["tpot_p50_ms"]) == pytest.approx(30.0)
    assert (r3["completed"], r3["failed"]) == ("78", "2")
    assert set(csv.DictReader(out.csv.open()).fieldnames or []) >= {
        "ttft_p50_ms", "tpot_p50_ms", "itl_p50_ms", "e2el_p50_ms", "output_throughput", "total_token_throughput",
    }  # fmt: skip

    md = out.markdown.read_text()
    assert "| Input | Conc. | TTFT p50 (ms) | TPOT p50 (ms) |" in md
    assert "| 128 | 1 | 100.0 (100.0-100.0) | 27.50 (27.00-28.00) |" in md
    assert "vllm 0.32.0" in md and "AMD EPYC" in md and "`accelbench sweep --repeats 2`" in md
    assert "1 partial and 0 failed repeat(s) left out" in md
    assert "2 failed request(s): HTTP 500: boom" in md
    assert "![tpot vs concurrency](tpot_vs_concurrency.png)" in md

    # per-repeat files are vLLM save-result JSON, read back to the same figures
    raw = json.loads((tmp_path / "out/repeats/input128_conc4_rep1.json").read_text())
    for key in ("median_tpot_ms", "median_ttft_ms", "output_throughput", "completed", "ttfts", "itls"):
        assert key in raw
    assert raw["median_tpot_ms"] == pytest.approx(26.0 + 4)  # repeat index 0
    back = read_result(tmp_path / "out/repeats/input128_conc4_rep1.json")
    assert back.tpot_ms.median == pytest.approx(30.0) and back.completed == 40

    data = json.loads(out.json.read_text())
    assert data["runs"][0]["id"] == run_id and len(data["cells"]) == 4


def test_several_runs_side_by_side(store: Store, tmp_path: Path) -> None:
    cpu = seed_run(store, label="cpu", tpot_base=26.0)
    gpu = seed_run(store, label="gpu", tpot_base=5.0)
    out = write_sweep_outputs(store, [cpu, gpu], tmp_path, repeat_json=False)
    assert out.repeat_files == []
    md = out.markdown.read_text()
    assert md.startswith("# Sweep results: cpu vs gpu")
    assert "| Run | Input | Conc." in md
    assert "| gpu | 128 | 1 |" in md and "| cpu | 128 | 1 |" in md
    rows = list(csv.DictReader(out.csv.open()))
    assert [r["run_id"] for r in rows] == [cpu] * 4 + [gpu] * 4
    assert float(rows[4]["tpot_p50_ms"]) == pytest.approx(6.5)
    assert all(p.stat().st_size > 5000 for p in out.plots)
