"""`accelbench runs list` starts without what it does not use: the ORM and the parts of the store that write and
read whole runs, and typer's rich help formatting (loaded when help or an error is printed). A fresh process on
a store that exists, as a person runs it; `--help` and a flag error still load the help formatting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, sys, types
from accelbench.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
rich_utils = sys.modules.get("typer.rich_utils")
loaded = sorted(m for m in sys.modules if m != "typer.rich_utils") + (
    ["typer.rich_utils"] if type(rich_utils) is types.ModuleType else []  # not a lazy module still to load
)
print(json.dumps({"code": code, "modules": loaded}), file=sys.stderr)
"""

NOT_AT_START = (
    "sqlalchemy.orm",
    "accelbench.store.repo",
    "accelbench.store.models",
    "accelbench.store.run_rows",
    "accelbench.store.result_rows",
    "accelbench.store.admin",
    "accelbench.domain.bench_summary",
    "typer.rich_utils",
    "rich.markdown",
)


def _run(tmp_path: Path, *args: str) -> tuple[int, set[str], str]:
    env = dict(os.environ, ACCELBENCH_DATABASE_URL=f"sqlite:///{tmp_path / 'store.db'}", COLUMNS="120")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], env=env, capture_output=True, text=True, timeout=120
    )
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"]), proc.stdout


def test_runs_list_loads_neither_the_orm_nor_the_help_formatting(tmp_path: Path) -> None:
    assert (
        _run(tmp_path, "runs", "list")[0] == 0
    )  # the first start makes the store (alembic: the ORM's tables)
    for args in (["runs", "list"], ["runs", "list", "--format", "json", "--status", "completed"]):
        code, loaded, _ = _run(tmp_path, *args)
        assert code == 0
        assert "accelbench.store.run_list" in loaded and "sqlalchemy" in loaded
        assert not loaded & set(NOT_AT_START), sorted(loaded & set(NOT_AT_START))


def test_help_and_errors_still_load_the_help_formatting(tmp_path: Path) -> None:
    code, loaded, out = _run(tmp_path, "runs", "list", "--help")
    assert code == 0 and "typer.rich_utils" in loaded and "--limit" in out
    code, loaded, _ = _run(tmp_path, "runs", "list", "--limit", "0")
    assert code == 2 and "typer.rich_utils" in loaded
