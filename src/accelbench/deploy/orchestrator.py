"""Execute a stored run from start to teardown: the one code path of ``accelbench run``, ``accelbench demo``,
``accelbench rerun`` and the API's run worker.

    pending -> deploying -> benchmarking -> completed | failed | cancelled (| interrupted)

deploy (the spec's target) -> wait ready -> ask the model a question (its answer is recorded) -> capture the
machine and the engine -> sweep (each cell stored as it finishes, with the server's telemetry) -> ISA trace
(when asked) -> report files -> teardown, always: on success, on failure, on cancel, on Ctrl-C or SIGTERM.

What a run records: the engine and its version, the model and its revision, the served model name, the engine
settings (in the stored spec), the exact command and the environment the runtime set, the machine
(``telemetry.host``), the start-up time, the answer check and, with ``isa_trace``, which CPU kernels ran.

If the engine dies in the middle of the sweep, the run fails with the engine's last log lines, the cells that
finished are kept, and nothing of the engine is left running. Kubernetes and EC2 runs have flows of their own
(the load generator runs in the cluster; cost is recorded): ``execute_run`` hands them over.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelbench.deploy.base import (
    DeployCancelled,
    EventProgress,
    Progress,
    Target,
    TerminatedBySignal,
    make_target,
    settle,
)
from accelbench.domain.bench import Endpoint
from accelbench.domain.results import RunInfo
from accelbench.domain.run import LocalTarget, RunSpec, RunStatus
from accelbench.errors import AccelbenchError, EngineError, UserInputError
from accelbench.settings import get_settings
from accelbench.store.repo import Store

log = logging.getLogger("accelbench.orchestrator")

EventFn = Callable[[dict[str, Any]], None]


def run_dir_for(run_id: str) -> Path:
    """Where a run's engine log and report files go."""
    return get_settings().runs_dir / run_id


def load_spec(run: RunInfo, *, hf_token: str | None = None) -> RunSpec:
    try:
        spec = RunSpec.model_validate(run.spec)
    except ValueError as exc:
        raise UserInputError(f"Run {run.id} has no valid run spec stored: {exc}") from None
    if hf_token:
        spec = spec.model_copy(update={"hf_token": hf_token})
    return spec


def create_run(store: Store, spec: RunSpec, *, extra: dict[str, Any] | None = None) -> RunInfo:
    """Store ``spec`` as a pending run (what POST /api/v1/runs does without the planner's checks)."""
    settings = spec.engine.settings
    return store.create_run(
        kind="run",
        status=RunStatus.pending,
        label=spec.label,
        model=spec.model,
        model_revision=spec.revision,
        engine=spec.engine.name,
        engine_version=spec.engine.version,
        target=spec.target.kind,
        instance_type=spec.instance_type,
        accelerator_type="cpu" if isinstance(spec.target, LocalTarget) else None,
        tp_degree=settings.tensor_parallel_size,
        quantization=settings.quantization,
        spec=spec.public_dict(),
        extra=extra or {},
    )


def execute_run(
    store: Store,
    run_id: str,
    *,
    cancel: threading.Event | None = None,
    progress: EventFn | None = None,
    secrets: dict[str, str] | None = None,
    deploy_progress: Progress | None = None,
    sweep_progress: Callable[[Any], None] | None = None,
    fix: Callable[[Any], bool] | None = None,
    cancel_status: RunStatus = RunStatus.cancelled,
) -> RunInfo:
    """Execute the stored run ``run_id``; returns the final run.

    ``cancel`` stops it (the cell in flight is kept as partial, the engine torn down) and the run ends as
    ``cancel_status``. ``progress`` receives plain dict events (the API worker stores them); the CLI passes
    ``deploy_progress`` (a ``Progress``) and ``sweep_progress`` (sweep events) for its own display. ``fix``
    decides whether to apply an automatic fix to a known start-up failure (local target). ``secrets`` holds
    what the API kept in memory (``hf_token``)."""
    cancel = cancel or threading.Event()
    hf_token = (secrets or {}).get("hf_token")
    run = store.get_run(run_id)
    spec = load_spec(run, hf_token=hf_token)
    kind = spec.target.kind
    if kind == "kubernetes":
        from accelbench.deploy.kubernetes import execute_kubernetes_run

        return execute_kubernetes_run(
            store, run.id, cancel=cancel, progress=progress, hf_token=hf_token, cancel_status=cancel_status
        )
    if kind == "ec2":
        from accelbench.deploy.ec2 import execute_ec2_run

        return execute_ec2_run(
            store, run.id, cancel=cancel, progress=progress, hf_token=hf_token, cancel_status=cancel_status
        )
    return _execute_here(
        store, run, spec,
        cancel=cancel, progress=progress, deploy_progress=deploy_progress, sweep_progress=sweep_progress,
        fix=fix, cancel_status=cancel_status,
    )  # fmt: skip


def _target_for(spec: RunSpec, progress: Progress, cancel: threading.Event, fix: Any) -> Target:
    if isinstance(spec.target, LocalTarget):
        return make_target(spec.target, progress=progress, cancel=cancel, fix=fix)
    return make_target(spec.target, progress=progress)


def _execute_here(
    store: Store,
    run: RunInfo,
    spec: RunSpec,
    *,
    cancel: threading.Event,
    progress: EventFn | None,
    deploy_progress: Progress | None,
    sweep_progress: Callable[[Any], None] | None,
    fix: Any,
    cancel_status: RunStatus,
) -> RunInfo:
    from accelbench.bench.sweep import run_sweep

    run_dir = run_dir_for(run.id)
    run_dir.mkdir(parents=True, exist_ok=True)
    events = EventProgress(progress, deploy_progress)
    target = _target_for(spec, events, cancel, fix)
    status, error = RunStatus.failed, None
    t0 = time.monotonic()
    log_start = 0
    endpoint: Endpoint | None = None
    interrupted: BaseException | None = None
    try:
        store.set_status(run.id, RunStatus.deploying)
        store.update_run(run.id, error=None, progress={"phase": "deploying"})
        if cancel.is_set():
            raise DeployCancelled("Cancelled before the engine was started.")
        endpoint = target.deploy(spec, run_dir=run_dir)
        _record_deployment(store, run.id, target)
        target.wait_ready()
        _record_deployment(store, run.id, target)  # now with the start-up time
        answer_check(store, run.id, target, endpoint, events)
        _record_environment(store, run.id, target, endpoint)
        store.set_status(run.id, RunStatus.benchmarking)
        log_start = _log_size(target)
        events.phase(
            f"Sweeping {len(spec.sweep.input_lens)} input length(s) x {len(spec.sweep.concurrency)} "
            f"concurrency level(s) x {spec.sweep.repeats} repeat(s)"
        )
        outcome = run_sweep(
            store,
            run.id,
            endpoint,
            spec.sweep,
            cancel=cancel,
            progress=_sweep_events(progress, sweep_progress),
            finish_run=False,  # the run is finished below, after teardown and the report files
        )
        status, error = outcome.status, outcome.error
        if status != RunStatus.completed and cancel.is_set():
            status = cancel_status
    except DeployCancelled as exc:
        status, error = cancel_status, exc.message
    except EngineError as exc:
        status, error = RunStatus.failed, str(exc)
    except AccelbenchError as exc:
        status, error = RunStatus.failed, str(exc)
    except (KeyboardInterrupt, SystemExit) as exc:
        status, error = RunStatus.interrupted, "interrupted (Ctrl-C)"
        interrupted = exc
    except TerminatedBySignal as exc:
        status, error = RunStatus.interrupted, str(exc)
        interrupted = exc
    except BaseException as exc:
        log.exception("run %s failed", run.id)
        status, error = RunStatus.failed, f"{type(exc).__name__}: {exc}"
    finally:
        engine_error = _engine_error(target) if status != RunStatus.completed else None
        problems: list[str] = []
        try:
            target.teardown()
        except Exception as exc:  # a failed teardown must be seen: the run cannot be called a success
            log.exception("run %s: teardown failed", run.id)
            problems.append(str(exc))
        status, error = settle(status, error, problems)
        if engine_error and (not error or engine_error not in error):
            error = f"{error}\n{engine_error}" if error else engine_error
    _isa_trace(store, run.id, spec, target, log_start, events)
    files = _write_reports(store, run.id, run_dir)
    if spec.isa_trace and (run_dir / "isa_trace.txt").exists():
        files.append(run_dir / "isa_trace.txt")
    store.merge_run_extra(
        run.id,
        run_dir=str(run_dir),
        files=[str(p) for p in files],
        wall_s=round(time.monotonic() - t0, 1),
        engine_log=target.deployed.log_path if target.deployed else None,
    )
    store.update_run(run.id, progress={**store.get_run(run.id).progress, "phase": status.value})
    final = store.set_status(run.id, status, error=error)
    if interrupted is not None:
        raise interrupted
    return final


def _log_size(target: Target) -> int:
    size = getattr(target, "log_size", None)
    return int(size()) if callable(size) else 0


def _record_deployment(store: Store, run_id: str, target: Target) -> None:
    d = target.deployed
    if d is None:
        return
    fields: dict[str, Any] = {}
    if store.get_run(run_id).quantization is None and (precision := weights_precision(d)):
        fields["quantization"] = precision
    store.update_run(
        run_id,
        engine=d.runtime,
        engine_version=d.engine_version,
        served_model=d.served_model,
        base_url=d.base_url,
        model_revision=d.model_revision,
        command=shlex.join(d.command) if d.command else None,
        target=d.target,
        **fields,
    )
    store.merge_run_extra(run_id, deployment=d.model_dump(mode="json"))


def weights_precision(d: Any) -> str | None:
    """The precision the engine serves the weights in, for comparisons: a GGUF file's quantization type
    (``GGUF Q4_1``), a pre-quantized checkpoint's scheme, else the ``--dtype`` the engine was given (``bf16``).
    A comparison of a Q4_1 llama.cpp run with a BF16 vLLM run must say that precision differs too."""
    from accelbench.modelspec import load_model_spec

    if d.model_path:
        with contextlib.suppress(AccelbenchError, OSError, ValueError):
            quant = load_model_spec(d.model_path, allow_network=False).quantization
            if quant is not None:  # "GGUF Q4_1 (5.00 bits/weight incl. scales)" -> "GGUF Q4_1"
                return quant.scheme.split(" (")[0] if quant.method == "gguf" else quant.scheme
    if "--dtype" in d.command:
        i = d.command.index("--dtype")
        if i + 1 < len(d.command):
            dtype = d.command[i + 1]
            return {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32"}.get(
                dtype, dtype
            )
    return None


def answer_check(store: Store, run_id: str, target: Target, endpoint: Endpoint, events: Progress) -> None:
    """Ask the served model the check question; record the verdict (and on a prepared model too)."""
    from accelbench.deploy.answer_check import check_endpoint

    d = target.deployed
    source = f"{d.runtime} {d.engine_version}" if d and d.runtime else "server"
    events.phase("Asking the model a question (is the answer made of real words?)")
    try:
        check = check_endpoint(endpoint, source=source)
    except AccelbenchError as exc:
        store.merge_run_extra(run_id, answer_check={"passed": False, "error": str(exc)})
        # an engine the question killed (SIGILL...) fails the run with its own cause of death
        target.check_alive(wait_s=3.0)
        return
    store.merge_run_extra(run_id, answer_check=check.model_dump(mode="json"))
    if not check.passed:
        target.check_alive(wait_s=3.0)
        events.phase(f"Warning: the model answers {check.answer!r} ({check.reason})")
    if d is not None and d.target == "local":
        _remember_check(d.model, check)


def _remember_check(model_ref: str, check: Any) -> None:
    from accelbench.deploy import model_store as ms

    with contextlib.suppress(AccelbenchError, OSError):
        m = ms.resolve_model(model_ref)
        root = ms.model_dir(m.name)
        if m.managed or (root / ms.MANIFEST).exists():
            latest = ms._read_manifest(root)
            if latest is not None and not latest.checked(check.source):
                latest.checks.append(check)
                ms._write_manifest(root, latest)


def _record_environment(store: Store, run_id: str, target: Target, endpoint: Endpoint) -> None:
    from accelbench.telemetry.host import capture_environment

    d = target.deployed
    try:
        env = capture_environment(endpoint.base_url, command=d.command if d and d.command else None)
    except Exception as exc:  # the environment is context, never a reason to fail the run
        env = {"error": f"{type(exc).__name__}: {exc}"}
    if d is not None:
        env["engine_env"] = d.env
        env["engine_startup_s"] = d.ready_s
        if d.extra.get("engine_packages"):
            env["engine_packages"] = d.extra["engine_packages"]
        if d.extra.get("engine_build"):
            env["engine_build"] = d.extra["engine_build"]
        probed = env.get("engine")
        engine: dict[str, Any] = probed if isinstance(probed, dict) else {}
        env["engine"] = {**engine, "name": engine.get("name") or d.runtime, "installed": d.engine_version}
    cpu = env.get("cpu") if isinstance(env.get("cpu"), dict) else {}
    store.update_run(run_id, environment=env, accelerator_name=cpu.get("model") if cpu else None)


def _sweep_events(emit: EventFn | None, also: Callable[[Any], None] | None) -> Callable[[Any], None]:
    def on_event(ev: Any) -> None:
        if also is not None:
            also(ev)
        if emit is not None and ev.kind in ("start", "cell_start", "cell_done", "end"):
            emit(
                {
                    "phase": "measuring" if ev.kind != "end" else "measured",
                    "cells_done": ev.cells_done,
                    "cells_total": ev.cells_total,
                    "current": ev.key.as_dict() if ev.key else None,
                }
            )

    return on_event


def _engine_error(target: Target) -> str | None:
    """The engine's own account when it is no longer running (its exit and last log lines)."""
    try:
        target.check_alive()
    except EngineError as exc:
        return str(exc)
    except Exception:
        return None
    return None


def _isa_trace(
    store: Store, run_id: str, spec: RunSpec, target: Target, start: int, events: Progress
) -> None:
    if not spec.isa_trace:
        return
    d = target.deployed
    if d is None or not d.log_path or not Path(d.log_path).exists():
        store.merge_run_extra(run_id, isa_trace={"available": False, "verdict": "no engine log to read"})
        return
    from accelbench.telemetry.isa import parse_log

    events.phase("Reading oneDNN's trace from the engine log")
    from accelbench.telemetry.isa import format_report

    report = parse_log(
        Path(d.log_path), start, None, window="benchmark (after start-up and the answer check)"
    )
    store.merge_run_extra(run_id, isa_trace=report.model_dump(mode="json"))
    with contextlib.suppress(OSError):
        (Path(d.log_path).parent / "isa_trace.txt").write_text(format_report(report, top=20) + "\n")


def record_report_files(store: Store, run_id: str) -> list[Path]:
    """Write a finished run's report files into its run directory and record where (every target's runs)."""
    run_dir = run_dir_for(run_id)
    files = _write_reports(store, run_id, run_dir)
    if files:
        store.merge_run_extra(run_id, run_dir=str(run_dir), files=[str(p) for p in files])
    return files


def _write_reports(store: Store, run_id: str, out_dir: Path) -> list[Path]:
    if not store.get_results(run_id):
        return []
    try:
        return write_run_files(store, run_id, out_dir)
    except Exception as exc:  # the results stay stored; `accelbench report` can write the files again
        log.warning("run %s: report files not written: %s", run_id, exc)
        store.merge_run_extra(run_id, report_error=f"{type(exc).__name__}: {exc}")
        return []


def write_run_files(store: Store, run_id: str, out_dir: Path) -> list[Path]:
    """A run's files: report.html (self-contained) and report.md with PNG charts, then the sweep's
    results.md / results.csv / plots / per-repeat JSON. report.html comes first: the file a person opens."""
    from accelbench.report.document import write_report_files
    from accelbench.report.sweep_outputs import write_sweep_outputs

    sweep_files = list(write_sweep_outputs(store, run_id, out_dir).all_paths())
    # both write the same concurrency charts under the same names: list each file once
    return list(dict.fromkeys([*write_report_files(store, [run_id], out_dir), *sweep_files]))
