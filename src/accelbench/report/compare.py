"""The comparison of two or more runs: what was compared, matched cells, ratios and cost.

A run is a set of cells, one per (input length, concurrency), each measured one or more times (repeats).
Cells of different runs are matched on (input length, concurrency); a cell's figure is the mean of its
repeats' medians (p95/p99 likewise: the mean of the repeats' p95s), with the min-max of the medians kept so
a reader can see the spread.

Ratios are computed per input length over the concurrencies both runs measured:
- decode speed-up at the lowest concurrency: TPOT of one run over the other (a single stream's speed);
- the total-throughput gap at each concurrency, and whether it widens or narrows from the lowest to the
  highest concurrency;
- per run: TPOT growth and TTFT growth from the lowest to the highest concurrency, output tok/s of one
  request at the lowest concurrency and the aggregate output tok/s at the highest.

Cost: cost per request = hourly / requests per s / 3600; cost per 1M tokens = hourly / tokens per s / 3600 x
1e6, where "tokens" are output tokens (what a user is served; the total-token variant is carried as well).
A run without an instance type (a local machine) has no price: its cost fields are None, never invented.

The baseline is the first run given, or the one chosen (``compare --baseline RUN``, the Compare page's picker):
every other run is compared with it, and every ratio shown to a person is said against it as a factor of at
least 1 with its direction in words (``report/comparison.py`` ``versus``). The latency percentiles a cell holds
are p50, p90 (from the stored summaries), p95 and p99.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from accelbench import __version__
from accelbench.domain.catalog import PriceTier
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.errors import NotFoundError, UserInputError
from accelbench.report.capacity import build_capacity
from accelbench.report.comparison import (
    ACCEL_MEMORY_KEYS,
    ACCEL_UTIL_KEYS,
    TIER_LABELS,
    CapacityRun,
    CellResult,
    ComparedRun,
    Comparison,
    Finding,
    Growth,
    HourlyPrice,
    PairRatios,
    RunData,
    RunScaling,
    ThroughputGap,
    fmt_num,
    fmt_usd,
    lead,
)
from accelbench.report.findings import generate_findings
from accelbench.report.like_for_like import check_like_for_like
from accelbench.report.percentiles import value as percentile_value
from accelbench.report.side_by_side import SIDE_BY_SIDE_COLUMNS, comparison_json, side_by_side_rows
from accelbench.report.tables import CellAggregate, MetricAggregate, aggregate_results
from accelbench.report.verdicts import MetricVerdict, cell_intervals, comparison_verdicts, cost_verdict

#: what the callers of this module use (the model lives in report/comparison.py, the table in
#: report/side_by_side.py; the names stay importable from here, where a comparison is built)
__all__ = [
    "SIDE_BY_SIDE_COLUMNS",
    "TIER_LABELS",
    "CapacityRun",
    "CellResult",
    "ComparedRun",
    "Comparison",
    "Finding",
    "Growth",
    "HourlyPrice",
    "PairRatios",
    "RunData",
    "RunScaling",
    "ThroughputGap",
    "baseline_first",
    "build_comparison",
    "compare_runs",
    "comparison_json",
    "fmt_num",
    "fmt_usd",
    "lead",
    "load_runs",
    "not_comparable",
    "side_by_side_rows",
]

if TYPE_CHECKING:
    from accelbench.store.repo import Store


def load_runs(
    store: Store, refs: Sequence[str], *, tier: PriceTier = PriceTier.on_demand, min_runs: int = 1
) -> list[RunData]:
    """Read the runs (ids or unambiguous prefixes) with their results and prices.

    Raises UserInputError when fewer than ``min_runs`` are given, a run is named twice, or a run has no
    results yet.
    """
    if len(refs) < min_runs:
        raise UserInputError(
            f"Compare needs at least {min_runs} runs; got {len(refs)}.",
            hint="Give two or more run ids (`accelbench runs list` shows them), or use `accelbench report` "
            "for a single run.",
        )
    out: list[RunData] = []
    seen: set[str] = set()
    for ref in refs:
        run = store.get_run(ref)
        if run.id in seen:
            raise UserInputError(f"Run {run.id} is named twice; give each run once.")
        seen.add(run.id)
        results = store.get_results(run.id)
        if not results:
            raise UserInputError(
                f"Run {run.id} has no results to compare (status {run.status.value}).",
                hint="Wait until it has measured at least one cell, or pick another run.",
            )
        price, note = resolve_price(run, tier, store)
        out.append(RunData(run=run, results=results, price=price, price_note=note))
    return out


def baseline_first(store: Store, refs: Sequence[str], baseline: str | None = None) -> list[str]:
    """The runs' ids in the order they are compared: the baseline first (``baseline`` when given, else the
    first run named), the others in the order named. Raises UserInputError when ``baseline`` is not one of
    ``refs``."""
    ids = [store.get_run(ref).id for ref in refs]
    if baseline is None or not baseline.strip():
        return ids
    base = store.get_run(baseline.strip()).id
    if base not in ids:
        raise UserInputError(
            f"The baseline {base} is not one of the runs compared ({', '.join(ids)}).",
            hint="Pick the baseline among the runs compared; without one, the first run named is the baseline.",
        )
    return [base, *(i for i in ids if i != base)]


def not_comparable(run: RunInfo) -> str | None:
    """Why a run is not offered for comparison (it did not complete, or completed no request), else None."""
    if run.status != RunStatus.completed:
        if run.status == RunStatus.failed:
            return "failed" + (f": {run.error}" if run.error else "")
        if run.status.finished:
            return f"{run.status.value} before it completed"
        return f"still {run.status.value}: it can be compared once it has completed"
    if run.completed_requests == 0:
        return "completed no request: nothing to compare"
    return None


def resolve_price(
    run: RunInfo, tier: PriceTier, store: Store | None
) -> tuple[HourlyPrice | None, str | None]:
    """The hourly price of the run's instance type in ``tier``, or (None, why not).

    Order: the catalog's best known price (the store's refreshed prices, else the shipped snapshot), then,
    for on-demand only, the hourly price the run recorded when it ran (an instance the catalog lacks).
    """
    from accelbench.catalog import price_for
    from accelbench.catalog.pricing import SNAPSHOT_REGION

    if not run.instance_type:
        return None, _local_note(run)
    region = _run_region(run) or SNAPSHOT_REGION
    unknown = False
    try:
        p = price_for(run.instance_type, tier, region, store)
    except NotFoundError:
        p, unknown = None, True
    if p is not None:
        return (
            HourlyPrice(
                usd_per_hour=p.usd_per_hour,
                tier=tier,
                region=p.region,
                source=f"{p.source}, {p.effective_date}",
            ),
            None,
        )
    if tier == PriceTier.on_demand and run.hourly_usd is not None:
        return HourlyPrice(usd_per_hour=run.hourly_usd, tier=tier, region=region, source="run record"), None
    why = "is not in the catalog" if unknown else f"has no known {TIER_LABELS[tier]} price in {region}"
    return None, f"{run.instance_type} ({run.id}) {why}; cost left blank."


def _local_note(run: RunInfo) -> str:
    return f"{run.id} has no instance type (a local machine): no price applies, cost left blank."


def _run_region(run: RunInfo) -> str | None:
    target = run.spec.get("target") if isinstance(run.spec, dict) else None
    if isinstance(target, dict) and isinstance(target.get("region"), str):
        return str(target["region"])
    region = run.extra.get("region") if isinstance(run.extra, dict) else None
    return str(region) if isinstance(region, str) else None


def accelerator_count(run: RunInfo) -> int | None:
    """The run's accelerator count, else its instance type's from the catalog, else None."""
    if run.accelerator_count is not None:
        return run.accelerator_count
    if run.instance_type:
        from accelbench.catalog import get_catalog

        try:
            return get_catalog().instance(run.instance_type).accelerator_count
        except NotFoundError:
            return None
    return None


# ------------------------------------------------------------------------------------- aggregation
def _telemetry_figure(
    summaries: Sequence[dict[str, Any]], keys: Sequence[tuple[str, float]], part: str
) -> float | None:
    """Mean (over repeats) of a gauge's per-repeat mean, or the highest per-repeat peak; None when absent."""
    values: list[float] = []
    for s in summaries:
        tel = s.get("telemetry") or {}
        gauges = tel.get(part) or {}
        for key, factor in keys:
            if key in gauges and gauges[key] is not None:
                values.append(float(gauges[key]) * factor)
                break
    if not values:
        return None
    return max(values) if part == "peaks" else sum(values) / len(values)


def _primary_devices(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The device summaries of the devices that served (accelerators, else the CPU), from a stored summary."""
    tel = summary.get("device_telemetry") or {}
    devices = [d for d in tel.get("devices") or [] if isinstance(d, dict)]
    accel = [d for d in devices if d.get("kind") in ("gpu", "neuron")]
    return accel or [d for d in devices if d.get("kind") == "cpu"]


def device_figures(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The compare columns from the repeats' device telemetry: utilisation (mean of the repeats' means, highest
    peak; several accelerators averaged), memory in GiB (summed over the accelerators), the kind described,
    energy per repeat, and tokens per joule over the repeats. Missing figures are absent from the answer."""
    util_avg: list[float] = []
    util_peak: list[float] = []
    mem_avg: list[float] = []
    mem_peak: list[float] = []
    energy: list[float] = []
    tokens = 0
    kinds: set[str] = set()
    energy_known = bool(summaries)
    for s in summaries:
        devs = _primary_devices(s)
        if not devs:
            energy_known = False
            continue
        kinds.update(str(d.get("kind")) for d in devs)
        u = [float(d["util_mean_pct"]) for d in devs if d.get("util_mean_pct") is not None]
        if u:
            util_avg.append(sum(u) / len(u))
        p = [float(d["util_peak_pct"]) for d in devs if d.get("util_peak_pct") is not None]
        if p:
            util_peak.append(max(p))
        m = [float(d["memory_used_mean_bytes"]) for d in devs if d.get("memory_used_mean_bytes") is not None]
        if m:
            mem_avg.append(sum(m) / 2**30)
        mp = [float(d["memory_used_peak_bytes"]) for d in devs if d.get("memory_used_peak_bytes") is not None]
        if mp:
            mem_peak.append(sum(mp) / 2**30)
        e = [d.get("energy_j") for d in devs]
        if any(x is None for x in e):
            energy_known = False
        else:
            energy.append(sum(float(x) for x in e if x is not None))
            tokens += int(s.get("total_output_tokens") or 0)
    out: dict[str, Any] = {}
    if kinds:
        out["kind"] = "/".join(sorted(kinds))
    if util_avg:
        out["util_avg"] = sum(util_avg) / len(util_avg)
    if util_peak:
        out["util_peak"] = max(util_peak)
    if mem_avg:
        out["mem_avg"] = sum(mem_avg) / len(mem_avg)
    if mem_peak:
        out["mem_peak"] = max(mem_peak)
    if energy_known and energy:
        total = sum(energy)
        out["energy_j"] = total / len(energy)
        if total > 0 and tokens > 0:
            out["tokens_per_joule"] = tokens / total
            out["joules_per_output_token"] = total / tokens
    return out


def device_note(data: RunData, name: str) -> str | None:
    """Why a run's accelerator or energy columns are blank, from what its results recorded; None when filled."""
    summaries = [r.summary for r in data.results if r.status != CellStatus.failed and r.completed > 0]
    if not summaries:
        return None
    tels = [s.get("device_telemetry") for s in summaries]
    if all(not t for t in tels):
        return (
            f"{name}: no device telemetry (the engine was not on the measuring machine, or the results predate "
            "it); accelerator utilisation, memory and energy are blank unless the server's /metrics carried them."
        )
    missing: list[str] = []
    for t in tels:
        for m in (t or {}).get("missing") or []:
            if m not in missing:
                missing.append(m)
    figs = device_figures(summaries)
    if "energy_j" in figs:
        return None
    lacking = [m for m in missing if m.split(":")[0] in ("RAPL", "NVML", "DCGM", "Neuron")]
    reason = "; ".join(lacking) if lacking else "no power or energy source for the devices that served"
    return f"{name}: energy and tokens per joule are blank: {reason}."


def _m(agg: MetricAggregate | None) -> float | None:
    return agg.mean if agg is not None else None


# where a stored summary keeps each latency metric's statistics (a ``MetricStats``)
_SUMMARY_STATS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2e": "e2el_ms"}


def _summary_percentile(used: Sequence[ResultInfo], metric: str, p: int) -> float | None:
    """The mean over the repeats used of one percentile a result keeps only in its summary (p90): the same
    mean of repeats as every other figure of the cell; None when no repeat recorded it."""
    values = [
        v for r in used if (v := percentile_value(r.summary.get(_SUMMARY_STATS[metric]), p)) is not None
    ]
    agg = MetricAggregate.of(values)
    return agg.mean if agg is not None else None


def aggregate_cells(data: RunData, base: Sequence[CellAggregate] | None = None) -> list[CellResult]:
    """One CellResult per (input_len, concurrency) of the run, from ``report.tables.aggregate_results``
    (the mean of the repeats' medians; which repeats count is decided there; ``base`` when already made),
    with cost and telemetry."""
    run = data.run
    hourly = data.price.usd_per_hour if data.price else None
    count = accelerator_count(run)
    results = list(data.results)
    base = aggregate_results(results) if base is None else base
    by_cell: dict[tuple[int, int], list[ResultInfo]] = defaultdict(list)
    for r in results:
        by_cell[(r.input_len, r.concurrency)].append(r)
    cells: list[CellResult] = []
    for c in base:
        key = (c.input_len, c.concurrency)
        tpot, total = c.tpot_p50_ms, c.total_token_throughput
        out_tps, rps, total_tps = _m(c.output_throughput), _m(c.request_throughput), _m(total)
        summaries = [r.summary for r in by_cell[key] if r.status != CellStatus.failed and r.completed > 0]
        dev = device_figures(summaries)
        # the repeats the aggregate's figures rest on (report/tables.py decides: completed ones, else partial)
        used = [r for r in by_cell[key] if r.status == c.status] if c.status != CellStatus.failed else []
        done = c.completed + c.failed
        cells.append(
            CellResult(
                run_id=run.id,
                input_len=c.input_len,
                concurrency=c.concurrency,
                output_len=c.output_len,
                repeats=c.repeats_used if c.status != CellStatus.failed else 0,
                result_ids=[r.id for r in by_cell[key]],
                status=c.status.value,
                ttft_p50_ms=_m(c.ttft_p50_ms),
                ttft_p90_ms=_summary_percentile(used, "ttft", 90),
                ttft_p95_ms=_m(c.ttft_p95_ms),
                ttft_p99_ms=_m(c.ttft_p99_ms),
                tpot_p50_ms=_m(tpot),
                tpot_p90_ms=_summary_percentile(used, "tpot", 90),
                tpot_p95_ms=_m(c.tpot_p95_ms),
                tpot_p99_ms=_m(c.tpot_p99_ms),
                itl_p50_ms=_m(c.itl_p50_ms),
                itl_p90_ms=_summary_percentile(used, "itl", 90),
                itl_p95_ms=_m(c.itl_p95_ms),
                itl_p99_ms=_m(c.itl_p99_ms),
                e2e_p50_ms=_m(c.e2el_p50_ms),
                e2e_p90_ms=_summary_percentile(used, "e2e", 90),
                e2e_p95_ms=_m(c.e2el_p95_ms),
                e2e_p99_ms=_m(c.e2el_p99_ms),
                tpot_p50_min_ms=tpot.min if tpot else None,
                tpot_p50_max_ms=tpot.max if tpot else None,
                output_throughput=out_tps,
                total_throughput=total_tps,
                total_throughput_min=total.min if total else None,
                total_throughput_max=total.max if total else None,
                # Why "None when 0": CPU instances carry no accelerator; a per-accelerator figure is meaningless.
                throughput_per_accelerator=(total_tps / count) if (total_tps is not None and count) else None,
                request_throughput=rps,
                successful=c.completed,
                failed=c.failed,
                success_rate=(c.completed / done) if done else None,
                # the devices' own telemetry first; the server's /metrics gauges where it was not collected
                accelerator_util_avg_pct=dev.get(
                    "util_avg", _telemetry_figure(summaries, _UTIL_KEYS, "means")
                ),
                accelerator_util_peak_pct=dev.get(
                    "util_peak", _telemetry_figure(summaries, _UTIL_KEYS, "peaks")
                ),
                accelerator_memory_avg_gib=dev.get(
                    "mem_avg", _telemetry_figure(summaries, ACCEL_MEMORY_KEYS, "means")
                ),
                accelerator_memory_peak_gib=dev.get(
                    "mem_peak", _telemetry_figure(summaries, ACCEL_MEMORY_KEYS, "peaks")
                ),
                accelerator_telemetry=dev.get("kind")
                or ("metrics" if _telemetry_figure(summaries, _UTIL_KEYS, "means") is not None else None),
                energy_j=dev.get("energy_j"),
                tokens_per_joule=dev.get("tokens_per_joule"),
                joules_per_output_token=dev.get("joules_per_output_token"),
                hourly_usd=hourly,
                cost_per_request_usd=cost_per_request(hourly, rps),
                cost_per_1m_tokens_usd=cost_per_1m_tokens(hourly, out_tps),
                cost_per_1m_total_tokens_usd=cost_per_1m_tokens(hourly, total_tps),
                ci95=cell_intervals(c),
            )
        )
    return cells


_UTIL_KEYS: tuple[tuple[str, float], ...] = tuple((k, 1.0) for k in ACCEL_UTIL_KEYS)


def cost_per_request(hourly_usd: float | None, requests_per_s: float | None) -> float | None:
    """hourly / requests per second / 3600; None without a price or a throughput."""
    if hourly_usd is None or not requests_per_s or requests_per_s <= 0:
        return None
    return hourly_usd / requests_per_s / 3600.0


def cost_per_1m_tokens(hourly_usd: float | None, tokens_per_s: float | None) -> float | None:
    """hourly / tokens per second / 3600 x 1e6; None without a price or a throughput."""
    if hourly_usd is None or not tokens_per_s or tokens_per_s <= 0:
        return None
    return hourly_usd / tokens_per_s / 3600.0 * 1e6


# ----------------------------------------------------------------------------------------- ratios
def growth_pct(low: float, high: float) -> float:
    """(high / low - 1) x 100."""
    return (high / low - 1.0) * 100.0


def run_scaling(run_id: str, input_len: int, cells: Sequence[CellResult]) -> RunScaling | None:
    """Scaling of one run at one input length over the given cells (those with metrics); None if none."""
    usable = sorted(
        # a cell stored with concurrency 0 (bench without --max-concurrency, before it was stored as the prompt
        # count) has no known concurrency: it is not a point on the scaling curve
        (
            c
            for c in cells
            if c.run_id == run_id and c.input_len == input_len and c.repeats > 0 and c.concurrency > 0
        ),
        key=lambda c: c.concurrency,
    )
    if not usable:
        return None
    lo, hi = usable[0], usable[-1]

    def _growth(attr: str) -> Growth | None:
        a, b = getattr(lo, attr), getattr(hi, attr)
        if lo is hi or a is None or b is None or a <= 0:
            return None
        return Growth(
            run_id=run_id,
            from_concurrency=lo.concurrency,
            to_concurrency=hi.concurrency,
            from_ms=a,
            to_ms=b,
            growth_pct=growth_pct(a, b),
        )

    per_request = (
        lo.output_throughput / lo.concurrency
        if lo.output_throughput is not None and lo.concurrency > 0
        else None
    )
    scaling = (
        hi.total_throughput / lo.total_throughput
        if lo is not hi and lo.total_throughput and hi.total_throughput is not None
        else None
    )
    return RunScaling(
        run_id=run_id,
        input_len=input_len,
        concurrencies=[c.concurrency for c in usable],
        lowest_concurrency=lo.concurrency,
        highest_concurrency=hi.concurrency,
        tpot_growth=_growth("tpot_p50_ms"),
        ttft_growth=_growth("ttft_p50_ms"),
        per_request_output_tps=per_request,
        aggregate_output_tps=hi.output_throughput,
        total_throughput_low=lo.total_throughput,
        total_throughput_high=hi.total_throughput,
        throughput_scaling=scaling,
    )


def gap_trend(low_ratio: float, high_ratio: float) -> Literal["widens", "narrows", "holds", "reverses"]:
    """How the leader's advantage moves from the low to the high ratio (A/B), judged on the advantages as
    they are printed (one decimal), so a sentence never says "widens from 2.0x to 2.0x"."""
    lo = round(lead(low_ratio), 1)
    hi = round(lead(high_ratio), 1)
    if lo > 1.0 and hi > 1.0 and (low_ratio >= 1.0) != (high_ratio >= 1.0):
        return "reverses"
    if hi > lo:
        return "widens"
    if hi < lo:
        return "narrows"
    return "holds"


def pair_ratios(a: str, b: str, input_len: int, cells: Sequence[CellResult]) -> PairRatios | None:
    """B against A at one input length, over the concurrencies both measured; None when none match."""
    a_cells = {c.concurrency: c for c in cells if c.run_id == a and c.input_len == input_len and c.repeats}
    b_cells = {c.concurrency: c for c in cells if c.run_id == b and c.input_len == input_len and c.repeats}
    common = sorted(set(a_cells) & set(b_cells))
    if not common:
        return None
    lo, hi = common[0], common[-1]
    matched = [a_cells[c] for c in common] + [b_cells[c] for c in common]
    a_scaling = run_scaling(a, input_len, matched)
    b_scaling = run_scaling(b, input_len, matched)
    assert a_scaling is not None and b_scaling is not None
    tpot_a, tpot_b = a_cells[lo].tpot_p50_ms, b_cells[lo].tpot_p50_ms
    speedup = tpot_b / tpot_a if tpot_a and tpot_b else None
    gaps: list[ThroughputGap] = []
    for c in common:
        ta, tb = a_cells[c].total_throughput, b_cells[c].total_throughput
        if ta and tb:
            gaps.append(ThroughputGap(concurrency=c, a_tok_s=ta, b_tok_s=tb, ratio_a_over_b=ta / tb))
    trend = None
    if len(gaps) >= 2 and gaps[0].concurrency == lo and gaps[-1].concurrency == hi:
        trend = gap_trend(gaps[0].ratio_a_over_b, gaps[-1].ratio_a_over_b)
    differs = any(
        a_cells[c].output_len is not None
        and b_cells[c].output_len is not None
        and a_cells[c].output_len != b_cells[c].output_len
        for c in common
    )
    return PairRatios(
        input_len=input_len,
        a=a,
        b=b,
        concurrencies=common,
        lowest_concurrency=lo,
        highest_concurrency=hi,
        tpot_a_ms=tpot_a,
        tpot_b_ms=tpot_b,
        decode_speedup_a_over_b=speedup,
        throughput_gaps=gaps,
        throughput_gap_trend=trend,
        a_scaling=a_scaling,
        b_scaling=b_scaling,
        output_len_differs=differs,
    )


# -------------------------------------------------------------------------------------- describe
def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _machine(run: RunInfo) -> str | None:
    env = run.environment or {}
    cpu = _dict(env.get("cpu"))
    parts: list[str] = []
    if cpu.get("model"):
        cores = cpu.get("usable_cpus") or cpu.get("logical_cpus")
        parts.append(f"{cpu['model']}" + (f" ({cores} CPUs)" if cores else ""))
    acc = _dict(env.get("accelerators"))
    gpus = acc.get("gpus") or []
    if gpus:
        names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")})
        parts.append(f"{len(gpus)} x {', '.join(names) or 'GPU'}")
    if acc.get("neuron_devices"):
        parts.append(f"{len(acc['neuron_devices'])} Neuron devices")
    return "; ".join(parts) or None


def _isa_trace(run: RunInfo) -> str | None:
    trace = (run.extra or {}).get("isa_trace")
    if trace is None:
        return None
    if isinstance(trace, str):
        return trace
    if isinstance(trace, dict):
        for key in ("verdict", "summary", "message"):
            if isinstance(trace.get(key), str):
                return str(trace[key])
    return None


def describe_run(data: RunData, name: str) -> ComparedRun:
    run = data.run
    isa = _dict(_dict((run.environment or {}).get("cpu")).get("isa"))
    return ComparedRun(
        id=run.id,
        name=name,
        label=run.label,
        kind=run.kind,
        status=run.status.value,
        created_at=run.created_at,
        model=run.model or run.served_model,
        engine=run.engine,
        engine_version=run.engine_version,
        target=run.target,
        instance_type=run.instance_type,
        machine=_machine(run),
        accelerator_type=run.accelerator_type,
        accelerator_name=run.accelerator_name,
        accelerator_count=accelerator_count(run),
        tp_degree=run.tp_degree,
        quantization=run.quantization,
        cpu_flags=[str(x) for x in isa.get("present", [])],
        cpu_matrix_engine=isa.get("matrix_engine"),
        isa_trace=_isa_trace(run),
        price=data.price,
        price_note=data.price_note,
    )


def display_names(runs: Sequence[RunInfo]) -> list[str]:
    """Labels where they are unique, else "label (id)"; the id when there is no label."""
    base = [r.label or r.id for r in runs]
    return [f"{n} ({r.id})" if base.count(n) > 1 else n for n, r in zip(base, runs, strict=True)]


# ----------------------------------------------------------------------------------------- build
def build_comparison(
    runs: Sequence[RunData],
    *,
    tier: PriceTier = PriceTier.on_demand,
    with_findings: bool = True,
    allow_mismatch: bool = False,
) -> Comparison:
    """Compare the runs (the first is the baseline). One run gives its cells and scaling, no pairs. A run that
    is not like for like with the baseline is left out of the pairs and findings unless ``allow_mismatch``."""
    if not runs:
        raise UserInputError("Nothing to compare: give at least one run.")
    names = display_names([d.run for d in runs])
    compared = [describe_run(d, n) for d, n in zip(runs, names, strict=True)]
    cells: list[CellResult] = []
    aggregates: list[CellAggregate] = []
    for d in runs:
        aggregates.extend(run_cells := aggregate_results(list(d.results)))
        cells.extend(aggregate_cells(d, run_cells))
    notes: list[str] = []
    for d, cr in zip(runs, compared, strict=True):
        if cr.price is None and cr.price_note is None:
            cr.price_note = (
                _local_note(d.run)
                if not d.run.instance_type
                else f"{d.run.instance_type} ({d.run.id}) has no {TIER_LABELS[tier]} price; cost left blank."
            )
        if cr.price_note:
            notes.append(cr.price_note)
        notes.extend(d.extra_notes)
        dnote = device_note(d, cr.name)
        if dnote:
            notes.append(dnote)
    capacity, capacity_notes = build_capacity(runs, compared, on_demand=tier == PriceTier.on_demand)
    notes.extend(capacity_notes)
    # a request-rate search stores every rate under concurrency 0: that cell mixes rates, no ratio rests on it
    mixed = {c.run_id for c in capacity if c.load == "request_rate"}
    ratio_cells = [c for c in cells if c.run_id not in mixed]
    keysets = [
        {(c.input_len, c.concurrency) for c in ratio_cells if c.run_id == d.run.id and c.repeats}
        for d in runs
    ]
    matched = sorted(set.intersection(*keysets)) if keysets else []
    if len(runs) > 1:
        union = set.union(*keysets)
        unmatched = sorted(union - set(matched))
        if not matched:
            notes.append("No (input length, concurrency) cell was measured by every run: nothing to match.")
        elif unmatched:
            notes.append(
                "Cells not measured by every run, shown but left out of the ratios: "
                + ", ".join(f"input {i} x concurrency {c}" for i, c in unmatched)
                + "."
            )
    models = {d.run.id: (d.run.model or d.run.served_model) for d in runs}
    if len({m for m in models.values() if m}) > 1:
        notes.append(
            "The runs serve different models ("
            + ", ".join(f"{n}: {models[d.run.id] or 'unknown'}" for n, d in zip(names, runs, strict=True))
            + "): the ratios compare model and hardware together."
        )
    precisions = {d.run.id: d.run.quantization for d in runs}
    if len({q for q in precisions.values() if q}) > 1:
        notes.append(
            "The runs serve the weights at different precisions ("
            + ", ".join(f"{n}: {precisions[d.run.id] or 'unknown'}" for n, d in zip(names, runs, strict=True))
            + "): the ratios compare precision, engine and hardware together."
        )
    failed_cells = [c for c in cells if c.repeats == 0]
    for c in failed_cells:
        notes.append(
            f"{names[[d.run.id for d in runs].index(c.run_id)]}: cell input {c.input_len} x concurrency "
            f"{c.concurrency} has no successful repeat ({c.failed} requests failed)."
        )
    scaling = [
        s
        for d in runs
        for il in sorted({c.input_len for c in cells if c.run_id == d.run.id})
        if (s := run_scaling(d.run.id, il, cells)) is not None
    ]
    baseline = runs[0].run.id
    pairs: list[PairRatios] = []
    for d in runs[1:]:
        for il in sorted({c.input_len for c in ratio_cells}):
            p = pair_ratios(baseline, d.run.id, il, ratio_cells)
            if p is not None:
                pairs.append(p)
                if p.output_len_differs:
                    notes.append(
                        f"At input {il} the runs {names[0]} and {names[runs.index(d)]} asked for different "
                        "output lengths: their TPOT compares, their throughput and cost less so."
                    )
    comparison = Comparison(
        generated_at=datetime.now(UTC),
        accelbench_version=__version__,
        tier=tier,
        baseline=baseline,
        runs=compared,
        cells=cells,
        matched=matched,
        scaling=scaling,
        pairs=pairs,
        notes=notes,
        capacity=capacity,
        verdicts=with_cost_verdicts(comparison_verdicts(aggregates, baseline, matched), compared),
    )
    check_like_for_like(comparison, [d.run for d in runs], allow_mismatch=allow_mismatch)
    if with_findings:
        comparison.findings = generate_findings(comparison)
    return comparison


def with_cost_verdicts(verdicts: list[MetricVerdict], runs: Sequence[ComparedRun]) -> list[MetricVerdict]:
    """The verdicts, each output throughput's followed by the cost per 1M output tokens' of the same cell where
    both runs have a price (``report/verdicts.py`` ``cost_verdict``)."""
    prices = {r.id: r.price.usd_per_hour if r.price else None for r in runs}
    out: list[MetricVerdict] = []
    for v in verdicts:
        out.append(v)
        if v.metric == "output_throughput":
            cost = cost_verdict(v, prices.get(v.baseline), prices.get(v.run_id))
            if cost is not None:
                out.append(cost)
    return out


def compare_runs(
    store: Store,
    refs: Sequence[str],
    *,
    tier: PriceTier = PriceTier.on_demand,
    min_runs: int = 2,
    baseline: str | None = None,
    allow_mismatch: bool = False,
) -> Comparison:
    """Load the runs from the store and compare them (``min_runs=1`` for a single-run report): every run
    against the baseline, ``baseline`` when given (one of ``refs``), else the first run named; runs not like for
    like with it are kept out of the ratios unless ``allow_mismatch``."""
    if baseline is not None and len(refs) >= min_runs:
        refs = baseline_first(store, refs, baseline)
    runs = load_runs(store, refs, tier=tier, min_runs=min_runs)
    return build_comparison(runs, tier=tier, allow_mismatch=allow_mismatch)
