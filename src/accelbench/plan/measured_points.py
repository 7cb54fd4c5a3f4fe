"""Measured runs as the points a calibration fits: each stored run (``MeasuredRun``: the run, its cells and
the start times of each cell's requests) on hardware the planner can describe, with the model and settings
it ran, and each usable cell predicted by the same code path ``estimate`` uses (``Point``). A capacity
search's probes are cells too (a request-rate probe at its Poisson rate)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import ValidationError

from accelbench.catalog import get_catalog
from accelbench.domain.capacity import CapacityResult
from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.domain.plan_query import FitQuery
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import EngineSettings
from accelbench.errors import AccelbenchError
from accelbench.modelspec import load_model_spec
from accelbench.plan.capacity_prediction import RateModel
from accelbench.plan.estimate import measured_perf
from accelbench.plan.hardware import LOCAL_INSTANCE, local_cpu_name, local_machine
from accelbench.plan.perf_model import PerfModel, Prediction, normalize_engine
from accelbench.plan.recommend import accelerator_name

if TYPE_CHECKING:
    from accelbench.catalog import Catalog

USABLE_CELL_STATUSES = ("completed", "partial")


@dataclass
class MeasuredRun:
    """What calibration is handed of one stored run: the run, its cells, and for each cell (result id) the
    start times of its successful requests (how they arrived: together, or spread out). Plain data: the
    caller (``services.plan.measured_runs``) reads it from a store."""

    run: RunInfo
    results: list[ResultInfo]
    starts: dict[int, list[float]] = field(default_factory=dict)


@dataclass
class RunModel:
    """A run with everything needed to predict its cells."""

    run: RunInfo
    accelerator: str
    engine: str
    kind: AcceleratorType
    instance: str
    model: str
    perf: PerfModel
    cells: list[ResultInfo] = field(default_factory=list)
    arrivals: dict[int, str] = field(default_factory=dict)  # result id -> bursts / steady, from the records
    capacity: CapacityResult | None = None  # a capacity search's answer (extra["capacity"])


@dataclass
class Point:
    run: RunModel
    input_len: int
    output_len: int
    concurrency: int
    tpot_ms: float
    ttft_ms: float | None
    out_tps: float | None
    arrivals: str = "bursts"
    request_rate: float | None = None  # a request-rate probe: Poisson arrivals at this rate

    def predict(self, f: EfficiencyFactors) -> Prediction:
        if self.request_rate is not None:
            return RateModel(self.run.perf, f, self.input_len, self.output_len).predict(self.request_rate)
        return self.run.perf.predict(f, self.input_len, self.output_len, self.concurrency, self.arrivals)


# --------------------------------------------------------------------------------------------- runs -> points
def _engine_settings(run: RunInfo) -> EngineSettings:
    raw = ((run.spec or {}).get("engine") or {}).get("settings") or {}
    try:
        settings = EngineSettings.model_validate(raw)
    except ValidationError:
        settings = EngineSettings()
    if run.tp_degree and not settings.tensor_parallel_size:
        settings = settings.model_copy(update={"tensor_parallel_size": run.tp_degree})
    return settings


def _hardware_of(run: RunInfo, catalog: Catalog) -> tuple[InstanceType, AcceleratorSpec, str] | str:
    """(instance, spec, calibration key) of a run, or why it cannot be described."""
    if run.instance_type and run.instance_type != LOCAL_INSTANCE and run.instance_type in catalog:
        inst = catalog.instance(run.instance_type)
        return inst, catalog.accelerator(inst.accelerator_name), accelerator_name(inst)
    env = run.environment or {}
    if env.get("cpu"):
        if (env.get("accelerators") or {}).get("gpus"):
            return "a local GPU run without a catalog instance type (the planner needs the GPU's specs)"
        inst, spec = local_machine(env)
        return inst, spec, local_cpu_name(env)
    if run.instance_type == LOCAL_INSTANCE:
        return "a run on this machine ('local') without a captured environment (the CPU it ran on is unknown)"
    if run.instance_type:
        return f"instance type {run.instance_type!r} is not in the catalog"
    return "no instance type and no captured environment"


def run_model(
    run: RunInfo, results: Sequence[ResultInfo], *, catalog: Catalog | None = None
) -> RunModel | str:
    """The prediction setup of a run, or the reason there is none."""
    if catalog is None:
        catalog = get_catalog()
    hwinfo = _hardware_of(run, catalog)
    if isinstance(hwinfo, str):
        return hwinfo
    inst, spec, key = hwinfo
    # an endpoint run's --tokenizer directory last: it often holds the model's config.json when the served
    # name is an alias the planner cannot read
    tokenizer = ((run.spec or {}).get("endpoint") or {}).get("tokenizer")
    refs = [r for r in (run.model, (run.spec or {}).get("model"), run.served_model, tokenizer) if r]
    model = None
    errors = []
    for ref in dict.fromkeys(refs):
        try:
            model = load_model_spec(str(ref), allow_network=False)
            break
        except AccelbenchError as exc:
            errors.append(exc.message)
    if model is None:
        return f"model {refs[0] if refs else '?'} cannot be read ({'; '.join(errors) or 'no model'})"
    settings = _engine_settings(run)
    engine = normalize_engine(
        run.engine or ((run.spec or {}).get("engine") or {}).get("name"), inst.accelerator_type
    )
    asked = FitQuery(
        quantization=run.quantization or settings.quantization,
        max_model_len=settings.max_model_len,
        kv_cache_dtype=settings.kv_cache_dtype,
        engine_settings=settings,
        engine=engine,
    )
    try:
        perf = measured_perf(model, inst, spec, asked, catalog=catalog)
    except AccelbenchError as exc:
        return f"no recommendation: {exc.message}"
    if isinstance(perf, str):
        return f"the planner says it does not fit: {perf}"
    usable = [
        r
        for r in results
        if r.status.value in USABLE_CELL_STATUSES
        and r.tpot_p50_ms
        and r.completed > 0
        and (r.concurrency > 0 or cell_rate(r) is not None)
    ]
    if not usable:
        return "no completed cell with a TPOT"
    return RunModel(
        run=run,
        accelerator=key,
        engine=str(engine),
        kind=inst.accelerator_type,
        instance=inst.name,
        model=model.name,
        perf=perf,
        cells=usable,
        capacity=capacity_of(run),
    )


def capacity_of(run: RunInfo) -> CapacityResult | None:
    """A capacity search's stored answer; None for other runs and for a search still under way."""
    data = (run.extra or {}).get("capacity")
    if not isinstance(data, dict) or "load" not in data:
        return None
    try:
        return CapacityResult.model_validate(data)
    except ValidationError:
        return None


def cell_rate(cell: ResultInfo) -> float | None:
    """The Poisson rate a cell was measured at: a capacity search's request-rate probe (stored under
    concurrency 0 with the rate in its config); None for a closed loop."""
    if cell.concurrency > 0:
        return None
    rate = ((cell.summary or {}).get("config") or {}).get("request_rate")
    if not isinstance(rate, int | float | str):
        return None
    try:
        value = float(rate)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def output_len_of(run: RunInfo, cell: ResultInfo) -> int:
    if cell.output_len:
        return cell.output_len
    cfg = (cell.summary or {}).get("config") or {}
    return int(cfg.get("output_len") or ((run.spec or {}).get("sweep") or {}).get("output_len") or 128)


def observed_arrivals(starts: Sequence[float], concurrency: int, e2e_s: float) -> str | None:
    """bursts when most requests of a cell were sent together with others (within min(5% of E2E, a quarter of
    the spacing a steady closed loop would have)), steady when they were spread out; None without data."""
    if concurrency < 2 or len(starts) < 2 or e2e_s <= 0:
        return None
    ordered = sorted(starts)
    window = min(0.05 * e2e_s, 0.25 * e2e_s / concurrency)
    together = 0
    for i, t in enumerate(ordered):
        near_prev = i > 0 and t - ordered[i - 1] <= window
        near_next = i + 1 < len(ordered) and ordered[i + 1] - t <= window
        together += near_prev or near_next
    return "bursts" if together / len(ordered) >= 0.5 else "steady"


def _arrivals(run: RunInfo, cell: ResultInfo, observed: str | None = None) -> str:
    """How a cell's requests arrived: what its records show, else bursts when they were sent as fast as the
    concurrency allows (request rate inf, the sweep default), steady when the run paced them."""
    if observed is not None:
        return observed
    cfg = (cell.summary or {}).get("config") or {}
    rate = cfg.get("request_rate", ((run.spec or {}).get("sweep") or {}).get("request_rate", "inf"))
    try:
        return "bursts" if math.isinf(float(rate)) else "steady"
    except (TypeError, ValueError):
        return "bursts"


def points_of(rm: RunModel) -> list[Point]:
    out = []
    for cell in rm.cells:
        rate = cell_rate(cell)
        out.append(
            Point(
                run=rm,
                input_len=cell.input_len,
                output_len=output_len_of(rm.run, cell),
                concurrency=cell.concurrency,
                tpot_ms=float(cell.tpot_p50_ms or 0.0),
                ttft_ms=cell.ttft_p50_ms,
                out_tps=cell.output_throughput,
                arrivals="steady" if rate is not None else _arrivals(rm.run, cell, rm.arrivals.get(cell.id)),
                request_rate=rate,
            )
        )
    return out


def collect(
    measured: Iterable[MeasuredRun], *, catalog: Catalog | None = None
) -> tuple[list[RunModel], list[str]]:
    """Every usable run and the reasons others were skipped."""
    models: list[RunModel] = []
    skipped: list[str] = []
    for m in measured:
        run = m.run
        if not m.results:
            skipped.append(f"{run.id}: no results")
            continue
        rm = run_model(run, m.results, catalog=catalog)
        if isinstance(rm, str):
            skipped.append(f"{run.id}: {rm}")
            continue
        for cell in rm.cells:
            if cell.concurrency > 1 and cell.id in m.starts:
                e2e = (cell.e2el_p50_ms or 0.0) / 1000
                seen = observed_arrivals(m.starts[cell.id], cell.concurrency, e2e)
                if seen is not None:
                    rm.arrivals[cell.id] = seen
        models.append(rm)
    return models, skipped
