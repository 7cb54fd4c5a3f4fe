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
from pydantic import ValidationError

from accelbench.cli.common import FormatOption, OutputFormat, err_console, print_json, user_errors
from accelbench.cli.input_errors import current_params, flag_error
from accelbench.cli.plan_views import (
    render_breakdown,
    render_calibration,
    render_estimate,
    render_recommendation,
    render_table,
)
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.plan_types import (
    EstimateQuery,
    EstimateTable,
)
from accelbench.domain.run import EngineSettings
from accelbench.errors import AccelbenchError
from accelbench.services.model_fit import BreakdownRequest, RecommendRequest, breakdown, recommend_for
from accelbench.services.planning import calibrate, calibration_json, estimate_result
from accelbench.services.session import get_store

REFUSED_EXIT = 3
plan_app = typer.Typer(help="Planning: calibrate the speed model from measured runs.", no_args_is_help=True)

ModelOpt = typer.Option(..., "--model", "-m", help="Preset name, model directory, .gguf file or hub id.")
QuantOpt = typer.Option(
    None,
    "--quantization",
    "-q",
    help="auto (the fallback chain), none, fp8, int8 or int4.",
    show_default="auto",
)
MaxLenOpt = typer.Option(None, "--max-model-len", min=16, help="Ask for this context length.")
KvOpt = typer.Option(None, "--kv-cache-dtype", help="GPU: auto (the model dtype, vLLM's default) or fp8.")
_EQ = EstimateQuery.model_fields  # flags take their defaults, bounds and help from the estimate query
# the settings a deployment fixes; the same flags on recommend and estimate
EngineOpt = typer.Option(None, "--engine", help=_EQ["engine"].description)
TpOpt = typer.Option(
    None, "--tensor-parallel-size", "--tp", min=1, max=64, help=_EQ["tensor_parallel_size"].description
)
SeqsOpt = typer.Option(None, "--max-num-seqs", min=1, help=_EQ["max_num_seqs"].description)
BatchedOpt = typer.Option(
    None, "--max-num-batched-tokens", min=16, help=_EQ["max_num_batched_tokens"].description
)
KvSpaceOpt = typer.Option(None, "--kv-cache-space-gib", min=1, help=_EQ["kv_cache_space_gib"].description)
ThreadsOpt = typer.Option(
    None, "--threads", min=1, help=_EQ["threads"].description, show_default="one per core"
)
CoresOpt = typer.Option(None, "--cores", min=1, help=_EQ["cores"].description)
SmtOpt = typer.Option(None, "--smt", min=1, max=8, help=_EQ["smt"].description)


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


def recommend_cmd(
    model: str = ModelOpt,
    instance: str = typer.Option(..., "--instance", "-i", help="Catalog instance type, or 'local'."),
    quantization: str | None = QuantOpt,
    max_model_len: int | None = MaxLenOpt,
    kv_cache_dtype: str | None = KvOpt,
    input_len: int | None = typer.Option(None, "--input-len", min=1, help="Typical prompt tokens."),
    output_len: int | None = typer.Option(None, "--output-len", min=1, help="Typical output tokens."),
    engine: str | None = EngineOpt,
    tensor_parallel_size: int | None = TpOpt,
    max_num_seqs: int | None = SeqsOpt,
    max_num_batched_tokens: int | None = BatchedOpt,
    kv_cache_space_gib: int | None = KvSpaceOpt,
    threads: int | None = ThreadsOpt,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Does MODEL fit INSTANCE, with which settings, and why. Exits 3 when refused.

    Settings given (--tp, --max-num-seqs, --kv-cache-space-gib ...) are kept, and every memory figure is
    computed for them; one that cannot work is refused with the reason."""
    with user_errors():
        settings = _settings(
            tensor_parallel_size, max_num_seqs, max_num_batched_tokens, kv_cache_space_gib, threads
        )
        request = RecommendRequest(
            model=model,
            instance=instance,
            quantization=quantization,
            max_model_len=max_model_len,
            kv_cache_dtype=kv_cache_dtype,
            input_len=input_len,
            output_len=output_len,
            settings=settings,
            engine=engine,
        )
        outcome = recommend_for(request)
        rec = outcome.recommendation
    if fmt == OutputFormat.json:
        print_json(rec)
    else:
        render_recommendation(rec, model_max=outcome.model_max, asked=max_model_len)
    if not rec.fits:
        raise typer.Exit(REFUSED_EXIT)


def memory_breakdown_cmd(
    model: str = ModelOpt,
    instance: str = typer.Option(..., "--instance", "-i", help="Catalog GPU or Neuron instance type."),
    quantization: str | None = QuantOpt,
    max_model_len: int | None = MaxLenOpt,
    kv_cache_dtype: str | None = KvOpt,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Where accelerator memory goes (GPU and Neuron). CPU instances are refused: see `recommend`."""
    with user_errors():
        request = BreakdownRequest(
            model=model,
            instance=instance,
            quantization=quantization,
            max_model_len=max_model_len,
            kv_cache_dtype=kv_cache_dtype,
        )
        outcome = breakdown(request)
        b = outcome.breakdown
    if fmt == OutputFormat.json:
        print_json(b)
    else:
        render_breakdown(b, model_max=outcome.model_max, asked=max_model_len)
    if b.verdict == "infeasible":
        raise typer.Exit(REFUSED_EXIT)


def estimate_cmd(
    model: str = ModelOpt,
    instance: str | None = typer.Option(
        None,
        "--instance",
        "-i",
        help=_EQ["instance_type"].description,
        show_default="every catalog instance, ranked",
    ),
    accelerator: AcceleratorType | None = typer.Option(
        None, "--accelerator", "-a", help=_EQ["accelerator_type"].description
    ),
    max_cost: float | None = typer.Option(None, "--max-cost", min=0, help=_EQ["max_cost"].description),
    min_context: int | None = typer.Option(
        None, "--min-context", min=16, help=_EQ["min_context"].description
    ),
    quantization: str | None = QuantOpt,
    input_len: int = typer.Option(
        _EQ["input_len"].default, "--input-len", min=1, help=_EQ["input_len"].description
    ),
    output_len: int = typer.Option(
        _EQ["output_len"].default, "--output-len", min=1, help=_EQ["output_len"].description
    ),
    concurrency: int = typer.Option(
        _EQ["concurrency"].default, "--concurrency", "-c", min=1, help=_EQ["concurrency"].description
    ),
    slo: str | None = typer.Option(None, "--slo", help=_EQ["slo"].description),
    arrivals: str = typer.Option(_EQ["arrivals"].default, "--arrivals", help=_EQ["arrivals"].description),
    limit: int = typer.Option(_EQ["limit"].default, "--limit", min=1, help=_EQ["limit"].description),
    no_calibration: bool = typer.Option(False, "--no-calibration", help=_EQ["no_calibration"].description),
    engine: str | None = EngineOpt,
    tensor_parallel_size: int | None = TpOpt,
    max_num_seqs: int | None = SeqsOpt,
    max_num_batched_tokens: int | None = BatchedOpt,
    kv_cache_dtype: str | None = KvOpt,
    kv_cache_space_gib: int | None = KvSpaceOpt,
    threads: int | None = ThreadsOpt,
    cores: int | None = CoresOpt,
    smt: int | None = SmtOpt,
    goal: str = typer.Option(_EQ["goal"].default, "--goal", help=_EQ["goal"].description),
    allow_quantization: bool = typer.Option(
        False, "--allow-quantization", help=_EQ["allow_quantization"].description
    ),
    alternatives: bool = typer.Option(False, "--alternatives", help=_EQ["alternatives"].description),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Predicted TTFT, TPOT, E2E, tokens/s and cost: one instance, or every feasible instance ranked.

    Settings given (--tp, --max-num-seqs, --kv-cache-dtype ...) are what the prediction assumes; the ones
    left open are chosen for --goal (cost or latency); --alternatives lists every option weighed."""
    with user_errors():
        try:
            query = EstimateQuery(
                model=model,
                instance_type=instance,
                accelerator_type=accelerator,
                max_cost=max_cost,
                min_context=min_context,
                quantization=quantization,
                input_len=input_len,
                output_len=output_len,
                concurrency=concurrency,
                slo=slo,
                arrivals=arrivals,
                limit=limit,
                no_calibration=no_calibration,
                engine=engine,
                tensor_parallel_size=tensor_parallel_size,
                max_num_seqs=max_num_seqs,
                max_num_batched_tokens=max_num_batched_tokens,
                kv_cache_dtype=kv_cache_dtype,
                kv_cache_space_gib=kv_cache_space_gib,
                threads=threads,
                cores=cores,
                smt=smt,
                goal=goal,
                allow_quantization=allow_quantization,
                alternatives=alternatives,
            )
        except ValidationError as exc:
            raise flag_error(exc, params=current_params()) from None
        result = estimate_result(_store_or_none(), query)
        if fmt == OutputFormat.json:
            print_json(result)  # the whole estimate or table (the API wraps it with paging)
        elif isinstance(result, EstimateTable):
            render_table(result, limit)
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
