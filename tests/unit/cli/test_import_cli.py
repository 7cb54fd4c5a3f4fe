"""`accelbench import vllm-bench` on files vLLM's own benchmark client wrote (tests/data/vllm_bench)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.run import RunStatus
from accelbench.services.vllm_imports import group_input_lengths
from accelbench.store.repo import Store

runner = CliRunner(env={"COLUMNS": "200"})
DATA = Path(__file__).resolve().parents[2] / "data" / "vllm_bench"
FILES = sorted(DATA.glob("*.json"))


def _import(*args: str) -> str:
    res = runner.invoke(app, ["import", "vllm-bench", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert list(data) == ["run_id"]
    return str(data["run_id"])


def test_import_recognises_cells_and_repeats(store: Store) -> None:
    assert len(FILES) == 5
    run_id = _import(
        *map(str, FILES), "--label", "vllm-fixture", "--engine", "vllm", "--engine-version", "0.32.0",
        "--instance", "g6.xlarge",
    )  # fmt: skip
    run = store.get_run(run_id)
    assert (run.kind, run.status, run.label) == ("import", RunStatus.completed, "vllm-fixture")
    assert (run.model, run.engine, run.engine_version) == ("smollm2", "vllm", "0.32.0")
    assert (run.instance_type, run.accelerator_type, run.accelerator_name, run.accelerator_count) == (
        "g6.xlarge", "gpu", "L4", 1,
    )  # fmt: skip
    assert run.hourly_usd == 0.8048
    assert run.extra["files"] == [f.name for f in FILES]
    assert run.extra["input_len_groups"] == [
        "input 42: files with measured input lengths 40, 42, 44",
        "input 85: files with measured input lengths 84, 85",
    ]
    results = store.get_results(run_id)
    assert [(r.input_len, r.concurrency, r.repeat) for r in results] == [
        (42, 1, 0), (42, 1, 1), (42, 4, 0), (85, 1, 0), (85, 4, 0),
    ]  # fmt: skip
    # repeats in the order measured: r0 (16:33:57) before r1 (16:34:18)
    raw = {f.name: json.loads(f.read_text()) for f in FILES}
    by_file = dict(zip(["in64-c1-r0.json", "in64-c1-r1.json", "in64-c4-r0.json", "in128-c1-r0.json",
                        "in128-c4-r0.json"], results, strict=True))  # fmt: skip
    for name, r in by_file.items():
        src = raw[name]
        assert r.completed == src["completed"] and r.failed == src["failed"]
        assert r.tpot_p50_ms == pytest.approx(src["median_tpot_ms"])
        assert r.ttft_p99_ms == pytest.approx(src["p99_ttft_ms"])
        assert r.output_throughput == pytest.approx(src["output_throughput"])
        assert r.total_token_throughput == pytest.approx(src["total_token_throughput"])
        records = store.get_request_records(r.id)
        assert len(records) == src["num_prompts"]
        assert [rec.ttft_s for rec in records] == pytest.approx(src["ttfts"])


def test_imported_runs_compare(store: Store) -> None:
    a = _import(*map(str, FILES), "--label", "first")
    b = _import(*map(str, FILES), "--label", "second")
    res = runner.invoke(app, ["compare", a, b, "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["matched"] == [[42, 1], [42, 4], [85, 1], [85, 4]]
    assert all(p["decode_speedup_a_over_b"] == pytest.approx(1.0) for p in data["pairs"])
    assert (
        # the same results twice: the interval of their ratio says there is nothing to tell apart
        "At input 42 and concurrency 1, second decodes with no detectable difference from the baseline first"
        in data["findings"][0]["text"]
    )


def test_tolerance_zero_keeps_lengths_apart(store: Store) -> None:
    run_id = _import(*map(str, FILES), "--label", "exact", "--input-len-tolerance", "0")
    cells = [(r.input_len, r.concurrency, r.repeat) for r in store.get_results(run_id)]
    assert cells == [(40, 1, 0), (42, 1, 0), (44, 4, 0), (84, 4, 0), (85, 1, 0)]


def test_table_output_prints_the_run_id(store: Store) -> None:
    res = runner.invoke(app, ["import", "vllm-bench", str(FILES[0]), "--label", "one"])
    assert res.exit_code == 0, res.output
    run_id = res.stdout.strip()
    assert store.get_run(run_id).label == "one"
    assert "Imported 1 results into run" in res.stderr


def test_group_input_lengths() -> None:
    assert group_input_lengths([44, 40, 42, 85, 84], 0.15) == {40: 42, 42: 42, 44: 42, 84: 85, 85: 85}
    assert group_input_lengths([100, 110, 120], 0.15) == {100: 105, 110: 105, 120: 120}
    assert group_input_lengths([128, 128, 512], 0.0) == {128: 128, 512: 512}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--engine-version", "1.0"], "--engine-version needs --engine"),
        (["--instance", "g6.xlarg"], "g6.xlarge"),  # did-you-mean
    ],
)
def test_bad_options(store: Store, args: list[str], message: str) -> None:
    res = runner.invoke(app, ["import", "vllm-bench", str(FILES[0]), "--label", "x", *args])
    assert res.exit_code != 0
    assert message in res.output
    assert store.list_runs()[1] == 0


def test_bad_file_imports_nothing(store: Store, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    shutil.copy(FILES[0], good)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    res = runner.invoke(app, ["import", "vllm-bench", str(good), str(broken), "--label", "x"])
    assert res.exit_code == 2 and "broken.json is not valid JSON" in res.output  # a malformed file: bad input
    missing = runner.invoke(
        app, ["import", "vllm-bench", str(good), str(tmp_path / "nope.json"), "--label", "x"]
    )
    assert missing.exit_code == 2 and "does not exist" in missing.output
    twice = runner.invoke(app, ["import", "vllm-bench", str(good), str(good), "--label", "x"])
    assert twice.exit_code == 2 and "named more than once" in twice.output
    other = json.loads(good.read_text())
    other["model_id"] = "another-model"
    (tmp_path / "other.json").write_text(json.dumps(other))
    mixed = runner.invoke(
        app, ["import", "vllm-bench", str(good), str(tmp_path / "other.json"), "--label", "x"]
    )
    assert mixed.exit_code == 2 and "different models" in mixed.output
    assert store.list_runs()[1] == 0
