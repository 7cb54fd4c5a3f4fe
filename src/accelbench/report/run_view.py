"""One stored run as every view shows it: ``accelbench runs show``, the run page, the API's run resource and the
HTML and Markdown reports each render the ``RunView`` read here once from the store (the run, its results and
per-cell aggregates with their intervals, the comparison's findings, the headline and the SLO each cell is judged
by, the grouped failures and warnings, the environment and, when asked, the server's telemetry, the per-request
records and the hourly price), so they cannot drift apart in what they read or how they judge it.

The use case the shells call is ``services/run_view.py`` (``run_view``: which run, secrets masked or not). The
reading lives here, below ``deploy``, because every orchestrated run writes its report files
(``deploy/run_files.py`` -> ``report/files.py``) from the same views.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from accelbench.domain.bench_summary import TelemetrySample
from accelbench.domain.capacity import CapacitySLO
from accelbench.domain.instance_types import PriceTier
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.errors import AccelbenchError
from accelbench.report.compare_runs import compare_runs, load_runs
from accelbench.report.comparison import HourlyPrice, RunData
from accelbench.report.failures import RunWarnings, run_warnings
from accelbench.report.findings import Finding
from accelbench.report.headline import CellSLO, Headline, Key, SLOChoice, headline_for
from accelbench.report.tables import CellAggregate, aggregate_results
from accelbench.telemetry.host import describe_environment

if TYPE_CHECKING:
    from accelbench.store.repo import Store


class ViewParts(BaseModel):
    """Which parts of a run's view to read and judge besides the run, its results and cells."""

    slo: CapacitySLO | None = Field(
        None, description="Judge every cell by this SLO instead of the run's own."
    )
    telemetry: bool = Field(False, description="Also read the server metrics scraped during the run.")
    findings: bool = Field(True, description="Also compare the run with itself: its findings.")
    headline: bool = Field(
        True, description="Also judge the run: the headline and each cell against its SLO."
    )
    keep_going: bool = Field(
        False, description="A comparison or headline that cannot be computed is noted, not raised (the page)."
    )
    records: bool = Field(
        False,
        description="Also read every result's per-request records (the report's CDFs and SLO attainment).",
    )


#: what a report reads of each run: the records and the telemetry; the comparison, findings and headline are
#: made across the runs it covers (``report/document.py`` ``build_report``)
REPORT_PARTS = ViewParts(telemetry=True, findings=False, headline=False, records=True)


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
    """One stored run as the CLI, the pages, the API and the reports show it."""

    run: RunInfo
    results: list[ResultInfo]
    samples: list[TelemetrySample] = Field(default_factory=list)
    warnings: RunWarnings
    environment: list[tuple[str, str]] = Field(default_factory=list)
    #: every result's per-request records by result id, when asked (``ViewParts.records``)
    records: dict[int, list[RequestRecord]] = Field(default_factory=dict)
    #: the hourly price its cost is computed from, or why there is none (a report's views)
    price: HourlyPrice | None = None
    price_note: str | None = None

    @classmethod
    def of(
        cls,
        data: RunData,
        answer: RunAnswer | None = None,
        *,
        samples: list[TelemetrySample] | None = None,
        records: dict[int, list[RequestRecord]] | None = None,
    ) -> RunView:
        """The view of a run already read (``read_view``'s, or one a test built from known numbers): its answer
        (else its cells alone), warnings and environment, and the telemetry and records read of it, if any."""
        run, results = data.run, data.results
        return cls(
            **dict(answer or RunAnswer(cells=aggregate_results(results))),
            run=run,
            results=results,
            samples=samples or [],
            warnings=run_warnings(results),
            environment=describe_environment(run.environment) if run.environment else [],
            records=records or {},
            price=data.price,
            price_note=data.price_note,
        )

    def run_data(self) -> RunData:
        """The run, its results and price as a comparison takes them."""
        return RunData(run=self.run, results=self.results, price=self.price, price_note=self.price_note)


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
    ``findings``/``headline`` false: the comparison or the judgement is left out. ``keep_going``: a comparison
    or headline that fails is noted in ``findings_error`` (the findings computed before it stay), not raised."""
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


def read_view(store: Store, data: RunData, parts: ViewParts) -> RunView:
    """The view of a run whose results (and price, for a report) are already read: the parts asked for read
    from the store and judged."""
    run, results = data.run, data.results
    answer = run_answer(
        store,
        run,
        results,
        parts.slo,
        findings=parts.findings,
        headline=parts.headline,
        keep_going=parts.keep_going,
    )
    return RunView.of(
        data,
        answer,
        samples=store.get_telemetry(run.id) if parts.telemetry else None,
        records={r.id: store.get_request_records(r.id) for r in results} if parts.records else None,
    )


def report_views(
    store: Store, refs: Sequence[str], *, tier: PriceTier = PriceTier.on_demand
) -> list[RunView]:
    """One view per run a report covers (ids or unambiguous prefixes, in the order given), each with its price
    in ``tier``, per-request records and telemetry. Raises UserInputError when a run is named twice or has no
    results yet (``load_runs``)."""
    return [read_view(store, data, REPORT_PARTS) for data in load_runs(store, refs, tier=tier, min_runs=1)]
