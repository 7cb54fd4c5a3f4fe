"""The comparison of two or more runs: what was compared, matched cells, ratios and cost.

A run is a set of cells, one per (input length, concurrency), each measured one or more times (repeats).
Cells of different runs are matched on (input length, concurrency); a cell's figure is the mean of its
repeats' medians (p95/p99 likewise: the mean of the repeats' p95s), with the min-max of the medians kept so
a reader can see the spread.

Ratios are computed per input length over the concurrencies both runs measured:
- decode speed-up at the lowest concurrency: TPOT of one run over the other (a single stream's speed);
- the total-throughput gap at each concurrency, and whether it widens or narrows from the lowest to the
  highest concurrency;
- per run: TPOT growth and TTFT growth from the lowest to the highest concurrency, output tok/s of one
  request at the lowest concurrency and the aggregate output tok/s at the highest.

Cost: cost per request = hourly / requests per s / 3600; cost per 1M tokens = hourly / tokens per s / 3600 x
1e6, where "tokens" are output tokens (what a user is served; the total-token variant is carried as well).
A run without an instance type (a local machine) has no price: its cost fields are None, never invented.

The baseline is the first run given, or the one chosen (``compare --baseline RUN``, the Compare page's picker):
every other run is compared with it, and every ratio shown to a person is said against it as a factor of at
least 1 with its direction in words (``report/comparison.py`` ``versus``). The latency percentiles a cell holds
are p50, p90 (from the stored summaries), p95 and p99.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from accelbench import __version__
from accelbench.domain.instance_types import PriceTier
from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunStatus
from accelbench.errors import UserInputError
from accelbench.report.capacity_results import build_capacity
from accelbench.report.catalog_lookup import accelerator_count, local_note, resolve_price
from accelbench.report.cell_matching import baseline_pairs, matched_cells
from accelbench.report.compared_cells import aggregate_cells, device_note
from accelbench.report.comparison import (
    TIER_LABELS,
    CapacityRun,
    CellResult,
    ComparedRun,
    Comparison,
    Finding,
    Growth,
    HourlyPrice,
    PairRatios,
    RunData,
    RunScaling,
    ThroughputGap,
    fmt_num,
    fmt_usd,
    lead,
)
from accelbench.report.findings import generate_findings
from accelbench.report.like_for_like import check_like_for_like
from accelbench.report.scaling import run_scaling
from accelbench.report.side_by_side import SIDE_BY_SIDE_COLUMNS, comparison_json, side_by_side_rows
from accelbench.report.tables import CellAggregate, aggregate_results
from accelbench.report.verdicts import MetricVerdict, comparison_verdicts, cost_verdict

if TYPE_CHECKING:
    from accelbench.store.repo import Store

#: what the callers of this module use (the model lives in report/comparison.py, the table in
#: report/side_by_side.py; the names stay importable from here, where a comparison is built)
__all__ = [
    "SIDE_BY_SIDE_COLUMNS",
    "TIER_LABELS",
    "CapacityRun",
    "CellResult",
    "ComparedRun",
    "Comparison",
    "Finding",
    "Growth",
    "HourlyPrice",
    "PairRatios",
    "RunData",
    "RunScaling",
    "ThroughputGap",
    "baseline_first",
    "build_comparison",
    "compare_runs",
    "comparison_json",
    "fmt_num",
    "fmt_usd",
    "lead",
    "load_runs",
    "not_comparable",
    "side_by_side_rows",
]


def load_runs(
    store: Store, refs: Sequence[str], *, tier: PriceTier = PriceTier.on_demand, min_runs: int = 1
) -> list[RunData]:
    """Read the runs (ids or unambiguous prefixes) with their results and prices.

    Raises UserInputError when fewer than ``min_runs`` are given, a run is named twice, or a run has no
    results yet.
    """
    if len(refs) < min_runs:
        raise UserInputError(
            f"Compare needs at least {min_runs} runs; got {len(refs)}.",
            hint="Give two or more run ids (`accelbench runs list` shows them), or use `accelbench report` "
            "for a single run.",
        )
    out: list[RunData] = []
    seen: set[str] = set()
    for ref in refs:
        run = store.get_run(ref)
        if run.id in seen:
            raise UserInputError(f"Run {run.id} is named twice; give each run once.")
        seen.add(run.id)
        results = store.get_results(run.id)
        if not results:
            raise UserInputError(
                f"Run {run.id} has no results to compare (status {run.status.value}).",
                hint="Wait until it has measured at least one cell, or pick another run.",
            )
        price, note = resolve_price(run, tier, store)
        out.append(RunData(run=run, results=results, price=price, price_note=note))
    return out


def baseline_first(store: Store, refs: Sequence[str], baseline: str | None = None) -> list[str]:
    """The runs' ids in the order they are compared: the baseline first (``baseline`` when given, else the
    first run named), the others in the order named. Raises UserInputError when ``baseline`` is not one of
    ``refs``."""
    ids = [store.get_run(ref).id for ref in refs]
    if baseline is None or not baseline.strip():
        return ids
    base = store.get_run(baseline.strip()).id
    if base not in ids:
        raise UserInputError(
            f"The baseline {base} is not one of the runs compared ({', '.join(ids)}).",
            hint="Pick the baseline among the runs compared; without one, the first run named is the baseline.",
        )
    return [base, *(i for i in ids if i != base)]


def not_comparable(run: RunInfo) -> str | None:
    """Why a run is not offered for comparison (it did not complete, or completed no request), else None."""
    if run.status != RunStatus.completed:
        if run.status == RunStatus.failed:
            return "failed" + (f": {run.error}" if run.error else "")
        if run.status.finished:
            return f"{run.status.value} before it completed"
        return f"still {run.status.value}: it can be compared once it has completed"
    if run.completed_requests == 0:
        return "completed no request: nothing to compare"
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _machine(run: RunInfo) -> str | None:
    env = run.environment or {}
    cpu = _dict(env.get("cpu"))
    parts: list[str] = []
    if cpu.get("model"):
        cores = cpu.get("usable_cpus") or cpu.get("logical_cpus")
        parts.append(f"{cpu['model']}" + (f" ({cores} CPUs)" if cores else ""))
    acc = _dict(env.get("accelerators"))
    gpus = acc.get("gpus") or []
    if gpus:
        names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")})
        parts.append(f"{len(gpus)} x {', '.join(names) or 'GPU'}")
    if acc.get("neuron_devices"):
        parts.append(f"{len(acc['neuron_devices'])} Neuron devices")
    return "; ".join(parts) or None


def _isa_trace(run: RunInfo) -> str | None:
    trace = (run.extra or {}).get("isa_trace")
    if trace is None:
        return None
    if isinstance(trace, str):
        return trace
    if isinstance(trace, dict):
        for key in ("verdict", "summary", "message"):
            if isinstance(trace.get(key), str):
                return str(trace[key])
    return None


def describe_run(data: RunData, name: str) -> ComparedRun:
    run = data.run
    isa = _dict(_dict((run.environment or {}).get("cpu")).get("isa"))
    return ComparedRun(
        id=run.id,
        name=name,
        label=run.label,
        kind=run.kind,
        status=run.status.value,
        created_at=run.created_at,
        model=run.model or run.served_model,
        engine=run.engine,
        engine_version=run.engine_version,
        target=run.target,
        instance_type=run.instance_type,
        machine=_machine(run),
        accelerator_type=run.accelerator_type,
        accelerator_name=run.accelerator_name,
        accelerator_count=accelerator_count(run),
        tp_degree=run.tp_degree,
        quantization=run.quantization,
        cpu_flags=[str(x) for x in isa.get("present", [])],
        cpu_matrix_engine=isa.get("matrix_engine"),
        isa_trace=_isa_trace(run),
        price=data.price,
        price_note=data.price_note,
    )


def display_names(runs: Sequence[RunInfo]) -> list[str]:
    """Labels where they are unique, else "label (id)"; the id when there is no label."""
    base = [r.label or r.id for r in runs]
    return [f"{n} ({r.id})" if base.count(n) > 1 else n for n, r in zip(base, runs, strict=True)]


def _run_notes(runs: Sequence[RunData], compared: Sequence[ComparedRun], tier: PriceTier) -> list[str]:
    """Per run, in order: why it has no price (set on the compared run too), its own notes, its devices'."""
    notes: list[str] = []
    for d, cr in zip(runs, compared, strict=True):
        if cr.price is None and cr.price_note is None:
            cr.price_note = (
                local_note(d.run)
                if not d.run.instance_type
                else f"{d.run.instance_type} ({d.run.id}) has no {TIER_LABELS[tier]} price; cost left blank."
            )
        if cr.price_note:
            notes.append(cr.price_note)
        notes.extend(d.extra_notes)
        dnote = device_note(d, cr.name)
        if dnote:
            notes.append(dnote)
    return notes


def _setup_notes(runs: Sequence[RunData], names: Sequence[str], cells: Sequence[CellResult]) -> list[str]:
    """What the ratios mix in besides hardware (different models, different precisions), then each cell that
    has no successful repeat."""
    notes: list[str] = []
    models = {d.run.id: (d.run.model or d.run.served_model) for d in runs}
    if len({m for m in models.values() if m}) > 1:
        notes.append(
            "The runs serve different models ("
            + ", ".join(f"{n}: {models[d.run.id] or 'unknown'}" for n, d in zip(names, runs, strict=True))
            + "): the ratios compare model and hardware together."
        )
    precisions = {d.run.id: d.run.quantization for d in runs}
    if len({q for q in precisions.values() if q}) > 1:
        notes.append(
            "The runs serve the weights at different precisions ("
            + ", ".join(f"{n}: {precisions[d.run.id] or 'unknown'}" for n, d in zip(names, runs, strict=True))
            + "): the ratios compare precision, engine and hardware together."
        )
    failed_cells = [c for c in cells if c.repeats == 0]
    for c in failed_cells:
        notes.append(
            f"{names[[d.run.id for d in runs].index(c.run_id)]}: cell input {c.input_len} x concurrency "
            f"{c.concurrency} has no successful repeat ({c.failed} requests failed)."
        )
    return notes


def build_comparison(
    runs: Sequence[RunData],
    *,
    tier: PriceTier = PriceTier.on_demand,
    with_findings: bool = True,
    allow_mismatch: bool = False,
) -> Comparison:
    """Compare the runs (the first is the baseline). One run gives its cells and scaling, no pairs. A run that
    is not like for like with the baseline is left out of the pairs and findings unless ``allow_mismatch``."""
    if not runs:
        raise UserInputError("Nothing to compare: give at least one run.")
    names = display_names([d.run for d in runs])
    compared = [describe_run(d, n) for d, n in zip(runs, names, strict=True)]
    cells: list[CellResult] = []
    aggregates: list[CellAggregate] = []
    for d in runs:
        aggregates.extend(run_cells := aggregate_results(list(d.results)))
        cells.extend(aggregate_cells(d, run_cells))
    notes = _run_notes(runs, compared, tier)
    capacity, capacity_notes = build_capacity(runs, compared, on_demand=tier == PriceTier.on_demand)
    notes.extend(capacity_notes)
    # a request-rate search stores every rate under concurrency 0: that cell mixes rates, no ratio rests on it
    mixed = {c.run_id for c in capacity if c.load == "request_rate"}
    ratio_cells = [c for c in cells if c.run_id not in mixed]
    matched, matching_notes = matched_cells([d.run.id for d in runs], ratio_cells)
    notes += matching_notes + _setup_notes(runs, names, cells)
    scaling = [
        s
        for d in runs
        for il in sorted({c.input_len for c in cells if c.run_id == d.run.id})
        if (s := run_scaling(d.run.id, il, cells)) is not None
    ]
    baseline = runs[0].run.id
    pairs, pair_notes = baseline_pairs([d.run.id for d in runs], names, ratio_cells)
    notes += pair_notes
    comparison = Comparison(
        generated_at=datetime.now(UTC),
        accelbench_version=__version__,
        tier=tier,
        baseline=baseline,
        runs=compared,
        cells=cells,
        matched=matched,
        scaling=scaling,
        pairs=pairs,
        notes=notes,
        capacity=capacity,
        verdicts=with_cost_verdicts(comparison_verdicts(aggregates, baseline, matched), compared),
    )
    check_like_for_like(comparison, [d.run for d in runs], allow_mismatch=allow_mismatch)
    if with_findings:
        comparison.findings = generate_findings(comparison)
    return comparison


def with_cost_verdicts(verdicts: list[MetricVerdict], runs: Sequence[ComparedRun]) -> list[MetricVerdict]:
    """The verdicts, each output throughput's followed by the cost per 1M output tokens' of the same cell where
    both runs have a price (``report/verdicts.py`` ``cost_verdict``)."""
    prices = {r.id: r.price.usd_per_hour if r.price else None for r in runs}
    out: list[MetricVerdict] = []
    for v in verdicts:
        out.append(v)
        if v.metric == "output_throughput":
            cost = cost_verdict(v, prices.get(v.baseline), prices.get(v.run_id))
            if cost is not None:
                out.append(cost)
    return out


def compare_runs(
    store: Store,
    refs: Sequence[str],
    *,
    tier: PriceTier = PriceTier.on_demand,
    min_runs: int = 2,
    baseline: str | None = None,
    allow_mismatch: bool = False,
) -> Comparison:
    """Load the runs from the store and compare them (``min_runs=1`` for a single-run report): every run
    against the baseline, ``baseline`` when given (one of ``refs``), else the first run named; runs not like for
    like with it are kept out of the ratios unless ``allow_mismatch``."""
    if baseline is not None and len(refs) >= min_runs:
        refs = baseline_first(store, refs, baseline)
    runs = load_runs(store, refs, tier=tier, min_runs=min_runs)
    return build_comparison(runs, tier=tier, allow_mismatch=allow_mismatch)
