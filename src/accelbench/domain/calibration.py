"""Calibration types: each measured cell beside its prediction, each capacity run beside the planner's
capacity, and the factors fitted per (accelerator, engine)."""

from __future__ import annotations

from pydantic import Field

from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.strict import StrictModel


# ------------------------------------------------------------------------------------------ calibration
def error_pct(predicted: float | None, measured: float | None) -> float | None:
    """How far a prediction is from the measurement, in percent of the measurement (positive: it said more);
    None without both (or with a measurement of 0)."""
    if predicted is None or not measured:
        return None
    return (predicted - measured) / measured * 100


class CellComparison(StrictModel):
    """One measured cell (input length x concurrency of a run) against the model's prediction(s)."""

    run_id: str = Field(description="Stored run.")
    label: str | None = Field(default=None, description="Run label.")
    instance: str = Field(description="Instance type, or 'local' for this machine.")
    accelerator: str = Field(
        description="Calibration key: accelerator name (local:<CPU model> for local runs)."
    )
    engine: str = Field(description="Engine of the run.")
    model: str = Field(description="Model name.")
    input_len: int = Field(description="Input tokens of the cell.")
    output_len: int = Field(description="Output tokens of the cell.")
    concurrency: int = Field(description="Concurrency of the cell (0 for a request-rate probe).")
    request_rate: float | None = Field(
        default=None,
        description="Requests/s of a request-rate probe (a capacity search); None for a closed loop.",
    )
    measured_tpot_ms: float = Field(description="Median TPOT measured.")
    measured_ttft_ms: float | None = Field(default=None, description="Median TTFT measured.")
    measured_output_tps: float | None = Field(default=None, description="Output tokens/s measured.")
    predicted_tpot_ms: float = Field(description="Predicted with the factors estimates used before.")
    predicted_ttft_ms: float = Field(description="Predicted median TTFT with the factors used before.")
    predicted_output_tps: float = Field(description="Predicted output tokens/s before.")
    fitted_tpot_ms: float | None = Field(default=None, description="Predicted with the fitted factors.")
    fitted_ttft_ms: float | None = Field(
        default=None, description="Predicted median TTFT with the fitted factors."
    )
    fitted_output_tps: float | None = Field(
        default=None, description="Predicted output tokens/s with the fitted factors."
    )

    @property
    def tpot_error_pct(self) -> float | None:
        return error_pct(self.predicted_tpot_ms, self.measured_tpot_ms)

    @property
    def fitted_tpot_error_pct(self) -> float | None:
        return error_pct(self.fitted_tpot_ms, self.measured_tpot_ms)


class CapacityComparison(StrictModel):
    """A capacity run's measured capacity at its SLO against the planner's, before and after a fit."""

    run_id: str = Field(description="Stored capacity run.")
    label: str | None = Field(default=None, description="Run label.")
    load: str = Field(description="concurrency (users) or request_rate (requests/s).")
    slo: str = Field(description="The SLO searched for, e.g. 'p90 tpot <= 50 ms'.")
    input_len: int = Field(description="Input tokens per request.")
    output_len: int = Field(description="Output tokens per request.")
    measured_max_load: float | None = Field(description="Highest level measured meeting the SLO.")
    predicted_at_run: float | None = Field(
        default=None, description="What the planner predicted when the search ran (stored with the run)."
    )
    predicted_before: float | None = Field(
        default=None, description="Predicted with the factors before the fit."
    )
    predicted_after: float | None = Field(default=None, description="Predicted with the fitted factors.")

    @property
    def error_at_run_pct(self) -> float | None:
        return error_pct(self.predicted_at_run, self.measured_max_load)

    @property
    def error_before_pct(self) -> float | None:
        return error_pct(self.predicted_before, self.measured_max_load)

    @property
    def error_after_pct(self) -> float | None:
        return error_pct(self.predicted_after, self.measured_max_load)


class CalibrationGroup(StrictModel):
    """The fit for one (accelerator, engine)."""

    accelerator: str = Field(description="Accelerator name (calibration key).")
    engine: str = Field(description="Engine (calibration key).")
    kind: AcceleratorType = Field(description="gpu, neuron or cpu.")
    n_points: int = Field(description="Measured cells fitted.")
    runs: list[str] = Field(description="Runs the cells come from.")
    before_source: str = Field(description="'defaults' or 'calibration <id>': what estimates used before.")
    factors_before: EfficiencyFactors = Field(description="Factors estimates used before.")
    factors_after: EfficiencyFactors = Field(description="Fitted factors.")
    error_before: dict[str, float] = Field(
        description="Mean absolute % errors before: tpot, ttft, throughput."
    )
    error_after: dict[str, float] = Field(description="The same after fitting.")
    cells: list[CellComparison] = Field(description="Every cell: measured, predicted before and after.")
    capacity: list[CapacityComparison] = Field(
        default_factory=list, description="Every capacity run used: measured vs predicted capacity."
    )
    saved_id: int | None = Field(default=None, description="Stored calibration id (None in a dry run).")
    note: str | None = Field(default=None, description="Caveat about the fit, if any.")
    held_out_runs: list[str] = Field(
        default_factory=list,
        description="Other stored runs of the same accelerator and engine, not fitted, graded with the factors "
        "before and after the fit.",
    )
    held_out_error_before: dict[str, float] = Field(
        default_factory=dict, description="Mean absolute % errors on the held-out runs before the fit."
    )
    held_out_error_after: dict[str, float] = Field(
        default_factory=dict, description="The same with the fitted factors."
    )


class CalibrationReport(StrictModel):
    groups: list[CalibrationGroup] = Field(description="One fit per (accelerator, engine).")
    skipped: list[str] = Field(default_factory=list, description="Runs not used, with the reason.")
    saved: bool = Field(description="Whether the calibrations were stored (and estimates now use them).")
