"""The answer a person reads first: per run (or comparison) the best configuration, whether the SLO is met and
where it stops being met, the cost per million output tokens there, the failure share, and between runs the
key ratios; and, per cell, the share of requests meeting an SLO (attainment) and the goodput.

One reading for every view: the report (HTML and Markdown), the result page and ``runs show`` render the plain
data made here (``Headline``, ``CellSLO``, ``cell_table``), never their own.

Rules, stated once:
- The SLO is the one the user gave (``--slo`` / ``?slo=``, parsed by ``domain/capacity.py``'s ``parse_slo``),
  else the run's own: a capacity search's SLO, a run spec's ``capacity:`` SLO, or its sweep's ``goodput``
  targets. ``SLOChoice.source`` says which.
- A request meets the SLO when every target holds for it, by the capacity search's own per-request rule
  (``bench/capacity.py``: TPOT of one request, ITL its longest gap); a failed request meets nothing. Attainment
  is the share of a cell's requests (its repeats pooled, failed ones included) meeting it; goodput is the mean
  over repeats of the requests/s and output tok/s of those requests.
- A cell meets the SLO when the SLO's percentile of each named metric is within its target and the attainment
  is at least the SLO's; as the capacity search judges a level.
- Without stored per-request records a cell is read from its stored percentiles: the attainment is then a lower
  bound (a target met at p95 is met by at least 95% of requests; several targets: one minus the sum of what
  each may miss), said so (``source="percentiles"``, written ``>=``); ITL cannot be judged so (the stored ITL
  percentiles are over gaps, not per request).
- The best configuration is the cell with the highest output tok/s that meets the SLO; without an SLO (or when
  none meets it) the cell with the highest output tok/s, said so. A capacity search's answer is its own
  (``report/capacity.py``).
- Ratios between runs are the comparison's verdicts (``report/verdicts.py``), at one matched cell each: output
  throughput and cost at the run's best configuration (else the baseline's) where both runs measured it, decode
  speed at the lowest concurrency both measured. A supported difference is said in the verdict's words, "B is 25%
  faster (22-28%) than A", otherwise "no detectable difference" (the same words as the findings, the tables and
  the CSV). Only figures without intervals (results stored before them) keep the plain factor, the larger figure
  first, "B is 2.5x faster than A", never below 1, at the two runs' best configurations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from accelbench.domain.bench import GoodputSLO, RequestRecord
from accelbench.domain.capacity import CapacitySLO, parse_slo
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import CellStatus
from accelbench.report.comparison import CapacityRun, Comparison, lead
from accelbench.report.failures import CellFailures, cell_failures
from accelbench.report.formatting import MISSING, fmt_num, fmt_usd
from accelbench.report.percentiles import STORED
from accelbench.report.ranking_stability import best_configuration_stability
from accelbench.report.tables import (
    CellAggregate,
    percentile_columns,
    table_headers,
    table_rows,
)
from accelbench.report.verdict_phrases import known, supported_sentence
from accelbench.report.verdicts import COST_METRIC, MetricVerdict, find

if TYPE_CHECKING:
    from accelbench.store.repo import Store

Key = tuple[str, int, int]  # (run id, input length, concurrency)
METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2E"}


# ------------------------------------------------------------------------------------------ the SLO
@dataclass(frozen=True)
class SLOChoice:
    """The SLO a view judges cells against, and where it came from."""

    slo: CapacitySLO
    source: str

    def label(self) -> str:
        """``p90 ttft <= 2000 ms, tpot <= 100 ms (attainment >= 95%; given)``"""
        return f"{self.slo.label()} (attainment >= {self.slo.attainment:.0%}; {self.source})"


def given_slo(text: str | None, *, percentile: float = 90.0, attainment: float = 0.95) -> CapacitySLO | None:
    """The SLO a user typed (``ttft:2000,tpot:100``), parsed by the one SLO parser; None when none was given."""
    if text is None or not text.strip():
        return None
    return parse_slo(text, percentile=percentile, attainment=attainment)


def run_slo(run: RunInfo, given: CapacitySLO | None = None) -> SLOChoice | None:
    """The SLO to judge ``run`` by: the one given, else the run's capacity search's, else its spec's (a
    ``capacity:`` SLO, or the sweep's ``goodput`` targets); None when none is known."""
    from accelbench.report.capacity import capacity_result

    if given is not None:
        return SLOChoice(given, "given")
    result, _ = capacity_result(run)
    if result is not None and result.slo is not None:
        return SLOChoice(result.slo, "the capacity search's SLO")
    spec = run.spec if isinstance(run.spec, dict) else {}
    section = spec.get("capacity")
    if isinstance(section, dict) and isinstance(section.get("slo"), dict) and section["slo"]:
        extra = {k: section[k] for k in ("percentile", "attainment") if k in section}
        try:
            slo = CapacitySLO(targets={str(k): float(v) for k, v in section["slo"].items()}, **extra)
        except (TypeError, ValueError):
            slo = None
        if slo is not None:
            return SLOChoice(slo, "the run spec's capacity SLO")
    goodput = (spec.get("sweep") or {}).get("goodput") if isinstance(spec.get("sweep"), dict) else None
    if isinstance(goodput, dict):
        try:
            g = GoodputSLO.model_validate(goodput)
        except ValueError:
            g = None
        if g is not None and not g.is_empty():
            targets = {m: v for m, v in (("ttft", g.ttft_ms), ("tpot", g.tpot_ms), ("e2el", g.e2el_ms)) if v}
            return SLOChoice(CapacitySLO(targets=targets), "the run spec's goodput targets")
    return None


# ------------------------------------------------------------------------------------------ per cell
@dataclass(frozen=True)
class CellSLO:
    """One cell against the SLO: attainment, goodput and whether it meets it, and what that rests on."""

    run_id: str
    input_len: int
    concurrency: int
    source: Literal["records", "percentiles"]
    attainment: float | None = None
    goodput_rps: float | None = None
    goodput_tps: float | None = None
    met: bool | None = None
    why: str = ""

    @property
    def key(self) -> Key:
        return (self.run_id, self.input_len, self.concurrency)

    @property
    def bound(self) -> bool:
        """True when the figures are lower bounds read from percentiles."""
        return self.source == "percentiles"

    def attainment_text(self) -> str:
        if self.attainment is None:
            return MISSING
        return (">=" if self.bound else "") + f"{self.attainment:.0%}"

    def met_text(self) -> str:
        return {True: "yes", False: "no", None: "?"}[self.met]


def _per_request(r: RequestRecord) -> dict[str, float | None]:
    # the capacity search's own per-request values and test, so a stored run and a capacity probe agree
    from accelbench.bench.capacity import _values_ms

    return _values_ms(r)


def _meets(values: dict[str, float | None], targets: Mapping[str, float]) -> bool:
    from accelbench.bench.capacity import _meets as meets

    return meets(values, dict(targets))


def _used(reps: Sequence[ResultInfo]) -> list[ResultInfo]:
    """The repeats a cell's figures rest on (report/tables.py's rule): completed ones, else partial ones."""
    done = [r for r in reps if r.status == CellStatus.completed]
    return done or [r for r in reps if r.status == CellStatus.partial]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _judge(
    percentiles: Mapping[str, float | None], attainment: float | None, slo: CapacitySLO, *, exact: bool
) -> tuple[bool | None, str]:
    """Whether a cell meets ``slo`` and why not, from the SLO percentile of each metric and the attainment."""
    q = f"p{slo.percentile:g}"
    misses, unknown = [], []
    for m, t in slo.targets.items():
        v = percentiles.get(m)
        if v is None:
            unknown.append(m)
        elif v > t:
            misses.append(f"{q} {METRIC_NAMES.get(m, m)} {fmt_num(v)} ms > {t:g} ms")
    if attainment is not None and attainment < slo.attainment and exact:
        misses.append(f"attainment {attainment:.0%} < {slo.attainment:.0%}")
    if misses:
        return False, "; ".join(misses)
    if unknown:
        names = ", ".join(METRIC_NAMES.get(m, m) for m in unknown)
        return None, f"{q} {names} not known for this cell"
    if attainment is None or attainment < slo.attainment:
        shown = f"at least {attainment:.0%}" if attainment is not None else "unknown"
        return None, (
            f"attainment not known exactly without per-request records ({shown}, {slo.attainment:.0%} needed)"
        )
    return True, "meets the SLO"


def _from_records(
    run_id: str,
    input_len: int,
    concurrency: int,
    used: Sequence[ResultInfo],
    records: Mapping[int, Sequence[RequestRecord]],
    slo: CapacitySLO,
) -> CellSLO:
    meeting = total = 0
    rps: list[float] = []
    tps: list[float] = []
    per_metric: dict[str, list[float]] = defaultdict(list)
    for r in used:
        recs = [x for x in records[r.id] if not x.ramp]  # a staggered start's requests are not measured
        good = [x for x in recs if x.success and _meets(_per_request(x), slo.targets)]
        meeting += len(good)
        total += len(recs)
        if r.duration_s > 0:
            rps.append(len(good) / r.duration_s)
            tps.append(sum(x.output_tokens for x in good) / r.duration_s)
        for x in recs:
            if x.success:
                for m, v in _per_request(x).items():
                    if v is not None:
                        per_metric[m].append(v)
    attainment = meeting / total if total else None
    pct: dict[str, float | None] = {
        m: float(np.percentile(per_metric[m], slo.percentile)) if per_metric.get(m) else None
        for m in slo.targets
    }
    met, why = _judge(pct, attainment, slo, exact=True)
    if total and meeting == 0 and not any(x.success for r in used for x in records[r.id]):
        met, why = False, "no request succeeded"
    return CellSLO(run_id, input_len, concurrency, "records", attainment, _mean(rps), _mean(tps), met, why)


def _from_percentiles(cell: CellAggregate, slo: CapacitySLO) -> CellSLO:
    """Lower bounds from the cell's stored percentiles (mean over repeats)."""
    if not cell.completed:
        return CellSLO(
            cell.run_id, cell.input_len, cell.concurrency, "percentiles", 0.0 if cell.failed else None,
            0.0 if cell.failed else None, 0.0 if cell.failed else None, False, "no request succeeded",
        )  # fmt: skip
    miss = 0.0
    pct: dict[str, float | None] = {}
    for m, t in slo.targets.items():
        if m == "itl":  # stored ITL percentiles are over gaps, not each request's longest one
            pct[m] = None
            miss = 1.0
            continue
        met_at = [p for p in STORED if (v := cell.mean(f"{m}_p{p}_ms")) is not None and v <= t]
        miss += 1.0 - (max(met_at) / 100.0 if met_at else 0.0)
        exact_p = slo.percentile if float(slo.percentile).is_integer() else None
        pct[m] = cell.mean(f"{m}_p{int(exact_p)}_ms") if exact_p in STORED else None
    ended = cell.completed + cell.failed
    attainment = max(0.0, 1.0 - miss) * (cell.completed / ended if ended else 0.0)
    met, why = _judge(pct, attainment, slo, exact=False)
    if "itl" in slo.targets and met is not False:
        met, why = None, "ITL is judged per request, and this cell has no per-request records"
    share = attainment / (cell.completed / ended) if ended and cell.completed else 0.0
    rps, tps = cell.mean("request_throughput"), cell.mean("output_throughput")
    return CellSLO(
        cell.run_id, cell.input_len, cell.concurrency, "percentiles", attainment,
        rps * share if rps is not None else None, tps * share if tps is not None else None, met, why,
    )  # fmt: skip


def evaluate_cells(
    cells: Sequence[CellAggregate],
    results: Sequence[ResultInfo],
    slo: CapacitySLO,
    records: Mapping[int, Sequence[RequestRecord]] | None = None,
) -> dict[Key, CellSLO]:
    """Every cell of ``cells`` against ``slo``: from the per-request records of its repeats when every one of
    them has some in ``records``, else from its stored percentiles."""
    by_cell: dict[Key, list[ResultInfo]] = defaultdict(list)
    for r in results:
        by_cell[(r.run_id, r.input_len, r.concurrency)].append(r)
    out: dict[Key, CellSLO] = {}
    for c in cells:
        key = (c.run_id, c.input_len, c.concurrency)
        used = _used(by_cell.get(key, []))
        if records is not None and used and all(records.get(r.id) for r in used):
            out[key] = _from_records(c.run_id, c.input_len, c.concurrency, used, records, slo)
        else:
            out[key] = _from_percentiles(c, slo)
    return out


def load_records(store: Store, results: Sequence[ResultInfo]) -> dict[int, list[RequestRecord]]:
    """The stored per-request records of each result (empty lists where none were kept)."""
    return {r.id: store.get_request_records(r.id) for r in results}


# ------------------------------------------------------------------------------------------ the cell table
def cell_table(
    cells: Sequence[CellAggregate],
    results: Sequence[ResultInfo],
    percentiles: Sequence[int],
    *,
    slo: Mapping[Key, CellSLO] | None = None,
    with_range: bool | None = None,
    with_run: bool = False,
    run_names: Mapping[str, str] | None = None,
) -> tuple[list[str], list[list[str]]]:
    """The per-cell table every human view shows: input, concurrency, each latency at the chosen percentiles,
    output and total tok/s, completed and failed requests, then (with an SLO) attainment, goodput and whether
    the SLO is met, then the most common failure reason. Headers and display strings."""
    cols = percentile_columns(percentiles)
    headers = table_headers(with_run=with_run, metrics=cols)
    names = dict(run_names or {})
    rows = table_rows(cells, with_range=with_range, with_run=with_run, run_names=names, metrics=cols)
    # min-max over repeats on the medians and throughputs only: a tail's spread over repeats is its own noise
    bare = table_rows(cells, with_range=False, with_run=with_run, run_names=names, metrics=cols)
    first = len(headers) - len(cols) - 2
    for i, m in enumerate(cols):
        if "_p" in m.key and not m.key.endswith("_p50_ms"):
            for row, plain in zip(rows, bare, strict=True):
                row[first + i] = plain[first + i]
    if slo is not None:
        headers += ["SLO attainment", "SLO met", "Goodput tok/s", "Goodput req/s"]
    headers.append("Top failure reason")
    failures: dict[Key, CellFailures] = {}
    by_run: dict[str, list[ResultInfo]] = defaultdict(list)
    for r in results:
        by_run[r.run_id].append(r)
    for run_id, rs in by_run.items():
        for f in cell_failures(rs):
            failures[(run_id, f.input_len, f.concurrency)] = f
    for c, row in zip(cells, rows, strict=True):
        key = (c.run_id, c.input_len, c.concurrency)
        if slo is not None:
            e = slo.get(key)
            row += (
                [
                    e.attainment_text(),
                    e.met_text(),
                    (">=" if e.bound else "") + fmt_num(e.goodput_tps, 1),
                    (">=" if e.bound else "") + fmt_num(e.goodput_rps, 2),
                ]
                if e is not None
                else [MISSING] * 4
            )
        top = failures.get(key)
        row.append(f"({top.reason_count}x) {top.reason}" if top is not None and top.reason else MISSING)
    return headers, rows


def slo_note(choice: SLOChoice | None, evaluation: Mapping[Key, CellSLO] | None) -> str | None:
    """The sentence under a cell table with SLO columns: the SLO, where it came from, what the figures rest on."""
    if choice is None or not evaluation:
        return None
    sources = {e.source for e in evaluation.values()}
    rest = (
        "from each request's record"
        if sources == {"records"}
        else "from the cells' stored percentiles: lower bounds (>=), no per-request records were stored"
        if sources == {"percentiles"}
        else "from each request's record where stored, else from the stored percentiles (>=: a lower bound)"
    )
    return (
        f"SLO: {choice.label()}. Attainment is the share of requests (failed ones included) meeting every target, "
        f"goodput the requests/s and output tok/s of those requests; {rest}."
    )


# ------------------------------------------------------------------------------------------ the headline
@dataclass(frozen=True)
class BestCell:
    """The configuration a run's headline recommends, with the figures quoted."""

    input_len: int
    concurrency: int
    output_tps: float | None
    tpot_p50_ms: float | None
    ttft_p50_ms: float | None
    usd_per_1m_output: float | None
    hourly_usd: float | None
    meets_slo: bool | None


@dataclass
class RunHeadline:
    """One run's answer: the best configuration, the SLO verdict and where it breaks, cost, failures."""

    run_id: str
    name: str
    best: BestCell | None
    slo: SLOChoice | None = None
    met_cells: int = 0
    missed_cells: int = 0
    unknown_cells: int = 0
    boundaries: list[str] = field(default_factory=list)
    failed: int = 0
    ended: int = 0
    top_failure: str | None = None
    capacity_answer: str | None = None
    price_note: str | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def failure_share(self) -> float:
        return self.failed / self.ended if self.ended else 0.0

    @property
    def slo_verdict(self) -> str | None:
        """all, some, none or unknown; None without an SLO."""
        if self.slo is None:
            return None
        if self.met_cells and not self.missed_cells and not self.unknown_cells:
            return "all"
        if self.met_cells:
            return "some"
        if self.missed_cells and not self.unknown_cells:
            return "none"
        return "unknown"


@dataclass(frozen=True)
class Ratio:
    """``winner`` is ``factor`` x better than ``loser`` at ``what`` (factor >= 1 always)."""

    what: str
    winner: str
    loser: str
    factor: float
    winner_value: float
    loser_value: float
    sentence: str
    #: the comparison's verdict the sentence says (a matched cell's), None where the figures have no interval
    verdict: MetricVerdict | None = None


@dataclass
class Headline:
    """What a report or page opens with: one sentence that answers, then the sentences behind it."""

    title: str
    runs: list[RunHeadline]
    ratios: list[Ratio] = field(default_factory=list)
    stability: list[str] = field(default_factory=list)  # how often the ranking survives resampling

    @property
    def lines(self) -> list[str]:
        """Every sentence after the title, run by run, then the ratios."""
        multi = len(self.runs) > 1
        out: list[str] = []
        for r in self.runs:
            out += [f"{r.name}: {line}" if multi else line for line in r.lines]
        out += [q.sentence for q in self.ratios]
        return out + self.stability

    def as_dict(self) -> dict[str, object]:
        from dataclasses import asdict

        return {"title": self.title, "lines": self.lines, "runs": [asdict(r) for r in self.runs],
                "ratios": [_ratio_dict(q) for q in self.ratios], "stability": self.stability}  # fmt: skip


def _ratio_dict(q: Ratio) -> dict[str, object]:
    from dataclasses import fields

    out: dict[str, object] = {f.name: getattr(q, f.name) for f in fields(q)}
    out["verdict"] = q.verdict.model_dump(mode="json") if q.verdict is not None else None
    return out


def _best(
    cells: Sequence[CellAggregate], evaluation: Mapping[Key, CellSLO] | None
) -> tuple[CellAggregate | None, bool | None]:
    """The cell with the highest output tok/s meeting the SLO (True), else the highest overall (False without
    one meeting it, None without an SLO)."""
    measured = [c for c in cells if c.mean("output_throughput") is not None]
    if not measured:
        return None, None

    def tps(c: CellAggregate) -> float:
        return c.mean("output_throughput") or 0.0

    if evaluation is not None:
        meeting = [
            c for c in measured if (e := evaluation.get((c.run_id, c.input_len, c.concurrency))) and e.met
        ]
        if meeting:
            return max(meeting, key=tps), True
        return max(measured, key=tps), False
    return max(measured, key=tps), None


def _boundaries(cells: Sequence[CellAggregate], evaluation: Mapping[Key, CellSLO]) -> list[str]:
    """Per input length, where the SLO stops being met as concurrency grows."""
    out = []
    by_len: dict[int, list[CellAggregate]] = defaultdict(list)
    for c in cells:
        by_len[c.input_len].append(c)
    for input_len in sorted(by_len):
        row = sorted(by_len[input_len], key=lambda c: c.concurrency)
        evals = [evaluation.get((c.run_id, c.input_len, c.concurrency)) for c in row]
        verdicts = [e.met if e is not None else None for e in evals]
        where = f"At input {input_len}"
        if all(v is True for v in verdicts):
            out.append(f"{where} the SLO holds at every concurrency measured (up to {row[-1].concurrency}).")
            continue
        if all(v is False for v in verdicts):
            first = evals[0]
            why = f": {first.why}" if first is not None and first.why else ""
            out.append(
                f"{where} the SLO is missed at every concurrency measured (from {row[0].concurrency}{why})."
            )
            continue
        held = [c.concurrency for c, v in zip(row, verdicts, strict=True) if v is True]
        broke = next(
            (
                (c, e)
                for c, v, e in zip(row, verdicts, evals, strict=True)
                if v is False and (not held or c.concurrency > max(held))
            ),
            None,
        )
        if held and broke is not None:
            c, e = broke
            why = f" ({e.why})" if e is not None and e.why else ""
            out.append(
                f"{where} the SLO holds up to concurrency {max(held)} and breaks at {c.concurrency}{why}."
            )
        elif held:
            unknown = [c.concurrency for c, v in zip(row, verdicts, strict=True) if v is None]
            out.append(
                f"{where} the SLO holds up to concurrency {max(held)}; it cannot be judged at "
                + ", ".join(str(u) for u in unknown)
                + "."
            )
        else:
            e = next((e for e in evals if e is not None and e.met is None), None)
            out.append(f"{where} the SLO cannot be judged: {e.why if e else 'no figures'}.")
    return out


def run_headline(
    cmp: Comparison,
    run_id: str,
    cells: Sequence[CellAggregate],
    results: Sequence[ResultInfo],
    *,
    slo: SLOChoice | None = None,
    evaluation: Mapping[Key, CellSLO] | None = None,
) -> RunHeadline:
    """One run's headline from its comparison (price, cost), cells, results and SLO evaluation."""
    compared = cmp.run(run_id)
    cells = [c for c in cells if c.run_id == run_id]
    results = [r for r in results if r.run_id == run_id]
    capacity: CapacityRun | None = next((c for c in cmp.capacity if c.run_id == run_id), None)
    failures = cell_failures(results)
    failed = sum(r.failed for r in results)
    ended = sum(r.completed + r.failed for r in results)
    h = RunHeadline(run_id=run_id, name=compared.name, best=None, slo=slo, failed=failed, ended=ended)
    if failures:
        worst = max(failures, key=lambda f: (f.failed, f.share))
        h.top_failure = f"most at {worst.cell}: {worst.text()}"
    evaluation = evaluation if slo is not None else None
    if evaluation is not None:
        mine = [e for e in evaluation.values() if e.run_id == run_id]
        h.met_cells = sum(1 for e in mine if e.met is True)
        h.missed_cells = sum(1 for e in mine if e.met is False)
        h.unknown_cells = sum(1 for e in mine if e.met is None)
        h.boundaries = _boundaries(cells, evaluation)
    if capacity is not None:
        from accelbench.report.capacity import answer_sentence

        h.capacity_answer = answer_sentence(capacity)
    best, meets = _best(cells, evaluation)
    if best is not None:
        cr = cmp.cell(run_id, best.input_len, best.concurrency)
        h.best = BestCell(
            input_len=best.input_len,
            concurrency=best.concurrency,
            output_tps=best.mean("output_throughput"),
            tpot_p50_ms=best.mean("tpot_p50_ms"),
            ttft_p50_ms=best.mean("ttft_p50_ms"),
            usd_per_1m_output=cr.cost_per_1m_tokens_usd if cr is not None else None,
            hourly_usd=cr.hourly_usd if cr is not None else None,
            meets_slo=meets,
        )
    if compared.price is None:
        h.price_note = compared.price_note or "the run has no price"
    h.lines = _run_lines(h, cmp)
    return h


def _per_million(value: float | None) -> str:
    from accelbench.report.capacity import fmt_usd_per_million

    return fmt_usd_per_million(value)


def _run_lines(h: RunHeadline, cmp: Comparison) -> list[str]:
    from accelbench.report.comparison import TIER_LABELS

    out: list[str] = []
    if h.capacity_answer:
        out.append(h.capacity_answer)
    b = h.best
    if b is None:
        out.append("No cell has a measured throughput, so there is no best configuration.")
    else:
        at = f"input {b.input_len}, concurrency {b.concurrency}"
        figures = (
            f"{fmt_num(b.output_tps)} output tok/s, TPOT p50 {fmt_num(b.tpot_p50_ms, 2)} ms, "
            f"TTFT p50 {fmt_num(b.ttft_p50_ms)} ms"
        )
        if h.slo is None:
            out.append(
                f"Best configuration: {at} ({figures}), the highest output throughput; no SLO is known."
            )
        elif b.meets_slo:
            out.append(f"Best configuration meeting the SLO: {at} ({figures}).")
        else:
            out.append(f"No cell meets the SLO; the highest output throughput is at {at} ({figures}).")
    if h.slo is not None:
        total = h.met_cells + h.missed_cells + h.unknown_cells
        verdict = {
            "all": f"SLO met in every cell ({total})",
            "some": f"SLO met in {h.met_cells} of {total} cells",
            "none": f"SLO met in none of the {total} cells",
            "unknown": f"SLO met in {h.met_cells} of {total} cells, {h.unknown_cells} cannot be judged",
        }[h.slo_verdict or "unknown"]
        out.append(f"{verdict}: {h.slo.label()}.")
        out += h.boundaries
    if b is not None:
        if b.usd_per_1m_output is not None:
            out.append(
                f"Cost there: {_per_million(b.usd_per_1m_output)} per 1M output tokens "
                f"(at {fmt_usd(b.hourly_usd)}/h, {TIER_LABELS[cmp.tier]})."
            )
        else:
            out.append(
                f"No cost per token: {(h.price_note or 'no price is known for this run').rstrip('.')}."
            )
    if h.failed:
        line = f"{h.failed} of {h.ended} requests failed ({h.failure_share:.1%})"
        out.append(line + (f"; {h.top_failure}" if h.top_failure else "") + ".")
    else:
        out.append(f"No request failed ({h.ended} ended).")
    return out


def _ratio(
    what: str, verb: str, a: tuple[str, float], b: tuple[str, float], unit: str, higher: bool
) -> Ratio:
    """``winner is N.Nx <verb> than loser`` with the figures; the factor is always >= 1."""
    (an, av), (bn, bv) = a, b
    a_wins = av >= bv if higher else av <= bv
    (wn, wv), (ln, lv) = ((an, av), (bn, bv)) if a_wins else ((bn, bv), (an, av))
    factor = lead(wv / lv)
    shown = _per_million if unit == "$" else (lambda v: fmt_num(v, 2 if unit == "ms" else 1))
    figures = f"{shown(wv)} vs {shown(lv)}" + ("" if unit == "$" else f" {unit}")
    return Ratio(what, wn, ln, factor, wv, lv, f"{wn} is {factor:.1f}x {verb} than {ln} {what} ({figures}).")


def _shared_best(cmp: Comparison, base: RunHeadline, other: RunHeadline, metric: str) -> MetricVerdict | None:
    """The verdict of ``metric`` at the run's best configuration where the baseline measured it too, else at the
    baseline's best; None when neither cell has a verdict resting on intervals."""
    for best in (other.best, base.best):
        if best is not None:
            v = find(cmp.verdicts, other.run_id, best.input_len, best.concurrency, metric)
            if known(v):
                return v
    return None


def _whose_best(base: RunHeadline, other: RunHeadline, v: MetricVerdict) -> str:
    at = (v.input_len, v.concurrency)
    mine = [
        r.name for r in (other, base) if r.best is not None and (r.best.input_len, r.best.concurrency) == at
    ]
    return "the best configuration of both" if len(mine) == 2 else f"{mine[0]}'s best configuration"


def _judged_ratio(
    what: str, names: tuple[str, str], v: MetricVerdict, figures: str, fallback: Ratio
) -> Ratio:
    """A ratio as the verdict says it (``fallback``'s sentence where the verdict is unknown); the winner the
    verdict's better side, with no detectable difference the one ahead at that cell's figures."""
    ahead = (v.ratio > 1) == (v.direction == "higher is better")
    better = v.better == v.run_id if v.better else ahead
    winner, loser = (names[1], names[0]) if better else (names[0], names[1])
    mine, theirs = (v.value, v.baseline_value) if better else (v.baseline_value, v.value)
    sentence = supported_sentence(fallback.sentence, names, what, v, figures)
    return Ratio(what, winner, loser, lead(v.ratio), mine, theirs, sentence, v)


def comparison_ratios(cmp: Comparison, runs: Sequence[RunHeadline]) -> list[Ratio]:
    """Each run against the baseline, as the comparison's verdicts say it: output throughput and cost at the
    run's best configuration (else the baseline's) where both measured it, and decode speed (TPOT p50) at the
    lowest concurrency both measured; the plain factor at the two best configurations where the figures have
    no interval."""
    base = next((r for r in runs if r.run_id == cmp.baseline), None)
    if base is None:
        return []
    out: list[Ratio] = []
    for other in runs:
        if other is base or base.best is None or other.best is None or other.run_id in cmp.left_out:
            continue  # a run not like for like with the baseline is not ranked against it
        a, b = base.best, other.best
        names = (base.name, other.name)
        shared = _shared_best(cmp, base, other, "output_throughput")
        if a.output_tps and b.output_tps:
            r = _ratio(
                "in output throughput at their best configurations",
                "faster",
                (base.name, a.output_tps),
                (other.name, b.output_tps),
                "tok/s",
                True,
            )
            if shared is not None:
                what = f"in output throughput at input {shared.input_len}, concurrency {shared.concurrency}"
                figures = (
                    f"{fmt_num(shared.value)} vs {fmt_num(shared.baseline_value)} tok/s, "
                    f"{_whose_best(base, other, shared)}"
                )
                r = _judged_ratio(what, names, shared, figures, r)
            out.append(r)
        cost = (
            find(cmp.verdicts, other.run_id, shared.input_len, shared.concurrency, COST_METRIC)
            if shared is not None
            else None
        )
        usd = (
            (cost.baseline_value, cost.value)
            if cost is not None and known(cost)
            else (a.usd_per_1m_output, b.usd_per_1m_output)
        )
        if usd[0] and usd[1]:
            r = _ratio(
                "per 1M output tokens there", "cheaper", (base.name, usd[0]), (other.name, usd[1]), "$", False
            )
            if cost is not None and known(cost):
                what = f"per 1M output tokens at input {cost.input_len}, concurrency {cost.concurrency}"
                r = _judged_ratio(what, names, cost, f"{_per_million(usd[1])} vs {_per_million(usd[0])}", r)
            out.append(r)
        pair = next(
            (
                p
                for p in cmp.pairs
                if p.a == base.run_id and p.b == other.run_id and p.tpot_a_ms and p.tpot_b_ms
            ),
            None,
        )
        if pair is not None and pair.tpot_a_ms and pair.tpot_b_ms:
            r = _ratio(
                f"at decoding (TPOT p50 at input {pair.input_len}, concurrency {pair.lowest_concurrency})",
                "faster",
                (base.name, pair.tpot_a_ms),
                (other.name, pair.tpot_b_ms),
                "ms",
                False,
            )
            v = find(cmp.verdicts, other.run_id, pair.input_len, pair.lowest_concurrency, "tpot_p50_ms")
            if known(v):
                assert v is not None
                figures = f"TPOT {fmt_num(pair.tpot_b_ms, 2)} vs {fmt_num(pair.tpot_a_ms, 2)} ms"
                r = _judged_ratio(r.what, names, v, figures, r)
            out.append(r)
    return out


def build_headline(
    cmp: Comparison,
    cells: Sequence[CellAggregate],
    results: Sequence[ResultInfo],
    *,
    slos: Mapping[str, SLOChoice | None] | None = None,
    evaluation: Mapping[Key, CellSLO] | None = None,
) -> Headline:
    """The headline of one run or of a comparison: per run its answer, for several the key ratios, and a title
    naming the best configuration of all (meeting its SLO when one is known)."""
    slos = slos or {}
    runs = [
        run_headline(cmp, r.id, cells, results, slo=slos.get(r.id), evaluation=evaluation) for r in cmp.runs
    ]
    ratios = comparison_ratios(cmp, runs) if len(runs) > 1 else []
    by_key = {(c.run_id, c.input_len, c.concurrency): c for c in cells}
    best = [
        (r.name, by_key.get((r.run_id, r.best.input_len, r.best.concurrency)), r.best.hourly_usd)
        for r in runs
        if r.best is not None
    ]
    stability = best_configuration_stability(best) if len(runs) > 1 else []
    ranked = [r for r in runs if r.run_id not in cmp.left_out]  # the best of the runs like for like
    return Headline(title=_title(ranked), runs=runs, ratios=ratios, stability=stability)


def _title(runs: Sequence[RunHeadline]) -> str:
    candidates = [r for r in runs if r.best is not None and r.best.output_tps is not None]
    if not candidates:
        return "No configuration has a measured throughput yet."

    def score(r: RunHeadline) -> tuple[int, float]:
        assert r.best is not None
        return (1 if r.best.meets_slo else 0, r.best.output_tps or 0.0)

    top = max(candidates, key=score)
    b = top.best
    assert b is not None
    who = f"{top.name} at " if len(runs) > 1 else ""
    at = f"{who}input {b.input_len}, concurrency {b.concurrency}: {fmt_num(b.output_tps)} output tok/s"
    cost = (
        f", {_per_million(b.usd_per_1m_output)}/1M output tokens" if b.usd_per_1m_output is not None else ""
    )
    if top.slo is None:
        verdict = "the highest throughput (no SLO known)"
    elif b.meets_slo:
        verdict = "meeting the SLO"
    else:
        verdict = "the highest throughput; the SLO is not met anywhere"
    share = f"; {top.failure_share:.1%} of {top.name}'s requests failed" if top.failed else ""
    return f"Best: {at}{cost}, {verdict}{share}."


def headline_for(
    store: Store | None,
    cmp: Comparison,
    cells: Sequence[CellAggregate],
    results: Sequence[ResultInfo],
    runs: Sequence[RunInfo],
    *,
    given: CapacitySLO | None = None,
    records: Mapping[int, Sequence[RequestRecord]] | None = None,
) -> tuple[Headline, dict[str, SLOChoice | None], dict[Key, CellSLO]]:
    """The headline and the per-cell SLO evaluation of stored runs: each run judged by ``given`` or its own SLO,
    from its per-request records (``records`` when given, else read from ``store``; without either, from the
    cells' stored percentiles)."""
    slos = {r.id: run_slo(r, given) for r in runs}
    evaluation: dict[Key, CellSLO] = {}
    if any(slos.values()):
        if records is None:
            judged = [r for r in results if slos.get(r.run_id)]
            records = load_records(store, judged) if store is not None else {}
        for run_id, choice in slos.items():
            if choice is None:
                continue
            mine = [c for c in cells if c.run_id == run_id]
            evaluation.update(
                evaluate_cells(mine, [r for r in results if r.run_id == run_id], choice.slo, records)
            )
    headline = build_headline(cmp, cells, results, slos=slos, evaluation=evaluation or None)
    return headline, slos, evaluation


__all__ = [
    "BestCell",
    "CellSLO",
    "Headline",
    "Ratio",
    "RunHeadline",
    "SLOChoice",
    "build_headline",
    "cell_table",
    "evaluate_cells",
    "given_slo",
    "headline_for",
    "load_records",
    "run_slo",
    "slo_note",
]
