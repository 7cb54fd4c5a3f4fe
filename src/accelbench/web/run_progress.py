"""A run in flight in words a person understands: its phase (waiting for the worker, installing or starting
the engine, loading the model, the answer check, benchmarking cell 3 of 12 (input 256, concurrency 4),
writing the report), how long it has run, and how long the benchmark is expected to take and has left.

Read from what a run stores: its status, its ``progress`` dict (the orchestrator's phase sentences and the
engine's last log line through ``deploy/target.py`` ``EventProgress`` and the API worker; the sweep's cell
counters from ``bench/sweep.py``), its timestamps, and the dry run's prediction kept at submission
(``extra["sweep_prediction"]``, ``services/submit.py``). Engine log lines are never the status: they are the
page's collapsible "engine log".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from accelbench.domain.results import ResultInfo, RunInfo

#: progress phases that are keywords of the lifecycle or the sweep, not sentences to show
KEYWORDS = frozenset(
    {"pending", "deploying", "starting", "tokenizer", "checking", "warmup", "measuring", "measured",
     "completed", "failed", "cancelled", "interrupted", "benchmarking"}
)  # fmt: skip

#: engine log lines that say the model's weights are being read (vLLM, llama.cpp, SGLang, TGI)
MODEL_LOADING = re.compile(
    r"load(ing)? (the )?(model|weights|checkpoint)|loading safetensors|checkpoint shards|load_tensors|"
    r"llama_model_load|model_loader|weights? load|loading gguf|downloading (the )?(model|weights)",
    re.IGNORECASE,
)

#: (phase sentence prefix, what it means) for the sentences the targets and engine installs emit
_DEPLOY_STEPS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("Asking the model a question", "Warning: the model answers"), "Answer check: asking the model a question"),
    (("Reading oneDNN's trace",), "Writing the report"),
    (("Installing", "Creating the environment", "Resuming the unfinished install", "Checking that",
      "Adding ", "Rebuilding", "Recording the install", "Removing"), "Installing the engine"),
    (("Downloading", "Extracting", "Copying", "Checksumming", "patchelf"), "Preparing the model files"),
    (("Launching",), "Launching the instance"),
    (("Rendering manifests", "Applying"), "Creating the deployment"),
    (("Waiting for",), "Starting the engine: waiting for it to answer"),
)  # fmt: skip


@dataclass
class RunProgress:
    """What a page shows of a run in flight; every field is words (or None when there is nothing to say)."""

    phase: str
    step: str | None = None
    elapsed: str | None = None
    expected: str | None = None
    remaining: str | None = None
    log: str | None = None
    requests: str | None = None
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One line for a list: the phase, then the time left (or the time so far)."""
        return " · ".join(x for x in (self.phase, self.remaining or self.elapsed) if x)


# ------------------------------------------------------------------------------------------ durations
def duration_words(seconds: float) -> str:
    """A duration as people say it: "less than a minute", "about 4 minutes", "about 1 hour 10 minutes"."""
    s = max(0.0, float(seconds))
    if s < 50:
        return "less than a minute"
    minutes = round(s / 60)
    if minutes < 60:
        return f"about {minutes} minute{'s' if minutes != 1 else ''}"
    hours, rest = divmod(minutes, 60)
    text = f"about {hours} hour{'s' if hours != 1 else ''}"
    return text + (f" {rest} minute{'s' if rest != 1 else ''}" if rest else "")


def clock_words(seconds: float) -> str:
    """Time so far, exact enough to watch: "45 s", "3 min 20 s", "1 h 5 min"."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


# ------------------------------------------------------------------------------------------ the phase
def _cell_words(progress: dict[str, Any], repeats: int) -> str | None:
    current = progress.get("current")
    total = progress.get("cells_total")
    if not isinstance(current, dict) or not isinstance(total, int) or not total:
        return None
    done_value = progress.get("cells_done")
    done = done_value if isinstance(done_value, int) else 0
    where = [f"input {current.get('input_len')}", f"concurrency {current.get('concurrency')}"]
    repeat = current.get("repeat")
    if isinstance(repeat, int) and (repeats > 1 or repeat > 0):
        where.append(f"repeat {repeat + 1}" + (f" of {repeats}" if repeats > 1 else ""))
    return f"cell {min(done + 1, total)} of {total} ({', '.join(where)})"


def _repeats(run: RunInfo) -> int:
    spec = run.spec if isinstance(run.spec, dict) else {}
    sweep = spec.get("sweep") if isinstance(spec.get("sweep"), dict) else {}
    repeats = sweep.get("repeats") if isinstance(sweep, dict) else None
    return repeats if isinstance(repeats, int) and repeats > 0 else 1


def _capacity_probes(run: RunInfo) -> int | None:
    spec = run.spec if isinstance(run.spec, dict) else {}
    extra = run.extra if isinstance(run.extra, dict) else {}
    if not isinstance(spec.get("capacity"), dict) and not isinstance(extra.get("capacity"), dict):
        return None
    probes = (extra.get("capacity") or {}).get("probes") if isinstance(extra.get("capacity"), dict) else None
    return len(probes) if isinstance(probes, list) else 0


def phase_words(run: RunInfo) -> str:
    """The phase of a run in words, from its status and its stored progress."""
    status = run.status.value
    progress = run.progress or {}
    phase = str(progress.get("phase") or "")
    if run.status.finished:
        return status
    if status == "pending":
        return "Waiting for the worker to pick the run up"
    for prefixes, words in _DEPLOY_STEPS[:2]:  # the answer check and the report come in either status
        if phase.startswith(prefixes):
            return words
    if status == "deploying":
        if " ready after " in phase:
            return "Engine ready: checking it answers and recording the environment"
        for prefixes, words in _DEPLOY_STEPS[2:]:
            if phase.startswith(prefixes):
                return words
        if MODEL_LOADING.search(str(progress.get("detail") or "")):
            return "Loading the model"
        return "Starting the engine"
    # benchmarking
    probes = _capacity_probes(run)
    if probes is not None:
        return f"Capacity search: {probes} level{'s' if probes != 1 else ''} measured so far"
    if phase == "tokenizer":
        return "Loading the tokenizer"
    if phase == "checking":
        return "Checking that every prompt fits the server's context"
    if phase in ("measured", "completed", "failed", "cancelled", "interrupted"):  # the sweep has ended
        return "Writing the report"
    cell = _cell_words(progress, _repeats(run))
    if cell is not None:
        return ("Warming up before " if phase == "warmup" else "Benchmarking ") + cell
    return "Starting the benchmark"


# ------------------------------------------------------------------------------------------ the time
def _predicted_keys(run: RunInfo) -> list[tuple[int, int, float]] | None:
    """(input, concurrency, predicted seconds) of every (cell, repeat) in run order, from the stored prediction;
    None when the run keeps no prediction of every cell."""
    extra = run.extra if isinstance(run.extra, dict) else {}
    stored = extra.get("sweep_prediction")
    if not isinstance(stored, dict) or not isinstance(stored.get("cells"), list):
        return None
    keys: list[tuple[int, int, float]] = []
    for c in stored["cells"]:
        if not isinstance(c, dict) or not isinstance(c.get("predicted_s"), int | float):
            return None
        repeats = int(c.get("repeats") or 1)
        keys += [(int(c["input_len"]), int(c["concurrency"]), float(c["predicted_s"]))] * repeats
    return keys or None


def _predicted_total(run: RunInfo) -> float | None:
    extra = run.extra if isinstance(run.extra, dict) else {}
    stored = extra.get("sweep_prediction")
    total = stored.get("duration_s") if isinstance(stored, dict) else None
    return float(total) if isinstance(total, int | float) and total > 0 else None


def _fraction_of_current(progress: dict[str, Any]) -> float:
    done, total = progress.get("requests_done"), progress.get("requests_total")
    if isinstance(done, int) and isinstance(total, int) and total > 0 and progress.get("current"):
        return min(1.0, done / total)
    return 0.0


def _measured(results: Sequence[ResultInfo]) -> list[ResultInfo]:
    return [r for r in results if r.status.value == "completed" and r.duration_s > 0]


def time_left(run: RunInfo, results: Sequence[ResultInfo] = ()) -> tuple[float | None, str | None]:
    """Seconds the benchmark has left and what the figure is based on, while it benchmarks: the planner's
    prediction of the cells still to run, scaled by how the measured cells compared with it; without a
    prediction, the pace of the cells measured so far. (None, None) when nothing says."""
    progress = run.progress or {}
    total, done = progress.get("cells_total"), progress.get("cells_done")
    if run.status.value != "benchmarking" or not isinstance(total, int) or not isinstance(done, int):
        return None, None
    if done >= total:
        return None, None
    fraction = _fraction_of_current(progress)
    keys = _predicted_keys(run)
    measured = _measured(results)
    if keys is not None and len(keys) == total:
        left = sum(s for _, _, s in keys[done:]) - fraction * keys[done][2]
        predicted = {(i, c): s for i, c, s in keys}
        pairs = [(r.duration_s, predicted[(r.input_len, r.concurrency)]) for r in measured
                 if predicted.get((r.input_len, r.concurrency))]  # fmt: skip
        if pairs:
            ratio = sum(a for a, _ in pairs) / sum(p for _, p in pairs)
            return max(0.0, left * ratio), (
                f"the planner's prediction, scaled by the {len(pairs)} cell(s) measured so far "
                f"({ratio:.2g}x its figure)"
            )
        return max(0.0, left), "the planner's prediction"
    if measured:
        pace = sum(r.duration_s for r in measured) / len(measured)
        return max(0.0, (total - done - fraction) * pace), "the pace of the cells measured so far"
    return None, None


def progress_view(
    run: RunInfo, results: Sequence[ResultInfo] = (), *, now: datetime | None = None
) -> RunProgress | None:
    """What a page shows while ``run`` is in flight (None once it has finished)."""
    if run.status.finished:
        return None
    now = _aware(now or datetime.now(UTC))
    progress = run.progress or {}
    view = RunProgress(phase=phase_words(run))
    phase = str(progress.get("phase") or "")
    if phase and phase not in KEYWORDS:
        view.step = phase
    if isinstance(progress.get("detail"), str) and progress["detail"].strip():
        view.log = progress["detail"]
    done, total = progress.get("requests_done"), progress.get("requests_total")
    if run.status.value == "benchmarking" and progress.get("current") and isinstance(total, int) and total:
        view.requests = f"{done or 0} of {total} requests of this cell"
    if run.status.value == "pending":
        view.elapsed = f"waiting for {clock_words((now - _aware(run.created_at)).total_seconds())}"
    else:
        since = run.started_at or run.created_at
        view.elapsed = f"running for {clock_words((now - _aware(since)).total_seconds())}"
    predicted = _predicted_total(run)
    if predicted is not None:
        view.expected = (
            f"the benchmark is predicted to take {duration_words(predicted)} in all "
            "(the engine's start-up and the model's download are not included)"
        )
    elif _capacity_probes(run) is not None:
        view.expected = "a capacity search's duration depends on where its boundary lies: not predicted"
    left, basis = time_left(run, results)
    if left is not None:
        view.remaining = f"{duration_words(left)} left"
        if basis:
            view.notes.append(f"time left from {basis}")
    elif predicted is not None and run.status.value in ("pending", "deploying"):
        view.remaining = f"{duration_words(predicted)} of benchmarking once the engine is up"
    return view


def cancel_warning(run: RunInfo) -> str:
    """What the cancel button's confirmation says cancelling does."""
    if run.status.value == "pending":
        return f"Cancel run {run.id}? It has not started: it will not be run, and nothing was deployed."
    return (
        f"Cancel run {run.id}? Its engine is stopped and torn down (whatever it holds is released), the cell "
        "being measured is kept as partial and the cells already measured stay stored; the run ends "
        "'cancelled' and the rest of its cells are not measured."
    )
