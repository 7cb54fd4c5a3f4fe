"""Every command's --help reads cleanly at 80, 120 and 160 columns: the whole command tree is walked and each
help page is checked for what made it hard to read: an option name, choice or env var split across lines, a
row with a value but no name, a flag pair or a name separated from its description, an env var named twice,
a command summary cut mid-sentence, and defaults written some other way than ``[default: X]``."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import COMMANDS, app, module_commands

WIDTHS = (80, 120, 160)
# defaults written in prose instead of "[default: X]"
_PROSE_DEFAULT = re.compile(r"\(default[ :]|[;,] default[ :]|(?<!\[)\bdefault: ")
_BORDERS = "│╭╮╰╯─"


def command_tree() -> Iterator[tuple[list[str], Any]]:
    """(argv path, click command) for every command and subcommand, the root first."""
    yield [], None
    for name, module in COMMANDS.items():
        yield from _walk([name], module_commands(module)[name])


def _walk(path: list[str], cmd: Any) -> Iterator[tuple[list[str], Any]]:
    yield path, cmd
    for sub, child in sorted(getattr(cmd, "commands", {}).items()):
        yield from _walk([*path, sub], child)


def render(path: list[str], width: int) -> str:
    res = CliRunner(env={"COLUMNS": str(width)}).invoke(app, [*path, "--help"])
    assert res.exit_code == 0, res.output
    return res.stdout


def inner(line: str) -> str:
    """A line without the panel's borders."""
    return line.strip().strip(_BORDERS).strip()


def shown_params(cmd: Any) -> list[Any]:
    return [p for p in cmd.params if not getattr(p, "hidden", False)]


def choices(param: Any) -> list[str]:
    desc = getattr(param, "type_descriptor", None)
    if desc is None or not desc.is_choice:
        return []
    return [str(getattr(c, "value", c)) for c in desc.choices or ()]


def envvars(param: Any) -> list[str]:
    env = getattr(param, "envvar", None)
    return [env] if isinstance(env, str) else list(env or ())


def whole_tokens(cmd: Any) -> set[str]:
    """What must never be split across lines: option names, choices, env var names."""
    out: set[str] = {"--help"}
    for p in shown_params(cmd):
        if p.param_type_name == "option":
            out.update(p.opts, p.secondary_opts)
        out.update(c for c in choices(p) if len(c) > 2)
        out.update(envvars(p))
    return {t for t in out if len(t) > 2}  # a two-letter flag (-m) cannot fold; "+-" then "from" is no split


def split_tokens(lines: list[str], tokens: set[str]) -> list[str]:
    """Tokens broken across two lines: a word of one line joined to the last word of the line above that
    starts in the same column span (a wrapped help text, or a folded cell of a table)."""
    found = []
    spans = [[(m.start(), m.group()) for m in re.finditer(r"[^\s│]+", line)] for line in lines]
    for above, below in itertools.pairwise(spans):
        for k, (start, head) in enumerate(below):
            end = below[k + 1][0] if k + 1 < len(below) else 10**6
            tails = [word for col, word in above if start <= col < end]
            if not tails:
                continue
            tail = tails[-1]
            for token in tokens:
                if token in tail + head and token not in tail and token not in head:
                    found.append(f"{token!r} split as {tail!r} / {head!r}")
    return found


def option_problems(out: str, cmd: Any) -> list[str]:
    problems = []
    lines = out.splitlines()
    bodies = [inner(line) if line.lstrip().startswith("│") else "" for line in lines]  # the panels' rows
    for i, body in enumerate(bodies):
        if re.match(r"(\* )?<[^>]*>", body):
            problems.append(f"a row with a value and no name: {lines[i].strip()!r}")
    for p in shown_params(cmd):
        if p.param_type_name != "option":
            continue
        names = [*p.opts, *p.secondary_opts]
        rows = [i for i, b in enumerate(bodies) if _leads(b, names) and all(_has(b, n) for n in names)]
        if not rows:
            problems.append(f"{' / '.join(names)} not on one line")
            continue
        first = (p.help or "").split()[:1]
        after = " ".join(bodies[rows[0] : rows[0] + 2])
        if first and first[0] not in after:
            problems.append(f"{names[0]}: its help does not start on or below its name")
        for env in envvars(p):
            if out.count(env) > 1:
                problems.append(f"{names[0]}: env var {env} named {out.count(env)} times")
    return problems


def _leads(line: str, names: list[str]) -> bool:
    """The line is an option's row: it starts with one of ``names`` (after the required marker)."""
    words = line.removeprefix("* ").split()
    return bool(words) and words[0].rstrip(",") in names


def _has(line: str, name: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", line) is not None


def summary_problems(out: str) -> list[str]:
    """Each command's line in a Commands panel, its wrapped lines joined, is whole sentences."""
    problems = []
    summaries: list[str] = []
    in_panel = False
    for line in out.splitlines():
        if "─ Commands ─" in line:
            in_panel = True
            continue
        if in_panel and line.lstrip().startswith("╰"):
            in_panel = False
            continue
        if not in_panel:
            continue
        m = re.match(r"│ (\S+)\s+(.*?)\s*│$", line.strip())
        text = inner(line)
        if m and not line.strip().startswith("│  "):
            summaries.append(m.group(2))
        elif summaries and text:
            summaries[-1] += " " + text
    for summary in summaries:
        if not summary.rstrip().endswith((".", "?", "!", ")")) or summary.rstrip().endswith("..."):
            problems.append(f"a summary ends mid-sentence: {summary!r}")
    return problems


def help_problems(path: list[str], cmd: Any, width: int) -> list[str]:
    out = render(path, width)
    lines = out.splitlines()
    where = f"accelbench {' '.join(path)} --help at {width}".replace("  ", " ")
    problems = [f"line of {len(line)} cells: {line!r}" for line in lines if len(line) > width]
    if cmd is not None:
        problems += split_tokens(lines, whole_tokens(cmd))
        problems += option_problems(out, cmd)
    problems += summary_problems(out)
    problems += [f"a default in prose: {inner(line)!r}" for line in lines if _PROSE_DEFAULT.search(line)]
    return [f"{where}: {p}" for p in problems]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_help_page_reads_cleanly(width: int) -> None:
    problems = [p for path, cmd in command_tree() for p in help_problems(path, cmd, width)]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:400])


@pytest.mark.parametrize("width", WIDTHS)
def test_the_root_summaries_each_fit_one_line(width: int) -> None:
    """`accelbench --help` lists each command on one line, so no summary is broken ("tear" / "down.")."""
    from accelbench.cli.main import SUMMARIES

    lines = render([], width).splitlines()
    start = next(i for i, line in enumerate(lines) if "─ Commands ─" in line)
    rows = [inner(line) for line in lines[start + 1 :] if line.lstrip().startswith("│")]
    shown = [name for name, summary in SUMMARIES.items() if summary]
    assert [row.split()[0] for row in rows] == shown, "\n".join(rows)
    for row, name in zip(rows, shown, strict=True):
        assert row.endswith(str(SUMMARIES[name])), row


def test_the_walk_covers_every_command_and_subcommand() -> None:
    paths = {" ".join(path) for path, _ in command_tree()}
    assert {"", "estimate", "runs show", "import aiperf", "catalog refresh-prices", "apikey revoke"} <= paths
    assert len(paths) > len(COMMANDS)


@pytest.mark.parametrize("command", ["bench", "sweep", "capacity"])
def test_dataset_help_lists_every_registered_dataset(command: str) -> None:
    """A dataset registered in bench/ appears in --dataset's help by itself (the option's choices)."""
    import accelbench.bench.feeds  # noqa: F401  (opens every dataset module, so all are registered)
    from accelbench.bench.datasets import DATASETS

    for width in WIDTHS:
        out = render([command], width)
        start = next(i for i, line in enumerate(out.splitlines()) if _has(inner(line), "--dataset"))
        block = " ".join(inner(line) for line in out.splitlines()[start : start + 6])
        for name in DATASETS.names():
            assert _has(block, name), f"{command} --help at {width}: dataset {name!r} not listed: {block}"


def test_the_checks_catch_what_they_look_for() -> None:
    """The checks above, on help as it used to be drawn: a cut summary, a split flag, a nameless row."""
    panel = (
        "╭─ Commands ─────────────────────────╮\n"
        "│ run   Deploy, measure, store, tear │\n"
        "│ runs  List stored runs.            │\n"
        "╰────────────────────────────────────╯"
    )
    assert summary_problems(panel) == ["a summary ends mid-sentence: 'Deploy, measure, store, tear'"]
    lines = [
        "│ --max-num-seqs  <int>    Tokens per step (--max-num-batched-token │",
        "│                          s). │",
    ]
    assert split_tokens(lines, {"--max-num-batched-tokens"})
    assert not split_tokens(lines, {"--max-num-seqs"})
