"""How a calibration does on stored runs it was not fitted to.

``plan calibrate --from-run ID`` fits one run's cells; the error after the fit on those same cells says how
well the factors describe that run, not how they will predict. ``with_held_out`` grades each fitted group on
every other stored run of the same accelerator and engine, with the factors before and after the fit, so the
report prints both: the error on the run it was fitted to and on runs it has not seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from accelbench.domain.calibration import CalibrationReport
from accelbench.plan.calibrate import compare_cells, error_summary
from accelbench.plan.measured_points import MeasuredRun, collect, points_of

if TYPE_CHECKING:
    from accelbench.catalog import Catalog


def with_held_out(
    report: CalibrationReport, others: Iterable[MeasuredRun], *, catalog: Catalog | None = None
) -> CalibrationReport:
    """``report`` with each group's error before and after its fit on ``others`` (runs of the same accelerator
    and engine that were not fitted); groups without such runs are unchanged."""
    models, _ = collect(others, catalog=catalog)
    groups = []
    for g in report.groups:
        rms = [
            rm
            for rm in models
            if rm.accelerator == g.accelerator and rm.engine == g.engine and rm.run.id not in g.runs
        ]
        points = [p for rm in rms for p in points_of(rm)]
        if not points:
            groups.append(g)
            continue
        cells = compare_cells(points, g.factors_before, g.factors_after)
        groups.append(
            g.model_copy(
                update={
                    "held_out_runs": sorted({rm.run.id for rm in rms}),
                    "held_out_error_before": error_summary(cells, fitted=False),
                    "held_out_error_after": error_summary(cells, fitted=True),
                }
            )
        )
    return report.model_copy(update={"groups": groups})
