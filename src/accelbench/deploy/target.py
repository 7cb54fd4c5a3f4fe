"""The deployment Target interface and its registry.

A target turns a ``RunSpec`` into a running, OpenAI-compatible server and gives the benchmark an
``Endpoint`` (base URL, served model name, tokenizer). The benchmark never sees more than that.

    with make_target(spec.target) as target:      # teardown on normal end, error, Ctrl-C
        endpoint = target.deploy(spec, run_dir=run_dir)
        target.wait_ready(timeout=600)
        ... benchmark endpoint ...

Targets: ``local`` (an engine process on this machine), ``endpoint`` (a server that is already running:
nothing is deployed or torn down); ``kubernetes`` and ``ec2`` live in their own modules and register here.

A target supplies the hooks of the one run lifecycle (``deploy.orchestrator.execute_run``): ``deploy``,
``wait_ready``, ``measure`` (default: the local load generator against the endpoint; Kubernetes runs its own
in the cluster), ``measure_capacity`` (a spec's capacity search instead of the sweep; default: the search from
this machine, ``deploy.capacity``; Kubernetes runs it in the cluster), ``teardown`` (through ``release``, which never raises), ``run_fields`` and ``held`` (what the
run records and what it cost), ``record`` (a summary stored after teardown) and two capabilities the lifecycle
reads: ``measured_from_here`` (the answer check and the engine probe can reach the endpoint) and
``engine_on_this_host`` (the environment capture and the ISA trace read this machine).
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from accelbench.bench.sweep import run_sweep
from accelbench.deploy.endpoint_capacity import search_endpoint
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.progress import NO_PROGRESS, Progress, TerminatedBySignal
from accelbench.domain.run import RunSpec, RunStatus
from accelbench.domain.strict import StrictModel
from accelbench.errors import AccelbenchError, EngineError
from accelbench.registry import Registry
from accelbench.runtimes.runtime import ServeParams

if TYPE_CHECKING:
    from accelbench.bench.sweep import SweepOutcome
    from accelbench.domain.capacity import CapacityResult, CapacitySpec
    from accelbench.domain.instance_types import InstanceType
    from accelbench.domain.run import SweepSpec
    from accelbench.store.repo import Store

TARGET_MODULES = ["local", "endpoint", "kubernetes", "ec2"]


def settle(
    status: RunStatus, error: str | None, teardown_problems: list[str]
) -> tuple[RunStatus, str | None]:
    """The final-status policy of every run, whatever its target: teardown problems are always recorded in
    the error; they turn a completed run into a failed one (its figures stand, but something may still be
    running and billed), and leave a failed, cancelled or interrupted run as it was."""
    if not teardown_problems:
        return status, error
    note = "Teardown failed: " + "; ".join(teardown_problems)
    error = f"{error} {note}" if error else note
    return (RunStatus.failed if status == RunStatus.completed else status), error


class DeployCancelled(AccelbenchError):
    """A cancel request arrived while a target was deploying or waiting for readiness."""

    status_code = 409


class DeployedEngine(StrictModel):
    """What was deployed, exactly: recorded with the run so it can be repeated and explained."""

    target: str = Field(description="Target kind: local, endpoint, kubernetes, ec2.")
    runtime: str | None = Field(default=None, description="Runtime (engine) name, e.g. vllm-cpu.")
    engine_version: str | None = Field(default=None, description="Engine version that served the run.")
    model: str = Field(description="The model as the spec named it.")
    model_path: str | None = Field(default=None, description="What the engine loaded (directory or file).")
    model_revision: str | None = Field(default=None, description="Pinned model revision, when known.")
    served_model: str = Field(description="Name the server answers to; the load generator uses it too.")
    base_url: str = Field(description="Server root URL (no /v1).")
    command: list[str] = Field(default_factory=list, description="The engine's argv, exactly as started.")
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment the runtime set for the engine (on top of the host's)."
    )
    log_path: str | None = Field(default=None, description="The engine's log file.")
    pid: int | None = Field(default=None, description="Process id of the engine (local target).")
    started_at: float | None = Field(default=None, description="Unix time the engine was started.")
    ready_s: float | None = Field(default=None, description="Seconds from start to a healthy /health.")
    extra: dict[str, Any] = Field(default_factory=dict, description="Target-specific details.")

    @classmethod
    def serving(cls, spec: RunSpec, params: ServeParams, **fields: Any) -> DeployedEngine:
        """What an engine started with ``params`` for ``spec`` serves: the model as the spec named it and as
        the engine loads it, the pinned revision and the name it answers to; ``fields``: the rest (a target
        that knows the revision better gives ``model_revision``)."""
        model = {
            "model": spec.model,
            "model_path": params.model,
            "model_revision": spec.revision,
            "served_model": params.served_model_name,
        }
        return cls(**{**model, **fields})


@dataclass(frozen=True)
class Held:
    """What a run held and pays for: an instance type, and the region its price comes from (None: the
    catalog's snapshot region)."""

    instance_type: str
    region: str | None = None


class Target(ABC):
    """Deploys an engine serving a model and tears it down. Use as a context manager."""

    kind: ClassVar[str]
    #: the endpoint is reachable from this machine: the lifecycle asks the answer check, probes the engine and
    #: runs the load generator here (False for a cluster-internal Service: ``measure`` runs elsewhere)
    measured_from_here: bool = True
    #: the engine runs on this machine: the environment capture describes this host, the ISA trace reads
    #: the engine's log file
    engine_on_this_host: bool = False

    def __init__(
        self,
        config: Any = None,
        *,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        run_id: str | None = None,
        hf_token: str | None = None,
        fix: Callable[[Any], bool] | None = None,
    ) -> None:
        """``config`` is the spec's ``target`` section for this kind (a pydantic model). ``cancel`` stops a
        deploy or a wait (``DeployCancelled``); ``run_id`` names what the target creates; ``hf_token`` is
        passed to the engine and never stored; ``fix`` decides whether to apply an automatic fix to a known
        start-up failure (targets that know such fixes)."""
        self.config = config
        self.progress = progress or NO_PROGRESS
        self.cancel = cancel or threading.Event()
        self.run_id = run_id or "manual"
        self.hf_token = hf_token
        self.fix = fix
        self.deployed: DeployedEngine | None = None
        self.instance: InstanceType | None = None  # the catalog's instance type, for targets that hold one
        self.teardown_errors: list[str] = []  # what teardown could not remove (it never raises)

    def _check_cancel(self) -> None:
        """Raise ``DeployCancelled`` if the run was cancelled."""
        if self.cancel.is_set():
            raise DeployCancelled("The run was cancelled.")

    def _sleep(self, seconds: float) -> None:
        """Wait, or raise ``DeployCancelled`` as soon as the run is cancelled."""
        if self.cancel.wait(seconds):
            raise DeployCancelled("The run was cancelled.")

    @abstractmethod
    def deploy(self, spec: RunSpec, *, run_dir: Path | None = None) -> Endpoint:
        """Start serving ``spec.model`` with ``spec.engine``; return where to send requests.

        Returns as soon as the server is launched; call ``wait_ready`` before sending load."""

    @abstractmethod
    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until the server answers /health; raise ``EngineError`` (with the engine's last log lines
        and what to try) if it dies or ``timeout`` seconds pass."""

    @abstractmethod
    def logs(self, tail: int | None = 200) -> str:
        """The engine's log, the last ``tail`` lines (all when None)."""

    @abstractmethod
    def teardown(self) -> None:
        """Stop everything ``deploy`` started. Safe to call twice and after a failed deploy."""

    def check_alive(self, wait_s: float = 0.0) -> None:  # noqa: B027 - optional hook, a no-op for targets that cannot tell
        """Raise ``EngineError`` if the deployed engine has died (called between benchmark cells, and after a
        failed answer check with ``wait_s`` for an engine that is still dying)."""

    def log_size(self) -> int:
        """Bytes in the engine's log so far (the ISA trace reads what came after); 0 when there is none."""
        return 0

    # ---- lifecycle hooks with defaults ---------------------------------------------------------------
    def measure(
        self, store: Store, run_id: str, endpoint: Endpoint, sweep: SweepSpec, *, events: Progress
    ) -> SweepOutcome:
        """Run the sweep and store each (cell, repeat); the run's final status is the lifecycle's. Default:
        the load generator on this machine against ``endpoint``."""

        return run_sweep(
            store, run_id, endpoint, sweep, cancel=self.cancel, progress=events.sweep, finish_run=False
        )

    def measure_capacity(
        self,
        store: Store,
        run_id: str,
        endpoint: Endpoint,
        capacity: CapacitySpec,
        *,
        start: float,
        events: Progress,
    ) -> CapacityResult:
        """Search for the highest load meeting ``capacity``'s SLO (or the knee), starting at ``start``; each
        probe stored as a cell, the probes in the run's ``extra["capacity"]``; the lifecycle prices the answer
        and sets the final status. Default: the search from this machine against ``endpoint``. A cancel stops
        it after the level in flight (``DeployCancelled``; the levels measured stay stored)."""

        def progress(message: str) -> None:  # a level starts (a phase), or its verdict (indented: a line)
            (events.line if message.startswith(" ") else events.phase)(message.strip())

        try:
            result = search_endpoint(
                store, run_id, endpoint, capacity, start=start, label=run_id, progress=progress,
                cancel=self.cancel,
            )  # fmt: skip
        except KeyboardInterrupt as exc:  # the search's own stop on cancel; Ctrl-C twice and signals go on
            if isinstance(exc, TerminatedBySignal) or not self.cancel.is_set():
                raise
            raise DeployCancelled(
                "Cancelled during the capacity search; the levels measured so far are stored."
            ) from None
        self.check_alive()  # an engine that died mid-search fails every level: that is no capacity
        return result

    def run_fields(self) -> dict[str, Any]:
        """Run columns this target knows after ``deploy`` beyond the deployed engine's (the instance and its
        accelerators for targets that hold one)."""
        inst = self.instance
        if inst is None:
            return {}
        return {
            "instance_type": inst.name,
            "accelerator_type": inst.accelerator_type.value,
            "accelerator_name": inst.accelerator_name,
            "accelerator_count": inst.accelerator_count,
        }

    def held(self) -> Held | None:
        """The instance the run held (its cost is its price x the time from deploy to teardown), if any."""
        return Held(self.instance.name) if self.instance is not None else None

    def record(self) -> dict[str, Any]:
        """What to store under the run's ``extra[kind]`` after teardown (what was created, what is left)."""
        return {}

    def explain(self, exc: Exception) -> str | None:
        """A clear message for an error of this target's own client library (None: the lifecycle's default)."""
        return None

    def release(self) -> list[str]:
        """Tear down and say what went wrong, never raise: the lifecycle records every problem."""
        problems: list[str] = []
        try:
            self.teardown()
        except Exception as exc:  # a failed teardown must be seen: the run cannot be called a success
            problems.append(f"{type(exc).__name__}: {exc}")
        return [*self.teardown_errors, *problems]

    @property
    def endpoint(self) -> Endpoint:
        if self.deployed is None:
            raise EngineError("Nothing is deployed yet.", hint="Call deploy() first.")
        return Endpoint(base_url=self.deployed.base_url, served_model=self.deployed.served_model)

    def __enter__(self) -> Target:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.teardown()


TARGETS: Registry[type[Target]] = Registry(
    "deploy target", [f"accelbench.deploy.{m}" for m in TARGET_MODULES]
)


def get_target_class(kind: str) -> type[Target]:
    return TARGETS.get(kind)


def make_target(config: StrictModel, *, progress: Progress | None = None, **kwargs: Any) -> Target:
    """Build the target for a spec's ``target`` section (its ``kind`` picks the class)."""
    kind = str(getattr(config, "kind", ""))
    cls = get_target_class(kind)
    return cls(config, progress=progress, **kwargs)


@contextlib.contextmanager
def exclusive_lock(lock_path: Path, waiting: str, progress: Progress) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (created if needed): one process installs or prepares a thing
    at a time; another waits, saying ``waiting``."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress.phase(waiting)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
