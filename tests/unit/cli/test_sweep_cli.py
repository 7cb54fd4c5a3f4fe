"""`accelbench sweep` and `accelbench sweep-plot` end to end against the in-repo streaming server."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.store.repo import Store
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner(env={"COLUMNS": "220"})


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture
def server(tokenizer_dir: Path) -> Iterator[StreamServer]:
    with StreamServer(Script(ttft_ms=3, itl_ms=1), tokenizer_dir=tokenizer_dir, model="smol") as s:
        yield s


def sweep_args(server: StreamServer, tokenizer_dir: Path, *extra: str) -> list[str]:
    return [
        "sweep",
        "--base-url",
        server.base_url,
        "--tokenizer",
        str(tokenizer_dir),
        "--input-lens",
        "48,64",
        "--concurrency",
        "1,2",
        "--repeats",
        "2",
        "--output-len",
        "4",
        "--prompts-per-concurrency",
        "2",
        "--num-warmups",
        "1",
        *extra,
    ]


def test_sweep_json_writes_every_file(
    store: Store, server: StreamServer, tokenizer_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    res = runner.invoke(
        app, sweep_args(server, tokenizer_dir, "--out", str(out), "--label", "fixture", "--format", "json")
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)  # nothing but JSON on stdout
    assert data["status"] == "completed" and data["cells_done"] == data["cells_total"] == 8
    assert [(c["input_len"], c["concurrency"]) for c in data["cells"]] == [(48, 1), (48, 2), (64, 1), (64, 2)]
    assert all(c["completed"] == 2 * 2 * c["concurrency"] and c["failed"] == 0 for c in data["cells"])
    run = store.get_run(data["run_id"])
    assert run.label == "fixture" and run.served_model == "smol"  # discovered from /v1/models
    assert run.status == RunStatus.completed
    assert run.environment["cpu"]["logical_cpus"] >= 1
    assert "--input-lens 48,64" in (run.command or "")
    for name in (
        "results.md",
        "results.csv",
        "results.json",
        "tpot_vs_concurrency.png",
        "throughput_vs_concurrency.png",
    ):
        assert (out / name).is_file(), name
    assert len(list((out / "repeats").glob("*.json"))) == 8
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == 4 and "tpot_p50_ms_min" in rows[0]


def test_sweep_table_output(store: Store, server: StreamServer, tokenizer_dir: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        app, sweep_args(server, tokenizer_dir, "--out", str(tmp_path / "o"), "--repeats", "1")
    )
    assert res.exit_code == 0, res.output
    assert "TPOT p50 (ms)" in res.stdout and "Total tok/s" in res.stdout
    assert "completed: 4/4 cell repeats complete" in res.stderr
    assert str(tmp_path / "o") in res.stderr


def test_spec_file_with_unknown_key_names_it(store: Store, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("input_lens: [48]\nconcurrencies: [1]\n")
    res = runner.invoke(app, ["sweep", "--spec", str(spec), "--base-url", "http://127.0.0.1:9"])
    assert res.exit_code == 2
    assert "unknown key 'concurrencies'" in res.stderr and "did you mean 'concurrency'" in res.stderr


def test_spec_file_drives_the_sweep_and_flags_override(
    store: Store, server: StreamServer, tokenizer_dir: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        f"label: from-file\ninput_lens: [48]\nconcurrency: [1, 2]\nrepeats: 1\noutput_len: 4\n"
        f"prompts_per_concurrency: 1\nnum_warmups: 0\nserver:\n  base_url: {server.base_url}\n"
        f"  served_model: smol\n  tokenizer: {tokenizer_dir}\n"
    )
    res = runner.invoke(
        app, ["sweep", "--spec", str(spec), "--concurrency", "3", "--out", str(tmp_path / "o"), "-f", "json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [(c["input_len"], c["concurrency"]) for c in data["cells"]] == [(48, 3)]
    run = store.get_run(data["run_id"])
    assert run.label == "from-file" and run.spec["sweep"]["concurrency"] == [3]


def test_resume_refuses_different_flags_and_completes_missing(
    store: Store, server: StreamServer, tokenizer_dir: Path, tmp_path: Path
) -> None:
    # a run interrupted by hand: the first cell stored, the rest missing
    res = runner.invoke(
        app,
        sweep_args(server, tokenizer_dir, "--out", str(tmp_path / "a"), "--format", "json", "--repeats", "1"),
    )
    run_id = json.loads(res.stdout)["run_id"]
    from accelbench.store.models import ResultRow

    with store.session() as s:  # drop three of the four results, as if the sweep had stopped after one
        for row in s.query(ResultRow).filter(ResultRow.run_id == run_id, ResultRow.concurrency == 2).all():
            s.delete(row)
        s.query(ResultRow).filter(ResultRow.run_id == run_id, ResultRow.input_len == 64).delete()
    store.set_status(run_id, RunStatus.interrupted, error="interrupted (Ctrl-C)")
    kept = store.get_results(run_id)
    assert len(kept) == 1

    res = runner.invoke(app, ["sweep", "--resume", run_id, "--output-len", "8"])
    assert res.exit_code != 0
    assert "different sweep spec" in res.stderr and "output_len: 4 -> 8" in res.stderr

    server.reset()
    res = runner.invoke(app, ["sweep", "--resume", run_id, "--out", str(tmp_path / "b"), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["status"] == "completed" and len(data["ran"]) == 3 and len(data["skipped"]) == 1
    assert store.get_results(run_id)[0].id == kept[0].id
    assert all(r.status == CellStatus.completed for r in store.get_results(run_id))
    assert (
        len([r for r in server.records if r.path.endswith("completions")]) == (4 + 2 + 4) + 1
    )  # cells (48,2), (64,1), (64,2) + one warmup


def test_sweep_plot_two_runs(store: Store, server: StreamServer, tokenizer_dir: Path, tmp_path: Path) -> None:
    ids = []
    for label in ("cpu", "gpu"):
        res = runner.invoke(
            app,
            sweep_args(
                server,
                tokenizer_dir,
                "--repeats",
                "1",
                "--label",
                label,
                "--out",
                str(tmp_path / label),
                "-f",
                "json",
            ),
        )
        ids.append(json.loads(res.stdout)["run_id"])
    res = runner.invoke(app, ["sweep-plot", *ids, "--out", str(tmp_path / "both")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "both" / "tpot_vs_concurrency.png").stat().st_size > 5000
    md = (tmp_path / "both" / "results.md").read_text()
    assert "cpu vs gpu" in md and "| Run |" in md
    res = runner.invoke(app, ["sweep-plot", "nope", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "No run 'nope'" in res.stderr


def test_unreachable_server_is_a_clean_error(store: Store) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = runner.invoke(app, ["sweep", "--base-url", f"http://127.0.0.1:{port}", "--input-lens", "48"])
    assert res.exit_code == 1
    # said as a server that cannot be reached, not as a missing --model
    assert f"Cannot reach the server at http://127.0.0.1:{port}" in res.stderr
    assert "Traceback" not in res.output


def test_ctrl_c_keeps_finished_cells_then_resume(store: Store, tokenizer_dir: Path, tmp_path: Path) -> None:
    """The real program in its own process: the first SIGINT finishes gracefully (exit 130, run interrupted,
    finished cells kept, the cell in flight kept as partial); --resume then measures only what is missing."""
    import os
    import signal
    import subprocess
    import sys
    import time

    with StreamServer(Script(ttft_ms=60, itl_ms=60), tokenizer_dir=tokenizer_dir, model="smol") as server:
        cmd = [
            sys.executable,
            "-m",
            "accelbench.cli.main",
            *sweep_args(server, tokenizer_dir, "--out", str(tmp_path / "o")),
        ]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
        )
        try:
            # one warmup + cells (48,1,r0) and (48,1,r1) = 5 requests; the 6th finished one is in the third cell
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                finished = [r for r in list(server.records) if any(c.kind == "done" for c in r.chunks)]
                if len(finished) >= 6:
                    break
                time.sleep(0.01)
            runs, _ = store.list_runs()
            assert runs, "the sweep never started"
            run_id = runs[0].id
            proc.send_signal(signal.SIGINT)
            _out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        assert "Stopping" in err and f"--resume {run_id}" in err
        run = store.get_run(run_id)
        assert run.status == RunStatus.interrupted and "interrupted" in (run.error or "")
        assert run.command is not None and run.command.startswith("accelbench sweep --base-url")
        statuses = [r.status for r in store.get_results(run_id)]
        assert statuses == [CellStatus.completed, CellStatus.completed, CellStatus.partial]
        partial = store.get_results(run_id)[2]
        assert partial.completed >= 1 and partial.completed + partial.failed <= partial.num_prompts
        assert (tmp_path / "o" / "results.md").is_file()  # files written for what was measured

        server.script = Script(ttft_ms=2, itl_ms=1)
        res = runner.invoke(
            app, ["sweep", "--resume", run_id[:-1], "--format", "json", "--out", str(tmp_path / "o")]
        )
        assert res.exit_code == 0, res.output
        data = json.loads(res.stdout)
        assert data["status"] == "completed" and data["cells_done"] == 8
        assert len(data["skipped"]) == statuses.count(CellStatus.completed)


def test_bad_flags_are_clean_errors(store: Store) -> None:
    res = runner.invoke(
        app, ["sweep", "--base-url", "http://127.0.0.1:9", "--model", "m", "--input-lens", "128,x"]
    )
    assert res.exit_code == 2 and "Bad --input-lens '128,x'" in res.stderr
    res = runner.invoke(
        app, ["sweep", "--base-url", "http://127.0.0.1:9", "--model", "m", "--concurrency", "4,4"]
    )
    assert res.exit_code == 2 and "concurrency" in res.stderr and "unique" in res.stderr
    res = runner.invoke(
        app, ["sweep", "--base-url", "http://127.0.0.1:9", "--model", "m", "--goodput", "ttft=5"]
    )
    assert res.exit_code == 2 and "--goodput" in res.stderr
    res = runner.invoke(app, ["sweep", "--model", "m"])
    assert res.exit_code == 2 and "--base-url" in res.stderr
    assert store.list_runs()[1] == 0  # nothing was created for a command that could not start


def test_lengths_above_the_servers_advertised_context_are_refused_before_any_load(
    server: StreamServer, tokenizer_dir: Path
) -> None:
    """The fixture server advertises max_model_len 8192 at /v1/models, as vLLM does."""
    from accelbench.store import get_store

    args = sweep_args(server, tokenizer_dir)
    args[args.index("--input-lens") + 1] = "64,8190"
    res = runner.invoke(app, args)
    assert res.exit_code != 0
    assert "Input length 8190 + output length 4 is more than the 8192-token context" in res.output
    assert get_store().list_runs()[1] == 0  # nothing stored
    bench = runner.invoke(
        app,
        ["bench", "--base-url", server.base_url, "--tokenizer", str(tokenizer_dir), "--input-len", "8190",
         "--output-len", "4", "--num-prompts", "2"],
    )  # fmt: skip
    assert bench.exit_code != 0 and "8192-token context the server advertises" in bench.output


def test_bench_and_sweep_expose_the_same_load_flags() -> None:
    """Every load setting (LoadSettings) is a flag of both commands with the same name, short alias, bounds and
    help, and the default the model gives it (they had drifted: --no-metrics vs --scrape/--no-scrape, -H on
    bench only, no --scrape-interval on sweep, different bounds and help)."""
    from typer.main import get_command

    from accelbench.cli.load_flags import LOAD_FLAGS, NOT_SHARED, shown_default
    from accelbench.domain.load import BenchConfig, LoadSettings
    from accelbench.domain.run import SweepSpec

    root = get_command(app)

    def options(name: str) -> dict[str, Any]:
        cmd = root.get_command(None, name)  # type: ignore[attr-defined]
        assert cmd is not None
        return {p.name: p for p in cmd.params if p.param_type_name == "option" and not p.hidden}

    def shape(p: Any) -> tuple[Any, ...]:
        kind = getattr(p, "type", None)
        return (
            tuple(sorted([*p.opts, *p.secondary_opts])),
            getattr(kind, "min", None),
            getattr(kind, "max", None),
        )

    bench, sweep = options("bench"), options("sweep")
    by_field = {f: (f, f) for f in LOAD_FLAGS}  # both commands name each option by its field
    assert set(LoadSettings.model_fields) == set(LOAD_FLAGS) | set(NOT_SHARED)  # a new field needs a flag
    for field, (b_name, s_name) in by_field.items():
        b, sw = bench[b_name], sweep[s_name]
        assert shape(b) == shape(sw), field
        info = BenchConfig.model_fields[field]
        assert b.default == info.get_default(call_default_factory=True), field
        assert sw.default is None, field  # unset: the spec file or the resumed run decides
        swept = SweepSpec.model_fields[field]  # a sweep may default differently (num_warmups: it warms up)
        said = (
            b.help.partition(" Choices: ")[0] if field == "dataset" else b.help
        )  # then the registered names
        assert said == info.description and sw.help.startswith(swept.description.rstrip(".")), field
        fallback = swept.get_default(call_default_factory=True)
        if (
            fallback is not None
        ):  # shown as every default is, [default: X]; a flag pair's is the flag in force
            on, _, off = LOAD_FLAGS[field][0].partition("/")
            want = (on if fallback else off) if isinstance(fallback, bool) else shown_default(fallback)
            assert sw.show_default == want, field
        low = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
        assert b.min == low, field
    for name in ("--header", "--api-key", "--base-url", "--model", "--tokenizer", "--goodput", "--label",
                 "--input-dist", "--output-dist"):  # fmt: skip
        assert name in [o for p in bench.values() for o in p.opts], name
        assert name in [o for p in sweep.values() for o in p.opts], name


def test_sweep_takes_a_load_plan_and_stores_it_with_the_run(
    store: Store, server: StreamServer, tokenizer_dir: Path, tmp_path: Path
) -> None:
    args = ["sweep", "--base-url", server.base_url, "--tokenizer", str(tokenizer_dir), "--input-lens", "48",
            "--output-len", "4", "--num-warmups", "0", "--prompts-per-concurrency", "300",
            "--stages", "c=1:0.5,c=2:0.5", "--out", str(tmp_path / "o"), "--format", "json"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [(c["input_len"], c["concurrency"]) for c in data["cells"]] == [
        (48, 2)
    ]  # keyed by the plan's peak
    run = store.get_run(data["run_id"])
    assert [st["concurrency"] for st in run.spec["sweep"]["stages"]] == [1, 2]
    (result,) = store.get_results(run.id)
    assert len(store.get_summary(result.id).per_stage) == 2
    bad = runner.invoke(app, [*args[:-4], "--concurrency", "1,4"])
    assert bad.exit_code == 2 and "leave concurrency unset or give [2]" in bad.output


def test_runs_show_has_each_cells_device_telemetry_of_a_server_on_this_machine(
    store: Store, server: StreamServer, tokenizer_dir: Path, tmp_path: Path
) -> None:
    """The fixture server listens on loopback, so the sweep samples this machine's CPU during every cell; runs show
    prints each cell's utilisation and memory and, once, what was not measured (the engine's own cgroup: a
    server given by URL has no process ids)."""
    res = runner.invoke(app, sweep_args(server, tokenizer_dir, "--repeats", "1", "--out", str(tmp_path / "o"),
                                        "--format", "json"))  # fmt: skip
    assert res.exit_code == 0, res.output
    run_id = json.loads(res.stdout)["run_id"]
    results = store.get_results(run_id)
    tel = [store.get_summary(r.id).device_telemetry for r in results]
    assert all(t is not None and t.available and t.devices for t in tel)
    shown = runner.invoke(app, ["runs", "show", run_id])
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert "Devices (first repeat of each cell)" in text and "Not measured on this machine" in text
    assert "process ids are not known" in text
    cpu = tel[0].device("cpu")
    assert cpu is not None and cpu.util_mean_pct is not None
    assert f"{cpu.util_mean_pct:.0f}%" in text
