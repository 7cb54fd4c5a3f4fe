"""Which latency percentiles the human views show (``runs show``, ``compare``, the result and compare pages,
the report tables): p50/p90/p99 by default, any of those a stored ``MetricStats`` holds on request.

One rule for every view: ``--percentiles 50,95,99`` on the CLI, ``?percentiles=50,95,99`` on a page, or
``ACCELBENCH_PERCENTILES`` for a default of one's own. Machine-readable outputs (JSON, CSV) keep every stored
percentile whatever is chosen here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from accelbench.errors import UserInputError

#: the percentiles a stored ``MetricStats`` holds (its fields p50, p90, p95, p99)
STORED: tuple[int, ...] = (50, 90, 95, 99)
#: what the views show unless told otherwise
DEFAULT: tuple[int, ...] = (50, 90, 99)
ENV_VAR = "ACCELBENCH_PERCENTILES"


def parse_percentiles(text: str | Iterable[int] | None) -> tuple[int, ...]:
    """``"50,90,99"`` (or ``"p50,p99"``, or a sequence of ints) -> ``(50, 90, 99)``, sorted and unique.

    None or blank means the default: ``ACCELBENCH_PERCENTILES`` when set, else p50/p90/p99. A percentile that
    is not stored is refused with the ones that are."""
    if text is None or (isinstance(text, str) and not text.strip()):
        env = os.environ.get(ENV_VAR, "").strip()
        if not env:
            return DEFAULT
        text = env
    items: list[str] = (
        [t.strip() for t in text.split(",")] if isinstance(text, str) else [str(t) for t in text]
    )
    chosen: set[int] = set()
    for item in items:
        if not item:
            continue
        raw = item.lower().removeprefix("p")
        try:
            value = int(float(raw)) if float(raw).is_integer() else None
        except ValueError:
            value = None
        if value not in STORED:
            have = ", ".join(str(p) for p in STORED)
            raise UserInputError(
                f"Percentile {item!r} is not one accelbench stores.",
                hint=f"Choose among {have}, comma-separated, e.g. --percentiles 50,90,99.",
            )
        chosen.add(value)
    if not chosen:
        return DEFAULT
    return tuple(sorted(chosen))


def label(p: int) -> str:
    """The column label of a percentile: ``p99``."""
    return f"p{p}"


def value(stats: Any, p: int) -> float | None:
    """One percentile of a ``MetricStats`` (or its dict), None when there is none (no requests counted)."""
    if stats is None:
        return None
    get = stats.get if isinstance(stats, dict) else lambda k, d=None: getattr(stats, k, d)
    if (get("count", 0) or 0) == 0:
        return None
    v = get(f"p{p}")
    return None if v is None else float(v)


def values(stats: Any, percentiles: Sequence[int]) -> list[float | None]:
    """The chosen percentiles of one metric, in order."""
    return [value(stats, p) for p in percentiles]
