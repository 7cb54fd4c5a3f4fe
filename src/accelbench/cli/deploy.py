"""CLI commands: ``accelbench export`` (Kubernetes manifests for a run) and ``accelbench loadgen`` (the
in-cluster load generator the exported Job runs; hidden from --help).

``export`` renders exactly what the Kubernetes target applies: the model server's Deployment and Service for
the instance's accelerator tier (settings from the planner unless the spec sets them), the load-generator
ConfigMap, headless Service and Indexed Job, and with ``--karpenter`` the NodePools and EC2NodeClasses.
Every Kubernetes object is validated against the Kubernetes schema in strict mode before anything is written.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError

from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    console,
    err_console,
    print_json,
    simple_table,
    user_errors,
)
from accelbench.domain.run import EngineSettings, EngineSpec, RunSpec
from accelbench.errors import UserInputError


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""

    @app.command("export")
    def export(
        model: str = typer.Option(None, "--model", "-m", help="Model: preset, hub id, path or s3:// URI."),
        instance: str = typer.Option(None, "--instance", "-i", help="Instance type the server is pinned to."),
        out: Path = typer.Option(..., "--out", "-o", help="Directory to write the manifests into."),
        runtime: str = typer.Option(
            None, "--runtime", "-r", help="Runtime.", show_default="the instance tier's"
        ),
        spec_file: Path = typer.Option(
            None, "--spec", help="Run spec YAML (engine settings, sweep); --model/--instance override it."
        ),
        namespace: str = typer.Option("accelbench", "--namespace", "-n", help="Kubernetes namespace."),
        max_model_len: int = typer.Option(
            None, "--max-model-len", help="Context length (else the planner's)."
        ),
        kv_cache_space_gib: float = typer.Option(
            None, "--kv-cache-space-gib", help="CPU KV-cache budget, whole GiB (else the planner's)."
        ),
        quantization: str = typer.Option(None, "--quantization", "-q", help="fp8, int8, int4 (per runtime)."),
        registry: str = typer.Option(None, "--registry", help="Pull-through registry prefix for images."),
        loadgen_image: str = typer.Option(None, "--loadgen-image", help="accelbench image for the Job."),
        shards: int = typer.Option(1, "--shards", min=1, max=64, help="Load-generator pods."),
        karpenter: bool = typer.Option(
            False, "--karpenter/--no-karpenter", help="Also write Karpenter pools."
        ),
        cluster_name: str = typer.Option(
            "accelbench", "--cluster-name", help="EKS cluster (Karpenter discovery)."
        ),
        hf_token_secret: str = typer.Option(None, "--hf-token-secret", help="Secret with key HF_TOKEN."),
        k8s_version: str = typer.Option(
            "1.33", "--k8s-version", help="Kubernetes version to validate against."
        ),
        force: bool = typer.Option(False, "--force", help="Render even if the planner says it does not fit."),
        fmt: OutputFormat = FormatOption,
    ) -> None:
        """Write the Kubernetes manifests of a benchmark run (model server, load generator, node pools)."""
        from accelbench import services
        from accelbench.deploy.manifests import ExportOptions, KarpenterOptions, write_bundle

        with user_errors():
            from accelbench.services.specs import load_run_spec

            spec = load_run_spec(spec_file) if spec_file else None
            if spec is None and not model:
                raise UserInputError("Give --model (or --spec with a model).")
            updates: dict[str, Any] = {}
            if model:
                updates["model"] = model
            if instance:
                updates["instance_type"] = instance
            settings = (spec.engine.settings if spec else EngineSettings()).model_copy(
                update={
                    k: v
                    for k, v in {
                        "max_model_len": max_model_len,
                        "kv_cache_space_gib": kv_cache_space_gib,
                        "quantization": quantization,
                    }.items()
                    if v is not None
                }
            )
            engine = spec.engine if spec else EngineSpec()
            engine = engine.model_copy(update={"settings": settings})
            if runtime:
                engine = EngineSpec(name=runtime, version=engine.version, settings=settings)
            base: dict[str, Any] = (
                spec.model_dump(exclude={"hf_token"}, exclude_unset=True) if spec else {"model": model}
            )
            base.update(updates)
            engine_data = engine.model_dump(exclude_unset=True)
            if "name" not in engine.model_fields_set:
                engine_data.pop("name", None)  # let the instance's tier choose the runtime
            base["engine"] = engine_data
            run_spec = RunSpec.model_validate(base)
            options = ExportOptions(
                namespace=namespace,
                runtime=runtime,
                registry=registry,
                loadgen_image=loadgen_image,
                loadgen_shards=shards,
                karpenter=KarpenterOptions(cluster_name=cluster_name) if karpenter else None,
                hf_token_secret=hf_token_secret,
                force=force,
            )
            bundle = services.export_bundle(run_spec, options, k8s_version=k8s_version)
            files = write_bundle(bundle, out)
        plan = bundle.engine
        if fmt == OutputFormat.json:
            print_json(
                {
                    "files": [str(f) for f in files],
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
            )
            return
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
        for f in files:
            console.print(f"wrote {f}")
        console.print(
            f"validated against Kubernetes {k8s_version} (strict); apply with: kubectl apply -f {out}"
        )

    @app.command("loadgen", hidden=True)
    def loadgen(
        config: Path = typer.Option(
            ..., "--config", help="The load-generator config (ConfigMap's loadgen.json)."
        ),
        shard: int = typer.Option(
            None, "--shard", help="Shard index.", show_default="from the Job's completion index"
        ),
    ) -> None:
        """Run one shard of an in-cluster sweep (or the whole capacity search) and print its results, framed."""
        from accelbench.deploy.incluster import run_shard
        from accelbench.deploy.manifests import LoadgenConfig

        with user_errors():
            try:
                cfg = LoadgenConfig.model_validate_json(config.read_text())
            except (OSError, ValidationError) as exc:
                raise UserInputError(f"Bad load-generator config {config}: {exc}") from exc
            index = shard
            if index is None:
                raw = (
                    os.environ.get("ACCELBENCH_SHARD_INDEX") or os.environ.get("JOB_COMPLETION_INDEX") or "0"
                )
                index = int(raw)
            if not 0 <= index < cfg.shards:
                raise UserInputError(f"Shard {index} is outside 0..{cfg.shards - 1}.")
            payload = run_shard(cfg, index, out=lambda line: print(line, flush=True))
        if payload.get("error"):
            err_console.print(f"[bold red]Error:[/] {payload['error']}")
            sys.exit(1)
