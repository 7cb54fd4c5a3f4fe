"""The local target: an engine server as a child process of accelbench, on this machine.

- The command and environment are exactly what the runtime produces (``runtime.command(params, python=<the
  engine venv's python>)`` and ``runtime.env(params)`` on top of this process's environment), so a local run,
  a Kubernetes manifest and an export never disagree about flags. The served model name the load generator
  uses is the one put on the command line (``ServeParams.served_model_name``).
- It runs in its own process group (a new session), listens on a free port, and writes its output to a log
  file in the run's directory.
- ``wait_ready`` polls ``/health``; if the engine exits or the timeout passes, the error quotes the log's last
  lines, names a known failure when it recognises one (``diagnose``) and says what to try. A library that asks
  for an executable stack can be repaired (patchelf) and the engine restarted, when the caller allows it.
- Teardown always happens (normal end, error, Ctrl-C, SIGTERM, interpreter exit): SIGTERM to the whole process
  group, a grace period, then SIGKILL to the group and to any descendant that left it. Nothing is left behind.
  When accelbench is killed outright (SIGKILL, out of memory), a ``ParentWatch`` started with the engine does
  the same teardown.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import platform
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import httpx

from accelbench.bench.cpu_affinity import (
    allowed_cpus,
    core_overlap,
    engine_cpus_from_bind,
    isolate_client,
    set_process_affinity,
)
from accelbench.deploy import execstack
from accelbench.deploy.diagnose import AMX_TILE_FAULT, diagnose
from accelbench.deploy.engine_store import get_engine
from accelbench.deploy.isa_fault import (
    IsaFault,
    compiled_groups,
    describe_exit,
    find_isa_fault,
    find_tile_fault,
    killed_by,
    uptime,
)
from accelbench.deploy.model_index import resolve_model
from accelbench.deploy.proctree import ParentWatch, kill_process_tree
from accelbench.deploy.target import TARGETS, DeployCancelled, DeployedEngine, Target
from accelbench.domain.answers import ModelsAnswer, parse_answer
from accelbench.domain.diagnosis import Diagnosis
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.progress import Progress, TerminatedBySignal
from accelbench.domain.run import LocalTarget as LocalTargetSpec
from accelbench.domain.run import RunSpec
from accelbench.errors import EngineError, GuardError, UserInputError
from accelbench.redact import redact, redact_argv
from accelbench.runtimes.runtime import Runtime, ServeParams, get_runtime
from accelbench.settings import get_settings
from accelbench.telemetry.host import cpu_info, numa_node_count

LOG_TAIL = 30
#: variables of accelbench's own environment that would leak into the engine's interpreter
_DROP_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__")
#: oneDNN's trace floods the log; it is never what a person needs to read in an error
_NOISE_PREFIXES = ("onednn_verbose",)

FixCallback = Callable[[Diagnosis], bool]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host if host not in ("0.0.0.0", "") else "127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def numa_nodes() -> int:

    return numa_node_count()


def machine_arch() -> Literal["x86_64", "arm64"]:

    return "arm64" if platform.machine().lower() in ("aarch64", "arm64") else "x86_64"


def tail_file(path: Path, lines: int | None = 200, *, skip_noise: bool = True) -> list[str]:
    """The last ``lines`` lines of a text file (all when None), reading only the end of a large file."""
    try:
        size = path.stat().st_size
    except OSError:
        return []
    want = lines if lines is not None else None
    with open(path, "rb") as fh:
        if want is None:
            data = fh.read()
        else:
            block = 64 * 1024
            data = b""
            pos = size
            while pos > 0:
                step = min(block, pos)
                pos -= step
                fh.seek(pos)
                data = fh.read(step) + data
                kept = [ln for ln in data.splitlines() if not (skip_noise and _is_noise(ln))]
                if len(kept) > want + 1:
                    break
                block *= 2
    text = data.decode("utf-8", errors="replace").splitlines()
    if skip_noise:
        text = [ln for ln in text if not ln.startswith(_NOISE_PREFIXES)]
    return text if want is None else text[-want:]


def _is_noise(line: bytes) -> bool:
    return line.startswith(b"onednn_verbose")


# --------------------------------------------------------------------------------------------------------
# Teardown on every way out


_LIVE: set[LocalProcessTarget] = set()
_LIVE_LOCK = threading.Lock()


def _teardown_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for target in live:
        with contextlib.suppress(Exception):
            target.teardown()


atexit.register(_teardown_all)


@contextlib.contextmanager
def handle_termination_signals() -> Iterator[None]:
    """Within this block SIGTERM and SIGHUP raise ``TerminatedBySignal`` in the main thread (Ctrl-C already
    raises KeyboardInterrupt), so engine processes are torn down. Does nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise TerminatedBySignal(signum)

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    for s in old:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# --------------------------------------------------------------------------------------------------------
# The target


@TARGETS.register("local")
class LocalProcessTarget(Target):
    """An engine started as a child process on this machine."""

    kind = "local"
    engine_on_this_host = True

    def __init__(
        self,
        config: LocalTargetSpec | None = None,
        *,
        progress: Progress | None = None,
        fix: FixCallback | None = None,
        startup_retries: int = 1,
        cancel: threading.Event | None = None,
        **context: Any,
    ) -> None:
        """``fix`` is asked whether to apply an automatic fix (e.g. clear an executable-stack flag) when a
        known start-up failure has one; it returns True to apply it and restart the engine. ``cancel`` stops
        a wait for readiness (the engine is stopped and ``DeployCancelled`` raised)."""
        super().__init__(config or LocalTargetSpec(), progress=progress, cancel=cancel, fix=fix, **context)
        self.config: LocalTargetSpec = config or LocalTargetSpec()
        self.startup_retries = startup_retries
        self.proc: subprocess.Popen[bytes] | None = None
        self.runtime: Runtime | None = None
        self.log_path: Path | None = None
        self.pgid: int | None = None
        self.exit_code: int | None = None
        self._log_fh: Any = None
        self._watch: ParentWatch | None = None
        self._env: dict[str, str] = {}
        self._cwd: Path | None = None
        self._started_mono = 0.0
        self._started_uptime: float | None = None
        self._restarts = 0
        self._lock = threading.Lock()
        self.torn_down = False
        self._client_cpus_before: set[int] | None = None  # this process's cores before the engine took some
        self.proc_settings_threads: int | None = None

    # ---- deploy -------------------------------------------------------------------------------------

    def serve_params(self, spec: RunSpec, *, port: int) -> tuple[ServeParams, Any, Any]:
        """The runtime's parameters for ``spec`` on this machine, with the installed engine and model."""

        runtime = get_runtime(spec.engine.name)
        engine = get_engine(spec.engine.name, spec.engine.version)
        model = resolve_model(spec.model)
        params = ServeParams(
            model=model.path_for(runtime.name),
            served_model_name=model.served_name,
            host=self.config.host,
            port=port,
            accelerator_type=AcceleratorType.cpu,
            accelerator_count=0,
            arch=machine_arch(),
            numa_nodes=numa_nodes(),
            settings=spec.engine.settings,
            isa_trace=spec.isa_trace,
            parameters=float(model.parameters) if model.parameters else None,
        )
        errors = runtime.validate(params)
        if errors:
            raise GuardError(
                f"{runtime.name} cannot run with these settings: " + "; ".join(errors),
                hint="Change engine.settings in the spec.",
            )
        return params, engine, model

    def deploy(self, spec: RunSpec, *, run_dir: Path | None = None) -> Endpoint:
        if self.proc is not None:
            raise EngineError("This target already runs an engine.", hint="Use one target per deployment.")
        port = self.config.port or free_port(self.config.host)
        params, engine, model = self.serve_params(spec, port=port)
        runtime = get_runtime(spec.engine.name)
        self.proc_settings_threads = params.settings.threads
        self.runtime = runtime
        argv = runtime.command(params, python=engine.python)
        runtime_env = runtime.env(params)
        if run_dir is None:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            run_dir = get_settings().runs_dir / f"local-{stamp}-{os.getpid()}"
        run_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = run_dir / "engine.log"
        self._cwd = run_dir
        env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
        env.update(runtime_env)
        # Line-buffered output, so the log (and an error quoting it) is current when the engine dies.
        env.setdefault("PYTHONUNBUFFERED", "1")
        if spec.hf_token:
            env["HF_TOKEN"] = spec.hf_token  # for gated hub models; never recorded
        self._env = env
        self._argv = argv
        base_url = f"http://{client_host(params.host)}:{params.port}"
        self.deployed = DeployedEngine.serving(
            spec,
            params,
            target=self.kind,
            runtime=runtime.name,
            engine_version=engine.version,
            model_revision=spec.revision or model.revision,
            base_url=base_url,
            command=argv,
            env=redact(runtime_env),
            log_path=str(self.log_path),
            extra={
                "engine_path": engine.path,
                "engine_packages": engine.packages,
                **({"engine_build": engine.build_record()} if engine.build else {}),
                "host_env_changes": {"removed": [k for k in _DROP_ENV if k in os.environ]}
                | ({"PYTHONUNBUFFERED": "1"} if "PYTHONUNBUFFERED" not in os.environ else {}),
                "tokenizer": model.tokenizer,
                "model_source": model.source,
            },
        )
        self._tokenizer = model.tokenizer
        self._start()
        return Endpoint(
            base_url=base_url,
            served_model=params.served_model_name,
            tokenizer=model.tokenizer,
            engine_pids=self._engine_pids(),
        )

    def _engine_pids(self) -> list[int]:
        """The engine's process (its workers share its cgroup): the benchmark reads that cgroup's CPU and memory."""
        return [self.proc.pid] if self.proc is not None else []

    @property
    def endpoint(self) -> Endpoint:
        ep = super().endpoint
        return ep.model_copy(
            update={"tokenizer": getattr(self, "_tokenizer", None), "engine_pids": self._engine_pids()}
        )

    def _start(self) -> None:
        assert self.log_path is not None and self.deployed is not None
        self.progress.phase(
            f"Starting {self.deployed.runtime} {self.deployed.engine_version} on {self.deployed.base_url}"
        )
        self._log_fh = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        self._log_fh.write(f"# accelbench: starting {' '.join(redact_argv(self._argv))}\n".encode())
        self._log_fh.flush()
        with _LIVE_LOCK:
            _LIVE.add(self)
        self.torn_down = False
        self._started_mono = time.monotonic()
        self._started_uptime = uptime()  # the kernel log's clock, to find a trap line of this engine
        if self._client_cpus_before is not None:
            set_process_affinity(self._client_cpus_before)  # a restart: the engine inherits every core again
        self.proc = subprocess.Popen(
            self._argv,
            stdout=self._log_fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self._env,
            cwd=self._cwd,
            start_new_session=True,  # its own session and process group: teardown kills the whole group
        )
        self.pgid = self.proc.pid
        self._watch = ParentWatch.start(self.proc.pid)  # stops the engine even if accelbench is SIGKILLed
        self._place_client()
        self.exit_code = None
        self.deployed.pid = self.proc.pid
        self.deployed.started_at = time.time()

    def _place_client(self) -> None:
        """Keep the load generator (this process) off the cores the engine binds when some are free, and record
        how many they share either way: on a CPU engine, shared cores put the client's work into the
        latencies. The engine was started first, so it keeps the cores it asked for."""
        assert self.deployed is not None
        bind = self._env.get("VLLM_CPU_OMP_THREADS_BIND")
        threads = self.proc_settings_threads
        cpus = os.cpu_count() or 1
        if bind is None and self.deployed.runtime != "vllm-cpu":
            bind = "all" if threads is None else None  # llama.cpp: its threads run anywhere
        engine_cpus = engine_cpus_from_bind(bind, threads, cpus)
        before = allowed_cpus()
        moved = isolate_client(engine_cpus) if engine_cpus else None
        if moved is not None:
            self._client_cpus_before = before
        overlap = core_overlap(engine_cpus)
        self.deployed.extra["core_overlap"] = overlap.model_dump()
        # said once, beside the steps: as a phase it named the whole engine start-up after itself
        self.progress.note(overlap.sentence[:1].upper() + overlap.sentence[1:])

    # ---- readiness -----------------------------------------------------------------------------------

    def wait_ready(self, timeout: float | None = None) -> None:
        if self.proc is None or self.deployed is None:
            raise EngineError("Nothing is deployed yet.", hint="Call deploy() first.")
        timeout = timeout if timeout is not None else self.config.startup_timeout_s
        while True:
            try:
                self._wait_once(timeout)
                return
            except EngineError as exc:
                diag: Diagnosis | None = getattr(exc, "diagnosis", None)
                if diag is not None and self._restarts < self.startup_retries and self._try_fix(diag):
                    self._restarts += 1
                    self._start()
                    continue
                raise

    def _wait_once(self, timeout: float) -> None:
        assert self.proc is not None and self.deployed is not None and self.log_path is not None
        # vLLM answers /health; llama-cpp-python's server has no such route (404), its model list then says
        # the model is loaded. A runtime may name its own readiness path.
        paths = [getattr(self.runtime, "health_path", "/health"), "/v1/models"]
        url = self.deployed.base_url + paths[0]
        deadline = self._started_mono + timeout
        pos = 0
        # a probe connects for at most a second, and none starts once the run is cancelled: a cancel ends the
        # wait at once, not after the probes in flight time out
        with httpx.Client(timeout=httpx.Timeout(3.0, connect=1.0)) as client:
            while True:
                pos = self._forward_log(pos)
                rc = self.proc.poll()
                if rc is not None:
                    self.exit_code = rc
                    raise self._failure(f"{describe_exit(rc)} while starting")
                if self._answers(client, paths):
                    break
                if time.monotonic() > deadline:
                    raise self._failure(f"did not answer {url} within {timeout:.0f} s")
                if self.cancel.wait(0.5):
                    self._stop_process()
                    raise DeployCancelled("Cancelled while the engine was starting; it has been stopped.")
            self.deployed.ready_s = round(time.monotonic() - self._started_mono, 1)
            self._check_served_name(client)
        self.progress.phase(
            f"{self.deployed.runtime} ready after {self.deployed.ready_s:.0f} s, serving "
            f"{self.deployed.served_model!r}"
        )

    def _answers(self, client: httpx.Client, paths: list[str]) -> bool:
        assert self.deployed is not None
        for path in dict.fromkeys(paths):
            if self.cancel.is_set():
                return False
            try:
                code = client.get(self.deployed.base_url + path).status_code
            except httpx.HTTPError:
                return False  # not listening yet
            if code == 200:
                return True
            if code != 404:
                return False  # listening, not ready (e.g. 503 while loading)
        return False

    def _check_served_name(self, client: httpx.Client) -> None:
        assert self.deployed is not None
        try:
            resp = client.get(self.deployed.base_url + "/v1/models", timeout=10)
            url = self.deployed.base_url + "/v1/models"
            ids = [m.id for m in parse_answer(ModelsAnswer, resp.content, url).data]
        except (httpx.HTTPError, UserInputError):
            return  # /v1/models is a courtesy check; /health already answered
        if ids and self.deployed.served_model not in ids:
            raise self._failure(f"serves {ids}, not the expected model name {self.deployed.served_model!r}")

    def _forward_log(self, pos: int) -> int:
        """Pass new log lines to the progress sink (start-up is long; show what the engine is doing)."""
        assert self.log_path is not None
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(pos)
                data = fh.read(1 << 20)
        except OSError:
            return pos
        if not data:
            return pos
        cut = data.rfind(b"\n")
        if cut < 0:
            return pos
        for raw in data[: cut + 1].splitlines():
            if raw and not _is_noise(raw):
                self.progress.line(raw.decode("utf-8", errors="replace"))
        return pos + cut + 1

    def _try_fix(self, diag: Diagnosis) -> bool:
        if diag.failure.action != "clear-execstack" or self.fix is None or not self.fix(diag):
            return False

        assert self.deployed is not None and self.deployed.runtime is not None
        engine = get_engine(self.deployed.runtime, self.deployed.engine_version)
        paths = [Path(diag.groups["path"])] if "path" in diag.groups else []
        if not paths:
            paths = execstack.find_execstack_libraries(Path(engine.path))
        # through the module, so that a test's stand-in for the tool is the one called
        changed = execstack.clear_execstack(paths, engine=engine, progress=self.progress)
        return bool(changed)

    def _failure(self, what: str) -> EngineError:
        """Stop the engine, then build the error: what happened, the log's last lines, the known cause.

        A death by SIGILL also gets what the kernel log says of it (the library and instruction), attached
        to the error as ``isa_fault`` for the installer's rebuild."""
        assert self.deployed is not None and self.log_path is not None
        self._stop_process()
        lines = tail_file(self.log_path, 400)
        diag = diagnose(lines, exit_code=self.exit_code)
        name = f"{self.deployed.runtime} {self.deployed.engine_version}"
        quoted = "\n".join("  " + ln for ln in lines[-LOG_TAIL:]) or "  (the log is empty)"
        msg = f"The engine ({name}) {what}. Last lines of its log ({self.log_path}):\n{quoted}"
        fault: IsaFault | None = None
        engine_path = self.deployed.extra.get("engine_path")
        search = [Path(engine_path)] if engine_path else []
        if diag is not None and diag.key == "illegal-instruction":
            fault = find_isa_fault(self._started_uptime, search)
            msg += f"\nIllegal instruction: {fault.describe()}."
        elif diag is None and killed_by(self.exit_code) == signal.SIGSEGV:
            fault = find_tile_fault(
                self._started_uptime, compiled_groups(lines), search, cpu_flags=cpu_info().get("flags") or ()
            )
            if fault is not None:
                diag = Diagnosis(AMX_TILE_FAULT, fault.kernel_line or describe_exit(self.exit_code))
                msg += f"\nAMX tile fault: {fault.describe()}."
        if fault is not None and fault.kernel_line:
            msg += f"\nKernel log: {fault.kernel_line}"
        if diag:
            hint = diag.explain().replace("ENGINE", self.deployed.runtime or "ENGINE")
            if fault is not None and fault.group:
                hint += f"\nHere: `accelbench engine install {self.deployed.runtime} --without-isa {fault.group}`."
        else:
            hint = (
                "Try: read the full log above for the first error; check the model "
                "(`accelbench model list`), the engine (`accelbench engine list`), and the settings "
                "(max_model_len, kv_cache_space_gib); a slow machine may need a longer "
                "target.startup_timeout_s."
            )
        err = EngineError(msg, hint=hint)
        err.diagnosis = diag  # type: ignore[attr-defined]
        err.isa_fault = fault  # type: ignore[attr-defined]
        return err

    # ---- while running -------------------------------------------------------------------------------

    def check_alive(self, wait_s: float = 0.0) -> None:
        """Raise the diagnosed failure if the engine has exited; ``wait_s`` gives a dying engine (one whose
        request just failed) that long to finish exiting."""
        if self.proc is None:
            return
        try:
            rc = self.proc.wait(wait_s) if wait_s > 0 else self.proc.poll()
        except subprocess.TimeoutExpired:
            rc = None
        if rc is not None:
            self.exit_code = rc
            raise self._failure(f"{describe_exit(rc)} while serving")

    def logs(self, tail: int | None = 200) -> str:
        if self.log_path is None:
            return ""
        return "\n".join(tail_file(self.log_path, tail, skip_noise=False))

    def log_size(self) -> int:
        """Current size of the log, in bytes (a window marker for the ISA trace)."""
        try:
            return self.log_path.stat().st_size if self.log_path else 0
        except OSError:
            return 0

    # ---- teardown ------------------------------------------------------------------------------------

    def _stop_process(self) -> None:
        with self._lock:
            proc = self.proc
            if proc is not None:
                if proc.poll() is None:
                    kill_process_tree(proc, pgid=self.pgid)
                else:
                    kill_process_tree(proc, grace_s=2.0, pgid=self.pgid)  # what the dead leader left behind
                if self.exit_code is None:
                    self.exit_code = proc.returncode
            if self._watch is not None:
                self._watch.disarm()
                self._watch = None
            if self._log_fh is not None:
                with contextlib.suppress(OSError):
                    self._log_fh.close()
                self._log_fh = None

    def teardown(self) -> None:
        if self.torn_down:
            return
        self._stop_process()
        self.torn_down = True
        if self._client_cpus_before is not None:
            set_process_affinity(
                self._client_cpus_before
            )  # the engine is gone: its cores are the client's again
            self._client_cpus_before = None
        with _LIVE_LOCK:
            _LIVE.discard(self)
