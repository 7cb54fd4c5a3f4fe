"""The one run lifecycle: the final-status policy as one table, then every fault at every hook of a scripted
target ending one way (status, teardown once, cost, interrupts re-raised after the run is recorded)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from accelbench.bench.sweep import SweepOutcome
from accelbench.deploy.orchestrator import create_run, execute_run
from accelbench.deploy.target import DeployCancelled, DeployedEngine, Held, Target, settle
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.progress import Progress, TerminatedBySignal
from accelbench.domain.run import EndpointTarget, RunSpec, RunStatus, SweepSpec
from accelbench.errors import EngineError
from accelbench.store import Store

S = RunStatus


@pytest.mark.parametrize(
    ("status", "problems", "final"),
    [
        (S.completed, [], S.completed),
        (S.completed, ["node still running"], S.failed),  # the figures stand, but something may be billed
        (S.failed, ["node still running"], S.failed),
        (S.cancelled, ["node still running"], S.cancelled),  # EC2 used to turn this into failed
        (S.interrupted, ["node still running"], S.interrupted),
        (S.cancelled, [], S.cancelled),
        (S.interrupted, [], S.interrupted),
    ],
)
def test_final_status_policy(status: RunStatus, problems: list[str], final: RunStatus) -> None:
    got, error = settle(status, "why" if status != S.completed else None, problems)
    assert got == final
    if problems:
        assert error is not None and "Teardown failed: node still running" in error
    else:
        assert error == ("why" if status != S.completed else None)


# ---- the one lifecycle, driven through a scripted target ----------------------------------------------------


class Scripted(Target):
    """A target that records which hooks ran and raises ``fault`` in the hook named ``at``."""

    kind = "endpoint"
    measured_from_here = False  # no answer check over HTTP: nothing here serves

    def __init__(self, config: Any = None, *, at: str = "", fault: BaseException | None = None,
                 teardown_fault: Exception | None = None, **context: Any) -> None:  # fmt: skip
        super().__init__(config, **context)
        self.at, self.fault, self.teardown_fault = at, fault, teardown_fault
        self.calls: list[str] = []

    def _hook(self, name: str) -> None:
        self.calls.append(name)
        if self.at == name and self.fault is not None:
            raise self.fault

    def deploy(self, spec: RunSpec, *, run_dir: Path | None = None) -> Endpoint:
        self._hook("deploy")
        self.deployed = DeployedEngine(
            target="endpoint", model=spec.model, served_model="m", base_url="http://x"
        )
        return self.endpoint

    def wait_ready(self, timeout: float | None = None) -> None:
        self._hook("wait_ready")

    def measure(
        self, store: Any, run_id: str, endpoint: Endpoint, sweep: SweepSpec, *, events: Progress
    ) -> Any:
        self._hook("measure")
        return SweepOutcome(run_id=run_id, status=RunStatus.completed, error=None, cells_total=0)

    def logs(self, tail: int | None = 200) -> str:
        return ""

    def teardown(self) -> None:
        self.calls.append("teardown")
        if self.teardown_fault is not None:
            raise self.teardown_fault

    def held(self) -> Held | None:
        return Held("m8i.2xlarge")

    def record(self) -> dict[str, Any]:
        return {"calls": list(self.calls)}


def _run(store: Store, **script: Any) -> tuple[Any, Scripted, BaseException | None]:
    spec = RunSpec(
        model="org/model", target=EndpointTarget(base_url="http://x"), sweep=SweepSpec(input_lens=[8])
    )
    run = create_run(store, spec)
    made: list[Scripted] = []

    def factory(config: Any, **context: Any) -> Scripted:
        made.append(Scripted(config, **script, **context))
        return made[0]

    clock = iter([100.0, 100.0 + 360.0]).__next__
    raised: BaseException | None = None
    try:
        execute_run(store, run.id, target_factory=factory, clock=clock, cancel_status=RunStatus.interrupted)
    except BaseException as exc:  # the interrupt types are re-raised once the run is recorded
        raised = exc
    return store.get_run(run.id), made[0], raised


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_every_hook_in_order_then_cost_and_record(store: Store) -> None:
    run, target, raised = _run(store)
    assert raised is None and run.status == S.completed, run.error
    assert target.calls == ["deploy", "wait_ready", "measure", "teardown"]
    assert run.extra["cost"]["held_s"] == 360.0 and run.extra["cost"]["usd"] > 0
    assert run.extra["endpoint"] == {"calls": ["deploy", "wait_ready", "measure", "teardown"]}
    assert run.environment["engine_host"] == "remote" and "cpu" not in run.environment


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("at", ["deploy", "wait_ready", "measure"])
@pytest.mark.parametrize(
    ("fault", "status", "reraised", "message"),
    [
        (KeyboardInterrupt(), S.interrupted, True, "interrupted (Ctrl-C)"),
        (TerminatedBySignal(signal.SIGTERM), S.interrupted, True, "terminated by signal SIGTERM"),
        (DeployCancelled("The run was cancelled."), S.interrupted, False, "The run was cancelled."),
        (EngineError("the engine died"), S.failed, False, "the engine died"),
        (RuntimeError("boom"), S.failed, False, "RuntimeError: boom"),
    ],
)
def test_one_outcome_per_fault_wherever_it_happens(
    store: Store, at: str, fault: BaseException, status: RunStatus, reraised: bool, message: str
) -> None:
    run, target, raised = _run(store, at=at, fault=fault)
    assert run.status == status and message in (run.error or "")
    assert target.calls[-1] == "teardown" and target.calls.count("teardown") == 1  # always, once
    assert (raised is fault) == reraised
    assert run.extra["cost"]["held_s"] == 360.0  # what was held is paid for, however the run ended


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_teardown_that_raises_is_recorded_and_fails_a_completed_run(store: Store) -> None:
    run, _, raised = _run(store, teardown_fault=OSError("node still draining"))
    assert raised is None
    assert run.status == S.failed and "Teardown failed: OSError: node still draining" in (run.error or "")
