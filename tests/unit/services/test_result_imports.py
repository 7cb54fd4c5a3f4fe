"""Import and export as use cases on a real store: a measured run (the in-repo stream server) exported in
llm-d-benchmark's report format validates against the vendored schema and imports back with the same figures;
other tools' files become runs with their cells and their own-named figures; a bad file stores nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from accelbench.bench import run_benchmark
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.errors import UserInputError
from accelbench.services.result_imports import ImportRequest, import_results
from accelbench.services.run_export import export_run
from accelbench.settings import reset_settings_cache
from accelbench.store import get_store
from accelbench.store.repo import Store, reset_stores
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

DATA = Path(__file__).resolve().parents[2] / "data"
SCHEMA = (
    Path(__file__).resolve().parents[3]
    / "src/accelbench/bench/importers/data/llm_d_benchmark_report_v0_2_1.schema.json"
)
FIGURES = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv("ACCELBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    reset_settings_cache()
    reset_stores()
    yield get_store()
    reset_stores()


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, BenchmarkSummary]]:
    """Three real benchmarks: concurrency 1 and 2, the second measured twice."""
    tok = make_tokenizer_dir(tmp_path_factory.mktemp("tok"))
    out = []
    with StreamServer(Script(ttft_ms=4, itl_ms=1), tokenizer_dir=tok) as server:
        endpoint = Endpoint(base_url=server.base_url, served_model="fixture-model", tokenizer=str(tok))
        for conc in (1, 2, 2):
            config = BenchConfig(input_len=40, output_len=6, num_prompts=6, max_concurrency=conc)
            out.append((conc, run_benchmark(endpoint, config)))
    return out


def _stored_run(store: Store, measured: list[tuple[int, BenchmarkSummary]]) -> str:
    run = store.create_run(kind="bench", label="measured", model="fixture-model", engine="vllm")
    repeats: dict[int, int] = {}
    for conc, s in measured:
        repeat = repeats.get(conc, 0)
        repeats[conc] = repeat + 1
        store.save_result(run.id, input_len=40, concurrency=conc, repeat=repeat, summary=s)
    return run.id


def _write(files: list, where: Path) -> list[Path]:  # type: ignore[type-arg]
    where.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in files:
        (where / f.name).write_text(f.content)
        paths.append(where / f.name)
    return paths


def test_llm_d_export_validates_and_round_trips(store: Store, measured, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_id = _stored_run(store, measured)
    files = export_run(store, run_id, "llm-d-report")
    assert len(files) == 3
    validator = Draft202012Validator(json.loads(SCHEMA.read_text()))
    reports = [json.loads(f.content) for f in files]
    for report in reports:
        assert list(validator.iter_errors(report)) == []
        assert report["version"] == "0.2.1"
        assert report["scenario"]["load"]["standardized"]["tool"] == "accelbench"
    first = reports[0]["results"]["request_performance"]["aggregate"]
    s0 = measured[0][1]
    assert first["latency"]["time_to_first_token"]["p90"] == s0.ttft_ms.p90
    assert first["requests"]["total"] == s0.completed + s0.failed
    back = import_results(store, ImportRequest("llm-d-report", _write(files, tmp_path / "x"), label="back"))
    before = store.get_results(run_id)
    after = store.get_results(back.run_id)
    assert [(r.input_len, r.concurrency, r.repeat) for r in after] == [
        (r.input_len, r.concurrency, r.repeat) for r in before
    ]
    for a, b in zip(before, after, strict=True):
        sa, sb = store.get_summary(a.id), store.get_summary(b.id)
        for fig in FIGURES:
            assert getattr(sb, fig) == getattr(sa, fig), fig
        assert (sb.completed, sb.output_throughput, sb.requests) == (
            sa.completed,
            sa.output_throughput,
            sa.requests,
        )


def test_llm_d_statistics_alone_keep_the_figures(measured, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A report without accelbench's profiling block (as another consumer might trim it) still gives the same
    statistics."""
    from accelbench.bench.importers import read_file
    from accelbench.domain.results import ResultInfo, RunInfo
    from accelbench.report.llm_d_report import cell_report

    conc, s = measured[1]
    run = RunInfo.model_validate(
        {"id": "r1", "kind": "bench", "status": "completed", "created_at": "2026-01-01T00:00:00"}
    )
    result = ResultInfo.model_validate(
        {"id": 1, "run_id": "r1", "input_len": 40, "concurrency": conc, "repeat": 0, "status": "completed"}
    )
    report = cell_report(run, result, s, 0)
    del report["results"]["profiling"]
    path = tmp_path / "trimmed.json"
    path.write_text(json.dumps(report))
    (cell,) = read_file("llm-d-report", path).cells
    got = cell.summary
    assert (cell.concurrency, cell.input_len, got.completed) == (conc, 40, s.completed)
    for fig in ("ttft_ms", "e2el_ms"):
        for stat in ("mean", "std", "min", "max", "p50", "p90", "p95", "p99"):
            assert getattr(getattr(got, fig), stat) == pytest.approx(getattr(getattr(s, fig), stat)), (
                fig,
                stat,
            )
    assert got.output_throughput == pytest.approx(s.output_throughput)
    assert got.request_throughput == pytest.approx(s.request_throughput)
    # harnesses define TPOT and ITL differently: kept under the report's names
    tpot = {m.name: m for m in cell.tool_metrics}["time_per_output_token"]
    assert not tpot.comparable and tpot.values["p99"] == pytest.approx(s.tpot_ms.p99)


def test_vllm_and_csv_exports(store: Store, measured) -> None:  # type: ignore[no-untyped-def]
    from accelbench.bench.results_io import from_dict

    run_id = _stored_run(store, measured)
    vllm = export_run(store, run_id, "vllm")
    assert [f.name.split("-", 2)[-1] for f in vllm] == [
        "in40-c1-r1.json",
        "in40-c2-r1.json",
        "in40-c2-r2.json",
    ]
    assert from_dict(json.loads(vllm[0].content)).ttft_ms == measured[0][1].ttft_ms
    (csv_file,) = export_run(store, run_id, "csv")
    assert csv_file.content.splitlines()[0].startswith("run_id,input_len,concurrency")
    with pytest.raises(UserInputError, match=r"Did you mean .*'llm-d-report'"):
        export_run(store, run_id, "llm-d")


def test_tool_files_become_a_run_with_their_own_figures(store: Store) -> None:
    stages = sorted((DATA / "inference_perf").glob("stage_*_lifecycle_metrics.json"))
    out = import_results(store, ImportRequest("inference-perf", stages, label="ip", engine="vllm"))
    run = store.get_run(out.run_id)
    assert (run.kind, run.label, run.engine, run.extra["source"]) == (
        "import",
        "ip",
        "vllm",
        "inference-perf",
    )
    results = store.get_results(run.id)
    assert len(results) == 3 and len({r.concurrency for r in results}) == 3  # three rates, three cells
    rates = sorted(store.get_summary(r.id).config.request_rate for r in results)
    assert rates == [1.0, 37.97, 74.94]
    kept = run.extra["tool_metrics"]
    assert len(kept) == 3 and kept[0]["metrics"][0]["comparable"] is False


def test_a_bad_file_stores_nothing(store: Store, tmp_path: Path) -> None:
    bad = tmp_path / "stage_9_lifecycle_metrics.json"
    bad.write_text("[]")
    good = DATA / "inference_perf" / "stage_0_lifecycle_metrics.json"
    with pytest.raises(UserInputError, match=str(bad)):
        import_results(store, ImportRequest("inference-perf", [good, bad], label="x"))
    assert store.list_runs()[1] == 0


def test_cli_export_then_import(store: Store, measured, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from accelbench.cli.main import app

    runner = CliRunner(env={"COLUMNS": "200"})
    run_id = _stored_run(store, measured)
    res = runner.invoke(
        app, ["runs", "export", run_id, "--format", "llm-d-report", "-o", str(tmp_path / "out")]
    )
    assert res.exit_code == 0, res.output
    files = sorted((tmp_path / "out").glob("*.json"))
    assert len(files) == 3
    res = runner.invoke(
        app, ["import", "llm-d-report", *map(str, files), "--label", "again", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    assert len(store.get_results(json.loads(res.stdout)["run_id"])) == 3
    res = runner.invoke(app, ["runs", "export", run_id, "--format", "llm-d-report"])
    assert res.exit_code == 0 and len(json.loads(res.stdout)) == 3


def test_runs_show_says_what_imported_figures_mean(store: Store) -> None:
    from accelbench.cli.main import app

    path = DATA / "guidellm" / "benchmarks.json"
    run_id = import_results(store, ImportRequest("guidellm", [path], label="gl")).run_id
    res = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["runs", "show", run_id])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "Imported figures:" in out and "nearest-rank" in out
    assert "time_per_output_token_ms (ms), kept under the tool's name, not directly comparable" in out


def test_a_run_exported_and_imported_back_compares_as_no_difference(
    store: Store, measured, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    from accelbench.report.compare_runs import compare_runs
    from accelbench.report.verdicts import NO_DIFFERENCE

    run_id = _stored_run(store, measured)
    files = _write(export_run(store, run_id, "llm-d-report"), tmp_path / "x")
    back = import_results(store, ImportRequest("llm-d-report", files, label="back")).run_id
    verdicts = compare_runs(store, [run_id, back]).verdicts
    assert verdicts and {v.verdict for v in verdicts} == {NO_DIFFERENCE}
    assert all(v.ratio == 1.0 for v in verdicts)


def test_cli_refusal_names_the_file_without_a_traceback(store: Store, tmp_path: Path) -> None:
    from accelbench.cli.main import app

    bad = tmp_path / "profile_export.jsonl"
    bad.write_text('{"metadata": {}, "metrics": {}}\nnot json\n')
    res = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["import", "aiperf", str(bad), "--label", "x"])
    out = " ".join(res.output.split())
    assert res.exit_code == 2 and "Traceback" not in out
    assert f"{bad}: expected AIPerf per-request records" in out and "found line 2 that is not JSON" in out
    assert "Nothing was imported from any of the files." in out and store.list_runs()[1] == 0


def test_vllm_bench_files_import_through_the_same_use_case(store: Store) -> None:
    from accelbench.services.result_imports import tool_choices

    assert tool_choices()[0][0] == "vllm-bench"
    assert {"guidellm", "aiperf", "inference-perf", "genai-bench", "llm-d-report"} <= dict(
        tool_choices()
    ).keys()
    files = sorted((DATA / "vllm_bench").glob("*.json"))
    out = import_results(store, ImportRequest("vllm-bench", files, label="vllm files"))
    run = store.get_run(out.run_id)
    assert (run.kind, run.label, run.extra["source"]) == (
        "import",
        "vllm files",
        "vllm bench serve --save-result",
    )
    assert len(out.cells) == len({(r.input_len, r.concurrency) for r in store.get_results(run.id)}) > 1


def test_an_uploaded_files_refusal_names_it_as_uploaded(store: Store, tmp_path: Path) -> None:
    """An upload is read from a temporary path; the refusal names the file as the user named it."""
    for tool, name in (("inference-perf", "stage_1_lifecycle_metrics.json"), ("vllm-bench", "mine.json")):
        bad = tmp_path / "upload-dir" / "f0.json"
        bad.parent.mkdir(exist_ok=True)
        bad.write_text("{not json")
        req = ImportRequest(tool, [bad], label="x", file_names=[name])
        with pytest.raises(UserInputError) as info:
            import_results(store, req)
        assert info.value.message.startswith(name) and str(tmp_path) not in info.value.message
    assert store.list_runs()[1] == 0
