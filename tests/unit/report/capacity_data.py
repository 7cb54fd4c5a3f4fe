"""Capacity runs with known numbers for the report and compare tests: built in memory (``capacity_run_data``)
or stored the way ``accelbench capacity`` stores them (``store_capacity_run``: each probe a cell, the answer in
the run's ``extra["capacity"]``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.domain.capacity import CapacityResult, CapacitySLO, LoadKind, Probe
from accelbench.domain.instance_types import PriceTier
from accelbench.domain.results import ResultInfo
from accelbench.domain.run import RunStatus
from accelbench.report.compare_runs import HourlyPrice, RunData
from accelbench.store.repo import Store
from tests.support.report_data import make_result, make_run, make_summary

TPOT_50 = CapacitySLO(targets={"tpot": 50.0}, percentile=90.0, attainment=0.95)


@dataclass(frozen=True)
class Level:
    """One probe: its level, the p-th percentile TPOT and TTFT (ms) and output / total tok/s."""

    level: float
    tpot: float
    ttft: float
    out_tps: float
    total_tps: float
    repeat: int = 1


def probes(levels: Sequence[Level], slo: CapacitySLO | None) -> list[Probe]:
    out = []
    for lv in levels:
        met = None
        why = ""
        if slo is not None:
            misses = [f"tpot {lv.tpot}"] if lv.tpot > slo.targets.get("tpot", float("inf")) else []
            misses += [f"ttft {lv.ttft}"] if lv.ttft > slo.targets.get("ttft", float("inf")) else []
            met, why = not misses, "; ".join(misses) or "meets the SLO"
        out.append(
            Probe(
                level=lv.level,
                repeat=lv.repeat,
                requests=30,
                percentiles={
                    "ttft": lv.ttft,
                    "tpot": lv.tpot,
                    "itl": lv.tpot * 1.2,
                    "e2el": lv.ttft + 31 * lv.tpot,
                },
                attainment=(1.0 if met else 0.5) if slo is not None else None,
                output_tokens_per_s=lv.out_tps,
                total_tokens_per_s=lv.total_tps,
                requests_per_s=lv.out_tps / 32,
                achieved_rate=lv.level,
                met=met,
                why=why,
            )
        )
    return out


def capacity_result(
    levels: Sequence[Level],
    *,
    slo: CapacitySLO | None = TPOT_50,
    load: LoadKind = "concurrency",
    knee: float | None = None,
    predicted: float | None = None,
    hourly: float | None = None,
) -> CapacityResult:
    """The answer a search over ``levels`` gives: the highest level all of whose measurements met the SLO."""
    ps = probes(levels, slo)
    result = CapacityResult(load=load, slo=slo, probes=ps, knee=knee, predicted_max_load=predicted)
    if slo is None:
        return result
    failing = {p.level for p in ps if not p.met}
    good = [p.level for p in ps if p.met and p.level not in failing]
    if not good:
        lowest = min(ps, key=lambda p: p.level)
        result.reason = f"even the lowest level measured ({lowest.level:g}) misses the SLO: {lowest.why}"
        return result
    result.max_load = max(good)
    at = [p for p in ps if p.level == result.max_load]
    result.output_tokens_per_s_at_max = sum(p.output_tokens_per_s for p in at) / len(at)
    result.total_tokens_per_s_at_max = sum(p.total_tokens_per_s for p in at) / len(at)
    result.requests_per_s_at_max = sum(p.requests_per_s for p in at) / len(at)
    if hourly is not None:
        result.hourly_usd = hourly
        result.usd_per_million_output_tokens = hourly / result.output_tokens_per_s_at_max / 3600 * 1e6
        result.usd_per_million_total_tokens = hourly / result.total_tokens_per_s_at_max / 3600 * 1e6
    return result


def _results(run_id: str, levels: Sequence[Level], load: LoadKind) -> list[ResultInfo]:
    return [
        make_result(
            run_id,
            128,
            int(lv.level) if load == "concurrency" else 0,
            repeat=lv.repeat if load == "concurrency" else i + 1,
            tpot=lv.tpot,
            ttft=lv.ttft,
            total_tps=lv.total_tps,
            output_tps=lv.out_tps,
        )
        for i, lv in enumerate(levels)
    ]


def capacity_run_data(
    run_id: str,
    levels: Sequence[Level],
    *,
    instance_type: str | None,
    hourly: float | None,
    engine: str = "vllm",
    label: str | None = None,
    **kw: Any,
) -> RunData:
    """A capacity run in memory, priced at ``hourly`` on demand."""
    load: LoadKind = kw.get("load", "concurrency")
    result = capacity_result(levels, hourly=hourly, **kw)
    run = make_run(
        run_id,
        kind="capacity",
        label=label or run_id,
        model="smol",
        engine=engine,
        instance_type=instance_type,
        extra={"capacity": result.model_dump(mode="json")},
    )
    price = (
        HourlyPrice(usd_per_hour=hourly, tier=PriceTier.on_demand, source="test")
        if hourly is not None
        else None
    )
    return RunData(run=run, results=_results(run_id, levels, load), price=price)


def store_capacity_run(
    store: Store,
    levels: Sequence[Level],
    *,
    label: str,
    instance_type: str | None,
    engine: str = "vllm",
    kind: str = "capacity",
    status: RunStatus = RunStatus.completed,
    partial: bool = False,
    spec: dict[str, Any] | None = None,
    **kw: Any,
) -> str:
    """A capacity run stored as the command stores one: each probe a cell (a concurrency level its cell, a
    re-measure repeat 2; a rate probe concurrency 0, repeat = probe index), then the answer in extra.
    ``partial``: only the probes so far, as a search that is still running leaves them; ``spec``: the run's
    spec (default: the capacity command's)."""
    load: LoadKind = kw.get("load", "concurrency")
    slo = kw.get("slo", TPOT_50)
    spec = spec or {"capacity": {"load": load, "slo": slo.model_dump(mode="json") if slo else None}}
    run = store.create_run(
        kind=kind,
        status=status,
        label=label,
        model="smol",
        served_model="smol",
        engine=engine,
        instance_type=instance_type,
        spec=spec,
    )
    for i, lv in enumerate(levels):
        conc, rep = (int(lv.level), lv.repeat) if load == "concurrency" else (0, i + 1)
        store.save_result(
            run.id, input_len=128, concurrency=conc, repeat=rep,
            summary=make_summary(128, max(conc, 1), tpot_ms=lv.tpot, ttft_ms=lv.ttft, telemetry_start=None),
        )  # fmt: skip
    result = capacity_result(levels, **kw)
    if partial:
        store.merge_run_extra(run.id, capacity={"probes": [p.model_dump(mode="json") for p in result.probes]})
    else:
        store.merge_run_extra(run.id, capacity=result.model_dump(mode="json"))
    return run.id


#: g6.2xlarge: capacity 24 users (levels 3, 6, 12, 24 meet p90 TPOT <= 50 ms, 48 and 32 do not; 24 again)
G6 = [
    Level(3, 20.0, 150.0, 95.0, 190.0),
    Level(6, 24.0, 180.0, 180.0, 360.0),
    Level(12, 31.0, 240.0, 340.0, 690.0),
    Level(24, 44.0, 420.0, 662.0, 1330.0),
    Level(48, 91.0, 1900.0, 700.0, 1410.0),
    Level(32, 63.0, 900.0, 690.0, 1390.0),
    Level(24, 46.0, 430.0, 662.0, 1330.0, repeat=2),
]
#: m8i.2xlarge: capacity 3 users (output 56 tok/s there)
M8I = [
    Level(3, 41.0, 600.0, 56.0, 110.0),
    Level(6, 72.0, 1400.0, 70.0, 140.0),
    Level(4, 55.0, 800.0, 62.0, 125.0),
    Level(3, 42.0, 610.0, 56.0, 110.0, repeat=2),
]
#: a CPU that misses the SLO even with one user
SLOW = [Level(1, 80.0, 900.0, 12.0, 24.0), Level(2, 120.0, 1500.0, 16.0, 32.0)]
