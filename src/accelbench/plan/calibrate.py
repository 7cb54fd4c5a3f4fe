"""``accelbench plan calibrate``: fit the speed model's efficiency factors to measured runs.

The planner is handed plain data (``MeasuredRun``: a run, its cells and the start times of each cell's
requests), never a store: ``services.plan`` reads the runs and stores the fit. For every run whose hardware the
planner can describe (a catalog instance, or "this machine" from the run's captured environment) and whose
model it can read, each measured cell (input length x concurrency) is predicted with the same code path
``estimate`` uses (recommendation, the run's own engine settings, PerfModel). A capacity search's probes are
cells too: a concurrency probe like a sweep cell, a request-rate probe (stored under concurrency 0 with its
rate in the cell's config) predicted at its Poisson rate (``plan/capacity_prediction.py``); and each capacity run's
measured capacity is set against the planner's for the same SLO, before and after the fit.
Points are grouped by (accelerator, engine); per group the factors are fitted by damped least squares in log
space (Levenberg-Marquardt) to the log-ratios of predicted to measured median TPOT (weight 1), median TTFT and
output throughput (weight 0.5 each) under a soft-L1 loss (robust to a cell measured on a busy machine), with
a weak pull towards the cited starting values so factors the data
cannot separate (e.g. bandwidth vs per-step overhead on a tiny model) stay plausible. The caller stores the fit
with its error before and after and estimates use it from then on, saying so.

The runs become points in ``plan/measured_points.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from accelbench.domain.calibration import (
    CalibrationGroup,
    CalibrationReport,
    CapacityComparison,
    CellComparison,
)
from accelbench.domain.capacity import CapacityResult
from accelbench.domain.estimate import EfficiencyFactors
from accelbench.errors import UserInputError
from accelbench.plan.calibrations import CalibrationSet
from accelbench.plan.capacity_prediction import predict_capacity
from accelbench.plan.hardware import default_factors
from accelbench.plan.measured_points import (
    MeasuredRun,
    Point,
    RunModel,
    collect,
    output_len_of,
    points_of,
)

if TYPE_CHECKING:
    from accelbench.catalog import Catalog

FIT_NAMES = (
    "bandwidth_efficiency",
    "compute_efficiency",
    "step_overhead_ms",
    "per_sequence_overhead_ms",
    "request_overhead_ms",
    "prefill_interference",
)
BOUNDS = {
    "bandwidth_efficiency": (0.05, 1.2),
    "compute_efficiency": (0.02, 1.2),
    "step_overhead_ms": (0.01, 500.0),
    "per_sequence_overhead_ms": (0.001, 50.0),
    "request_overhead_ms": (0.1, 5000.0),
    "prefill_interference": (0.01, 1.0),
    "layer_floor_us": (0.1, 2000.0),
    "kv_read_efficiency": (0.1, 1.2),
    "weight_only_efficiency": (0.05, 1.2),
    "dot_kernel_efficiency": (0.05, 1.2),
    "allreduce_latency_us": (0.5, 500.0),
    "request_serial_ms": (0.01, 100.0),
}
WEIGHTS = {"tpot": 1.0, "ttft": 0.5, "tps": 0.5}
PRIOR_WEIGHT = 0.05
ROBUST_SCALE = 0.15


# --------------------------------------------------------------------------------------------- fitting
def _predict(p: Point, f: EfficiencyFactors) -> tuple[float, float, float]:
    pred = p.predict(f)
    return pred.tpot * 1000, pred.ttft * 1000, pred.out_tps


def _residuals(points: Sequence[Point], f: EfficiencyFactors) -> list[float]:
    res = []
    for p in points:
        tpot, ttft, tps = _predict(p, f)
        # a figure the model says is unbounded (a saturated queue's TTFT) carries no information: a zero
        # residual keeps the vector's length fixed for the solver
        if p.tpot_ms:
            res.append(
                WEIGHTS["tpot"] * math.log(max(tpot, 1e-9) / p.tpot_ms) if math.isfinite(tpot) else 0.0
            )
        if p.ttft_ms:
            res.append(
                WEIGHTS["ttft"] * math.log(max(ttft, 1e-9) / p.ttft_ms) if math.isfinite(ttft) else 0.0
            )
        if p.out_tps:
            res.append(WEIGHTS["tps"] * math.log(max(tps, 1e-12) / p.out_tps))
    return res


def _factors(base: EfficiencyFactors, u: np.ndarray, names: Sequence[str] = FIT_NAMES) -> EfficiencyFactors:
    values = base.model_dump()
    for name, x in zip(names, u, strict=True):
        values[name] = float(math.exp(x))
    return EfficiencyFactors.model_construct(**values)


def _log_bounds(
    names: Sequence[str] = FIT_NAMES, bounds: Mapping[str, tuple[float, float]] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    b = {**BOUNDS, **(bounds or {})}
    return np.log([b[n][0] for n in names]), np.log([b[n][1] for n in names])


def _soft_l1(r: np.ndarray) -> np.ndarray:
    """Residuals whose squares are the soft-L1 loss: quadratic within ROBUST_SCALE (a log-ratio of ~15%),
    linear beyond, so one cell measured while the machine was busy does not drag every prediction."""
    z = (r / ROBUST_SCALE) ** 2
    return np.sign(r) * ROBUST_SCALE * np.sqrt(2.0 * (np.sqrt(1.0 + z) - 1.0))


def fit_factors(
    points: Sequence[Point],
    prior: EfficiencyFactors,
    start: EfficiencyFactors | None = None,
    names: Sequence[str] = (),
    bounds: Mapping[str, tuple[float, float]] | None = None,
    prior_weight: float = PRIOR_WEIGHT,
) -> EfficiencyFactors:
    """Bounded least squares (scipy's trust-region reflective) on the log-parameters: the data's residuals
    under a soft-L1 loss, plus the prior's residuals, which keep factors the data cannot identify near it.
    Started from the prior and, when given, from ``start`` (the stored calibration); the better fit wins.
    ``names`` fits these factors too (the public data set fits the per-layer floor, the KV-read and
    weight-only efficiencies and the all-reduce latency, which a single machine's runs cannot identify)."""
    from scipy.optimize import least_squares  # heavy: scipy, only when a fit runs

    if not points:
        return prior
    fit = tuple(FIT_NAMES) + tuple(n for n in names if n not in FIT_NAMES)
    lo, hi = _log_bounds(fit, bounds)
    b = {**BOUNDS, **(bounds or {})}
    # strictly inside the bounds, as the solver requires of a starting point
    inside = lo + 1e-9 * (hi - lo), hi - 1e-9 * (hi - lo)
    u0 = np.clip(np.log([max(getattr(prior, n), b[n][0]) for n in fit]), *inside)

    def residual_vector(u: np.ndarray) -> np.ndarray:
        data = _soft_l1(np.asarray(_residuals(points, _factors(prior, u, fit)), dtype=float))
        return np.concatenate([data, prior_weight * (u - u0)])

    starts = [u0]
    if start is not None:
        starts.append(np.clip(np.log([max(getattr(start, n), b[n][0]) for n in fit]), *inside))
    fits = [least_squares(residual_vector, s, bounds=(lo, hi), method="trf", x_scale="jac") for s in starts]
    best = min(fits, key=lambda r: float(r.cost))
    fitted = _factors(prior, best.x, fit)
    return EfficiencyFactors(**{k: round(v, 6) for k, v in fitted.model_dump().items()})


def _mape(pairs: Iterable[tuple[float | None, float | None]]) -> float | None:
    errs = [abs(p - m) / m * 100 for p, m in pairs if p is not None and m and math.isfinite(p)]
    return round(sum(errs) / len(errs), 2) if errs else None


def error_summary(cells: Sequence[CellComparison], fitted: bool) -> dict[str, float]:
    def col(name: str) -> list[tuple[float | None, float | None]]:
        pre = "fitted" if fitted else "predicted"
        return [(getattr(c, f"{pre}_{name}"), getattr(c, f"measured_{name}")) for c in cells]

    out: dict[str, float] = {}
    for key, name in (
        ("tpot_mape_pct", "tpot_ms"),
        ("ttft_mape_pct", "ttft_ms"),
        ("throughput_mape_pct", "output_tps"),
    ):
        v = _mape(col(name))
        if v is not None:
            out[key] = v
    tp = [abs(p - m) / m * 100 for p, m in col("tpot_ms") if p is not None and m and math.isfinite(p)]
    if tp:
        out["tpot_max_abs_pct"] = round(max(tp), 2)
    out["points"] = float(len(cells))
    return out


def compare_cells(
    points: Sequence[Point], before: EfficiencyFactors, after: EfficiencyFactors | None
) -> list[CellComparison]:
    cells = []
    for p in points:
        tpot, ttft, tps = _predict(p, before)
        ft = _predict(p, after) if after is not None else (None, None, None)
        cells.append(
            CellComparison(
                run_id=p.run.run.id,
                label=p.run.run.label,
                instance=p.run.instance,
                accelerator=p.run.accelerator,
                engine=p.run.engine,
                model=p.run.model,
                input_len=p.input_len,
                output_len=p.output_len,
                concurrency=p.concurrency,
                request_rate=p.request_rate,
                measured_tpot_ms=p.tpot_ms,
                measured_ttft_ms=p.ttft_ms,
                measured_output_tps=p.out_tps,
                predicted_tpot_ms=round(tpot, 3),
                predicted_ttft_ms=round(ttft, 3),
                predicted_output_tps=round(tps, 3),
                fitted_tpot_ms=round(ft[0], 3) if ft[0] is not None else None,
                fitted_ttft_ms=round(ft[1], 3) if ft[1] is not None else None,
                fitted_output_tps=round(ft[2], 3) if ft[2] is not None else None,
            )
        )
    return cells


def _capacity(
    rm: RunModel,
    cap: CapacityResult,
    f: EfficiencyFactors | None,
    input_len: int,
    output_len: int,
    max_load: float | None,
) -> float | None:
    if f is None or cap.slo is None:
        return None
    return predict_capacity(
        rm.perf, f, input_len=input_len, output_len=output_len, slo=cap.slo, load=cap.load, max_load=max_load
    ).max_load


def capacity_error(checks: Sequence[CapacityComparison], fitted: bool) -> dict[str, float]:
    """The mean absolute error of the predicted capacity over the capacity runs that found one (percent)."""
    errs = [c.error_after_pct if fitted else c.error_before_pct for c in checks]
    known = [abs(e) for e in errs if e is not None]
    if not known:
        return {}
    return {"capacity_mape_pct": round(sum(known) / len(known), 2), "capacity_runs": float(len(known))}


def capacity_checks(
    rms: Sequence[RunModel], before: EfficiencyFactors, after: EfficiencyFactors | None
) -> list[CapacityComparison]:
    """Each capacity run's measured capacity at its SLO against the planner's for the same SLO and load (the
    model of ``plan/capacity_prediction.py`` on the run's own setup), with the factors before and after a fit."""
    out: list[CapacityComparison] = []
    for rm in rms:
        cap = rm.capacity
        if cap is None or cap.slo is None or not rm.cells:
            continue
        first = rm.cells[0]
        input_len, output_len = first.input_len, output_len_of(rm.run, first)
        bound = ((rm.run.spec or {}).get("capacity") or {}).get("max_load")
        max_load = float(bound) if isinstance(bound, int | float) and bound > 0 else None

        out.append(
            CapacityComparison(
                run_id=rm.run.id,
                label=rm.run.label,
                load=cap.load,
                slo=cap.slo.label() + f", attainment {cap.slo.attainment:g}",
                input_len=input_len,
                output_len=output_len,
                measured_max_load=cap.max_load,
                predicted_at_run=cap.predicted_max_load,
                predicted_before=_capacity(rm, cap, before, input_len, output_len, max_load),
                predicted_after=_capacity(rm, cap, after, input_len, output_len, max_load),
            )
        )
    return out


def calibrate(
    measured: Iterable[MeasuredRun],
    *,
    current: CalibrationSet | None = None,
    skipped: Sequence[str] = (),
    accelerator: str | None = None,
    engine: str | None = None,
    catalog: Catalog | None = None,
) -> CalibrationReport:
    """Fit factors per (accelerator, engine) from measured runs, starting from the ``current`` calibrations;
    nothing is stored (``saved`` false, no ``saved_id``: storing is the caller's, ``services.plan.calibrate``).
    ``skipped`` are runs the caller could not read, reported with the ones this cannot use."""
    models, not_used = collect(measured, catalog=catalog)
    skipped = [*skipped, *not_used]
    current = current or CalibrationSet.empty()
    groups: dict[tuple[str, str], list[RunModel]] = {}
    for rm in models:
        if accelerator and rm.accelerator.lower() != accelerator.lower() and rm.instance != accelerator:
            continue
        if engine and rm.engine != engine:
            continue
        groups.setdefault((rm.accelerator, rm.engine), []).append(rm)
    if not groups:
        raise UserInputError(
            "No measured run to calibrate from"
            + (f" for {accelerator or ''} {engine or ''}".rstrip() if accelerator or engine else "")
            + ".",
            hint="Run a sweep or a capacity search first (e.g. `accelbench demo`, `accelbench sweep` or "
            "`accelbench capacity`); runs skipped: " + ("; ".join(skipped[:5]) or "none"),
        )
    out: list[CalibrationGroup] = []
    for (accel, eng), rms in sorted(groups.items()):
        kind = rms[0].kind
        prior = default_factors(kind.value, eng)
        before = current.factors.get((accel, eng), prior)
        ref = current.refs.get((accel, eng))
        points = [p for rm in rms for p in points_of(rm)]
        fitted = fit_factors(points, prior, start=before)
        cells = compare_cells(points, before, fitted)
        note = None
        if len(points) < len(FIT_NAMES):
            note = (
                f"{len(points)} point(s) for {len(FIT_NAMES)} factors: the starting values hold the factors the "
                "data cannot pin down"
            )
        capacity = capacity_checks(rms, before, fitted)
        err_before = error_summary(cells, fitted=False) | capacity_error(capacity, fitted=False)
        err_after = error_summary(cells, fitted=True) | capacity_error(capacity, fitted=True)
        out.append(
            CalibrationGroup(
                accelerator=accel,
                engine=eng,
                kind=kind,
                n_points=len(points),
                runs=sorted({rm.run.id for rm in rms}),
                before_source=f"calibration {ref.id}" if ref else "defaults",
                factors_before=before,
                factors_after=fitted,
                error_before=err_before,
                error_after=err_after,
                cells=cells,
                capacity=capacity,
                note=note,
            )
        )
    return CalibrationReport(groups=out, skipped=skipped, saved=False)


def predicted_vs_measured(
    measured: Iterable[MeasuredRun],
    *,
    calibrations: CalibrationSet | None = None,
    catalog: Catalog | None = None,
) -> tuple[list[CellComparison], list[str]]:
    """Every usable cell with the prediction estimates make now (``calibrations`` applied; none: the starting
    factors). For reports and ``benchmarks/estimate_accuracy.py`` (through ``services.plan``)."""
    models, skipped = collect(measured, catalog=catalog)
    cal = calibrations or CalibrationSet.empty()
    cells: list[CellComparison] = []
    for rm in models:
        f = cal.factors.get((rm.accelerator, rm.engine), default_factors(rm.kind.value, rm.engine))
        cells += compare_cells(points_of(rm), f, None)
    return cells, skipped


def calibration_dict(report: CalibrationReport) -> dict[str, Any]:
    """JSON form with the per-cell and per-capacity-run error percentages included (an unbounded prediction,
    a saturated queue's TTFT, is null)."""
    data = report.model_dump(mode="json")
    for g_json, g in zip(data["groups"], report.groups, strict=True):
        for c_json, c in zip(g_json["cells"], g.cells, strict=True):
            for k, v in c_json.items():  # a queue the model says never drains: no number (JSON has none)
                if isinstance(v, float) and not math.isfinite(v):
                    c_json[k] = None
            c_json["tpot_error_pct"] = None if c.tpot_error_pct is None else round(c.tpot_error_pct, 2)
            c_json["fitted_tpot_error_pct"] = (
                None if c.fitted_tpot_error_pct is None else round(c.fitted_tpot_error_pct, 2)
            )
        for k_json, k in zip(g_json["capacity"], g.capacity, strict=True):
            for name in ("error_at_run_pct", "error_before_pct", "error_after_pct"):
                v = getattr(k, name)
                k_json[name] = None if v is None else round(v, 2)
    return data
