"""Tables that fit the terminal they are printed on, and help that shows whole flag names.

The rule every CLI table follows (``fit_table`` / ``print_table``):
- each column says how much it matters (``Col.priority``: 0 is never dropped, higher numbers drop first, the
  rightmost first among equals); when even the narrowest layout is wider than the terminal, columns drop in
  that order and one line names what was dropped and how to see it (``--format json|csv`` or a wider terminal);
- a number is never split across lines: numeric (and other "whole") columns are at least as wide as their
  widest value and never wrap; text columns fold; headers wrap at spaces;
- the widths are chosen here, so rich never has to squeeze a column it cannot wrap.

``install_help_fit`` makes typer's option panels keep flag names whole at any width (the help text wraps).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleDimensions, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

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
    from rich import box as rich_box

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

# the type column of an option panel gets at most this many cells at narrow widths (it folds)
_HELP_TYPES_MAX = 12
# below this many cells for the help text, the type column gives up room
_HELP_TEXT_MIN = 24


class _HelpTable(Table):
    """typer's option panel table, laid out so flag names are whole: the name columns are as wide as their
    longest name, empty columns are left out, the type column folds, the help text takes the rest."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.show_header and len(self.columns) >= 4 and self.columns[-1].width is None:
            self._fit_names(console, options)
        yield from super().__rich_console__(console, options)

    def _fit_names(self, console: Console, options: ConsoleOptions) -> None:
        cols = [c for c in self.columns if any(_cell_width(console, cell)[1] for cell in c._cells)]
        for i, c in enumerate(cols):
            c._index = i
        self.columns = cols
        if len(cols) < 3:
            return
        cols = self._merge_names(console, cols)
        pad_l, pad_r = self.padding[3], self.padding[1]
        gaps = (len(cols) - 1) * (pad_l + pad_r)
        names = [max(_cell_width(console, cell)[1] for cell in c._cells) for c in cols[:-2]]
        types = max(_cell_width(console, cell)[1] for cell in cols[-2]._cells)
        room = options.max_width - gaps - sum(names)
        types_width = min(types, max(room - _HELP_TEXT_MIN, _HELP_TYPES_MAX))
        if room - types_width < 8:  # too narrow for anything sensible: let rich share it out
            return
        for c, w in zip(cols[:-2], names, strict=True):
            c.width, c.no_wrap = w, True
        cols[-2].width, cols[-2].overflow = types_width, "fold"
        cols[-1].overflow = "fold"
        cols[-1]._cells = [_flat(cell) for cell in cols[-1]._cells]

    def _merge_names(self, console: Console, cols: list[Any]) -> list[Any]:
        """One column for a flag's names: ``--header -H``, a ``--no-...`` form on the next line."""
        first = next((i for i, c in enumerate(cols) if any("-" in _plain(x) for x in c._cells)), None)
        if first is None or len(cols) - 2 - first < 2:
            return cols
        names = cols[first:-2]
        merged: list[Text] = []
        for parts in zip(*(c._cells for c in names), strict=True):
            texts = [p if isinstance(p, Text) else Text(str(p)) for p in parts]
            plain = [t.plain for t in texts]
            line = Text(" ").join(
                t for t, p in zip(texts, plain, strict=True) if p and not p.startswith("--no")
            )
            rest = [t for t, p in zip(texts, plain, strict=True) if p.startswith("--no")]
            for t in rest:
                line.append("\n")
                line.append_text(t)
            merged.append(line)
        names[0]._cells = merged
        cols = [*cols[:first], names[0], *cols[-2:]]
        for i, c in enumerate(cols):
            c._index = i
        self.columns = cols
        return cols


def _flat(cell: Any) -> Any:
    """typer's help cell (rich Columns of texts) as one text, so a long word folds instead of being cut."""
    from rich.columns import Columns

    items = getattr(cell, "renderables", None)
    if isinstance(cell, Columns) and items and all(isinstance(t, Text) for t in items):
        return Text(" ").join(items)
    return cell


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def install_help_fit() -> None:
    """Make typer's rich help use ``_HelpTable`` for its panels (idempotent)."""
    from typer import rich_utils

    if rich_utils.Table is not _HelpTable:
        rich_utils.Table = _HelpTable  # type: ignore[misc]


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
    from accelbench.report.failures import run_warnings

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
    from accelbench.report.failures import cell_devices

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
