"""Output fits the terminal it is printed on: at 80 and 120 columns no line of
`catalog list`, `compare`, `runs show`, `estimate` or `--help` is wider than the terminal, no number is split
across lines or cut, flag names in help are whole, and a table that had to drop columns says which."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app, module_commands
from accelbench.domain.run import RunStatus
from accelbench.store import get_store
from tests.support.report_data import make_summary

WIDTHS = (80, 120)
MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
ENVIRONMENT = {
    "command": "accelbench sweep --base-url http://127.0.0.1:8000 --model HuggingFaceTB/SmolLM2-135M-Instruct "
    "--input-len 128 --input-len 4096 --concurrency 1 --concurrency 64 --repeats 2",
    "python": {"version": "3.11.7", "implementation": "CPython"},
    "os": {"system": "Linux", "release": "6.8.0-1019-aws", "distro": "Ubuntu 24.04.1 LTS"},
    "cpu": {
        "model": "Intel(R) Xeon(R) Platinum 8488C",
        "arch": "x86_64",
        "cores": 48,
        "threads": 96,
        "isa": {"present": ["AVX2", "AVX512F", "AVX512-BF16", "AMX-BF16", "AMX-INT8"], "has": {}},
    },
    "memory": {"total_gib": 371.9},
}
# a number cut or split by the renderer: a cell ending in a figure that ends in a separator ("1,128." then "0"
# on the next line), or an ellipsis right after a digit
_SPLIT = re.compile(r"(^|\s)[($+-]?[\d,]*\d[,.]$|\d…")


def seed() -> tuple[str, str]:
    """Two sweeps whose figures are wide (TTFT of 1,100 and 19,700 ms, thousands of tokens per second)."""
    store = get_store()
    ids = []
    for label, instance, tpot, ttft in (
        ("gpu-l4-long-label", "g6.xlarge", 9.0, 1128.0),
        ("cpu", "m8i.4xlarge", 27.0, 20000.0),
    ):
        run = store.create_run(
            kind="sweep", label=label, model=MODEL, engine="vllm", engine_version="0.19.0", instance_type=instance,
            status=RunStatus.completed, environment=ENVIRONMENT,
            spec={"sweep": {"input_lens": [128, 4096], "concurrency": [1, 64], "repeats": 2}},
        )  # fmt: skip
        for input_len in (128, 4096):
            for conc in (1, 64):
                for rep in (0, 1):
                    store.save_result(
                        run.id, input_len=input_len, concurrency=conc, repeat=rep,
                        summary=make_summary(input_len, conc, tpot_ms=tpot * (1 + 0.1 * conc),
                                             ttft_ms=ttft * (1 + rep * 0.01), telemetry_start=None),
                    )  # fmt: skip
        ids.append(run.id)
    return ids[0], ids[1]


def invoke(width: int, args: list[str]) -> str:
    res = CliRunner(env={"COLUMNS": str(width)}).invoke(app, args)
    assert res.exit_code == 0, res.output
    return res.stdout


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"[│┃║|]", line)]


def assert_fits(out: str, width: int, whole: Sequence[str] = (), *, tables: bool = True) -> None:
    """No line wider than ``width``; in tables (``tables``) no cell ends in a split figure; ``whole`` printed."""
    lines = out.splitlines()
    assert lines, "no output"
    too_wide = [(len(line), line) for line in lines if len(line) > width]
    assert not too_wide, f"{len(too_wide)} lines wider than {width}: {too_wide[0]}"
    split = [line for line in lines if "…" in line or (tables and any(_SPLIT.search(c) for c in cells(line)))]
    assert not split, f"a number split across lines at {width} columns: {split[0]!r}"
    for figure in whole:
        assert figure in out, f"{figure!r} not printed whole at {width} columns"


@pytest.mark.parametrize("width", WIDTHS)
def test_catalog_list_fits(width: int) -> None:
    out = invoke(width, ["catalog", "list"])
    assert_fits(out, width)
    data = json.loads(invoke(width, ["catalog", "list", "--format", "json"]))
    for row in data[:5]:
        assert row["name"] in out  # instance names are kept whole
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) < 2 * len(data), "most rows fit on one line"
    if width == 80:
        assert "Not shown at 80 columns:" in out and "--format json" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_fits_and_keeps_numbers_whole(width: int) -> None:
    gpu, cpu = seed()
    out = invoke(width, ["compare", gpu, cpu])
    figures = json.loads(invoke(width, ["compare", gpu, cpu, "--format", "json"]))
    ttfts = {f"{c['ttft_p50_ms']:,.1f}" for c in figures["cells"]}
    assert_fits(out, width, whole=sorted(ttfts))
    assert "Findings" in out and "Not shown at" in out
    assert "--format json|csv or a wider terminal shows all" in out.replace("\n", " ")


@pytest.mark.parametrize("width", WIDTHS)
def test_runs_show_fits(width: int) -> None:
    gpu, _ = seed()
    out = invoke(width, ["runs", "show", gpu, "--repeats"])
    assert_fits(out, width, whole=["1,111.0", "14,636.5", "Intel(R) Xeon(R) Platinum 8488C"])
    assert "Environment" in out and "Cells" in out and "Repeats" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_runs_list_fits(width: int) -> None:
    gpu, cpu = seed()
    out = invoke(width, ["runs", "list"])
    assert_fits(out, width, whole=[gpu, cpu])


@pytest.mark.parametrize("width", WIDTHS)
def test_estimate_fits(width: int) -> None:
    args = ["estimate", "--model", "smollm2-135m-instruct"]
    out = invoke(width, args)
    assert_fits(out, width)
    rows = json.loads(invoke(width, [*args, "--format", "json"]))["rows"]
    first = next(r for r in rows if r["feasible"])
    assert first["instance"] in out


def _flags(command: str) -> list[str]:
    group, _, sub = command.partition(" ")
    cmd = module_commands(_module(group))[group]
    if sub:
        cmd = cmd.commands[sub]
    shown = [p for p in cmd.params if not getattr(p, "hidden", False)]
    return [o for p in shown for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]


def _module(command: str) -> str:
    from accelbench.cli.main import COMMANDS

    return COMMANDS[command]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", ["", "bench", "sweep", "estimate", "runs show"])
def test_help_fits_and_shows_whole_flag_names(width: int, command: str) -> None:
    out = invoke(width, [*command.split(), "--help"])
    assert_fits(out, width, tables=False)  # prose in help may end in "e.g. 128,512."
    for flag in _flags(command) if command else ["--version", "--help"]:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", out), (
            f"{flag} not whole at {width} columns"
        )
