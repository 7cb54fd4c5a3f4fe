"""CLI commands: ``recommend``, ``memory-breakdown``, ``estimate`` and ``plan calibrate``.

- ``recommend``: does the model fit, with which engine settings, and why; a refusal prints its reason and a
  way forward and exits 3 (``--format json`` still prints the whole answer on stdout);
- ``memory-breakdown``: where each GPU's / NeuronCore's memory goes (refused for CPU instances);
- ``estimate``: predicted TTFT, TPOT, E2E, tokens/s and cost for one instance (``--instance``, ``local`` for
  this machine) or ranked over the catalog; ``--slo`` finds the cheapest instance that meets it;
- ``plan calibrate``: fits the speed model to the measured runs in the store (sweep cells and capacity probes,
  through ``services.plan.calibrate``) and prints the error before and after, with each capacity run's
  measured capacity against the predicted one; estimates use the calibration from then on.
"""

from __future__ import annotations

from typing import Any

import typer
from pydantic import BaseModel, Field

from accelbench.cli.common import FormatOption, OutputFormat, err_console, print_json, user_errors
from accelbench.cli.load_flags import Flag, Given, Group, command, flag
from accelbench.cli.measure_flags import FORMAT_GROUP, FormatFlags
from accelbench.cli.plan_views import (
    render_breakdown,
    render_calibration,
    render_estimate,
    render_recommendation,
    render_table,
)
from accelbench.domain.estimate import EstimateTable
from accelbench.domain.plan_query import EstimateQuery
from accelbench.domain.run import EngineSettings
from accelbench.errors import AccelbenchError
from accelbench.services.model_fit import BreakdownRequest, RecommendRequest, breakdown, recommend_for
from accelbench.services.planning import calibrate, calibration_json, estimate_result
from accelbench.services.session import get_store

REFUSED_EXIT = 3
plan_app = typer.Typer(help="Planning: calibrate the speed model from measured runs.", no_args_is_help=True)


def _store_or_none() -> Any:
    try:
        return get_store()
    except Exception as exc:  # estimates still work from the shipped data without a store
        err_console.print(f"[yellow]Warning:[/] store unavailable ({exc}); no calibrations or stored prices.")
        return None


def _settings(
    tp: int | None, seqs: int | None, batched: int | None, kv_space: int | None, threads: int | None
) -> EngineSettings | None:
    given = {
        "tensor_parallel_size": tp,
        "max_num_seqs": seqs,
        "max_num_batched_tokens": batched,
        "kv_cache_space_gib": float(kv_space) if kv_space else None,
        "threads": threads,
    }
    values = {k: v for k, v in given.items() if v is not None}
    return EngineSettings(**values) if values else None


class RecommendFlags(BaseModel):
    """What ``recommend`` asks besides the deployment's settings (``EstimateQuery``'s fields)."""

    instance: str = Field(description="Catalog instance type, or 'local'.")
    max_model_len: int | None = Field(default=None, ge=16, description="Ask for this context length.")
    input_len: int | None = Field(default=None, ge=1, description="Typical prompt tokens.")
    output_len: int | None = Field(default=None, ge=1, description="Typical output tokens.")


#: the model and the settings a deployment fixes: the same fields (and flags) on recommend and estimate
QUERY_FLAGS = {
    "model": flag("--model", "-m", help="Preset name, model directory, .gguf file or hub id."),
    "quantization": flag(
        "--quantization",
        "-q",
        help="auto (the fallback chain), none, fp8, int8 or int4.",
        show_default="auto",
    ),
    "kv_cache_dtype": flag("--kv-cache-dtype", help="GPU: auto (the model dtype, vLLM's default) or fp8."),
    "engine": flag("--engine"),
    "tensor_parallel_size": flag("--tensor-parallel-size", "--tp"),
    "max_num_seqs": flag("--max-num-seqs", maximum=None),
    "max_num_batched_tokens": flag("--max-num-batched-tokens", maximum=None),
    "kv_cache_space_gib": flag("--kv-cache-space-gib", maximum=None),
    "threads": flag("--threads", show_default="one per core", maximum=None),
}


def model_on_instance(instance: Flag) -> tuple[Group, ...]:
    """The flags ``recommend`` and ``memory-breakdown`` both start with, in this order: the model, the instance
    (``instance``: how each command words it), the quantization, the context length and the KV cache dtype."""
    return (
        Group("query", EstimateQuery, {"model": QUERY_FLAGS["model"]}),
        Group("recommend", RecommendFlags, {"instance": instance}),
        Group("query", EstimateQuery, {"quantization": QUERY_FLAGS["quantization"]}),
        Group("recommend", RecommendFlags, {"max_model_len": flag("--max-model-len")}),
        Group("query", EstimateQuery, {"kv_cache_dtype": QUERY_FLAGS["kv_cache_dtype"]}),
    )


@command(
    *model_on_instance(flag("--instance", "-i")),
    Group(
        "recommend", RecommendFlags, {"input_len": flag("--input-len"), "output_len": flag("--output-len")}
    ),
    Group(
        "query",
        EstimateQuery,
        {k: v for k, v in QUERY_FLAGS.items() if k not in ("model", "quantization", "kv_cache_dtype")},
    ),
    FORMAT_GROUP,
)
def recommend_cmd(given: Given) -> None:
    """Does MODEL fit INSTANCE, with which settings, and why. Exits 3 when refused.

    Settings given (--tp, --max-num-seqs, --kv-cache-space-gib ...) are kept, and every memory figure is
    computed for them; one that cannot work is refused with the reason."""
    q, fmt = given.values("query"), given.model("format", FormatFlags).fmt
    with user_errors():
        own = given.model("recommend", RecommendFlags)
        settings = _settings(
            q["tensor_parallel_size"],
            q["max_num_seqs"],
            q["max_num_batched_tokens"],
            q["kv_cache_space_gib"],
            q["threads"],
        )
        request = RecommendRequest(
            model=q["model"],
            instance=own.instance,
            quantization=q["quantization"],
            max_model_len=own.max_model_len,
            kv_cache_dtype=q["kv_cache_dtype"],
            input_len=own.input_len,
            output_len=own.output_len,
            engine_settings=settings,
            engine=q["engine"],
        )
        outcome = recommend_for(request)
        rec = outcome.answer
    if fmt == OutputFormat.json:
        print_json(rec)
    else:
        render_recommendation(rec, model_max=outcome.model_max, asked=own.max_model_len)
    if not rec.fits:
        raise typer.Exit(REFUSED_EXIT)


@command(
    *model_on_instance(flag("--instance", "-i", help="Catalog GPU or Neuron instance type.")),
    FORMAT_GROUP,
)
def memory_breakdown_cmd(given: Given) -> None:
    """Where accelerator memory goes (GPU and Neuron). CPU instances are refused: see `recommend`."""
    q, own, fmt = given.values("query"), given.values("recommend"), given.model("format", FormatFlags).fmt
    with user_errors():
        request = BreakdownRequest(
            model=q["model"],
            instance=own["instance"],
            quantization=q["quantization"],
            max_model_len=own["max_model_len"],
            kv_cache_dtype=q["kv_cache_dtype"],
        )
        outcome = breakdown(request)
        b = outcome.answer
    if fmt == OutputFormat.json:
        print_json(b)
    else:
        render_breakdown(b, model_max=outcome.model_max, asked=own["max_model_len"])
    if b.verdict == "infeasible":
        raise typer.Exit(REFUSED_EXIT)


#: estimate's options: the fields of EstimateQuery (the API's and the pages' estimate too), with their flags
ESTIMATE_QUERY = Group(
    "query",
    EstimateQuery,
    {
        "model": QUERY_FLAGS["model"],
        "instance_type": flag("--instance", "-i", show_default="every catalog instance, ranked"),
        "accelerator_type": flag("--accelerator", "-a"),
        "max_cost": flag("--max-cost", minimum=0, maximum=None),
        "min_context": flag("--min-context", maximum=None),
        "quantization": QUERY_FLAGS["quantization"],
        "input_len": flag("--input-len", maximum=None),
        "output_len": flag("--output-len", maximum=None),
        "concurrency": flag("--concurrency", "-c", maximum=None),
        "slo": flag("--slo"),
        "arrivals": flag("--arrivals"),
        "limit": flag("--limit", maximum=None),
        "no_calibration": flag("--no-calibration"),
    }
    | {
        k: QUERY_FLAGS[k]
        for k in (
            "engine",
            "tensor_parallel_size",
            "max_num_seqs",
            "max_num_batched_tokens",
            "kv_cache_dtype",
            "kv_cache_space_gib",
            "threads",
        )
    }
    | {
        "cores": flag("--cores", maximum=None),
        "smt": flag("--smt"),
        "goal": flag("--goal"),
        "allow_quantization": flag("--allow-quantization"),
        "alternatives": flag("--alternatives"),
    },
    show_defaults=True,
)


@command(ESTIMATE_QUERY, FORMAT_GROUP)
def estimate_cmd(given: Given) -> None:
    """Predicted TTFT, TPOT, E2E, tokens/s and cost: one instance, or every feasible instance ranked.

    Settings given (--tp, --max-num-seqs, --kv-cache-dtype ...) are what the prediction assumes; the ones
    left open are chosen for --goal (cost or latency); --alternatives lists every option weighed."""
    fmt = given.model("format", FormatFlags).fmt
    with user_errors():
        query = given.model("query", EstimateQuery)  # a refusal names the flag
        result = estimate_result(_store_or_none(), query)
        if fmt == OutputFormat.json:
            print_json(result)  # the whole estimate or table (the API wraps it with paging)
        elif isinstance(result, EstimateTable):
            render_table(result, query.limit)
        else:
            render_estimate(result)
        if isinstance(result, EstimateTable):
            return
        if not result.feasible:
            raise typer.Exit(REFUSED_EXIT)


@plan_app.command("calibrate")
def calibrate_cmd(
    run: list[str] | None = typer.Option(
        None,
        "--run",
        "--from-run",
        "-r",
        help="Only these runs (repeatable; a local, Kubernetes or imported run).",
        show_default="all",
    ),
    accelerator: str | None = typer.Option(
        None, "--accelerator", help="Only this accelerator (e.g. H100-SXM, local:AMD EPYC)."
    ),
    engine: str | None = typer.Option(None, "--engine", help="Only this engine (e.g. vllm-cpu)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Fit and print, but do not store the calibration."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Fit the speed model's efficiency factors to the measured runs; print the error before and after."""
    with user_errors():
        rep = calibrate(get_store(), run_ids=run, accelerator=accelerator, engine=engine, dry_run=dry_run)
    if fmt == OutputFormat.json:
        print_json(calibration_json(rep))
    else:
        render_calibration(rep)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("recommend")(recommend_cmd)
    app.command("memory-breakdown")(memory_breakdown_cmd)
    app.command("estimate")(estimate_cmd)
    app.add_typer(plan_app, name="plan")


__all__ = ["AccelbenchError", "register"]
