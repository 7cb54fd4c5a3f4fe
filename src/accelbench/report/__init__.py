"""Reports over stored results: the per-cell aggregate table (``tables``), plots (``plots``) and the files a
sweep writes (``sweep_outputs``). Reports read the store and the domain types, never a server.

``aggregate_results`` is the one place where repeats become a cell's figures; everything else formats it.

The names below are imported when first used (PEP 562): the CLI imports light modules of this package
(``report.formatting``) at start-up and must not pay for the tables and their statistics then.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.report.tables import (
        METRICS,
        CellAggregate,
        MetricAggregate,
        MetricColumn,
        aggregate_results,
    )

__all__ = ["METRICS", "CellAggregate", "MetricAggregate", "MetricColumn", "aggregate_results"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'accelbench.report' has no attribute {name!r}")
    value = getattr(importlib.import_module("accelbench.report.tables"), name)
    globals()[name] = value
    return value
