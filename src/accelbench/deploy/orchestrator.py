"""The one run lifecycle: execute a stored run from start to teardown, whatever its target. The one code
path of ``accelbench run``, ``accelbench demo``, ``accelbench rerun`` and the API's run worker.

    pending -> deploying -> benchmarking -> completed | failed | cancelled | interrupted

deploy -> wait ready -> answer check -> environment capture -> measure (each cell stored as it finishes; a
spec with a ``capacity:`` section: the capacity search, each probe a cell, the answer priced in
``extra["capacity"]``) -> teardown, always (on success, failure, cancel, Ctrl-C and SIGTERM) -> final status
(``settle``) -> cost from the time the resource was held -> ISA trace -> report files.

What is the lifecycle's and what is the target's:

- the lifecycle owns the statuses, cancellation (``cancel`` and ``DeployCancelled``), the one interrupt type
  (``KeyboardInterrupt``; ``TerminatedBySignal`` is one), teardown through ``Target.release`` (which never
  raises: problems are recorded), the final-status policy (``deploy.base.settle``), the cost, the report
  files and the checks (``deploy.checks``), each made where the target allows it;
- a target (``deploy.base.Target``) supplies ``deploy``, ``wait_ready``, ``measure`` and
  ``measure_capacity`` (the local load generator by default; Kubernetes runs its own in the cluster),
  ``teardown``, ``run_fields``, ``held``, ``record`` and ``explain``.

Events: every phase, log line and sweep event goes to one ``Progress`` (``events``: the CLI's display, a
test's recorder) and, as plain dicts, to ``progress`` (the API worker stores them on the run).

What a run records: the engine and its version, the model and its revision, the served model name, the engine
settings (in the stored spec), the exact command and the environment the runtime set, where it ran
(``telemetry.host``), the start-up time, the answer check and, with ``isa_trace``, which CPU kernels ran.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelbench.bench.served_identity import record_served, sampling_of
from accelbench.deploy.checks import answer_check, engine_error, isa_trace, record_environment
from accelbench.deploy.cost import record_held_cost
from accelbench.deploy.endpoint_capacity import finish, stored_plan
from accelbench.deploy.machine_share import MACHINE
from accelbench.deploy.run_files import run_dir_for, write_reports
from accelbench.deploy.target import DeployCancelled, Target, get_target_class, settle
from accelbench.domain.progress import EventProgress, Progress
from accelbench.domain.results import RunInfo
from accelbench.domain.run import LocalTarget, RunSpec, RunStatus, secret_slot_name
from accelbench.errors import AccelbenchError, UserInputError
from accelbench.modelspec import load_model_spec
from accelbench.redact import redact, redact_url
from accelbench.store.owner import process_owner
from accelbench.store.repo import Store
from accelbench.telemetry.host import redact_command

log = logging.getLogger("accelbench.orchestrator")

EventFn = Callable[[dict[str, Any]], None]
TargetFactory = Callable[..., Target]


def load_spec(run: RunInfo, *, hf_token: str | None = None) -> RunSpec:
    try:
        spec = RunSpec.model_validate(run.spec)
    except ValueError as exc:
        raise UserInputError(f"Run {run.id} has no valid run spec stored: {exc}") from None
    if hf_token:
        spec = spec.model_copy(update={"hf_token": hf_token})
    return spec


# Secrets given with a run (hf_token, the engine's secret extra_args and env) never reach the store: the stored
# spec carries the masked placeholder, and the values wait here, in this process's memory, until the run
# executes (``accelbench run`` executes in the process that stored it; the API hands them to its worker).
_kept_secrets: dict[str, dict[str, str]] = {}
_kept_lock = threading.Lock()


def take_secrets(run_id: str) -> dict[str, str]:
    """The secrets ``create_run`` kept in this process for ``run_id``, handed over once (then forgotten)."""
    with _kept_lock:
        return _kept_secrets.pop(run_id, {})


def create_run(
    store: Store,
    spec: RunSpec,
    *,
    extra: dict[str, Any] | None = None,
    claimed_by: str | None = None,
    owner_key_id: int | None = None,
) -> RunInfo:
    """Store ``spec`` as a pending run (what POST /api/v1/runs does after preflight), its secrets masked; their
    values are kept in this process's memory for ``execute_run`` (or ``take_secrets``). ``claimed_by``: the
    executor that holds the run from the start (a CLI process), so no worker takes it; ``owner_key_id``: the
    API key that submitted it."""
    settings = spec.engine.settings
    run = store.create_run(
        kind="run",
        status=RunStatus.pending,
        claimed_by=claimed_by,
        owner_key_id=owner_key_id,
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
    secrets = spec.secrets()
    if secrets:
        with _kept_lock:
            _kept_secrets[run.id] = secrets
    return run


def restore_secrets(run: RunInfo, spec: RunSpec, secrets: dict[str, str]) -> RunSpec:
    """The stored spec with its secrets put back, before anything is deployed. A placeholder whose value is
    gone (the process it was submitted to restarted before the run started) is a refusal: the engine never
    starts with the placeholder."""
    missing = [slot for slot in spec.secret_placeholders() if slot not in secrets]
    if missing:
        names = ", ".join(secret_slot_name(slot) for slot in missing)
        raise UserInputError(
            f"Run {run.id} cannot start: its spec was stored with the secret{'s' if len(missing) > 1 else ''} "
            f"{names} masked (secrets are never stored), and the value{'s are' if len(missing) > 1 else ' is'} "
            "gone: they are kept only in the memory of the process the run was submitted to, which restarted "
            "(or ran without a worker) before the run started.",
            hint="Submit the run again with the secret values.",
        )
    return spec.with_secrets(secrets) if secrets else spec


def execute_run(
    store: Store,
    run_id: str,
    *,
    cancel: threading.Event | None = None,
    progress: EventFn | None = None,
    events: Progress | None = None,
    secrets: dict[str, str] | None = None,
    fix: Callable[[Any], bool] | None = None,
    cancel_status: RunStatus = RunStatus.cancelled,
    target_factory: TargetFactory | None = None,
    clock: Callable[[], float] = time.time,
) -> RunInfo:
    """Execute the stored run ``run_id`` on its target; returns the final run.

    ``cancel`` stops it (the cell in flight is kept as partial, everything deployed torn down) and the run
    ends as ``cancel_status`` (the CLI passes ``interrupted``: a person stopped it). Ctrl-C and SIGTERM end it
    ``interrupted`` and are re-raised once the run is recorded. ``events`` receives every phase, log line and
    sweep event; ``progress`` the same as plain dicts. ``fix`` decides whether to apply an automatic fix to a
    known start-up failure. ``secrets`` holds what the API kept in memory (``hf_token``, ``arg:N``,
    ``env:NAME``: ``RunSpec.secrets``), with what ``create_run`` kept in this process; they are put back in
    the spec before anything is deployed, and a run whose secrets are gone fails at once. ``target_factory``
    replaces the target class (tests inject clients); ``clock`` times what the run held, for its cost."""
    cancel = cancel or threading.Event()
    secrets = {**take_secrets(run_id), **(secrets or {})}
    hf_token = secrets.get("hf_token")
    try:  # one executor per run: this process's claim, or the claim of a run nobody holds
        store.take_claim(run_id, process_owner())
    except BaseException:
        secrets.clear()
        raise
    run = store.get_run(run_id)
    spec = load_spec(run, hf_token=hf_token)
    try:
        spec = restore_secrets(run, spec, secrets)
    except UserInputError as exc:
        log.warning("run %s: %s", run.id, exc.message)
        store.update_run(run.id, progress={**run.progress, "phase": RunStatus.failed.value})
        return store.set_status(run.id, RunStatus.failed, error=str(exc))
    finally:
        secrets.clear()
    observer = EventProgress(progress, events)
    factory = target_factory or get_target_class(spec.target.kind)
    target = factory(spec.target, progress=observer, cancel=cancel, run_id=run.id, hf_token=hf_token, fix=fix)
    run_dir = run_dir_for(run.id)
    run_dir.mkdir(parents=True, exist_ok=True)
    status, error = RunStatus.failed, None
    t0, wall0 = clock(), time.monotonic()
    marks = {"log_start": 0}
    interrupted: BaseException | None = None
    try:
        status, error = _deploy_and_measure(store, run, spec, target, run_dir, observer, cancel, marks)
        if status != RunStatus.completed and cancel.is_set():
            status = cancel_status
    except DeployCancelled as exc:
        status, error = cancel_status, exc.message
    except AccelbenchError as exc:
        status, error = RunStatus.failed, str(exc)
    except (KeyboardInterrupt, SystemExit) as exc:  # Ctrl-C, or SIGTERM/SIGHUP (TerminatedBySignal)
        status, error = RunStatus.interrupted, str(exc) or "interrupted (Ctrl-C)"
        interrupted = exc
    except Exception as exc:
        log.exception("run %s failed", run.id)
        status, error = RunStatus.failed, target.explain(exc) or f"{type(exc).__name__}: {exc}"
    finally:
        died = engine_error(target) if status != RunStatus.completed else None
        problems = target.release()
        held_s = clock() - t0
        if problems:
            log.warning("run %s: teardown: %s", run.id, "; ".join(problems))
        status, error = settle(status, error, problems)
        if died and (not error or died not in error):
            error = f"{error}\n{died}" if error else died
    _record_held(store, run.id, target, held_s)
    trace = isa_trace(store, run.id, spec, target, marks["log_start"], observer)
    files = write_reports(store, run.id, run_dir)
    if trace is not None:
        files.append(trace)
    store.merge_run_extra(
        run.id,
        run_dir=str(run_dir),
        files=[str(p) for p in files],
        wall_s=round(time.monotonic() - wall0, 1),
        engine_log=target.deployed.log_path if target.deployed else None,
    )
    store.update_run(run.id, progress={**store.get_run(run.id).progress, "phase": status.value})
    final = store.set_status(run.id, status, error=error)
    if interrupted is not None:
        raise interrupted
    return final


def _deploy_and_measure(
    store: Store,
    run: RunInfo,
    spec: RunSpec,
    target: Target,
    run_dir: Path,
    observer: Progress,
    cancel: threading.Event,
    marks: dict[str, int],
) -> tuple[RunStatus, str | None]:
    """Deploy, wait ready, check and measure; the status and error the measurement ends with.

    A run measured from this machine has it to itself while it measures (``deploy.machine``); an engine on
    this machine holds it from start-up on. Waiting for a remote engine holds nothing, so the service's worker
    may take the next run meanwhile."""
    local = isinstance(spec.target, LocalTarget)
    with contextlib.ExitStack() as machine:
        if local:
            machine.enter_context(MACHINE.held(cancel, observer.phase))
        with contextlib.nullcontext() if local else MACHINE.waiting(run.id):
            store.set_status(run.id, RunStatus.deploying)
            store.update_run(run.id, error=None, progress={"phase": "deploying"})
            if cancel.is_set():
                raise DeployCancelled("Cancelled before anything was deployed.")
            endpoint = target.deploy(spec, run_dir=run_dir)
            _record_deployment(store, run.id, target)
            target.wait_ready()
            _record_deployment(store, run.id, target)  # now with the start-up time
        if not local and target.measured_from_here:
            machine.enter_context(MACHINE.held(cancel, observer.phase))
        if target.measured_from_here:
            answer_check(store, run.id, target, endpoint, observer)
        record_environment(store, run.id, target, endpoint)
        served_from = endpoint if target.measured_from_here else None  # else only its launch command
        record_served(store, run.id, served_from, sampling=sampling_of(spec.capacity or spec.sweep))
        store.set_status(run.id, RunStatus.benchmarking)
        marks["log_start"] = target.log_size()
        if spec.capacity is not None:
            return _measure_capacity(store, run, spec, target, endpoint, observer)
        observer.phase(
            f"Sweeping {len(spec.sweep.input_lens)} input length(s) x {len(spec.sweep.concurrency)} "
            f"concurrency level(s) x {spec.sweep.repeats} repeat(s)"
        )
        outcome = target.measure(store, run.id, endpoint, spec.sweep, events=observer)
        return outcome.status, outcome.error


def _measure_capacity(
    store: Store, run: RunInfo, spec: RunSpec, target: Target, endpoint: Any, observer: Progress
) -> tuple[RunStatus, str | None]:
    """A spec's capacity search in place of the sweep: from the plan kept at submission (the first level, the
    price, the planner's capacity), through the target's ``measure_capacity``, priced and set beside the
    prediction (``deploy.capacity.finish``) in the run's ``extra["capacity"]``."""

    capacity = spec.capacity
    assert capacity is not None
    plan = stored_plan(run.extra or {}, capacity, spec.instance_type)
    slo = capacity.target()
    observer.phase(
        f"Searching for the capacity {'at ' + slo.label() if slo else '(the knee: no SLO)'}: {capacity.load} "
        f"from {plan.start:g} ({plan.start_from}) up to {capacity.max_load:g}, at most {capacity.max_probes} "
        "levels"
    )
    result = target.measure_capacity(store, run.id, endpoint, capacity, start=plan.start, events=observer)
    result = finish(result, plan)
    store.merge_run_extra(run.id, capacity=result.model_dump(mode="json"))
    if not result.probes:
        return RunStatus.failed, "The capacity search measured no level."
    return RunStatus.completed, None


def _record_held(store: Store, run_id: str, target: Target, held_s: float) -> None:
    """The cost (what the target held x the time from deploy to the end of teardown) and the target's own
    summary of what it created and what is left."""

    held = target.held()
    if held is not None:
        record_held_cost(store, run_id, held.instance_type, held_s, region=held.region)
    record = target.record()
    if record:
        store.merge_run_extra(run_id, **{target.kind: record})


def _record_deployment(store: Store, run_id: str, target: Target) -> None:
    d = target.deployed
    if d is None:
        return
    fields: dict[str, Any] = {}
    if store.get_run(run_id).quantization is None and (precision := weights_precision(d)):
        fields["quantization"] = precision
    fields.update({k: v for k, v in target.run_fields().items() if v is not None})
    store.update_run(
        run_id,
        engine=d.runtime,
        engine_version=d.engine_version,
        served_model=d.served_model,
        base_url=redact_url(d.base_url),
        model_revision=d.model_revision,
        command=redact_command(d.command) if d.command else None,
        target=d.target,
        **fields,
    )
    store.merge_run_extra(run_id, deployment=redact(d.model_dump(mode="json")))  # the one rule, stored masked


def weights_precision(d: Any) -> str | None:
    """The precision the engine serves the weights in, for comparisons: a GGUF file's quantization type
    (``GGUF Q4_1``), a pre-quantized checkpoint's scheme, else the ``--dtype`` the engine was given (``bf16``).
    A comparison of a Q4_1 llama.cpp run with a BF16 vLLM run must say that precision differs too."""

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
