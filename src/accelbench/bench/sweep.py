"""The sweep: one running endpoint measured over input lengths x concurrency levels x repeats.

``run_sweep`` drives ``run_benchmark`` once per (cell, repeat) against the same server, with the tokenizer
loaded once and the server warmed up once (before the first cell that runs). Each (cell, repeat) is saved to
the store the moment it finishes, with its per-request records and telemetry, so nothing measured is lost:

- **Cancel / Ctrl-C**: the cell in flight stops sending, its finished requests are kept and the cell is
  stored as ``partial``; the run becomes ``interrupted``.
- **Server gone**: when a cell ends with failures, the server is probed; if it no longer answers, the cell is
  stored as ``partial`` (or ``failed`` when nothing completed), the sweep stops and the run becomes
  ``failed`` with the reason.
- **Resume** (``resume=True``): the spec must equal the stored one (else a ``ConflictError`` lists the
  differences); (cell, repeat) pairs stored as ``completed`` are skipped, ``partial`` and ``failed`` ones and
  those never run are measured again.

Every (cell, repeat) gets its own prompt seed derived from the spec's seed, the cell and the repeat, so no
two requests of the sweep share a prompt (the server's prefix cache would flatter later cells otherwise) and
a resumed sweep sends exactly the prompts the uninterrupted one would have sent.

The run's ``progress`` JSON says how far it is: ``{"cells_total", "cells_done", "current": {input_len,
concurrency, repeat}, "requests_done", "requests_total", "phase"}``, updated at every cell boundary and at
most every ``PROGRESS_WRITE_S`` seconds in between, so the API and other processes can follow a sweep.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from accelbench.bench.context import check_served_context
from accelbench.bench.quality_run import before_load
from accelbench.bench.recorder import RunRecorder
from accelbench.bench.spec import spec_differences
from accelbench.bench.target_ci import MIN_REPEATS, record, settled
from accelbench.bench.tokenizer import load_tokenizer
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig, LoadSettings
from accelbench.domain.owner import process_owner
from accelbench.domain.results import RunInfo
from accelbench.domain.run import CellStatus, RunStatus, SweepSpec
from accelbench.domain.sweep_events import CellKey, SweepCounts, SweepEvent
from accelbench.errors import ConflictError, UserInputError
from accelbench.redact import redact_url

PROGRESS_WRITE_S = 2.0
HEALTH_TIMEOUT_S = 5.0


def sweep_keys(spec: SweepSpec) -> list[CellKey]:
    """Every (cell, repeat) of ``spec`` in run order: input length, then concurrency, then repeat."""
    return [CellKey(i, c, r) for i, c in spec.cells() for r in range(spec.repeats)]


def cell_seed(base_seed: int, key: CellKey) -> int:
    """A stable per-(cell, repeat) seed (same on every machine and Python, unlike ``hash``)."""
    digest = hashlib.sha256(f"{base_seed}:{key.input_len}:{key.concurrency}:{key.repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def cell_config(spec: SweepSpec, key: CellKey, *, label: str | None = None, warmups: int = 0) -> BenchConfig:
    """The BenchConfig of one (cell, repeat): the spec's load settings, ``num_prompts = concurrency x
    prompts_per_concurrency``, ``max_concurrency = concurrency`` (none for a concurrency load plan, whose peak
    is the cell's concurrency), its own seed, warmups only when asked."""
    load = {name: getattr(spec, name) for name in LoadSettings.model_fields}
    load["seed"] = cell_seed(spec.seed, key)
    load["num_warmups"] = warmups
    return BenchConfig(
        **load,
        input_len=key.input_len,
        num_prompts=key.concurrency * spec.prompts_per_concurrency * spec.turns,  # conversations x turns
        # a concurrency plan sets the requests in flight itself; a rate plan or rate is capped by the level
        max_concurrency=None if spec.stages and spec.stages[0].concurrency is not None else key.concurrency,
        label=label,
        schedule=spec.schedule,
    )


@dataclass
class CellResult:
    """One finished (cell, repeat), as handed to ``on_cell``."""

    key: CellKey
    status: CellStatus
    result_id: int | None
    summary: BenchmarkSummary


@dataclass
class SweepOutcome:
    """How a ``run_sweep`` call ended."""

    run_id: str
    status: RunStatus
    error: str | None
    cells_total: int
    ran: list[CellKey] = field(default_factory=list)
    skipped: list[CellKey] = field(default_factory=list)
    partial: list[CellKey] = field(default_factory=list)
    failed: list[CellKey] = field(default_factory=list)
    missing: list[CellKey] = field(default_factory=list)
    #: one line per cell judged failed in this call: the cell, its failed share, the most common reason
    reasons: list[str] = field(default_factory=list)
    #: repeats not run because their cell had reached the spec's target_ci (``bench/target_ci.py``)
    settled: list[CellKey] = field(default_factory=list)
    #: with a target_ci: per cell, its repeats, intervals and whether it reached the target or hit the cap
    target_ci: dict[str, Any] | None = None

    @property
    def cells_done(self) -> int:
        """(cell, repeat) pairs stored as completed, this call and earlier ones together."""
        return self.cells_total - len(self.missing) - len(self.settled)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status.value,
            "error": self.error,
            "cells_total": self.cells_total,
            "cells_done": self.cells_done,
            "ran": [k.as_dict() for k in self.ran],
            "skipped": [k.as_dict() for k in self.skipped],
            "partial": [k.as_dict() for k in self.partial],
            "failed": [k.as_dict() for k in self.failed],
            "missing": [k.as_dict() for k in self.missing],
            "reasons": list(self.reasons),
            "settled": [k.as_dict() for k in self.settled],
            "target_ci": self.target_ci,
        }


ProgressFn = Callable[[SweepEvent], None]
OnCellFn = Callable[[CellResult], None]


def stored_sweep_spec(run: RunInfo) -> SweepSpec:
    """The sweep spec a run was created with (``spec["sweep"]``)."""
    raw = (run.spec or {}).get("sweep")
    if not isinstance(raw, dict):
        raise UserInputError(f"Run {run.id} has no sweep spec stored; it cannot be resumed as a sweep.")
    return SweepSpec.model_validate(raw)


def check_resume_spec(run: RunInfo, spec: SweepSpec) -> SweepSpec:
    """Refuse to resume ``run`` with a spec that differs from the stored one; returns the stored spec."""
    stored = stored_sweep_spec(run)
    diffs = spec_differences(stored, spec)
    if diffs:
        raise ConflictError(
            f"Run {run.id} was started with a different sweep spec; resume runs the stored one. Differences "
            "(stored -> given): " + "; ".join(diffs) + ".",
            hint="Resume with the same settings (or without sweep flags), or start a new sweep.",
        )
    return stored


def server_alive(endpoint: Endpoint, timeout: float = HEALTH_TIMEOUT_S) -> str | None:
    """None when the server answers; otherwise why not. Any HTTP answer counts as alive (some servers have
    no /health), only a connection failure or timeout means the server is gone."""
    root = endpoint.base_url.rstrip("/").removesuffix("/v1")
    headers = endpoint.request_headers()
    reason = "no answer"
    for path in ("/health", "/v1/models"):
        try:
            with httpx.Client(timeout=timeout, headers=headers) as client:
                client.get(root + path)
            return None
        except httpx.HTTPError as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return reason


class _Progress:
    """Writes the run's progress JSON, at cell boundaries and at most every PROGRESS_WRITE_S seconds."""

    def __init__(
        self, store: RunRecorder, run_id: str, total: int, done: int, callback: ProgressFn | None
    ) -> None:
        self.store, self.run_id, self.callback = store, run_id, callback
        self.total, self.done = total, done
        self.key: CellKey | None = None
        self.requests_done = self.requests_total = 0
        self.phase = "starting"
        self._last_write = 0.0
        self._lock = threading.Lock()

    def counts(self) -> SweepCounts:
        """How far the sweep is: its cells done of all, and the current cell's requests done of all."""
        return SweepCounts(
            cells_total=self.total,
            cells_done=self.done,
            requests_done=self.requests_done,
            requests_total=self.requests_total,
        )

    def state(self) -> dict[str, Any]:
        return {
            "cells_total": self.total,
            "cells_done": self.done,
            "current": self.key.as_dict() if self.key else None,
            "requests_done": self.requests_done,
            "requests_total": self.requests_total,
            "phase": self.phase,
        }

    def write(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_write < PROGRESS_WRITE_S:
            return
        self._last_write = now
        self.store.update_run(self.run_id, progress=self.state())

    def emit(self, kind: str, **extra: Any) -> None:
        if self.callback is not None:
            self.callback(SweepEvent(kind=kind, key=self.key, **self.counts(), **extra))

    def on_request(self, done: int, total: int) -> None:
        # called from the benchmark's event loop: keep it cheap, write the store only now and then
        with self._lock:
            self.requests_done, self.requests_total = done, total
        self.emit("request")
        self.write()


def preflight(spec: SweepSpec, keys: list[CellKey], tokenizer: Any) -> None:
    """Build one prompt of every input length still to run, so a setting that cannot work (an input length
    shorter than the chat template, a bad dataset file) fails before the first request, not an hour in."""
    # start-up: the dataset builders load once a sweep runs (report/ imports this module)
    from accelbench.bench import build_dataset

    for input_len in dict.fromkeys(k.input_len for k in keys):
        key = next(k for k in keys if k.input_len == input_len)
        build_dataset(cell_config(spec, key), tokenizer, count=1, warmups=0)


def create_sweep_run(
    store: RunRecorder,
    endpoint: Endpoint,
    spec: SweepSpec,
    *,
    label: str | None = None,
    command: str | None = None,
    environment: dict[str, Any] | None = None,
    model: str | None = None,
) -> RunInfo:
    """Create the stored run of a sweep (status pending) with its spec, endpoint and environment.

    ``model`` is what the server loaded when it says (vLLM's ``root``), else the served name is the model.

    The stored spec is ``{"sweep": <SweepSpec>, "endpoint": {...}}``; secrets (the API key, auth headers) are
    not stored, so a resume needs them again.
    """
    env = environment or {}
    engine = env.get("engine") or {}
    return store.create_run(
        kind="sweep",
        claimed_by=process_owner(),  # this process measures it: no worker may take the pending run
        label=label,
        served_model=endpoint.served_model,
        # the server's own name for what it serves (or the directory it loaded, when the caller found one),
        # never the --tokenizer directory: the endpoint record keeps that on its own
        model=model or endpoint.served_model,
        base_url=redact_url(endpoint.base_url),
        engine=engine.get("name"),
        engine_version=engine.get("version"),
        spec={
            "sweep": spec.model_dump(mode="json"),
            "endpoint": endpoint.record(),
        },
        environment=env,
        command=env.get("command") if command is None else command,
        progress={"cells_total": len(sweep_keys(spec)), "cells_done": 0, "current": None, "phase": "pending"},
    )


def run_sweep(
    store: RunRecorder,
    run_id: str,
    endpoint: Endpoint,
    spec: SweepSpec,
    *,
    cancel: threading.Event | None = None,
    progress: ProgressFn | None = None,
    resume: bool = False,
    on_cell: OnCellFn | None = None,
    tokenizer: Any = None,
    finish_run: bool = True,
) -> SweepOutcome:
    """Measure every missing (cell, repeat) of ``spec`` against ``endpoint`` and store each as it finishes.

    ``run_id`` names a stored run (``create_sweep_run``). ``cancel`` stops the sweep gracefully: the cell in
    flight is stored as partial and the run marked interrupted. ``progress`` receives ``SweepEvent``s;
    ``on_cell`` each stored ``CellResult``. ``resume`` checks ``spec`` against the stored one and skips the
    (cell, repeat) pairs already stored as completed. ``tokenizer`` is an already loaded tokenizer (else it
    is loaded once here). A KeyboardInterrupt marks the run interrupted and is re-raised. With
    ``finish_run=False`` the run's final status is left to the caller (an orchestrator that still has an
    engine to tear down and files to write); the outcome carries the status it would have set.
    """
    run, spec = open_sweep_run(store, run_id, spec, resume=resume)
    keys = sweep_keys(spec)
    stored = stored_statuses(store, run.id)
    done_keys = {k for k in keys if stored.get(k) == CellStatus.completed}
    outcome = SweepOutcome(run_id=run.id, status=RunStatus.benchmarking, error=None, cells_total=len(keys))
    outcome.skipped = [k for k in keys if k in done_keys]
    sweep = _Sweep(
        store=store,
        run=run,
        endpoint=endpoint,
        spec=spec,
        cancel=cancel or threading.Event(),
        prog=_Progress(store, run.id, len(keys), len(done_keys), progress),
        outcome=outcome,
        on_cell=on_cell,
        tokenizer=tokenizer,
    )
    store.set_status(run.id, RunStatus.benchmarking)
    store.update_run(run.id, error=None)
    sweep.prog.phase = "tokenizer"
    sweep.prog.write(force=True)
    sweep.prog.emit("start")
    try:
        status, error = sweep.measure([k for k in keys if k not in done_keys])
    except KeyboardInterrupt:
        _finish(store, sweep.prog, outcome, keys, RunStatus.interrupted, "interrupted (Ctrl-C)", finish_run)
        raise
    except BaseException as exc:
        _finish(
            store, sweep.prog, outcome, keys, RunStatus.failed, f"{type(exc).__name__}: {exc}", finish_run
        )
        raise
    if spec.target_ci is not None:
        outcome.target_ci = note_target_ci(store, run.id, spec)
    _finish(store, sweep.prog, outcome, keys, status, error, finish_run)
    return outcome


def open_sweep_run(
    store: RunRecorder, run_id: str, spec: SweepSpec, *, resume: bool
) -> tuple[RunInfo, SweepSpec]:
    """The stored run to measure and the spec to run: on resume the stored spec (refused when ``spec`` differs)
    and the run claimed by this process; a fresh start is refused once the run has results."""
    run = store.get_run(run_id)
    if resume:
        spec = check_resume_spec(run, spec)
        run = store.claim_run(run.id)  # this process owns it now; a second resume is refused
    elif store.get_results(run.id):
        raise ConflictError(
            f"Run {run.id} already has results; resume it instead of starting it again.",
            hint=f"accelbench sweep --resume {run.id}",
        )
    return run, spec


def stored_statuses(store: RunRecorder, run_id: str) -> dict[CellKey, CellStatus]:
    """The status of every (cell, repeat) stored for ``run_id``."""
    return {CellKey(r.input_len, r.concurrency, r.repeat): r.status for r in store.get_results(run_id)}


#: how a sweep ends when nothing stops it early
Ending = tuple[RunStatus, str | None]


@dataclass
class _Sweep:
    """One ``run_sweep`` call's state: what it measures against what, and where it stores it."""

    store: RunRecorder
    run: RunInfo
    endpoint: Endpoint
    spec: SweepSpec
    cancel: threading.Event
    prog: _Progress
    outcome: SweepOutcome
    on_cell: OnCellFn | None
    tokenizer: Any
    cert: Any = None
    warmups: int = 0

    def measure(self, todo: list[CellKey]) -> Ending:
        """Run every (cell, repeat) of ``todo`` in order, until a cancel or a server that went away stops it."""
        if not todo:
            return RunStatus.completed, None
        self.prepare(todo)
        self.warmups = self.spec.num_warmups
        for key in todo:
            if self.cancel.is_set():
                return RunStatus.interrupted, "interrupted before " + str(key)
            if reached_target(self.store, self.run.id, self.spec, key):
                self.outcome.settled.append(key)
                continue
            ending = self.measure_cell(key)
            if ending is not None:
                return ending
        return RunStatus.completed, None

    def prepare(self, todo: list[CellKey]) -> None:
        """Before the first cell: the tokenizer, the settings checked against the server, what the run serves
        (and its quality when asked), the client's self test when asked."""
        # heavy: the client; report/ imports this module
        from accelbench.bench.selftest import client_self_test

        prog, spec = self.prog, self.spec
        if self.tokenizer is None:
            self.tokenizer = load_tokenizer(self.endpoint)
        prog.phase = "checking"
        prog.write(force=True)
        if spec.dataset == "random":
            check_served_context(self.endpoint, (k.input_len for k in todo), spec.output_len)
        preflight(spec, todo, self.tokenizer)
        if spec.quality:
            prog.phase = "quality"
            prog.write(force=True)
        # what it serves, and the quality probe when asked
        before_load(self.store, self.run.id, self.endpoint, spec)
        if spec.self_test:
            # once, at the heaviest cell: a client that keeps up there keeps up everywhere
            heaviest = max(todo, key=lambda k: (k.concurrency, -k.input_len))
            self.cert = client_self_test(cell_config(spec, heaviest))

    def measure_cell(self, key: CellKey) -> Ending | None:
        """Run one (cell, repeat), store it, count it; how the sweep ends when it must stop here, else None."""
        # heavy: the client and the runner, loaded only once a sweep runs (report/ imports this module)
        from accelbench.bench.runner import run_benchmark
        from accelbench.bench.selftest import certify

        prog = self.prog
        config = cell_config(self.spec, key, label=self.run.label, warmups=self.warmups)
        prog.key = key
        prog.requests_done, prog.requests_total = 0, config.num_prompts
        prog.phase = "warmup" if self.warmups else "measuring"
        prog.write(force=True)
        prog.emit("cell_start")
        summary = run_benchmark(
            self.endpoint, config, tokenizer=self.tokenizer, progress=prog.on_request, cancel=self.cancel
        )
        if self.cert is not None:
            summary = certify(summary, self.cert)
        self.warmups = 0  # once per sweep, before the first cell that runs
        gone = server_alive(self.endpoint) if summary.failed else None
        cell_status = judge_cell(summary, cancelled=self.cancel.is_set(), server_gone=gone is not None)
        self.keep(key, cell_status, summary)
        prog.requests_done = summary.completed + summary.failed
        prog.write(force=True)
        prog.emit("cell_done", status=cell_status, summary=summary)
        if gone is not None:
            where = redact_url(self.endpoint.base_url)
            return RunStatus.failed, f"the server at {where} stopped answering during {key}: {gone}"
        if self.cancel.is_set():
            return RunStatus.interrupted, f"interrupted during {key}"
        return None

    def keep(self, key: CellKey, cell_status: CellStatus | None, summary: BenchmarkSummary) -> None:
        """Store a finished (cell, repeat) (unless nothing worth storing happened) and count it in the outcome."""
        outcome = self.outcome
        if cell_status is not None:
            result_id = self.store.save_result(
                self.run.id,
                input_len=key.input_len,
                concurrency=key.concurrency,
                repeat=key.repeat,
                summary=summary,
                status=cell_status,
            )
            if self.on_cell is not None:
                self.on_cell(CellResult(key=key, status=cell_status, result_id=result_id, summary=summary))
        outcome.ran.append(key)
        if cell_status == CellStatus.completed:
            self.prog.done += 1
        elif cell_status == CellStatus.partial:
            outcome.partial.append(key)
        elif cell_status == CellStatus.failed:
            outcome.failed.append(key)
            outcome.reasons.append(failure_line(key, summary))


def reached_target(store: RunRecorder, run_id: str, spec: SweepSpec, key: CellKey) -> bool:
    """With a target_ci: whether ``key``'s cell already reached it with its earlier repeats (so ``key`` need
    not run)."""
    if spec.target_ci is None or key.repeat < MIN_REPEATS:
        return False
    cell = [r for r in store.get_results(run_id) if (r.input_len, r.concurrency) == key[:2]]
    return settled(cell, spec.target_ci)


def note_target_ci(store: RunRecorder, run_id: str, spec: SweepSpec) -> dict[str, Any]:
    """Keep in the run's ``extra`` which cells reached the target_ci and which hit the cap; return it."""
    assert spec.target_ci is not None
    rec = record(store.get_results(run_id), spec.target_ci, spec.repeats)
    store.update_run(run_id, extra={**store.get_run(run_id).extra, "target_ci": rec})
    return rec


def judge_cell(summary: BenchmarkSummary, *, cancelled: bool, server_gone: bool) -> CellStatus | None:
    """How to store a finished benchmark; None when nothing worth storing happened (cancelled before any
    request ended). A cancelled cell whose requests all ended anyway is complete; a cell during which the
    server went away is not, even if every request "ended" (the rest failed fast against a closed port)."""
    ended = summary.completed + summary.failed
    # the engine fails requests a cancel cut short (reason "cancelled") and marks the summary interrupted
    if server_gone or (cancelled and (summary.interrupted or ended < summary.num_prompts)):
        if ended == 0:
            return None
        return CellStatus.partial if summary.completed else CellStatus.failed
    if not summary.completed:
        return CellStatus.failed
    return CellStatus.failed if too_many_failed(summary) else CellStatus.completed


def failure_text(failed: int, ended: int, errors: dict[str, int]) -> str:
    """``3 of 9 requests failed (33%); most common reason (3x): HTTP 400: ...``"""
    line = f"{failed} of {ended} requests failed ({failed / ended if ended else 0:.0%})"
    top = max(errors.items(), key=lambda kv: kv[1], default=None)
    if top is not None:
        line += f"; most common reason ({top[1]}x): {top[0]}"
    return line


def too_many_failed(summary: BenchmarkSummary) -> bool:
    """More of its ended requests failed than the config's ``max_error_rate`` allows."""
    ended = summary.completed + summary.failed
    return bool(ended) and summary.failed / ended > summary.config.max_error_rate


def failure_line(key: CellKey | None, summary: BenchmarkSummary) -> str:
    """``input 128, concurrency 4, repeat 1: 3 of 9 requests failed (33%, more than --max-error-rate 5%);
    most common reason (3x): ...``: what the console says of a cell judged failed."""
    ended = summary.completed + summary.failed
    text = failure_text(summary.failed, ended, summary.errors)
    if summary.completed and too_many_failed(summary):
        text = text.replace("%)", f"%, more than --max-error-rate {summary.config.max_error_rate:.0%})", 1)
    if summary.failed == 0:
        text = "no request completed"
    return f"{key}: {text}" if key is not None else text


def _finish(
    store: RunRecorder,
    prog: _Progress,
    outcome: SweepOutcome,
    keys: list[CellKey],
    status: RunStatus,
    error: str | None,
    finish_run: bool = True,
) -> None:
    stored = stored_statuses(store, outcome.run_id)
    outcome.missing = [k for k in keys if stored.get(k) != CellStatus.completed and k not in outcome.settled]
    if status == RunStatus.completed and outcome.missing:
        # every cell ran, but some ended failed: the run did not produce the full matrix
        status = RunStatus.failed
        error = error or f"{len(outcome.missing)} of {len(keys)} cell repeats did not complete" + (
            f"; {outcome.reasons[0]}" if outcome.reasons else ""
        )
    outcome.status, outcome.error = status, error
    prog.done = len(keys) - len(outcome.missing)
    prog.key = None
    prog.phase = status.value
    store.update_run(outcome.run_id, progress=prog.state())
    if finish_run:
        store.set_status(outcome.run_id, status, error=error)
    prog.emit("end", status=None)
