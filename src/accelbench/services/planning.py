"""Planning as use cases: model presets and prepared models, a model's spec, recommend, estimate (one
instance or the ranked catalog, with the store's calibrations and prices), the memory breakdown, the
capacity a deployment is predicted to sustain at an SLO, and calibration from measured runs.

The planner never opens a store: what it learns from one (active calibrations, prices, measured runs and
their cells) is read here and handed to it as plain data.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from accelbench import plan
from accelbench.catalog import get_catalog, price_map
from accelbench.domain.calibration import CalibrationReport, CellComparison
from accelbench.domain.estimate import Estimate, EstimateRow, EstimateTable
from accelbench.domain.plan_query import EstimateQuery, FitQuery, PlanQuery
from accelbench.errors import AccelbenchError
from accelbench.modelspec import load_model_spec, preset_names
from accelbench.modelspec.presets import load_preset, preset_document
from accelbench.plan.calibrate import calibrate as fit
from accelbench.plan.calibrate import calibration_dict
from accelbench.plan.calibrate import predicted_vs_measured as compare
from accelbench.plan.calibrate_holdout import with_held_out
from accelbench.plan.calibrations import CalibrationSet
from accelbench.plan.capacity_prediction import predict_capacity
from accelbench.plan.context import PlanContext
from accelbench.plan.estimate import perf_setup
from accelbench.plan.hardware import is_local, local_machine
from accelbench.plan.measured_points import USABLE_CELL_STATUSES, MeasuredRun
from accelbench.plan.query import answer
from accelbench.plan.refusal import DEFAULT_TRAFFIC, Question, priced_refusal
from accelbench.services.run_checks import load_model
from accelbench.store import Store
from accelbench.store.repo import jsonable

if TYPE_CHECKING:
    from accelbench.catalog import Catalog
    from accelbench.domain.capacity import CapacitySLO
    from accelbench.domain.model import ModelSpec
    from accelbench.domain.recommendation import Recommendation
    from accelbench.plan.calibrations import CalibrationSet
    from accelbench.plan.context import PlanContext
    from accelbench.plan.measured_points import MeasuredRun


def presets() -> list[dict[str, Any]]:
    """Shipped model presets with the figures a picker needs."""
    out = []
    for name in preset_names():
        spec = load_preset(name)
        out.append(
            {
                "name": name,
                "hf_id": preset_document(name).get("hf_id"),
                "architecture": spec.architecture,
                "parameters": spec.parameters.total,
                "active_parameters": spec.parameters.active,
                "moe": spec.is_moe,
                "max_context": spec.max_position_embeddings,
                "quantization": spec.quantization.scheme if spec.quantization else None,
            }
        )
    return out


def prepared_models() -> list[dict[str, Any]]:
    """Models prepared on this machine (``accelbench model prepare``): what local runs can serve now."""
    from accelbench.deploy.model_store import list_models  # start-up: the model store pulls in deploy/

    return [
        m.model_dump(
            mode="json", include={"name", "source", "revision", "architecture", "parameters", "dtype"}
        )
        | {"gguf": bool(m.gguf_path), "hf": bool(m.hf_dir or m.hub_id)}
        for m in list_models()
    ]


def model_spec(name: str) -> dict[str, Any]:
    spec = load_model(name, allow_network=False)
    data: dict[str, Any] = spec.model_dump(mode="json")
    data["kv_bytes_per_token_bf16"] = spec.kv_bytes_per_token(2.0)
    data["attention_kind"] = spec.attention_kind.value
    return data


def recommend(model: str, instance_type: str, **options: Any) -> dict[str, Any]:
    """``accelbench recommend``: does the model fit, with which settings, and why (``fits`` false is an
    answer, not an error). ``instance_type`` may be "local" for this machine."""
    return dict(jsonable(recommendation(load_model(model), instance_type, **options)))


def recommendation(spec: ModelSpec, instance_type: str, **options: Any) -> Recommendation:
    """The planner's answer for a model already read; a refusal comes with its way forward priced: the
    instances offered instead and the setting changes, each predicted at the given lengths (default: the
    estimate's) and one request in flight (``plan/refusal.py``)."""

    asked = FitQuery(**options)
    rec = plan.recommend(spec, instance_type, asked)
    if rec.fits:
        return rec
    d_in, d_out, conc = DEFAULT_TRAFFIC
    traffic = PlanQuery.of_fit(asked, input_len=d_in, output_len=d_out, concurrency=conc)
    return priced_refusal(rec, spec, Question(traffic))


def plan_context(
    store: Store | None, *, use_calibrations: bool = True, region: str | None = None
) -> PlanContext:
    """What the planner takes from a store, in three queries so a catalog-wide estimate stays fast: the
    active calibrations, the best known prices (stored ones win over the snapshot) and the models measured
    on each instance type (an instance is measured for an estimate only where its model was). No store: the snapshot prices and the cited factors."""

    if store is None:
        return PlanContext()
    prices: dict[str, Any] = dict(price_map(store=store, region=region) if region else price_map(store=store))
    return PlanContext(
        calibrations=calibrations(store) if use_calibrations else None,
        prices=prices,
        measured_runs=store.measured_models(),
    )


def estimate_result(store: Store | None, query: EstimateQuery) -> Estimate | EstimateTable:
    """``accelbench estimate``: one instance (``query.instance_type``, or "local" for this machine) or the
    ranked catalog, with the store's calibrations, prices and measured runs when there is a store."""

    return answer(
        query, load_model(query.model), plan_context(store, use_calibrations=not query.no_calibration)
    )


def estimate(store: Store | None, query: EstimateQuery) -> dict[str, Any]:
    """The estimate as JSON (the API, the pages and `estimate --format json`)."""
    return estimate_json(estimate_result(store, query), query)


def estimate_json(result: Estimate | EstimateTable, query: EstimateQuery) -> dict[str, Any]:
    """One instance's row and estimate, or the ranked table's first ``query.limit`` rows with the total."""
    if isinstance(result, EstimateTable):
        data: dict[str, Any] = jsonable(result)
        data["total_rows"] = len(result.rows)
        data["rows"] = data["rows"][: query.limit]
        return data
    return {
        "model": result.model,
        "input_len": query.input_len,
        "output_len": query.output_len,
        "concurrency": query.concurrency,
        "rows": [jsonable({k: getattr(result, k) for k in _row_fields()})],
        "total_rows": 1,
        "summary": None,
        "estimate": jsonable(result),
    }


def _row_fields() -> list[str]:
    return list(EstimateRow.model_fields)


def memory_breakdown(model: str, instance_type: str, **options: Any) -> dict[str, Any]:
    """Where accelerator memory goes (GPU, Neuron); the planner refuses CPU instances (GuardError, 400)."""

    return dict(jsonable(plan.memory_breakdown(load_model(model), instance_type, **options)))


def calibrations(store: Store) -> CalibrationSet:
    """The store's active calibrations, as the planner takes them."""

    return CalibrationSet.from_rows(store.active_calibrations())


def measured_runs(store: Store, run_ids: Iterable[str] | None = None) -> tuple[list[MeasuredRun], list[str]]:
    """The stored runs (every one, or the given ones) as calibration takes them: each run with its cells and,
    for the closed-loop cells with more than one user, the start times of their successful requests (from
    which calibration tells waves from spread-out arrivals). A capacity search is a run like a sweep: its
    probes are its cells, its answer in the run's ``extra["capacity"]``. Returns (runs, runs not read)."""

    runs = [store.get_run(r) for r in run_ids] if run_ids else store.list_runs(limit=100_000)[0]
    out: list[MeasuredRun] = []
    for run in runs:
        results = store.get_results(run.id)
        starts = {
            cell.id: [r.start_s for r in store.get_request_records(cell.id) if r.success and not r.ramp]
            for cell in results
            if cell.concurrency > 1 and cell.status.value in USABLE_CELL_STATUSES and cell.completed > 0
        }
        out.append(MeasuredRun(run=run, results=results, starts=starts))
    return out, []


def calibrate(
    store: Store,
    *,
    run_ids: Iterable[str] | None = None,
    accelerator: str | None = None,
    engine: str | None = None,
    dry_run: bool = False,
    catalog: Catalog | None = None,
) -> CalibrationReport:
    """``accelbench plan calibrate``: fit the speed model per (accelerator, engine) to the stored runs (sweeps,
    runs, capacity searches: every probe a measured point), starting from the active calibrations, and store
    each fit unless ``dry_run``; estimates use them from then on. Capacity runs also report the measured
    capacity against the planner's, before and after the fit."""

    measured, unread = measured_runs(store, run_ids)
    report = fit(
        measured,
        current=calibrations(store),
        skipped=unread,
        accelerator=accelerator,
        engine=engine,
        catalog=catalog,
    )
    if run_ids:  # fitted to the runs named: grade the fit on the store's other runs of the same hardware
        fitted = {m.run.id for m in measured}
        everything, _ = measured_runs(store)
        report = with_held_out(report, [m for m in everything if m.run.id not in fitted], catalog=catalog)
    if dry_run:
        return report
    groups = []
    for g in report.groups:
        saved_id = store.save_calibration(
            accelerator=g.accelerator,
            engine=g.engine,
            factors=g.factors_after.model_dump(),
            n_points=g.n_points,
            error_before=g.error_before,
            error_after=g.error_after,
        )
        groups.append(g.model_copy(update={"saved_id": saved_id}))
    return report.model_copy(update={"groups": groups, "saved": True})


def calibration_json(report: CalibrationReport) -> dict[str, Any]:
    """A calibration report as JSON, with each cell's and each capacity run's error percentages."""

    return calibration_dict(report)


def predicted_vs_measured(
    store: Store,
    *,
    run_ids: Iterable[str] | None = None,
    use_calibrations: bool = True,
    catalog: Catalog | None = None,
) -> tuple[list[CellComparison], list[str]]:
    """Every usable stored cell with the prediction estimates make now (the active calibrations applied
    unless ``use_calibrations`` is false), and the runs skipped with the reason."""

    measured, unread = measured_runs(store, run_ids)
    cells, skipped = compare(
        measured, calibrations=calibrations(store) if use_calibrations else None, catalog=catalog
    )
    return cells, [*unread, *skipped]


def capacity_plan(
    instance: str | None,
    model_ref: str,
    input_len: int,
    output_len: int,
    slo: CapacitySLO | None,
    load: str,
    *,
    store: Store | None = None,
    max_load: float | None = None,
) -> tuple[float | None, float | None]:
    """``accelbench capacity``'s planning side: (hourly price, the planner's predicted capacity at the SLO) for a
    named instance ("local": this machine, unpriced), when the model can be read offline.

    The prediction answers the measurement's question (``plan/capacity_prediction.py``): the highest concurrency, or for
    ``load`` "request_rate" the highest Poisson rate (requests/s, below the saturation throughput), at which
    the SLO's percentile of every named metric (TTFT, TPOT, ITL, E2EL) is within its target and the share of
    requests meeting all of them reaches its attainment. With ``store``, its active calibrations apply;
    ``max_load`` bounds the search as it bounds the measurement. No SLO, or a model or instance the planner
    cannot predict: no prediction (None)."""
    if not instance:
        return None, None

    spec_of = None
    if is_local(instance):  # this machine: predicted from its probe, not priced
        inst, spec_of = local_machine()
    else:
        inst = get_catalog().instance(instance)
    hourly = inst.on_demand_usd
    if slo is None or not slo.targets:
        return hourly, None
    kind = "request_rate" if load in ("rate", "request_rate") else load
    if kind not in ("concurrency", "request_rate"):
        return hourly, None
    try:
        setup = perf_setup(
            load_model_spec(model_ref, allow_network=False),
            inst,
            PlanQuery(input_len=input_len, output_len=output_len),
            PlanContext(calibrations=calibrations(store) if store is not None else None),
            spec=spec_of,
        )
        if isinstance(setup, str):  # does not fit: nothing to predict
            return hourly, None
        predicted = predict_capacity(
            setup.perf,
            setup.factors,
            input_len=input_len,
            output_len=output_len,
            slo=slo,
            load=kind,
            max_load=max_load,
        )
    except AccelbenchError:
        return hourly, None
    return hourly, predicted.max_load
