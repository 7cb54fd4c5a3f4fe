"""The latency-throughput chart of a report: per run and input length, each cell's output tok/s against its
latency, one point per concurrency, so where latency starts to climb for little more throughput (the knee) and
where the SLO stops holding are read off one picture. The plain data is made here; ``report/html.py`` draws it
with plotly, ``report/plots.py`` as a PNG for ``report.md``.

Rules, stated once:
- The latency is each cell's mean over repeats of the chosen percentile: the percentile of the SLO the runs are
  judged by when they all share one that is stored (p50/p90/p95/p99, ``report/percentiles.py``), else p50.
- The panels are TTFT and TPOT, then E2E when an SLO names it. ITL has no panel: an SLO judges each request's
  longest gap, which the stored ITL percentiles (over every gap) do not give.
- An SLO target is drawn as a line only where it is judged at the charted percentile (a p90 target beside p50
  points would mislead). A cell's point is marked missed when the headline's evaluation says it misses the SLO
  (``report/headline.py``), and each run's best configuration (the headline's) is marked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from accelbench.report.cell_slo import METRIC_NAMES, CellSLO, Key, SLOChoice
from accelbench.report.headline_data import Headline
from accelbench.report.percentiles import STORED
from accelbench.report.tables import CellAggregate

#: the panels every chart has, before the other metrics an SLO names
BASE_METRICS: tuple[str, ...] = ("ttft", "tpot")
#: the order of every latency metric a panel may show
METRIC_ORDER: tuple[str, ...] = ("ttft", "tpot", "e2el")


@dataclass(frozen=True)
class LTPoint:
    """One cell: its concurrency, output tok/s, the latency of each charted metric (ms, None when not stored),
    whether it meets the SLO (None without one) and whether it is its run's best configuration."""

    concurrency: int
    output_tps: float
    latency_ms: dict[str, float | None]
    met: bool | None = None
    best: bool = False


@dataclass
class LTSeries:
    """One line: a run at one input length, its cells in order of concurrency."""

    run_id: str
    run_name: str
    input_len: int
    label: str
    points: list[LTPoint] = field(default_factory=list)


@dataclass(frozen=True)
class LTTarget:
    """An SLO target line on one panel, and the runs it applies to (empty when it applies to every run)."""

    metric: str
    target_ms: float
    runs: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        who = f" ({', '.join(self.runs)})" if self.runs else ""
        return f"SLO {METRIC_NAMES.get(self.metric, self.metric)} <= {self.target_ms:g} ms{who}"


@dataclass
class LatencyThroughput:
    """What the chart shows: the percentile, the panels, the lines and the SLO targets."""

    percentile: int
    metrics: list[str]
    series: list[LTSeries]
    targets: list[LTTarget] = field(default_factory=list)

    def title(self, metric: str) -> str:
        """A panel's title: ``TPOT p90 (ms)``."""
        return f"{METRIC_NAMES.get(metric, metric)} p{self.percentile} (ms)"

    @property
    def empty(self) -> bool:
        return not any(s.points for s in self.series)


def chart_percentile(slos: Mapping[str, SLOChoice | None]) -> int:
    """The SLOs' percentile when every known one has the same stored percentile, else 50."""
    known = {c.slo.percentile for c in slos.values() if c is not None}
    if len(known) == 1:
        (p,) = known
        if float(p).is_integer() and int(p) in STORED:
            return int(p)
    return 50


def latency_throughput(
    cells: Sequence[CellAggregate],
    run_names: Mapping[str, str],
    *,
    slos: Mapping[str, SLOChoice | None] | None = None,
    evaluation: Mapping[Key, CellSLO] | None = None,
    headline: Headline | None = None,
) -> LatencyThroughput:
    """The chart's data from a report's cells, the SLO each run is judged by, the per-cell evaluation and the
    headline (for each run's best configuration)."""
    slos = dict(slos or {})
    evaluation = evaluation or {}
    p = chart_percentile(slos)
    named = {m for c in slos.values() if c is not None for m in c.slo.targets}
    metrics = [m for m in METRIC_ORDER if m in BASE_METRICS or m in named]
    best: set[Key] = set()
    for r in headline.runs if headline is not None else []:
        if r.best is not None:
            best.add((r.run_id, r.best.input_len, r.best.concurrency))
    multi = len(run_names) > 1
    lines: dict[tuple[str, int], LTSeries] = {}
    for c in sorted(cells, key=lambda c: (list(run_names).index(c.run_id) if c.run_id in run_names else 0,
                                          c.input_len, c.concurrency)):  # fmt: skip
        tps = c.mean("output_throughput")
        if tps is None:
            continue  # a cell without a measured throughput has no place on this axis
        name = run_names.get(c.run_id, c.run_id)
        line = lines.get((c.run_id, c.input_len))
        if line is None:
            label = f"{name} · input {c.input_len}" if multi else f"input {c.input_len}"
            line = lines[(c.run_id, c.input_len)] = LTSeries(c.run_id, name, c.input_len, label)
        key = (c.run_id, c.input_len, c.concurrency)
        e = evaluation.get(key) if slos.get(c.run_id) is not None else None
        line.points.append(
            LTPoint(
                concurrency=c.concurrency,
                output_tps=tps,
                latency_ms={m: c.mean(f"{m}_p{p}_ms") for m in metrics},
                met=e.met if e is not None else None,
                best=key in best,
            )
        )
    return LatencyThroughput(p, metrics, list(lines.values()), _targets(slos, run_names, p))


def _targets(
    slos: Mapping[str, SLOChoice | None], run_names: Mapping[str, str], percentile: int
) -> list[LTTarget]:
    """The SLO target lines judged at ``percentile``: one per (metric, target), naming its runs unless every
    run shares it."""
    who: dict[tuple[str, float], list[str]] = defaultdict(list)
    for run_id, choice in slos.items():
        if choice is None or choice.slo.percentile != percentile:
            continue
        for m, t in choice.slo.targets.items():
            if m not in METRIC_ORDER:
                continue
            who[(m, float(t))].append(run_names.get(run_id, run_id))
    everyone = len(run_names)
    return [LTTarget(m, t, () if len(names) == everyone else tuple(names)) for (m, t), names in who.items()]
