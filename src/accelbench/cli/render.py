"""Tables that fit the terminal they are printed on, and help that shows whole flag names.

The rule every CLI table follows (``fit_table`` / ``print_table``):
- each column says how much it matters (``Col.priority``: 0 is never dropped, higher numbers drop first, the
  rightmost first among equals); when even the narrowest layout is wider than the terminal, columns drop in
  that order and one line names what was dropped and how to see it (``--format json|csv`` or a wider terminal);
- a number is never split across lines: numeric (and other "whole") columns are at least as wide as their
  widest value and never wrap; text columns fold; headers wrap at spaces;
- the widths are chosen here, so rich never has to squeeze a column it cannot wrap.

``install_help_fit`` makes typer's help keep flag names, choices and words whole at any width (see its rule).
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rich import box as rich_box
from rich.console import Console, ConsoleDimensions, Group, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from typer import rich_utils

from accelbench.report.formatting import MISSING, fmt_num

# Piped or logged output (CI, `| tee`) is not a terminal; rich would then wrap tables at 80 columns and cut
# figures. Without a terminal and without COLUMNS, print wide instead. The width is read at each print, so
# COLUMNS set after import (tests, a resized terminal) counts. Tables fit it by `cli/render.py`'s rule.
PIPED_WIDTH = 200


class _FittingConsole(Console):
    @property
    def size(self) -> ConsoleDimensions:
        dims = super().size
        columns = os.environ.get("COLUMNS", "")
        if self._width is None and not columns.isdigit() and not self.is_terminal:
            return ConsoleDimensions(PIPED_WIDTH, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = _FittingConsole()
err_console = _FittingConsole(stderr=True)


R = TypeVar("R")

# a folded text column is given at least this many cells (or its natural width when narrower)
TEXT_MIN = 10


@dataclass(frozen=True)
class Col:
    """One column: its header, how much it matters (0 = always shown; higher drops first), and whether its
    values must stay whole (``num``: numbers, right-justified; ``whole``: ids and names, left-justified)."""

    header: str
    priority: int = 1
    num: bool = False
    whole: bool = False
    justify: str | None = None
    style: str | None = None


def _cell_width(console: Console, cell: Any) -> tuple[int, int]:
    """(longest word, longest line) of a cell, in terminal cells."""
    if cell is None:
        return 0, 0
    if isinstance(cell, str):
        text = Text.from_markup(cell) if "[" in cell else Text(cell)
        plain = text.plain
    elif isinstance(cell, Text):
        plain = cell.plain
    else:
        m = Measurement.get(console, console.options, cell)
        return m.minimum, m.maximum
    lines = plain.splitlines() or [""]
    longest_line = max(Text(line).cell_len for line in lines)
    words = plain.split()
    longest_word = max((Text(w).cell_len for w in words), default=0)
    return longest_word, longest_line


def _table_extra(n: int, table_kw: dict[str, Any]) -> int:
    """Cells a table with ``n`` columns spends on borders and padding."""
    box = table_kw.get("box", rich_box.HEAVY_HEAD)
    show_edge = table_kw.get("show_edge", True)
    pad = table_kw.get("padding", (0, 1))
    if isinstance(pad, int):
        left = right = pad
    elif len(pad) == 2:
        left = right = pad[1]
    else:
        left, right = pad[3] if len(pad) == 4 else pad[1], pad[1]
    pad_edge = table_kw.get("pad_edge", True)
    padding = n * (left + right) - (0 if pad_edge else left + right)
    borders = (n + 1 if show_edge else n - 1) if box else 0
    return padding + borders


def fit_widths(
    console: Console,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Any]],
    width: int,
    table_kw: dict[str, Any] | None = None,
) -> tuple[list[int], list[int | None]]:
    """Which columns to keep (indexes) and the width of each kept column (None: what rich picks)."""
    table_kw = table_kw or {}
    natural: list[int] = []
    least: list[int] = []
    for i, col in enumerate(cols):
        head_word, head_line = _cell_width(console, col.header)
        cells = [_cell_width(console, row[i]) for row in rows if i < len(row)]
        widest = max((c[1] for c in cells), default=0)
        word = max((c[0] for c in cells), default=0)
        natural.append(max(head_line, widest, 1))
        if col.num or col.whole:
            least.append(max(widest, head_word, 1))
        else:
            least.append(min(natural[-1], max(TEXT_MIN, head_word, min(word, TEXT_MIN))))
    keep = list(range(len(cols)))

    def total(idx: list[int]) -> int:
        return sum(least[i] for i in idx) + _table_extra(len(idx), table_kw)

    # the columns to drop, lowest importance first and the rightmost first among equals
    order = sorted((i for i in keep if cols[i].priority > 0), key=lambda i: (-cols[i].priority, -i))
    for i in order:
        if total(keep) <= width:
            break
        keep.remove(i)
    spare = width - total(keep)
    widths: list[int | None] = []
    chosen = {i: least[i] for i in keep}
    # spare room goes first to text columns (fewer wrapped rows), then to whole columns (their headers unwrap)
    for i in sorted(keep, key=lambda i: 1 if (cols[i].num or cols[i].whole) else 0):
        if spare <= 0:
            break
        more = min(spare, natural[i] - chosen[i])
        chosen[i] += more
        spare -= more
    widths = [chosen[i] for i in keep]
    return keep, widths


def fit_table(
    cols: Sequence[Col],
    rows: Sequence[Sequence[Any]],
    *,
    out: Console | None = None,
    width: int | None = None,
    sections: Sequence[int] = (),
    **table_kw: Any,
) -> tuple[Table, list[str]]:
    """A rich Table of ``rows`` that fits ``width`` (default: the console's), and the headers dropped.

    ``sections``: row indexes before which a section line is drawn."""
    out = out or console
    width = width or out.width
    table_kw.setdefault("header_style", "bold")
    keep, widths = fit_widths(out, cols, rows, width, table_kw)
    table = Table(**table_kw)
    for i, w in zip(keep, widths, strict=True):
        col = cols[i]
        whole = col.num or col.whole
        table.add_column(
            Text(col.header, no_wrap=False, overflow="fold"),
            justify=col.justify or ("right" if col.num else "left"),  # type: ignore[arg-type]
            no_wrap=whole,
            overflow="fold",
            width=w,
            style=col.style,
        )
    starts = set(sections)
    for n, row in enumerate(rows):
        if n in starts and n:
            table.add_section()
        table.add_row(*(_cell(row[i]) if i < len(row) else "" for i in keep))
    dropped = [cols[i].header.strip() or f"column {i + 1}" for i in range(len(cols)) if i not in keep]
    return table, dropped


def _cell(value: Any) -> RenderableType:
    if value is None:
        return ""
    if isinstance(value, str | Text) or hasattr(value, "__rich_console__"):
        return value
    return str(value)


def dropped_note(dropped: Sequence[str], width: int, formats: str = "json|csv") -> str:
    """The one line said under a table whose columns did not fit."""
    return (
        f"[dim]Not shown at {width} columns: {', '.join(dropped)}; "
        f"--format {formats} or a wider terminal shows all.[/]"
    )


def print_records(
    columns: Sequence[tuple[Col, Callable[[R], Any]]], records: Iterable[R], **table_kw: Any
) -> list[str]:
    """``print_table`` of one row per record: each column beside the function that reads its cell from a record
    (a header and its value are written in one place)."""
    rows = [[read(r) for _, read in columns] for r in records]
    return print_table([col for col, _ in columns], rows, **table_kw)


def print_bullets(
    items: Iterable[object], heading: str | None = None, *, mark: str = "-", out: Console | None = None
) -> None:
    """A list said one item a line (``  - item``), under ``heading`` (rich markup) when there is an item."""
    out = out or console
    items = list(items)
    if heading is not None and items:
        out.print(heading)
    for item in items:
        out.print(f"  {mark} {item}", highlight=False)


def print_table(
    cols: Sequence[Col],
    rows: Sequence[Sequence[Any]],
    *,
    out: Console | None = None,
    formats: str = "json|csv",
    sections: Sequence[int] = (),
    **table_kw: Any,
) -> list[str]:
    """Print ``rows`` as a table that fits the console, with a note naming any column dropped."""
    out = out or console
    table, dropped = fit_table(cols, rows, out=out, sections=sections, **table_kw)
    out.print(table)
    if dropped:
        out.print(dropped_note(dropped, out.width, formats), highlight=False)
    return dropped


# --- help ------------------------------------------------------------------------------------------------
#
# typer draws an option panel as a six-column table that rich squeezes to the terminal, cutting flag names,
# choice lists and long words mid-word. ``install_help_fit`` replaces that panel (and the commands panel's
# summary, and the description's line breaks) with the rule below, so --help reads at any width:
# - one row per option: its names (``--model, -m``; a flag pair ``--scrape / --no-scrape``; ``*`` when
#   required), its value (``<int> [x>=1]``; nothing for a flag), its help;
# - a choice list longer than ``_CHOICES_INLINE`` cells moves into the help as "Choices: a, b, c.";
# - defaults are written one way, "[default: X]" (a flag pair's default is the flag in force), an env var once;
# - a table when the help column gets at least ``_HELP_TEXT_MIN`` cells and its longest word, else each option
#   on a line of its own with its help indented below it; help text wraps only at spaces.

_HELP_TEXT_MIN = 30
_CHOICES_INLINE = 24
_PANEL_EXTRA = 4  # a panel's two borders and its padding
_STACK_INDENT = 6


@dataclass(frozen=True)
class HelpRow:
    """One option (or argument) as the help shows it."""

    names: str
    value: str
    help: Text
    required: bool


def option_names(param: Any) -> str:
    """``--model, -m``; a flag pair ``--scrape / --no-scrape``; an argument its metavar."""
    if getattr(param, "param_type_name", "") == "argument":
        name = str(getattr(param, "metavar", None) or param.name).upper()
        return name + ("..." if param.nargs != 1 else "")
    main = sorted(param.opts, key=lambda o: not o.startswith("--"))
    alt = sorted(param.secondary_opts, key=lambda o: not o.startswith("--"))
    return " / ".join(p for p in (", ".join(main), ", ".join(alt)) if p)


def _choices(param: Any) -> list[str]:
    desc = getattr(param, "type_descriptor", None)
    if desc is None or not desc.is_choice:
        return []
    return [str(getattr(c, "value", c)) for c in desc.choices or ()]


def option_value(param: Any, ctx: Any) -> tuple[str, list[str]]:
    """What an option takes (``<int> [x>=1]``, ``<table|json>``; nothing for a flag) and the choices moved to
    its help because they are too long to stand in the value column."""
    if getattr(param, "is_flag", False):
        return "", []
    desc = getattr(param, "type_descriptor", None)
    choices = _choices(param)
    if choices:
        inline = "<" + "|".join(choices) + ">"
        return (inline, []) if len(inline) <= _CHOICES_INLINE else ("<choice>", choices)
    if desc is not None and desc.is_ranged:
        kind = f"<{desc.ranged_type_name}>"
    else:
        kind = param.display_type_rich(ctx=ctx) or ""
    bound = param._get_number_range_help_str()
    return (f"{kind} [{bound}]" if bound else kind), []


def _default_text(param: Any, ctx: Any) -> str | None:
    """The one way a default is written: the value, or for a flag pair the flag in force; None: not shown."""
    if isinstance(param.show_default, str):
        return param.show_default
    value = param._extract_default_help_str(ctx=ctx)
    if value is None or not (param.show_default or ctx.show_default):
        return None
    if getattr(param, "is_bool_flag", False):
        if not param.secondary_opts:
            return None
        opts = param.opts if value else param.secondary_opts
        return opts[0] if opts else None
    text = param._get_default_string(ctx=ctx, show_default_is_str=False, default_value=value)
    return text or None


def option_help(param: Any, ctx: Any, markup_mode: Any, choices: Sequence[str]) -> Text:
    """The help text, then the choices moved out of the value column, the env var (once), the default and
    whether it is required."""
    text = Text()
    paragraphs = [" ".join(p.split()) for p in (getattr(param, "help", None) or "").split("\n\n")]
    body = "\n".join(p for p in paragraphs if p)
    if body:
        made = rich_utils._make_rich_text(
            text=body, style=rich_utils.STYLE_OPTION_HELP, markup_mode=markup_mode
        )
        text = made if isinstance(made, Text) else Text(body)
    extras: list[tuple[str, str]] = []
    if choices:
        extras.append((f"Choices: {', '.join(choices)}.", rich_utils.STYLE_OPTION_HELP))
    envvar = getattr(param, "envvar", None)
    names = [envvar] if isinstance(envvar, str) else list(dict.fromkeys(envvar or ()))
    names = [n for n in names if n not in text.plain]
    if names and getattr(param, "show_envvar", False):
        extras.append((f"[env var: {', '.join(names)}]", rich_utils.STYLE_OPTION_ENVVAR))
    default = _default_text(param, ctx)
    if default is not None:
        extras.append((f"[default: {default}]", rich_utils.STYLE_OPTION_DEFAULT))
    if param.required:
        extras.append(("[required]", rich_utils.STYLE_REQUIRED_LONG))
    for extra, style in extras:
        if text.plain:
            text.append(" ")
        text.append(extra, style=style)
    return text


def help_rows(params: Sequence[Any], ctx: Any, markup_mode: Any) -> list[HelpRow]:
    rows = []
    for param in params:
        value, choices = option_value(param, ctx)
        rows.append(
            HelpRow(option_names(param), value, option_help(param, ctx, markup_mode, choices), param.required)
        )
    return rows


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def options_layout(rows: Sequence[HelpRow], width: int) -> RenderableType:
    """The rows as a table when the help column gets room for its longest word, else stacked."""
    marker = 2 if any(r.required for r in rows) else 0
    names_w = marker + max((len(r.names) for r in rows), default=0)
    value_w = max((len(r.value) for r in rows), default=0)
    value_min = max((_longest_word(r.value) for r in rows), default=0)
    help_min = max(_HELP_TEXT_MIN, max((_longest_word(r.help.plain) for r in rows), default=0))
    room = width - _PANEL_EXTRA - names_w - (2 if value_w else 0) - 2
    if room - value_w < help_min and value_w:
        value_w = value_min if room - value_min >= help_min else value_w
    fits = room - value_w >= help_min

    def name_text(row: HelpRow) -> Text:
        prefix = Text("* ", style=rich_utils.STYLE_REQUIRED_SHORT) if row.required else Text(" " * marker)
        return prefix + rich_utils.highlighter(Text(row.names))

    def value_text(row: HelpRow) -> Text:
        return rich_utils.types_highlighter(Text(row.value, style=rich_utils.STYLE_TYPES))

    if fits:
        table = Table(box=None, show_header=False, expand=True, padding=(0, 1), pad_edge=False)
        table.add_column(width=names_w, no_wrap=True)
        if value_w:
            table.add_column(width=value_w, overflow="fold")
        table.add_column(ratio=1, overflow="fold")
        for row in rows:
            table.add_row(name_text(row), *([value_text(row)] if value_w else []), row.help)
        return table

    parts: list[RenderableType] = []
    for row in rows:
        head = name_text(row)
        if row.value:
            head = head + Text(" ") + value_text(row)
        parts.append(head)
        if row.help.plain:
            parts.append(Padding(row.help, (0, 0, 0, _STACK_INDENT)))
    return Group(*parts)


def print_options_panel(
    *, name: str, params: list[Any], ctx: Any, markup_mode: Any, console: Console
) -> None:
    """typer's options/arguments panel, drawn by the rule above."""
    rows = help_rows(params, ctx, markup_mode)
    if not rows:
        return
    console.print(
        Panel(
            options_layout(rows, console.width),
            border_style=rich_utils.STYLE_OPTIONS_PANEL_BORDER,
            title=name,
            title_align=rich_utils.ALIGN_OPTIONS_PANEL,
        )
    )


def command_summary(*, help_text: str, markup_mode: Any) -> Text:
    """A command's line in its group's Commands panel: its help's first sentence, on one logical line."""
    first = inspect.cleandoc(help_text).split("\n\n")[0].replace("\b", "")
    first = " ".join(first.split())
    first = re.split(r"(?<=[.!?])\s+(?=[A-Z])", first, maxsplit=1)[0]
    made = rich_utils._make_rich_text(text=first, style=rich_utils.STYLE_OPTION_HELP, markup_mode=markup_mode)
    return made if isinstance(made, Text) else Text(first)


def join_lines(paragraphs: list[str], markup_mode: Any) -> str:
    """A command's description: each paragraph on one logical line (the terminal wraps it), unless it starts
    with ``\\b`` (kept as written)."""
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


def install_help_fit() -> None:
    """Make typer's rich help draw option panels, command summaries and descriptions by the rule above
    (idempotent)."""
    rich_utils._print_options_panel = print_options_panel
    rich_utils._make_command_help = command_summary
    rich_utils._fix_linebreaks = join_lines


# --- the cells table (runs show, sweep, sweep-plot) --------------------------------------------------------

# a cells-table header -> its priority, by the first word in it that is named here (later columns get 3); a tail
# drops before its median: p95/p99 two steps later, p90 three
_CELL_WORDS = {"run": 0, "input": 0, "conc.": 0, "tpot": 0, "output": 0, "ttft": 1, "failed": 1, "total": 1}
_CELL_WORDS |= {"slo": 1, "goodput": 2, "top": 2, "e2e": 3, "completed": 3, "itl": 4}
_TAIL_STEPS = {"p90": 3, "p95": 2, "p99": 2}
# cells-table columns that hold text (folded), not figures
_CELL_TEXT = {"run", "failed", "slo met", "top failure reason"}


def cell_priority(header: str) -> int:
    """A cells-table column's priority by its header (0 is never dropped; higher numbers drop first)."""
    words = header.lower().split()
    step = max((_TAIL_STEPS.get(w, 0) for w in words), default=0)
    for w in words:
        if w in _CELL_WORDS:
            return _CELL_WORDS[w] + step
    return 3


def print_cells(
    headers: Sequence[str],
    with_range: Sequence[Sequence[str]],
    without_range: Sequence[Sequence[str]] | None,
    *,
    title: str | None,
    plain_title: str | None = None,
    out: Console | None = None,
) -> None:
    """The per-cell table: min-max ranges when they fit, else the medians alone (said in the note)."""
    out = out or console
    cols = [
        Col(h, cell_priority(h), num=h.lower() not in _CELL_TEXT, whole=h.lower() in ("failed", "slo met"))
        for h in headers
    ]
    table, dropped = fit_table(cols, with_range, out=out, title=title)
    if dropped and without_range is not None:
        bare, bare_dropped = fit_table(cols, without_range, out=out, title=plain_title or title)
        if len(bare_dropped) < len(dropped):
            table, dropped = bare, [*bare_dropped, "min-max ranges"]
    out.print(table)
    if dropped:
        out.print(dropped_note(dropped, out.width), highlight=False)


def print_failures_and_warnings(results: Sequence[Any], *, out: Console | None = None) -> None:
    """The run's warnings as ``report/failures.py`` ``run_warnings`` groups them: each failed cell with its
    most common reason first, then each distinct note its figures carry (prompt-token mismatch, client lag,
    scrape cost, ...) once, with the cells it applies to; nothing when there are none."""
    from accelbench.report.failures import run_warnings  # heavy (statistics); render loads with --help

    out = out or console
    found = run_warnings(results)
    if found.failures:
        print_table(
            [
                Col("Input", 1, num=True),
                Col("Conc.", 1, num=True),
                Col("Failed", 0, num=True),
                Col("Share", 2, num=True),
                Col("Most common reason", 0),
            ],
            [
                [
                    str(f.input_len),
                    str(f.concurrency),
                    f"{f.failed}/{f.ended}",
                    f"{f.share:.0%}",
                    Text(f"({f.reason_count}x) {f.reason}" if f.reason else "-"),
                ]
                for f in found.failures
            ],
            out=out,
            title="Failures",
        )
    if found.notes:
        out.print("[bold]Warnings[/]")
        for note in found.notes:
            out.print(Text(f"- {note.line()}"), overflow="fold")


def _with_unit(value: float | None, digits: int, unit: str) -> str:
    """``fmt_num`` with a unit after it; the missing mark alone when there is no value."""
    text = fmt_num(value, digits)
    return text if text == MISSING else text + unit


def print_device_telemetry(results: Sequence[Any], *, out: Console | None = None) -> None:
    """Each cell's devices (utilisation mean/peak, peak memory, mean power, energy and output tokens per joule),
    then, once, the sources this machine lacked; nothing when no cell has device telemetry."""
    from accelbench.report.failures import cell_devices  # heavy (statistics); render loads with --help

    out = out or console
    cells = cell_devices(results)
    if not cells:
        return
    rows = []
    missing: list[str] = []
    for c in cells:
        tel = c.telemetry
        missing.extend(m for m in tel.missing if m not in missing)
        tpj = tel.tokens_per_joule(c.output_tokens)
        for d in tel.devices:
            mem = d.memory_used_peak_bytes
            rows.append(
                [
                    str(c.input_len),
                    str(c.concurrency),
                    d.device,
                    _with_unit(d.util_mean_pct, 0, "%"),
                    _with_unit(d.util_peak_pct, 0, "%"),
                    _with_unit(None if mem is None else mem / 2**30, 2, " GiB"),
                    _with_unit(d.power_mean_w, 1, " W"),
                    _with_unit(d.energy_j, 1, " J"),
                    fmt_num(tpj, 2),
                ]
            )
    print_table(
        [
            Col("Input", 1, num=True),
            Col("Conc.", 1, num=True),
            Col("Device", 0),
            Col("Util mean", 0, num=True),
            Col("Util peak", 2, num=True),
            Col("Mem peak", 1, num=True),
            Col("Power", 2, num=True),
            Col("Energy", 1, num=True),
            Col("Tok/J", 1, num=True),
        ],
        rows,
        out=out,
        title="Devices (first repeat of each cell)",
    )
    if missing:
        out.print("[bold]Not measured on this machine[/]")
        for m in missing:
            out.print(Text(f"- {m}"), overflow="fold")
