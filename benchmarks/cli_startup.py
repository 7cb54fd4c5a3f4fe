"""How long the commonest commands take to start, beside ``python -c pass`` (the floor) and, with ``--baseline REF``,
beside the same commands of another commit (checked out in a temporary git worktree and run with this environment).

Each command is run ``--repeats`` times, all variants interleaved so that a busy machine slows them alike; the
medians are printed with the ratio to the baseline. ``runs list`` reads an empty store made for the run.

A second floor, ``libraries of runs list``, imports only the libraries ``runs list`` cannot do without (SQLAlchemy
for the store, pydantic-settings for the settings, typer with the pydantic adapters it builds each option's parser
from, rich's console and table): the part of its start-up that accelbench's own code cannot remove. Its ratio to
the baseline's ``runs list`` is the lowest that command can reach on these libraries.

Usage (from the repository root):
    python benchmarks/cli_startup.py                       # this tree
    python benchmarks/cli_startup.py --baseline 6390132    # this tree against that commit, side by side

The numbers depend on the machine and on what else runs on it; compare the ratios within one invocation.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What `runs list` imports before it reads a row, without accelbench: typer._adapters is where typer 0.29 builds an
# option's parser from pydantic (it imports pydantic itself).
LIBRARY_FLOOR = "import sqlalchemy, pydantic_settings, typer, typer._adapters, rich.console, rich.table"
COMMANDS: dict[str, str | list[str]] = {
    "python -c pass": "pass",
    "libraries of runs list": LIBRARY_FLOOR,
    "accelbench --version": ["--version"],
    "accelbench --help": ["--help"],
    "accelbench runs list": ["runs", "list"],
}


def run_once(src: Path | None, args: str | list[str], env: dict[str, str], store: str) -> float:
    """One process: ``args`` is Python code for ``-c`` (a floor) or the arguments of an accelbench command."""
    if isinstance(args, str):
        cmd = [sys.executable, "-c", args]
    else:
        cmd = [sys.executable, "-c", "from accelbench.cli.main import main; main()", *args]
    run_env = dict(env)
    run_env["ACCELBENCH_DATABASE_URL"] = store  # each tree its own: an older tree refuses a newer schema
    if src is not None:
        run_env["PYTHONPATH"] = str(src)
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=run_env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--baseline", default=None, help="a commit to measure side by side (a temporary worktree)")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env["COLUMNS"] = "120"
        trees: dict[str, Path | None] = {"this tree": ROOT / "src"}
        if a.baseline:
            wt = Path(tmp) / "baseline"
            subprocess.run(
                ["git", "worktree", "add", "--detach", "-q", str(wt), a.baseline], cwd=ROOT, check=True
            )
            trees[a.baseline] = wt / "src"
        try:
            stores = {name: f"sqlite:///{tmp}/store-{i}.db" for i, name in enumerate(trees)}
            for name, src in trees.items():  # warm the store and the byte-code caches once
                for args in COMMANDS.values():
                    run_once(src, args, env, stores[name])
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(a.repeats):
                for name, src in trees.items():
                    for label, args in COMMANDS.items():
                        times.setdefault((name, label), []).append(run_once(src, args, env, stores[name]))
        finally:
            if a.baseline:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(Path(tmp) / "baseline")], cwd=ROOT
                )
    floor = statistics.median(times[("this tree", "python -c pass")])
    print(f"median of {a.repeats} runs each, interleaved; floor (python -c pass) {floor:.3f} s")
    head = f"{'command':<24}" + "".join(f"{name[:14]:>16}" for name in trees)
    if a.baseline:
        head += f"{'this / baseline':>18}"
    print(head)
    for label in COMMANDS:
        row = f"{label:<24}"
        meds = {name: statistics.median(times[(name, label)]) for name in trees}
        row += "".join(f"{meds[name]:>14.3f} s" for name in trees)
        if a.baseline:
            row += f"{meds['this tree'] / meds[a.baseline]:>17.2f}x"
        print(row)
    if a.baseline:
        libs = statistics.median(times[("this tree", "libraries of runs list")])
        base = statistics.median(times[(a.baseline, "accelbench runs list")])
        print(
            f"the libraries of runs list alone take {libs:.3f} s, {libs / base:.2f}x of {a.baseline}'s runs list: "
            "the lowest ratio that command can reach while it uses them"
        )


if __name__ == "__main__":
    main()
