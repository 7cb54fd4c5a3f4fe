"""The local target with a real child process (the toy engine): command and environment exactly as the
runtime builds them, readiness, failures quoted and diagnosed, a fix then a restart, and teardown that leaves
no process behind on every way out (normal end, error, SIGTERM, Ctrl-C, interpreter exit)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from accelbench.deploy import local, proctree
from accelbench.deploy.answer_check import check_endpoint
from accelbench.deploy.local import LocalProcessTarget
from accelbench.deploy.proctree import processes_in_group
from accelbench.domain.diagnosis import Diagnosis
from accelbench.domain.run import EngineSettings, EngineSpec, LocalTarget, RunSpec
from accelbench.errors import EngineError, GuardError
from tests.unit.deploy.conftest import alive_pids

pytestmark = pytest.mark.usefixtures("toy_engine_installed")


def spec_for(model: Path, *extra: str, timeout: float = 60, **settings: object) -> RunSpec:
    return RunSpec(
        model=str(model),
        engine=EngineSpec(
            name="toy", version="1.0", settings=EngineSettings(extra_args=list(extra), **settings)
        ),
        target=LocalTarget(startup_timeout_s=timeout),
    )


def test_serves_with_the_runtimes_exact_command_and_env_then_leaves_nothing(
    hf_model_dir: Path, pid_dir: Path, tmp_path: Path
) -> None:
    spec = spec_for(hf_model_dir, "--children", "2", "--escape", "--pid-dir", str(pid_dir))
    with LocalProcessTarget(spec.target) as target:  # type: ignore[arg-type]
        endpoint = target.deploy(spec, run_dir=tmp_path / "run")
        target.wait_ready()
        deployed = target.deployed
        assert deployed is not None
        # the served name the load generator gets is the one on the engine's command line
        argv = deployed.command
        assert argv[argv.index("--served-model-name") + 1] == endpoint.served_model == "toy-model-1b"
        assert argv[argv.index("--model") + 1] == str(hf_model_dir.resolve())
        assert argv[0] == sys.executable
        assert deployed.env == {"TOY_SETTING": "on"}
        assert endpoint.tokenizer == str(hf_model_dir.resolve())
        assert deployed.ready_s is not None
        log = target.logs()
        assert "env TOY_SETTING=on" in log and "listening on" in log
        assert check_endpoint(endpoint).passed
        pgid = target.pgid
        assert pgid is not None
        # 1 server + 2 children + 1 escaped grandchild are running
        deadline = time.monotonic() + 10
        while len(alive_pids(pid_dir)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(alive_pids(pid_dir)) == 4
    assert alive_pids(pid_dir) == []
    assert processes_in_group(pgid) == []
    assert target.torn_down


def test_teardown_escalates_to_sigkill(
    hf_model_dir: Path, pid_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proctree, "TERM_GRACE_S", 1.0)
    spec = spec_for(hf_model_dir, "--ignore-term", "--children", "1", "--pid-dir", str(pid_dir))
    target = LocalProcessTarget(spec.target)  # type: ignore[arg-type]
    target.deploy(spec)
    target.wait_ready()
    t0 = time.monotonic()
    target.teardown()
    assert time.monotonic() - t0 < 10
    assert alive_pids(pid_dir) == []
    assert target.exit_code == -signal.SIGKILL
    target.teardown()  # twice is harmless


def test_startup_failure_quotes_the_log_and_names_the_fix(hf_model_dir: Path, pid_dir: Path) -> None:
    line = "ImportError: /opt/x/libfoo.so.1: cannot enable executable stack as shared object requires: Invalid argument"
    spec = spec_for(hf_model_dir, "--fail-with", line, "--children", "1", "--pid-dir", str(pid_dir))
    with LocalProcessTarget(spec.target) as target:  # type: ignore[arg-type]
        target.deploy(spec)
        with pytest.raises(EngineError) as err:
            target.wait_ready()
    msg = str(err.value)
    assert "exited with code 1 while starting" in msg
    assert "loading weights 3/3" in msg and line in msg  # the log's last lines, quoted
    assert "patchelf --clear-execstack /opt/x/libfoo.so.1" in (err.value.hint or "")
    assert "accelbench engine fix-execstack toy" in (err.value.hint or "")
    assert alive_pids(pid_dir) == []


def test_known_fix_is_applied_when_allowed_and_the_engine_restarts(
    hf_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fixed = tmp_path / "fixed"
    line = f"ImportError: {tmp_path}/libbar.so: cannot enable executable stack as shared object requires"
    spec = spec_for(hf_model_dir, "--fail-with", line, "--fail-unless-file", str(fixed))
    asked: list[Diagnosis] = []

    def fake_clear(paths: list[Path], **kw: object) -> list[Path]:
        assert paths == [tmp_path / "libbar.so"]
        fixed.touch()
        return paths

    monkeypatch.setattr("accelbench.deploy.execstack.clear_execstack", fake_clear)

    def allow(d: Diagnosis) -> bool:
        asked.append(d)
        return True

    with LocalProcessTarget(spec.target, fix=allow) as target:  # type: ignore[arg-type]
        target.deploy(spec)
        target.wait_ready()
        assert "listening on" in target.logs()
    assert [d.key for d in asked] == ["execstack"]


def test_refused_fix_keeps_the_error(hf_model_dir: Path, tmp_path: Path) -> None:
    line = f"ImportError: {tmp_path}/libbar.so: cannot enable executable stack as shared object requires"
    spec = spec_for(hf_model_dir, "--fail-with", line)
    with LocalProcessTarget(spec.target, fix=lambda d: False) as target:  # type: ignore[arg-type]
        target.deploy(spec)
        with pytest.raises(EngineError, match="cannot enable executable stack"):
            target.wait_ready()


def test_timeout_stops_the_engine(hf_model_dir: Path, pid_dir: Path) -> None:
    spec = spec_for(hf_model_dir, "--startup-s", "60", "--pid-dir", str(pid_dir), timeout=2)
    with LocalProcessTarget(spec.target) as target:  # type: ignore[arg-type]
        target.deploy(spec)
        with pytest.raises(EngineError) as err:
            target.wait_ready()
        assert "within 2 s" in str(err.value)
        assert "startup_timeout_s" in (err.value.hint or "")
        assert alive_pids(pid_dir) == []


def test_death_while_serving_is_reported(hf_model_dir: Path) -> None:
    spec = spec_for(hf_model_dir, "--die-after", "3")
    with LocalProcessTarget(spec.target) as target:  # type: ignore[arg-type]
        target.deploy(spec)
        target.wait_ready()
        target.check_alive()  # alive at first
        deadline = time.monotonic() + 30
        while target.proc is not None and target.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(EngineError) as err:
            target.check_alive()
    assert "exited with code 3 while serving" in str(err.value)
    assert "fatal error" in str(err.value)


def test_death_by_sigill_while_starting_is_named_with_its_fix(hf_model_dir: Path) -> None:
    spec = spec_for(hf_model_dir, "--sigill-at", "start")
    with LocalProcessTarget(spec.target) as target:  # type: ignore[arg-type]
        target.deploy(spec)
        with pytest.raises(EngineError) as err:
            target.wait_ready()
    msg = str(err.value)
    assert "exited with code -4 (killed by SIGILL" in msg and "while starting" in msg
    assert "Illegal instruction: " in msg
    assert "accelbench engine install toy --without-isa GROUP" in (err.value.hint or "")
    assert err.value.diagnosis.key == "illegal-instruction"  # type: ignore[attr-defined]
    assert err.value.isa_fault is not None  # type: ignore[attr-defined]


def test_death_by_sigill_on_the_first_request_is_diagnosed(hf_model_dir: Path) -> None:
    """What llama.cpp's AMX build did: ready, listed its model, then died on the first completion."""
    spec = spec_for(hf_model_dir, "--sigill-at", "request")
    with LocalProcessTarget(spec.target) as target:  # type: ignore[arg-type]
        endpoint = target.deploy(spec)
        target.wait_ready()
        with pytest.raises(EngineError):
            check_endpoint(endpoint)
        with pytest.raises(EngineError) as err:
            target.check_alive(wait_s=5.0)
    assert "killed by SIGILL" in str(err.value) and "while serving" in str(err.value)
    assert "running an illegal instruction" in str(err.value)  # the log's last lines
    assert err.value.diagnosis.key == "illegal-instruction"  # type: ignore[attr-defined]


def _segv_on_first_request(hf_model_dir: Path) -> EngineError:
    spec = spec_for(hf_model_dir, "--segv-amx-build")
    with LocalProcessTarget(spec.target) as target:  # type: ignore[arg-type]
        endpoint = target.deploy(spec)
        target.wait_ready()
        with pytest.raises(EngineError):
            check_endpoint(endpoint)
        with pytest.raises(EngineError) as err:
            target.check_alive(wait_s=5.0)
    return err.value


def test_an_amx_build_killed_by_a_general_protection_fault_is_named_with_its_fix(
    hf_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What llama.cpp's AMX build did on another hypervisor: ldtilecfg faulted, SIGSEGV, and the kernel logged
    a general protection fault for it (here the kernel's line is given, as this CPU logged it, at the time of
    the death)."""
    from accelbench.deploy import isa_fault

    def log() -> list[str]:
        now = isa_fault.uptime() or 0.0
        return [
            f"[{now:12.6f}] traps: python[4242] general protection fault ip:7f2dbfc7c193 sp:7f2d853c0980 error:0"
        ]

    monkeypatch.setattr(isa_fault, "kernel_log", log)
    err = _segv_on_first_request(hf_model_dir)
    assert "killed by SIGSEGV" in str(err) and "AMX tile fault: a general protection fault" in str(err)
    assert "Kernel log: " in str(err) and "general protection fault ip:7f2dbfc7c193" in str(err)
    assert err.diagnosis.key == "amx-tile-fault"  # type: ignore[attr-defined]
    assert err.isa_fault.group == "amx"  # type: ignore[attr-defined]
    assert "--without-isa amx" in (err.hint or "")


def test_an_ordinary_segfault_is_not_called_an_instruction_set_fault(
    hf_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelbench.deploy import isa_fault

    monkeypatch.setattr(isa_fault, "kernel_log", lambda: [])  # readable, and no fault logged for it
    err = _segv_on_first_request(hf_model_dir)
    assert "killed by SIGSEGV" in str(err) and "AMX tile fault" not in str(err)
    assert err.diagnosis is None  # type: ignore[attr-defined]
    assert err.isa_fault is None  # type: ignore[attr-defined]


def test_secrets_reach_the_engine_but_are_not_recorded(hf_model_dir: Path) -> None:
    spec = spec_for(hf_model_dir, env={"MY_API_KEY": "s3cret", "PLAIN": "x"})
    spec.hf_token = "hf_abc"
    with LocalProcessTarget(spec.target) as target:  # type: ignore[arg-type]
        target.deploy(spec)
        target.wait_ready()
        assert target.deployed is not None
        assert target.deployed.env == {"TOY_SETTING": "on", "MY_API_KEY": "***", "PLAIN": "x"}
        assert target._env["HF_TOKEN"] == "hf_abc" and target._env["MY_API_KEY"] == "s3cret"
        assert "hf_abc" not in target.deployed.model_dump_json()


def test_guard_errors_come_from_the_runtime(hf_model_dir: Path) -> None:
    spec = spec_for(hf_model_dir, max_num_seqs=13)
    with LocalProcessTarget(spec.target) as target, pytest.raises(GuardError, match="unlucky"):  # type: ignore[arg-type]
        target.deploy(spec)
    assert target.proc is None


def test_fixed_port_is_used(hf_model_dir: Path) -> None:
    port = local.free_port()
    spec = spec_for(hf_model_dir)
    spec.target = LocalTarget(port=port)
    with LocalProcessTarget(spec.target) as target:  # type: ignore[arg-type]
        ep = target.deploy(spec)
        target.wait_ready()
        assert ep.base_url == f"http://127.0.0.1:{port}"


_DRIVER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from tests.unit.deploy.conftest import ToyRuntime, TOY_RECIPE
    from accelbench.runtimes.runtime import RUNTIMES
    from accelbench.deploy import engines
    from accelbench.deploy.local import LocalProcessTarget, handle_termination_signals
    from accelbench.domain.run import RunSpec
    RUNTIMES.add("toy", ToyRuntime())
    engines.ENGINES.add("toy", TOY_RECIPE)
    spec = RunSpec.model_validate_json(Path(sys.argv[1]).read_text())
    mode = sys.argv[2]
    if mode == "atexit":
        t = LocalProcessTarget(spec.target)
        t.deploy(spec)
        t.wait_ready()
        Path(sys.argv[3]).write_text("ready")
        while not Path(sys.argv[3] + ".go").exists():
            time.sleep(0.05)
        sys.exit(0)  # no teardown: the atexit hook must do it
    with handle_termination_signals(), LocalProcessTarget(spec.target) as t:
        t.deploy(spec)
        t.wait_ready()
        Path(sys.argv[3]).write_text("ready")
        time.sleep(120)
    """
)


@pytest.mark.parametrize(
    ("mode", "sig"),
    [("signal", signal.SIGTERM), ("signal", signal.SIGINT), ("atexit", None), ("signal", signal.SIGKILL)],
)
def test_no_orphans_when_accelbench_itself_is_stopped(
    hf_model_dir: Path, pid_dir: Path, tmp_path: Path, mode: str, sig: int | None
) -> None:
    spec = spec_for(hf_model_dir, "--children", "2", "--pid-dir", str(pid_dir))
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    ready = tmp_path / "ready"
    root = str(Path(__file__).resolve().parents[3])
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER.format(root=root), str(spec_file), mode, str(ready)],
        env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert driver.poll() is None, "the driver died before the engine was ready"
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert len(alive_pids(pid_dir)) == 3
        if sig is not None:
            driver.send_signal(sig)
        else:
            Path(str(ready) + ".go").touch()
        driver.wait(timeout=40)
    finally:
        if driver.poll() is None:
            driver.kill()
    # after a SIGKILL nothing in accelbench runs: the watcher started with the engine stops it
    deadline = time.monotonic() + (20 if sig == signal.SIGKILL else 5)
    while alive_pids(pid_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive_pids(pid_dir) == []


def test_a_disarmed_watch_leaves_the_process_alone(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        watch = proctree.ParentWatch.start(sleeper.pid, grace_s=1)
        watch.disarm()
        assert watch.proc.returncode == 0
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_kill_process_tree_finds_members_whose_leader_is_gone(pid_dir: Path, tmp_path: Path) -> None:
    # a group leader that exits at once, leaving a child in its group
    child = tmp_path / "child.py"
    child.write_text(
        "import os, sys, time\n"
        "open(os.path.join(sys.argv[1], f'{os.getpid()}.pid'), 'w').close()\n"
        "time.sleep(60)\n"
    )
    code = f"import subprocess, sys; subprocess.Popen([sys.executable, {str(child)!r}, {str(pid_dir)!r}])"
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    leader.wait()
    deadline = time.monotonic() + 10
    while not alive_pids(pid_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive_pids(pid_dir)
    proctree.kill_process_tree(leader, grace_s=1, pgid=leader.pid)
    assert alive_pids(pid_dir) == []


def test_the_load_generator_leaves_the_engines_cores_and_the_overlap_is_recorded(hf_model_dir: Path) -> None:
    """An engine bound to CPU 0 (VLLM_CPU_OMP_THREADS_BIND): this process, the load generator, moves to the other
    cores while the engine runs and gets them back at teardown; an engine on every core shares them all, which
    the run records."""
    before = os.sched_getaffinity(0)
    bound = spec_for(hf_model_dir)
    bound.engine.settings.env["VLLM_CPU_OMP_THREADS_BIND"] = "0"
    try:
        with LocalProcessTarget(bound.target) as target:  # type: ignore[arg-type]
            target.deploy(bound)
            target.wait_ready()
            assert target.deployed is not None
            overlap = target.deployed.extra["core_overlap"]
            assert overlap["engine_cpus"] == [0]
            if len(before) >= 2 and 0 in before:
                assert os.sched_getaffinity(0) == before - {0} and overlap["shared"] == 0
            else:  # nothing free to move to: said, not changed
                assert os.sched_getaffinity(0) == before
        assert os.sched_getaffinity(0) == before
        everywhere = spec_for(hf_model_dir)
        with LocalProcessTarget(everywhere.target) as target:  # type: ignore[arg-type]
            target.deploy(everywhere)
            target.wait_ready()
            assert target.deployed is not None
            shared = target.deployed.extra["core_overlap"]
            assert shared["shared"] == len(before) and "share" in shared["sentence"]
            assert os.sched_getaffinity(0) == before
    finally:
        os.sched_setaffinity(0, before)


def test_the_core_sharing_sentence_is_a_note_not_the_name_of_the_engine_start(hf_model_dir: Path) -> None:
    """While the engine starts, the step is called what it is ("Starting toy ..."); that the load generator shares
    the engine's cores is said once as a note, not as the label of that step."""
    from accelbench.domain.progress import Progress

    class Recorder(Progress):
        def __init__(self) -> None:
            self.phases: list[str] = []
            self.notes: list[str] = []

        def phase(self, message: str) -> None:
            self.phases.append(message)

        def note(self, text: str) -> None:
            self.notes.append(text)

    seen = Recorder()
    spec = spec_for(hf_model_dir)
    with LocalProcessTarget(spec.target, progress=seen) as target:  # type: ignore[arg-type]
        target.deploy(spec)
        target.wait_ready()
        assert target.deployed is not None
        sentence = target.deployed.extra["core_overlap"]["sentence"]
    assert [n.lower() for n in seen.notes] == [sentence.lower()]
    assert not any(sentence.lower() in p.lower() for p in seen.phases)
    starting = next(i for i, p in enumerate(seen.phases) if p.startswith("Starting toy"))
    assert "ready after" in seen.phases[starting + 1]  # the start-up's step runs until the engine answers
