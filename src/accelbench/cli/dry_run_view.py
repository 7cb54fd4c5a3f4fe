"""What ``run --dry-run`` prints: the deployment it would make (engine, image, command, environment), the
cells it would measure with their predicted time and cost, or the capacity search it would run."""

from __future__ import annotations

from typing import Any

from accelbench.cli.common import OutputFormat, console, print_json, simple_table
from accelbench.services.run_local import redacted_command


def print_dry_run(plan: Any, fmt: OutputFormat) -> None:
    if fmt == OutputFormat.json:
        print_json(plan.model_dump(mode="json"))
        return
    where = plan.instance_type or "this machine"
    console.print(
        f"Dry run: {plan.model} with {plan.runtime} {plan.engine_version} on {plan.target} ({where}, "
        f"{plan.accelerator_type}); nothing stored or started.",
        highlight=False,
    )
    if plan.image:
        console.print(f"Image: {plan.image}", highlight=False)
    if plan.argv:
        console.print(f"Command: {redacted_command(plan.argv)}", highlight=False)
    for k, v in plan.env.items():
        console.print(f"  {k}={v}", highlight=False)
    for w in plan.warnings:
        console.print(f"[yellow]Warning:[/] {w}", highlight=False)
    if plan.capacity is not None:
        print_capacity_plan(plan)
        return
    rows = [
        (
            c.input_len,
            c.concurrency,
            c.repeats,
            c.requests,
            "" if c.predicted_s is None else f"{c.predicted_s:g}",
        )
        for c in plan.cells
    ]
    headers = ["input", "concurrency", "repeats", "requests", "predicted s / repeat"]
    console.print(simple_table("Cells", headers, rows))
    line = f"{plan.requests} requests in all"
    if plan.predicted_duration_s is not None:
        line += f"; predicted {plan.predicted_duration_s / 60:.1f} min of load"
        if plan.predicted_cost_usd is not None:
            line += f", ${plan.predicted_cost_usd:.2f} at ${plan.hourly_usd:.3f}/h"
    console.print(line + ".", highlight=False)
    for note in plan.prediction_notes:
        console.print(f"  ({note})", highlight=False)


def print_capacity_plan(plan: Any) -> None:
    """A dry run's capacity search: what it judges, where it starts, how far it may go."""
    c = plan.capacity
    unit = "users" if c.load == "concurrency" else "requests/s"
    what = f"at {c.slo}" if c.slo else "without an SLO: the knee, where adding load stops adding throughput"
    console.print(f"Capacity search ({c.load}) {what}.", highlight=False)
    console.print(f"  first level: {c.start:g} {unit} (from {c.start_from})", highlight=False)
    if c.predicted_max_load is not None:
        console.print(f"  the planner's capacity: {c.predicted_max_load:g} {unit}", highlight=False)
    console.print(
        f"  up to {c.max_load:g} {unit}, at most {c.max_probes} levels, {c.requests_per_level} requests "
        f"judged per level, {c.requests_at_most} requests at most",
        highlight=False,
    )
    if plan.hourly_usd is not None:
        console.print(f"  priced at ${plan.hourly_usd:.3f}/h", highlight=False)
    for note in plan.prediction_notes:
        console.print(f"  ({note})", highlight=False)
