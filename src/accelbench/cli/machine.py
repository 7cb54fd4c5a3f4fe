"""CLI commands: ``accelbench machine probe``.

``probe`` measures this machine (memory bandwidth of one core and of all usable cores; decode- and
prefill-shaped matrix multiplies, BF16 through torch where it can) and saves the figures for the planner,
which then predicts "local" from them instead of its cited guesses (``services/machine_probe.py``).
"""

from __future__ import annotations

import typer
from rich.table import Table

from accelbench.cli.common import FormatOption, OutputFormat, console, err_console, print_json, user_errors
from accelbench.domain.machine import MachineProbe
from accelbench.services.machine_probe import probe_this_machine

machine_app = typer.Typer(help="This machine, as the planner sees it.", no_args_is_help=True)


def _num(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def probe_table(probe: MachineProbe, saved: str) -> Table:
    cores = probe.cores_used
    gemm = f"{probe.gemm_library} {probe.gemm_dtype}" + (
        "" if probe.bf16_measured else " (BF16 not measured)"
    )
    decode = next((g for g in probe.gemm if g.shape == "decode"), None)
    prefill = next((g for g in probe.gemm if g.shape == "prefill" and g.threads == cores), None)
    dshape = f"{decode.m}x{decode.k}x{decode.n}" if decode else "decode"
    pshape = f"{prefill.m}x{prefill.k}x{prefill.n}" if prefill else "prefill"
    rows = [
        ("CPU", f"{probe.cpu_model} ({probe.arch})"),
        (
            "Cores used",
            f"{cores}"
            + (f", {probe.threads_per_core} thread(s) per core" if probe.threads_per_core else "")
            + (f", {probe.numa_nodes} NUMA node(s)" if probe.numa_nodes > 1 else ""),
        ),
        ("ISA", ", ".join(probe.isa) or "-"),
        ("Memory bandwidth, 1 core", f"{_num(probe.single_core_gbps)} GB/s"),
        (
            f"Memory bandwidth, {cores} cores",
            f"{_num(probe.all_core_gbps)} GB/s ({_num(probe.all_core_gbps_per_core)} per core)",
        ),
        (f"GEMM decode {dshape}, 1 core", f"{_num(probe.decode_gflops_single)} GFLOP/s"),
        (f"GEMM decode {dshape}, {cores} cores", f"{_num(probe.decode_gflops_all)} GFLOP/s"),
        (f"GEMM prefill {pshape}, 1 core", f"{_num(probe.prefill_gflops_single)} GFLOP/s"),
        (
            f"GEMM prefill {pshape}, {cores} cores",
            f"{_num(probe.prefill_gflops_all)} GFLOP/s ({_num(probe.prefill_gflops_per_core)} per core)",
        ),
        ("GEMM library", f"{gemm}, in {probe.gemm_python}"),
        ("Last-level cache", f"{_num(probe.llc_mib, 0)} MiB" if probe.llc_mib else "-"),
        ("Measured", f"{probe.measured_at:%Y-%m-%d %H:%M:%S} UTC in {probe.wall_seconds:.1f} s"),
        ("Saved", saved),
    ]
    table = Table(title="Machine probe", header_style="bold", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("measured", overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    return table


@machine_app.command("probe")
def probe(
    quick: bool = typer.Option(False, "--quick", help="Small sizes, seconds (a check; never saved)."),
    no_save: bool = typer.Option(False, "--no-save", help="Print the figures without saving them."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Measure memory bandwidth and matrix-multiply speed of this machine; the planner's "local" uses them."""

    def progress(message: str) -> None:
        err_console.print(f"[dim]probe:[/] {message}", highlight=False)

    with user_errors():
        outcome = probe_this_machine(quick=quick, save=not no_save, progress=progress)
    saved = str(outcome.saved_to) if outcome.saved_to else f"not saved: {outcome.not_saved_reason}"
    if fmt == OutputFormat.json:
        data = outcome.probe.model_dump(mode="json")
        data["saved_to"] = str(outcome.saved_to) if outcome.saved_to else None
        print_json(data)
        return
    console.print(probe_table(outcome.probe, saved))
    for note in outcome.probe.notes:
        err_console.print(f"[yellow]Note:[/] {note}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(machine_app, name="machine")
