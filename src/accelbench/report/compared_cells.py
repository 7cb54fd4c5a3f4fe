"""A run's cells as a comparison shows them: per (input length, concurrency) the mean of its repeats' medians
and percentiles with the spread, throughput, the devices' utilisation, memory and energy from the stored
telemetry, and the cost per request and per million tokens at the run's hourly price."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from accelbench.domain.results import ResultInfo
from accelbench.domain.run import CellStatus
from accelbench.report.catalog_lookup import accelerator_count
from accelbench.report.comparison import (
    ACCEL_MEMORY_KEYS,
    ACCEL_UTIL_KEYS,
    CellResult,
    RunData,
)
from accelbench.report.percentiles import value as percentile_value
from accelbench.report.tables import CellAggregate, MetricAggregate, aggregate_results
from accelbench.report.verdicts import cell_intervals


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
