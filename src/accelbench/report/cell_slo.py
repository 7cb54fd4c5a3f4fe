"""Each cell against an SLO: which SLO a run is judged by (``SLOChoice``: given, else the run's own), and per
cell the share of requests meeting it (attainment), the goodput and whether it is met (``CellSLO``), from the
per-request records where stored, else as lower bounds from the stored percentiles. The rules are stated in
``report/headline.py``'s docstring."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from accelbench.bench.capacity_search import _meets as meets
from accelbench.bench.capacity_search import _values_ms
from accelbench.domain.capacity import CapacitySLO, parse_slo
from accelbench.domain.load import GoodputSLO
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import CellStatus
from accelbench.report.capacity_results import capacity_result
from accelbench.report.formatting import MISSING, fmt_num
from accelbench.report.percentiles import STORED
from accelbench.report.tables import CellAggregate

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
    return _values_ms(r)


def _meets(values: dict[str, float | None], targets: Mapping[str, float]) -> bool:
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
