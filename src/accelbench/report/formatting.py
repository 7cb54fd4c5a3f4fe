"""How numbers are written for people, everywhere (CLI tables, pages, report.md, report.html): one rule for
a missing value ("-"), thousands separators, and dollars with enough significant digits for a per-request
cost. Machine-readable outputs (CSV, JSON) write a missing value as empty / null instead."""

from __future__ import annotations

import math
from typing import Any

#: what a table shows where there is no value (not measured, no price, not finite)
MISSING = "-"


def fmt_num(value: Any, digits: int = 1) -> str:
    """A number for tables: thousands separators, fixed decimals; ``MISSING`` for None, "" and inf/nan; any
    other non-number as its text."""
    if value is None or value == "":
        return MISSING
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(v):
        return MISSING
    return f"{v:,.{digits}f}"


def fmt_pct(value: float | None, digits: int = 0, *, signed: bool = False, missing: str = MISSING) -> str:
    """A percent for people, the one way everywhere: ``"12%"``, ``"+12.5%"`` with ``signed``, thousands
    separated; ``missing`` for None and inf/nan."""
    if value is None or not math.isfinite(value):
        return missing
    return f"{value:{'+' if signed else ''},.{digits}f}%"


def fmt_usd(value: Any) -> str:
    """Dollars with enough significant digits for a per-request cost ($0.000012); ``MISSING`` for None."""
    if value is None or value == "":
        return MISSING
    v = float(value)
    if not math.isfinite(v):
        return MISSING
    if abs(v) >= 1:
        return f"${v:,.2f}"
    if v == 0:
        return "$0"
    digits = max(2, 2 - math.floor(math.log10(abs(v))))
    return f"${v:.{digits}f}"
