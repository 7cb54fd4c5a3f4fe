"""What a report shows, gathered once from the runs' views (``report/run_view.py``: the ``RunView`` that ``runs
show``, the run page and the API render too; this module reads no store): the headline (the answer,
``report/headline.py``), the comparison, the per-cell aggregates the tables and charts show, the per-request
latencies behind the CDFs, the server telemetry over time, and predicted vs measured.

``report.html`` and ``report.md`` both render a ``ReportData``, so the two never disagree. Both open with the
headline, then show, in this order: the percentile table (with SLO attainment and goodput when an SLO is
known), the latency-throughput chart, telemetry with each cell's window marked, predicted vs measured, and the
environment (``REPORT_SECTIONS``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accelbench.domain.bench_summary import TelemetrySample
from accelbench.domain.capacity import CapacitySLO
from accelbench.domain.instance_types import PriceTier
from accelbench.domain.plan_query import PlanQuery
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.results import ResultInfo
from accelbench.domain.run import EngineSettings
from accelbench.errors import AccelbenchError
from accelbench.modelspec import load_model_spec
from accelbench.plan import CalibrationSet, PlanContext, estimate, estimate_local
from accelbench.plan.measured_error import error_sentence
from accelbench.report.cell_slo import CellSLO, Key, SLOChoice
from accelbench.report.cell_table import cell_table, slo_note
from accelbench.report.compare_runs import Comparison, RunData, build_comparison
from accelbench.report.failures import GroupedNote
from accelbench.report.fleet_view import fleet_plans
from accelbench.report.headline import headline_for
from accelbench.report.headline_data import Headline
from accelbench.report.latency_throughput import LatencyThroughput, latency_throughput
from accelbench.report.percentiles import parse_percentiles
from accelbench.report.run_view import RunView
from accelbench.report.tables import CellAggregate
from accelbench.report.timeline import RunTimeline, run_timeline

if TYPE_CHECKING:
    from accelbench.fleet.result import FleetPlan

# Server gauges plotted over time: (series key, title, names a sample may carry it under, scale). The
# scraper (telemetry.prometheus) stores canonical names (running, waiting, kv_cache_usage); raw vLLM names
# are accepted too, for samples stored by other tools. KV-cache usage is a fraction; the chart shows percent.
TELEMETRY_GAUGES: tuple[tuple[str, str, tuple[str, ...], float], ...] = (
    ("running", "Running requests", ("running", "num_requests_running"), 1.0),
    ("waiting", "Waiting requests", ("waiting", "num_requests_waiting"), 1.0),
    (
        "kv_cache_pct",
        "KV-cache usage (%)",
        ("kv_cache_usage", "kv_cache_usage_perc", "gpu_cache_usage_perc"),
        100.0,
    ),
)

#: the report's sections in the order both renderers show them: (HTML id, label in the page's navigation). The
#: answer first, then what it rests on; a section without content for a report (capacity, failures) is left out.
REPORT_SECTIONS: tuple[tuple[str, str], ...] = (
    ("headline", "Headline"),
    ("results", "Results"),
    ("failures", "Failures and warnings"),
    ("capacity", "Capacity"),
    ("fleet", "Fleet plan"),
    ("latency-throughput", "Latency vs throughput"),
    ("charts", "Charts"),
    ("telemetry", "Telemetry"),
    ("devices", "Device telemetry"),
    ("predicted", "Predicted vs measured"),
    ("environment", "Environment"),
    ("findings", "Findings"),
    ("cost", "Cost"),
    ("notes", "Notes"),
)


@dataclass
class CellLatencies:
    """Per-request latencies of one run's cell (all repeats), successful requests only, in ms."""

    run_id: str
    input_len: int
    concurrency: int
    ttft_ms: list[float] = field(default_factory=list)
    tpot_ms: list[float] = field(default_factory=list)
    e2e_ms: list[float] = field(default_factory=list)


@dataclass
class TelemetrySeries:
    """One run's server gauges over time; ``t_s`` is seconds since the run's first scrape."""

    run_id: str
    t_s: list[float] = field(default_factory=list)
    values: dict[str, list[float | None]] = field(default_factory=dict)
    #: Unix time of t_s = 0 (the first scrape), the zero of the run's device chart too (report/timeline.py)
    origin_wall: float | None = None

    def has(self, key: str) -> bool:
        return any(v is not None for v in self.values.get(key, []))


@dataclass
class Prediction:
    """The planner's estimate of one cell against what was measured."""

    run_id: str
    input_len: int
    concurrency: int
    metric: str
    predicted: float
    measured: float

    @property
    def error_pct(self) -> float:
        """(measured / predicted - 1) x 100: positive when the measurement is higher than the estimate."""
        return (self.measured / self.predicted - 1.0) * 100.0


@dataclass
class ReportData:
    """Everything ``report.html`` and ``report.md`` show."""

    comparison: Comparison
    aggregates: list[CellAggregate]
    latencies: list[CellLatencies] = field(default_factory=list)
    telemetry: list[TelemetrySeries] = field(default_factory=list)
    predictions: list[Prediction] = field(default_factory=list)
    prediction_notes: list[str] = field(default_factory=list)
    #: (run name, cell, line): each cell's failed requests and most common reason (report/failures.py)
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    #: (run name, note): what each run's figures should be read with, each distinct note once with the cells it
    #: applies to (report/failures.py ``run_warnings``)
    warnings: list[tuple[str, GroupedNote]] = field(default_factory=list)
    #: each run's cells and device samples on one axis, and its cells' device rows (report/timeline.py)
    devices: list[RunTimeline] = field(default_factory=list)
    #: every stored (cell, repeat) of every run: the percentile table's failure column reads them
    results: list[ResultInfo] = field(default_factory=list)
    #: the latency percentiles the tables show (report/percentiles.py: p50/p90/p99 by default)
    percentiles: tuple[int, ...] = field(default_factory=lambda: parse_percentiles(None))
    #: the answer the report opens with (report/headline.py), made once by ``build_report``
    headline: Headline | None = None
    #: the SLO each run is judged by (the one given, else its own; None: none known)
    slos: dict[str, SLOChoice | None] = field(default_factory=dict)
    #: each cell against its run's SLO: attainment, goodput, met
    evaluation: dict[Key, CellSLO] = field(default_factory=dict)
    #: fleet plans stored with the runs (a ``fleet --validate`` replay keeps the plan it checked)
    fleet_plans: list[FleetPlan] = field(default_factory=list)

    @property
    def run_names(self) -> dict[str, str]:
        return {r.id: r.name for r in self.comparison.runs}

    def percentile_table(self) -> tuple[list[str], list[list[str]]]:
        """The Results table: every run's cells at the chosen percentiles, with SLO attainment, whether it is
        met and goodput when some run has an SLO, and each cell's top failure reason (``cell_table``, the one
        per-cell table every human view shows)."""
        return cell_table(
            self.aggregates,
            self.results,
            self.percentiles,
            slo=self.evaluation if any(self.slos.values()) else None,
            with_run=len(self.comparison.runs) > 1,
            run_names=self.run_names,
        )

    def slo_notes(self) -> list[str]:
        """What the SLO columns rest on: one sentence when every run is judged by the same SLO, else one per run
        judged, naming it."""
        judged = [(run_id, c) for run_id, c in self.slos.items() if c is not None]
        if not judged:
            return []
        if len(judged) == len(self.slos) and all(c == judged[0][1] for _, c in judged):
            note = slo_note(judged[0][1], self.evaluation)
            return [note] if note else []
        out = []
        for run_id, choice in judged:
            mine = {k: e for k, e in self.evaluation.items() if e.run_id == run_id}
            note = slo_note(choice, mine)
            if note:
                out.append(f"{self.run_names.get(run_id, run_id)}: {note}")
        return out

    def latency_throughput(self) -> LatencyThroughput:
        """The latency-throughput chart's data (``report/latency_throughput.py``)."""
        return latency_throughput(
            self.aggregates,
            self.run_names,
            slos=self.slos,
            evaluation=self.evaluation,
            headline=self.headline,
        )

    @property
    def title(self) -> str:
        names = [r.name for r in self.comparison.runs]
        return "accelbench report: " + (" vs ".join(names) if len(names) <= 4 else f"{len(names)} runs")


def _gauge(values: dict[str, float], names: Sequence[str]) -> float | None:
    """The value of the first stored key that is one of ``names`` or ends with it (``vllm:`` prefixes,
    label suffixes such as ``{model_name="..."}`` are tolerated)."""
    for name in names:
        for key in sorted(values):
            bare = key.split("{", 1)[0]
            if bare == name or bare.endswith(":" + name) or bare.endswith("_" + name):
                return float(values[key])
    return None


def telemetry_series(run_id: str, samples: Sequence[TelemetrySample]) -> TelemetrySeries:
    """Gauges of interest from raw scrapes, on a time axis that starts at the run's first scrape."""
    ordered = sorted(samples, key=lambda s: s.wall)
    series = TelemetrySeries(run_id=run_id, values={key: [] for key, *_ in TELEMETRY_GAUGES})
    if not ordered:
        return series
    t0 = series.origin_wall = ordered[0].wall
    for s in ordered:
        series.t_s.append(s.wall - t0)
        for key, _title, names, scale in TELEMETRY_GAUGES:
            v = _gauge(s.values, names)
            series.values[key].append(v * scale if v is not None else None)
    return series


def build_report(
    runs: Sequence[RunView | RunData],
    *,
    tier: PriceTier = PriceTier.on_demand,
    latencies: Sequence[CellLatencies] = (),
    telemetry: Sequence[TelemetrySeries] = (),
    predictions: Sequence[Prediction] = (),
    prediction_notes: Sequence[str] = (),
    slo: CapacitySLO | None = None,
    records: Mapping[int, Sequence[RequestRecord]] | None = None,
    percentiles: Sequence[int] | None = None,
) -> ReportData:
    """A report from runs already read: their views (``report_from_views``), or runs a test built from known
    numbers, each made a view here (``RunView.of``). Each run's cells, intervals and warnings are its view's.

    The headline is made here, once, by ``headline_for``: each run judged by ``slo`` when given, else by its own
    (a capacity search's or its spec's), from ``records`` (per-request records by result id) where given, else
    from the cells' stored percentiles. ``percentiles`` are the table's (default: ``report/percentiles.py``)."""

    views = [r if isinstance(r, RunView) else RunView.of(r) for r in runs]
    comparison = build_comparison([r.run_data() if isinstance(r, RunView) else r for r in runs], tier=tier)
    results = [r for v in views for r in v.results]
    aggregates = [c for v in views for c in v.cells]
    names = {r.id: r.name for r in comparison.runs}
    origins = {s.run_id: s.origin_wall for s in telemetry}
    headline, slos, evaluation = headline_for(
        None, comparison, aggregates, results, [v.run for v in views], given=slo, records=records
    )
    warned = [(names.get(v.run.id, v.run.id), v.warnings) for v in views]
    return ReportData(
        comparison=comparison,
        aggregates=aggregates,
        latencies=list(latencies),
        telemetry=list(telemetry),
        predictions=list(predictions),
        prediction_notes=list(prediction_notes),
        failures=[(name, f.cell, f.text()) for name, w in warned for f in w.failures],
        warnings=[(name, note) for name, w in warned for note in w.notes],
        devices=[run_timeline(v.run.id, v.results, origin_wall=origins.get(v.run.id)) for v in views],
        results=results,
        percentiles=parse_percentiles(percentiles),
        headline=headline,
        slos=slos,
        evaluation=evaluation,
    )


def cell_latencies(view: RunView) -> list[CellLatencies]:
    """The view's per-request latencies by cell, in cell order (successful requests only; its records)."""
    cells: dict[tuple[int, int], CellLatencies] = {}
    for r in view.results:
        cell = cells.setdefault(
            (r.input_len, r.concurrency),
            CellLatencies(run_id=view.run.id, input_len=r.input_len, concurrency=r.concurrency),
        )
        for rec in view.records.get(r.id, []):
            if not rec.success:
                continue
            cell.ttft_ms.append(rec.ttft_s * 1000.0)
            cell.e2e_ms.append(rec.latency_s * 1000.0)
            if rec.tpot_s is not None:
                cell.tpot_ms.append(rec.tpot_s * 1000.0)
    return [cells[k] for k in sorted(cells)]


@dataclass
class ReportOptions:
    """How a report judges and prices its runs: the price tier, the SLO every run is judged by (None: each its
    own), the table's percentiles, and the planner's calibrations for predicted vs measured."""

    tier: PriceTier = PriceTier.on_demand
    slo: CapacitySLO | None = None
    percentiles: Sequence[int] | None = None
    calibrations: CalibrationSet | None = None


def report_from_views(views: Sequence[RunView], options: ReportOptions | None = None) -> ReportData:
    """The report of the runs' views (``report/run_view.py`` ``report_views``: records and telemetry read), in
    the order given; each run judged by ``options.slo`` when given, else by its own SLO, if any."""
    options = options or ReportOptions()
    # the records, read once: the CDFs use the successful ones, the SLO attainment every one of them
    records = {result_id: recs for v in views for result_id, recs in v.records.items()}
    report = build_report(
        views,
        tier=options.tier,
        latencies=[cell for v in views for cell in cell_latencies(v)],
        telemetry=[telemetry_series(v.run.id, v.samples) for v in views],
        slo=options.slo,
        records=records,
        percentiles=options.percentiles,
    )
    report.predictions, report.prediction_notes = predicted_vs_measured(
        [v.run_data() for v in views], report.comparison, options.calibrations
    )
    report.fleet_plans = fleet_plans(v.run.extra for v in views)
    return report


PREDICTED_METRICS: tuple[tuple[str, str, str], ...] = (
    # (label, Estimate attribute, CellResult attribute)
    ("TTFT p50 (ms)", "ttft_ms", "ttft_p50_ms"),
    ("TPOT p50 (ms)", "tpot_ms", "tpot_p50_ms"),
    ("output tok/s", "output_tokens_per_s", "output_throughput"),
)


def predicted_vs_measured(
    runs: Sequence[RunData], comparison: Comparison, calibrations: CalibrationSet | None = None
) -> tuple[list[Prediction], list[str]]:
    """The planner's estimate of every measured cell, next to the measurement.

    The estimate is made as the planner would make it now: for the run's instance type, or for the machine
    its captured environment describes, with the run's engine and engine settings and ``calibrations`` (the
    store's active ones, read by the caller). The model spec is read offline (a preset, a prepared model, a local
    path or the hub cache): a report never reaches a network. Returns (predictions, notes saying why a run has
    none).
    """
    predictions: list[Prediction] = []
    notes: list[str] = []
    for d in runs:
        run = d.run
        name = comparison.run(run.id).name
        ref = run.model or run.served_model
        if not ref:
            notes.append(f"No estimate for {name}: the run does not record its model.")
            continue
        if not run.instance_type and not (run.environment or {}).get("cpu"):
            notes.append(f"No estimate for {name}: neither an instance type nor a captured machine.")
            continue
        try:
            model = load_model_spec(ref, allow_network=False)
        except AccelbenchError as exc:
            notes.append(
                f"No estimate for {name}: the planner cannot read model {ref!r} offline: {exc.message}"
            )
            continue
        settings_data = ((run.spec or {}).get("engine") or {}).get("settings")
        try:
            settings = EngineSettings.model_validate(settings_data) if settings_data else None
        except ValueError:
            settings = None
        calibrated = False
        kind: str | None = None
        context = PlanContext(calibrations=calibrations)
        for cell in comparison.cells_of(run.id):
            if not cell.repeats:
                continue
            asked = PlanQuery(
                input_len=cell.input_len,
                output_len=cell.output_len or 128,
                concurrency=cell.concurrency,
                engine=run.engine,
                engine_settings=settings,
            )
            try:
                if run.instance_type:
                    est = estimate(model, run.instance_type, asked, context)
                else:
                    est = estimate_local(model, asked, context, environment=run.environment)
            except AccelbenchError as exc:
                notes.append(
                    f"No estimate for {name} at input {cell.input_len} x concurrency {cell.concurrency}: "
                    f"{exc.message}"
                )
                continue
            if not est.feasible:
                notes.append(f"The planner finds {name}'s setup infeasible: {est.explanation}")
                break
            calibrated = calibrated or est.calibrated
            kind = est.accelerator_type.value
            for label, est_attr, cell_attr in PREDICTED_METRICS:
                predicted, measured = getattr(est, est_attr), getattr(cell, cell_attr)
                if predicted and measured is not None:
                    predictions.append(
                        Prediction(
                            run_id=run.id,
                            input_len=cell.input_len,
                            concurrency=cell.concurrency,
                            metric=label,
                            predicted=float(predicted),
                            measured=float(measured),
                        )
                    )
        if any(p.run_id == run.id for p in predictions):
            where = run.instance_type or "the machine recorded with the run"
            how = "a measured calibration" if calibrated else "the planner's default efficiency factors"
            note = f"{name}: estimated for {where} with {how}."
            if not calibrated and kind is not None:
                note += " " + (error_sentence(kind) or "")
            notes.append(note.strip())
    return predictions, notes
