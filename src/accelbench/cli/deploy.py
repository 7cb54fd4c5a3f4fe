"""CLI commands: ``accelbench export`` (Kubernetes manifests for a run) and ``accelbench loadgen`` (the
in-cluster load generator the exported Job runs; hidden from --help).

``export`` renders exactly what the Kubernetes target applies: the model server's Deployment and Service for
the instance's accelerator tier (settings from the planner unless the spec sets them), the load-generator
ConfigMap, headless Service and Indexed Job, and with ``--karpenter`` the NodePools and EC2NodeClasses.
Every Kubernetes object is validated against the Kubernetes schema in strict mode before anything is written.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import typer

from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    console,
    err_console,
    options_command,
    print_json,
    simple_table,
    user_errors,
)
from accelbench.services.deploy_export import (
    ExportRequest,
    ExportResult,
    LoadgenRequest,
    export_run_manifests,
    run_loadgen_shard,
)


@dataclass(kw_only=True)
class ExportFlags:
    """The flags of ``export``: what ``services.deploy_export`` renders, and the output format."""

    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model: preset, hub id, path or s3:// URI.")
    ] = None
    instance: Annotated[
        str | None, typer.Option("--instance", "-i", help="Instance type the server is pinned to.")
    ] = None
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write the manifests into.")]
    runtime: Annotated[
        str | None, typer.Option("--runtime", "-r", help="Runtime.", show_default="the instance tier's")
    ] = None
    spec_file: Annotated[
        Path | None,
        typer.Option(
            "--spec", help="Run spec YAML (engine settings, sweep); --model/--instance override it."
        ),
    ] = None
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="Kubernetes namespace.")] = "accelbench"
    max_model_len: Annotated[
        int | None, typer.Option("--max-model-len", help="Context length (else the planner's).")
    ] = None
    kv_cache_space_gib: Annotated[
        float | None,
        typer.Option("--kv-cache-space-gib", help="CPU KV-cache budget, whole GiB (else the planner's)."),
    ] = None
    quantization: Annotated[
        str | None, typer.Option("--quantization", "-q", help="fp8, int8, int4 (per runtime).")
    ] = None
    registry: Annotated[
        str | None, typer.Option("--registry", help="Pull-through registry prefix for images.")
    ] = None
    loadgen_image: Annotated[
        str | None, typer.Option("--loadgen-image", help="accelbench image for the Job.")
    ] = None
    shards: Annotated[int, typer.Option("--shards", min=1, max=64, help="Load-generator pods.")] = 1
    karpenter: Annotated[
        bool, typer.Option("--karpenter/--no-karpenter", help="Also write Karpenter pools.")
    ] = False
    cluster_name: Annotated[
        str, typer.Option("--cluster-name", help="EKS cluster (Karpenter discovery).")
    ] = "accelbench"
    hf_token_secret: Annotated[
        str | None, typer.Option("--hf-token-secret", help="Secret with key HF_TOKEN.")
    ] = None
    k8s_version: Annotated[
        str, typer.Option("--k8s-version", help="Kubernetes version to validate against.")
    ] = "1.33"
    force: Annotated[
        bool, typer.Option("--force", help="Render even if the planner says it does not fit.")
    ] = False
    fmt: OutputFormat = FormatOption


def export(flags: ExportFlags) -> None:
    """Write the Kubernetes manifests of a benchmark run (model server, load generator, node pools)."""
    fields = asdict(flags)
    fmt = fields.pop("fmt")
    with user_errors():
        result = export_run_manifests(ExportRequest(**fields))
    if fmt == OutputFormat.json:
        print_json(export_json(result, flags.k8s_version))
        return
    show_export(result, flags.k8s_version, flags.out)


def export_json(result: ExportResult, k8s_version: str) -> dict[str, object]:
    bundle, plan = result.bundle, result.bundle.engine
    return {
        "files": [str(f) for f in result.files],
        "runtime": plan.runtime,
        "engine_version": plan.engine_version,
        "image": plan.image,
        "instance": plan.instance.name,
        "command": plan.command,
        "env": plan.env,
        "ready_timeout_s": bundle.ready_timeout_s,
        "warnings": bundle.warnings,
        "planner_notes": bundle.planner_notes,
        "validated_against": f"Kubernetes {k8s_version} (strict)",
    }


def show_export(result: ExportResult, k8s_version: str, out: Path) -> None:
    bundle, plan = result.bundle, result.bundle.engine
    console.print(
        simple_table(
            f"{plan.runtime} {plan.engine_version} on {plan.instance.name} ({plan.tier.value})",
            ["", ""],
            [
                ["image", plan.image],
                ["pod", f"{plan.size.cpus} CPU, {plan.size.memory_mib} MiB"],
                ["start-up allowance", f"{plan.size.startup_s} s"],
                ["service", plan.service_url],
                ["command", " ".join(plan.command)],
            ],
        )
    )
    for note in bundle.planner_notes:
        console.print(f"Planner: {note}", highlight=False)
    for w in bundle.warnings:
        err_console.print(f"[yellow]Warning:[/] {w}", highlight=False)
    for f in result.files:
        console.print(f"wrote {f}")
    console.print(f"validated against Kubernetes {k8s_version} (strict); apply with: kubectl apply -f {out}")


def loadgen(
    config: Path = typer.Option(
        ..., "--config", help="The load-generator config (ConfigMap's loadgen.json)."
    ),
    shard: int = typer.Option(
        None, "--shard", help="Shard index.", show_default="from the Job's completion index"
    ),
) -> None:
    """Run one shard of an in-cluster sweep (or the whole capacity search) and print its results, framed."""
    with user_errors():
        payload = run_loadgen_shard(
            LoadgenRequest(config=config, shard=shard), out=lambda line: print(line, flush=True)
        )
    if payload.get("error"):
        err_console.print(f"[bold red]Error:[/] {payload['error']}")
        sys.exit(1)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("export")(options_command(ExportFlags, export))
    app.command("loadgen", hidden=True)(loadgen)
