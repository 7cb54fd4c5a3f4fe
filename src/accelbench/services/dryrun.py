"""A run's dry run: what it would deploy and measure (runtime, image, exact argv, masked environment, cells, or
what a capacity search will do) and what the planner predicts the load will take and cost, after the preflight
every submitted run passes; nothing is stored or started. ``accelbench run SPEC --dry-run``,
``POST /api/v1/runs?dry_run=true`` and the Run page's Preview all answer this."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from accelbench.bench.capacity_search import level_config, requests_for
from accelbench.deploy.engines import find_engine
from accelbench.domain.instance_types import InstanceType
from accelbench.domain.plan_query import PlanQuery
from accelbench.domain.run import DryRun, DryRunCapacity, DryRunCell, RunSpec
from accelbench.errors import AccelbenchError
from accelbench.plan.estimate import estimate
from accelbench.plan.hardware import local_machine
from accelbench.redact import redact
from accelbench.runtimes import get_runtime
from accelbench.services.capacity_at_slo import plan_for_run
from accelbench.services.run_checks import CheckedRun, load_model, preflight, tier_of

log = logging.getLogger("accelbench.services")


def dry_run(spec: RunSpec) -> DryRun:
    """What ``spec`` would deploy and measure (runtime, image, exact argv, environment with secrets masked,
    warnings, cells), after the same preflight a submitted run passes; nothing is stored or started."""

    checked = preflight(spec)
    spec = checked.spec
    runtime = get_runtime(spec.engine.name)
    version = spec.engine.version or runtime.default_version
    params = checked.params
    argv: list[str] = []
    env: dict[str, str] = {}
    image = None
    if params is not None:
        env = redact(runtime.env(params))
        if spec.target.kind == "local":
            engine = find_engine(spec.engine.name, spec.engine.version)
            argv = runtime.command(params, python=engine.python if engine else "python3")
        else:
            argv = runtime.serve_args(params)
            image = runtime.default_image(version, arch=params.arch)
    what = {
        "model": spec.model,
        "runtime": runtime.name,
        "engine_version": version,
        "target": spec.target.kind,
        "instance_type": spec.instance_type,
        "accelerator_type": tier_of(checked.instance).value,
        "image": image,
        "argv": argv,
        "env": env,
        "warnings": checked.warnings,
    }
    if spec.capacity is not None:
        capacity, hourly, notes = plan_search(spec)
        return DryRun(
            **what,
            cells=[],
            capacity=capacity,
            requests=capacity.requests_at_most,
            hourly_usd=hourly,
            prediction_notes=notes,
        )
    prediction = checked_prediction(checked)
    return DryRun(
        **what,
        cells=prediction.cells,
        requests=sum(c.requests * c.repeats for c in prediction.cells),
        predicted_duration_s=prediction.duration_s,
        hourly_usd=prediction.hourly_usd,
        predicted_cost_usd=prediction.cost_usd,
        prediction_notes=prediction.notes,
    )


def checked_prediction(checked: CheckedRun) -> SweepPrediction:
    """The planner's prediction of a checked run's sweep, cell by cell: what the dry run answers, and what a
    submitted run keeps (``services/submit.py``) so its page can say how long is left."""
    spec = checked.spec
    sweep = spec.sweep
    cells = [
        DryRunCell(
            input_len=n, concurrency=c, repeats=sweep.repeats, requests=c * sweep.prompts_per_concurrency
        )
        for n, c in sweep.cells()
    ]

    return predict_sweep(spec, checked.instance, get_runtime(spec.engine.name).name, cells)


def plan_search(spec: RunSpec) -> tuple[DryRunCapacity, float | None, list[str]]:
    """What a spec's capacity search will do: its load and SLO, the first level and where it comes from (the
    spec, the planner's predicted capacity, else 1), how far and how many levels it may go, the requests each
    level judges and the most it can send; with the instance's hourly price and what is not predicted."""

    capacity = spec.capacity
    plan = plan_for_run(spec)
    assert capacity is not None and plan is not None
    slo = capacity.target()
    top = level_config(capacity.bench_config(), load=capacity.load, level=capacity.max_load, slo=slo)
    search = DryRunCapacity(
        load=capacity.load,
        slo=slo.label() if slo else None,
        start=plan.start,
        start_from=plan.start_from,
        max_load=capacity.max_load,
        max_probes=capacity.max_probes,
        requests_per_level=requests_for(slo.percentile if slo else 90.0),
        requests_at_most=capacity.max_probes * top.num_prompts,
        predicted_max_load=plan.predicted_max_load,
    )
    notes = [
        "a capacity search's duration depends on where the boundary lies: not predicted",
        "a closed loop also sends each level's first wave (its concurrency) and warm-ups, which are not judged"
        if capacity.load == "concurrency"
        else f"each rate level runs at least 10 s (rate x 10 s requests when that is more than "
        f"{search.requests_per_level})",
        *plan.notes,
    ]
    return search, plan.hourly_usd, notes


@dataclass
class SweepPrediction:
    """What the planner predicts a run's load will take: each cell's seconds per repeat, the whole, the cost."""

    cells: list[DryRunCell]
    duration_s: float | None
    hourly_usd: float | None
    cost_usd: float | None
    notes: list[str]


def predict_sweep(
    spec: RunSpec, instance: InstanceType | None, runtime: str, cells: list[DryRunCell]
) -> SweepPrediction:
    """The planner's prediction of ``spec``'s sweep on its instance (a local run: this machine), with the
    run's own engine settings: a cell's repeat takes its requests / the predicted requests per second at its
    concurrency (requests sent in bursts, as the sweep sends them); the warm-ups, sent once, take their
    predicted latency each. The engine's start-up and the model's download are not predicted."""

    sweep = spec.sweep
    notes = ["load only: the engine's start-up and the model's download are not included"]
    try:
        model = load_model(spec.model)
        if instance is None:
            inst, accel = local_machine()
        else:
            inst, accel = instance, None
        out: list[DryRunCell] = []
        first_e2e_s: float | None = None
        for cell in cells:
            est = estimate(
                model,
                inst,
                PlanQuery(
                    input_len=cell.input_len,
                    output_len=sweep.output_len,
                    concurrency=cell.concurrency,
                    engine=runtime,
                    engine_settings=spec.engine.settings,
                ),
                spec=accel,
            )
            rps = est.requests_per_s
            out.append(
                cell.model_copy(update={"predicted_s": round(cell.requests / rps, 1) if rps else None})
            )
            if first_e2e_s is None and est.e2e_ms:
                first_e2e_s = est.e2e_ms / 1000.0
            hourly = est.hourly_usd
    except AccelbenchError as exc:
        return SweepPrediction(cells, None, None, None, [f"no prediction: {exc.message}"])
    except Exception as exc:  # the prediction is advice: a planner failure never fails the dry run itself
        log.warning("dry run: no prediction for %s", spec.model, exc_info=True)
        return SweepPrediction(cells, None, None, None, [f"no prediction: {type(exc).__name__}: {exc}"])
    if any(c.predicted_s is None for c in out):
        return SweepPrediction(
            out, None, hourly, None, [*notes, "the planner cannot predict every cell here"]
        )
    total = sum((c.predicted_s or 0.0) * c.repeats for c in out)
    if sweep.num_warmups and first_e2e_s:
        total += sweep.num_warmups * first_e2e_s
        notes.append(f"{sweep.num_warmups} warm-up request(s) at the first cell's predicted latency each")
    cost = round(hourly * total / 3600.0, 4) if hourly is not None and instance is not None else None
    if instance is None:
        hourly = None
        notes.append("this machine has no price: no cost")
    return SweepPrediction(out, round(total, 1), hourly, cost, notes)
