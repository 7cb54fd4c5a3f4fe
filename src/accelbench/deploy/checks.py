"""The checks the run lifecycle makes on a deployed engine, each where the target allows it:

- the answer check (``measured_from_here``): one question to the served model; is the answer made of words?
- the environment capture: this machine when the engine runs here (``engine_on_this_host``), else the
  instance the catalog describes, the engine's own answer when reachable, and this machine as the load
  generator;
- the ISA trace (``engine_on_this_host``, with ``isa_trace``): which CPU kernels oneDNN ran during the sweep;
- the engine's own account of its death (exit code, last log lines) when a run did not complete.

None of them fails a run by itself, except a dead engine: a failed question is followed by ``check_alive``,
which raises the engine's cause of death (SIGILL, out of memory...).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from accelbench.deploy import model_index as ms
from accelbench.deploy.answer_check import check_endpoint
from accelbench.deploy.target import Target
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.progress import Progress
from accelbench.domain.run import RunSpec
from accelbench.errors import AccelbenchError, EngineError
from accelbench.redact import redact
from accelbench.store.repo import Store
from accelbench.telemetry.host import capture_environment, remote_environment
from accelbench.telemetry.isa import format_report, parse_log


def answer_check(store: Store, run_id: str, target: Target, endpoint: Endpoint, events: Progress) -> None:
    """Ask the served model the check question; record the verdict (and on a prepared model too)."""

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
    if d is not None and target.engine_on_this_host:
        _remember_check(d.model, check)


def _remember_check(model_ref: str, check: Any) -> None:

    with contextlib.suppress(AccelbenchError, OSError):
        m = ms.resolve_model(model_ref)
        root = ms.model_dir(m.name)
        if m.managed or (root / ms.MANIFEST).exists():
            latest = ms._read_manifest(root)
            if latest is not None and not latest.checked(check.source):
                latest.checks.append(check)
                ms._write_manifest(root, latest)


def record_environment(store: Store, run_id: str, target: Target, endpoint: Endpoint) -> None:
    """Store where the run happened (``telemetry.host``), and the engine's environment and build."""

    d = target.deployed
    command = d.command if d and d.command else None
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else None
    try:
        if target.engine_on_this_host:
            env = capture_environment(endpoint.base_url, command=command, headers=headers)
        else:
            env = remote_environment(
                endpoint.base_url if target.measured_from_here else None,
                command,
                instance=target.instance.model_dump(mode="json") if target.instance else None,
                headers=headers,
            )
    except Exception as exc:  # the environment is context, never a reason to fail the run
        env = {"error": f"{type(exc).__name__}: {exc}"}
    if d is not None:
        env["engine_env"] = redact(d.env)
        env["engine_startup_s"] = d.ready_s
        for key in ("engine_packages", "engine_build", "image"):
            if d.extra.get(key):
                env[key] = d.extra[key]
        probed = env.get("engine")
        engine: dict[str, Any] = probed if isinstance(probed, dict) else {}
        env["engine"] = {**engine, "name": engine.get("name") or d.runtime, "installed": d.engine_version}
    fields: dict[str, Any] = {}
    cpu = env.get("cpu") if isinstance(env.get("cpu"), dict) else None
    if target.engine_on_this_host and cpu:  # a remote run's accelerator comes from its instance instead
        fields["accelerator_name"] = cpu.get("model")
    store.update_run(run_id, environment=env, **fields)


def engine_error(target: Target) -> str | None:
    """The engine's own account when it is no longer running (its exit and last log lines)."""
    try:
        target.check_alive()
    except EngineError as exc:
        return str(exc)
    except Exception:
        return None
    return None


def isa_trace(
    store: Store, run_id: str, spec: RunSpec, target: Target, start: int, events: Progress
) -> Path | None:
    """With ``isa_trace``: read oneDNN's trace from the engine log (from byte ``start``: the sweep only),
    store the report, write ``isa_trace.txt`` beside the log; returns that file."""
    if not spec.isa_trace:
        return None
    d = target.deployed
    if not target.engine_on_this_host:
        store.merge_run_extra(
            run_id,
            isa_trace={
                "available": False,
                "verdict": f"the engine ran on the {target.kind} host; its log is read only for engines on "
                "this machine",
            },
        )
        return None
    if d is None or not d.log_path or not Path(d.log_path).exists():
        store.merge_run_extra(run_id, isa_trace={"available": False, "verdict": "no engine log to read"})
        return None

    events.phase("Reading oneDNN's trace from the engine log")
    report = parse_log(
        Path(d.log_path), start, None, window="benchmark (after start-up and the answer check)"
    )
    store.merge_run_extra(run_id, isa_trace=report.model_dump(mode="json"))
    out = Path(d.log_path).parent / "isa_trace.txt"
    try:
        out.write_text(format_report(report, top=20) + "\n")
    except OSError:
        return None
    return out
