"""Stored capacity runs with known numbers, for the API and page tests: each probe a cell (as the search stores
it) and the answer in the run's ``extra["capacity"]``, written through the store API."""

from __future__ import annotations

from typing import Any

from accelbench.domain.capacity import CapacityResult, CapacitySLO, Probe
from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.support.api_app import summary

SLO = CapacitySLO(targets={"tpot": 50.0, "ttft": 1000.0}, percentile=90.0, attainment=0.95)


def probe(level: float, tpot: float, ttft: float, out_tps: float, *, met: bool | None, repeat: int = 1,
          slo: CapacitySLO | None = SLO, **kw: Any) -> Probe:  # fmt: skip
    why = ""
    if slo is not None:
        misses = [f"p{slo.percentile:g} {m} {v:.1f} ms > {slo.targets[m]:g} ms"
                  for m, v in (("tpot", tpot), ("ttft", ttft)) if m in slo.targets and v > slo.targets[m]]  # fmt: skip
        why = "; ".join(misses) or "meets the SLO"
    return Probe(level=level, repeat=repeat, requests=30, percentiles={"ttft": ttft, "tpot": tpot, "itl": tpot * 1.5,
                 "e2el": ttft + 31 * tpot}, attainment=(1.0 if met else 0.5) if slo is not None else None,
                 output_tokens_per_s=out_tps, total_tokens_per_s=out_tps * 5, requests_per_s=out_tps / 32,
                 met=met, why=why, **kw)  # fmt: skip


def met_result() -> CapacityResult:
    """Concurrency, p90 TPOT <= 50 ms and TTFT <= 1000 ms: 6 users met (twice), 7 missed (twice); the knee at 8;
    the planner predicted 8 (+33%); $0.98/h."""
    probes = [probe(1, 20, 100, 40, met=True), probe(2, 24, 150, 75, met=True), probe(4, 32, 300, 130, met=True),
              probe(8, 70, 1500, 190, met=False), probe(6, 45, 700, 170, met=True), probe(7, 55, 900, 180, met=False),
              probe(6, 46, 720, 172, met=True, repeat=2), probe(7, 56, 950, 181, met=False, repeat=2)]  # fmt: skip
    out_tps, total_tps, hourly = 171.0, 855.0, 0.98
    return CapacityResult(
        load="concurrency", slo=SLO, max_load=6, knee=8, probes=probes, output_tokens_per_s_at_max=out_tps,
        total_tokens_per_s_at_max=total_tps, requests_per_s_at_max=out_tps / 32, hourly_usd=hourly,
        usd_per_million_output_tokens=hourly / (out_tps * 3600) * 1e6,
        usd_per_million_total_tokens=hourly / (total_tps * 3600) * 1e6, predicted_max_load=8,
        notes=["The planner predicted 8 (+33% against the measured)."],
    )  # fmt: skip


def knee_result() -> CapacityResult:
    """Request rate without an SLO: throughput stops growing after 4 requests/s (the knee)."""
    probes = [probe(r, t, f, o, met=None, slo=None, achieved_rate=r * 0.98, oversaturated=r >= 8)
              for r, t, f, o in ((1, 20, 100, 32), (2, 22, 120, 64), (4, 30, 200, 120), (8, 60, 2000, 125))]  # fmt: skip
    return CapacityResult(load="request_rate", slo=None, knee=4, probes=probes)


def unmet_result() -> CapacityResult:
    """p90 TPOT <= 5 ms: even one user misses it."""
    slo = CapacitySLO(targets={"tpot": 5.0}, percentile=90.0, attainment=0.95)
    probes = [probe(1, 20, 100, 40, met=False, slo=slo)]
    return CapacityResult(load="concurrency", slo=slo, max_load=None, probes=probes,
                          reason=f"even the lowest level measured (1) misses the SLO: {probes[0].why}")  # fmt: skip


def store_capacity_run(store: Store, result: CapacityResult, *, kind: str = "capacity",
                       status: RunStatus = RunStatus.completed, label: str = "capacity",
                       spec: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> str:  # fmt: skip
    """A run with ``result``'s probes as cells (concurrency: the level and repeat; rate: cell 0, one repeat per
    probe, as the search stores them) and ``extra["capacity"]`` = the answer (or ``extra`` as given)."""
    run = store.create_run(kind=kind, label=label, model="smollm2-135m-instruct", engine="vllm-cpu",
                           instance_type="m8i.2xlarge", accelerator_type="cpu", target="kubernetes",
                           spec=spec or {}, extra=extra if extra is not None
                           else {"capacity": result.model_dump(mode="json")})  # fmt: skip
    for i, p in enumerate(result.probes):
        conc, rep = (int(p.level), p.repeat) if result.load == "concurrency" else (0, i + 1)
        store.save_result(run.id, input_len=128, concurrency=conc, repeat=rep,
                          summary=summary(128, max(conc, 1), tpot=p.percentiles["tpot"]))  # fmt: skip
    store.set_status(run.id, status)
    return run.id


def store_in_flight(store: Store) -> str:
    """A run spec's capacity search half-way: kind "run", benchmarking, two probes stored, no answer yet."""
    probes = met_result().probes[:2]
    spec = {"model": "smollm2-135m-instruct",
            "capacity": {"load": "concurrency", "slo": {"tpot": 50.0}, "percentile": 95.0, "attainment": 0.9}}  # fmt: skip
    partial = CapacityResult(load="concurrency", probes=probes)
    return store_capacity_run(store, partial, kind="run", status=RunStatus.benchmarking, label="searching", spec=spec,
                              extra={"capacity": {"probes": [p.model_dump(mode="json") for p in probes]}})  # fmt: skip
