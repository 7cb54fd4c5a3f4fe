"""Reports over stored results: the per-cell aggregate table (``tables``), plots (``plots``) and the files a
sweep writes (``sweep_outputs``). Reports read the store and the domain types, never a server.

``aggregate_results`` is the one place where repeats become a cell's figures; everything else formats it.
"""

from accelbench.report.tables import (
    METRICS,
    CellAggregate,
    MetricAggregate,
    MetricColumn,
    aggregate_results,
)

__all__ = ["METRICS", "CellAggregate", "MetricAggregate", "MetricColumn", "aggregate_results"]
