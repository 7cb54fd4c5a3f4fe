"""One stored run as every view shows it: ``accelbench runs show``, the run page and the API's run resource each
render the ``RunView`` that ``run_view`` assembles once from the store (the run, its results and per-cell
aggregates with their intervals, the comparison's findings, the headline and the SLO each cell is judged by, the
grouped failures and warnings, the environment and, when asked, the server's telemetry), so they cannot drift
apart in what they read or how they judge it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from accelbench.domain.bench_summary import TelemetrySample
from accelbench.domain.capacity import CapacitySLO
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.errors import AccelbenchError
from accelbench.redact import redact
from accelbench.report.compare_runs import compare_runs
from accelbench.report.failures import RunWarnings, run_warnings
from accelbench.report.findings import Finding
from accelbench.report.headline import CellSLO, Headline, Key, SLOChoice, headline_for
from accelbench.report.tables import CellAggregate, aggregate_results
from accelbench.store import Store
from accelbench.store.owner import recover_dead_owners
from accelbench.telemetry.host import describe_environment


class RunViewRequest(BaseModel):
    """Which run to show and what its view needs."""

    run_ref: str = Field(description="A run id or an unambiguous prefix.")
    slo: CapacitySLO | None = Field(
        None, description="Judge every cell by this SLO instead of the run's own."
    )
    public: bool = Field(
        False, description="Secrets masked in the run's spec, environment and extra (API, pages)."
    )
    telemetry: bool = Field(False, description="Also read the server metrics scraped during the run.")
    findings: bool = Field(True, description="Also compare the run with itself: its findings.")
    headline: bool = Field(
        True, description="Also judge the run: the headline and each cell against its SLO."
    )
    keep_going: bool = Field(
        False, description="A comparison or headline that cannot be computed is noted, not raised (the page)."
    )
    recover: bool = Field(False, description="First mark runs whose process died as interrupted (the CLI).")


class RunAnswer(BaseModel):
    """What a run answers: its cells, the comparison's findings, the headline (report/headline.py), the SLO it
    is judged by and each cell against it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    cells: list[CellAggregate]
    findings: list[Finding] = Field(default_factory=list)
    findings_error: str | None = None
    headline: Headline | None = None
    choice: SLOChoice | None = None
    evaluation: dict[Key, CellSLO] = Field(default_factory=dict)

    @property
    def judged(self) -> dict[Key, CellSLO] | None:
        """Each cell against the run's SLO, None when the run has none."""
        return self.evaluation if self.choice is not None else None


class RunView(RunAnswer):
    """One stored run as the CLI, the pages and the API show it."""

    run: RunInfo
    results: list[ResultInfo]
    samples: list[TelemetrySample] = Field(default_factory=list)
    warnings: RunWarnings
    environment: list[tuple[str, str]] = Field(default_factory=list)


def public_run(run: RunInfo) -> RunInfo:
    """The run as the API and the pages show it: secrets masked, whatever a record holds."""
    return run.model_copy(
        update={
            "spec": redact(run.spec),
            "environment": redact(run.environment),
            "extra": redact(run.extra),
            "progress": redact(run.progress),
        }
    )


def run_answer(
    store: Store,
    run: RunInfo,
    results: list[ResultInfo],
    given: CapacitySLO | None = None,
    *,
    findings: bool = True,
    headline: bool = True,
    keep_going: bool = False,
) -> RunAnswer:
    """The run's cells, findings and headline, judged by ``given`` (an SLO) when there is one, else by its own.
    ``findings``/``headline`` false: the comparison or the judgement is left out. ``keep_going``: a comparison or headline that fails is noted in ``findings_error`` (the findings computed
    before it stay), not raised."""
    answer = RunAnswer(cells=aggregate_results(results))
    if not results or not (findings or headline):
        return answer
    try:
        cmp = compare_runs(store, [run.id], min_runs=1)
        answer.findings = list(cmp.findings)
        if headline:
            answer.headline, slos, answer.evaluation = headline_for(
                store, cmp, answer.cells, results, [run], given=given
            )
            answer.choice = slos.get(run.id)
    except AccelbenchError as exc:
        if not keep_going:
            raise
        answer.findings_error = exc.message
        answer.headline, answer.choice, answer.evaluation = None, None, {}
    return answer


def run_view(store: Store, request: RunViewRequest) -> RunView:
    """The one view of a stored run (see the module's docstring)."""
    if request.recover:
        recover_dead_owners(store)  # a run whose process was killed outright is not "benchmarking" any more
    run = store.get_run(request.run_ref)
    if request.public:
        run = public_run(run)
    results = store.get_results(run.id)
    answer = run_answer(
        store,
        run,
        results,
        request.slo,
        findings=request.findings,
        headline=request.headline,
        keep_going=request.keep_going,
    )
    return RunView(
        **dict(answer),
        run=run,
        results=results,
        samples=store.get_telemetry(run.id) if request.telemetry else [],
        warnings=run_warnings(results),
        environment=describe_environment(run.environment) if run.environment else [],
    )


def run_view_json(view: RunView) -> dict[str, Any]:
    """``runs show --format json``: the run, headline, SLO, cells, each cell against the SLO and the results."""
    return {
        "run": view.run.model_dump(mode="json"),
        "headline": view.headline.as_dict() if view.headline is not None else None,
        "slo": (
            {"source": view.choice.source, **view.choice.slo.model_dump(mode="json")}
            if view.choice is not None
            else None
        ),
        "cells": [c.model_dump(mode="json") for c in view.cells],
        "cells_slo": [asdict(e) for e in view.evaluation.values()],
        "results": [r.model_dump(mode="json", exclude={"summary"}) for r in view.results],
    }
