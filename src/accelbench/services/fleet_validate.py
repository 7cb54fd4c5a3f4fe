"""A fleet plan checked against a replay (``accelbench fleet --validate``): one local server gets the traffic the
plan gives each server at its busiest, replayed through the ``trace`` dataset (``bench/trace.py``), and the SLO
attainment it measures is set beside the one the plan promised.

Which load: the plan for this machine (the candidate ``local``: its capacity a stored capacity run on it, else
the planner's prediction from the machine probe) puts ``servers`` servers on each interval; the interval where
the mean rate per server is highest is replayed. A trace is thinned to one server's share: each of that
interval's requests is kept with probability 1 / servers (seeded), so its burstiness is kept. A profile has no
requests of its own: Poisson arrivals at the per-server rate with the interval's mean lengths are drawn. At most
``max_requests`` are replayed, at their recorded times (time scale 1).

The promise: every server is sized to carry at most its capacity at the SLO, which meets the SLO's percentile
targets with at least its attainment; ``measured`` is the share of replayed requests meeting every target
(``bench/capacity.judge``, the capacity search's own rule). The run is stored as a ``bench`` run with the
replay's cell, so it lists, shows and compares like any other; the plan and the verdict are in its
``extra["fleet_validation"]``, the plan it checked in ``extra["fleet_plan"]`` (the report's Fleet plan section).
"""

from __future__ import annotations

import json
import math
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from accelbench.bench import run_benchmark
from accelbench.bench.capacity_search import judge
from accelbench.bench.sweep import too_many_failed
from accelbench.bench.trace import read_trace
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.capacity import CapacitySLO
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.run import RunStatus
from accelbench.domain.strict import StrictModel
from accelbench.errors import UserInputError
from accelbench.fleet.result import Candidate, FleetPlan
from accelbench.fleet.traffic import Traffic
from accelbench.redact import redact_url

if TYPE_CHECKING:
    from accelbench.store import Store

MAX_REPLAY = 10_000


class FleetValidation(StrictModel):
    """The replay's verdict beside the plan's promise."""

    run_id: str | None
    instance: str
    interval_start_s: float = Field(description="Start of the interval replayed.")
    servers: int = Field(description="Servers the plan gives that interval.")
    requests_per_s: float = Field(description="The plan's mean load per server there.")
    capacity_requests_per_s: float = Field(description="One server's capacity the plan rests on.")
    capacity_source: str
    requests: int = Field(description="Requests replayed.")
    slo: str
    promised_attainment: float = Field(description="Share within the SLO the plan promises (at least).")
    measured_attainment: float | None = Field(description="Share of replayed requests meeting every target.")
    percentiles: dict[str, float] = Field(
        default_factory=dict, description="Measured, at the SLO's percentile."
    )
    met: bool = Field(description="The replay met the SLO as the plan promised.")
    why: str
    notes: list[str] = Field(default_factory=list)


def busiest(candidate: Candidate) -> int:
    """The interval with the highest mean rate per server."""
    per = [i.requests_per_s / max(1, i.servers) for i in candidate.intervals]
    return int(max(range(len(per)), key=lambda j: per[j]))


def replay_rows(
    traffic: Traffic, candidate: Candidate, max_requests: int, seed: int
) -> tuple[list[dict[str, Any]], str]:
    """Mooncake rows (timestamp ms, lengths) of one server's share of the busiest interval, and how they were made."""

    j = busiest(candidate)
    span, servers = traffic.intervals[j], max(1, candidate.intervals[j].servers)
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    if traffic.format in ("mooncake", "burstgpt") and traffic.path is not None:
        trace = read_trace(Path(traffic.path), traffic.format, 5_000_000)
        t0 = trace.rows[0].timestamp_s
        for r in trace.rows:
            at = r.timestamp_s - t0
            if at < span.start_s or at >= span.start_s + span.seconds or rng.random() >= 1.0 / servers:
                continue
            rows.append({"timestamp": (at - span.start_s) * 1000.0, "input_length": r.input_length,
                         "output_length": r.output_length})  # fmt: skip
            if len(rows) >= max_requests:
                break
        how = f"the trace's requests in that interval, each kept with probability 1/{servers}"
    else:
        rate = span.requests_per_s / servers
        if rate <= 0:
            raise UserInputError("The busiest interval has no requests to replay.")
        t = 0.0
        for _ in range(max_requests):
            t += float(rng.exponential(1.0 / rate))
            rows.append({"timestamp": t * 1000.0, "input_length": max(1, round(span.input_tokens)),
                         "output_length": max(1, round(span.output_tokens))})  # fmt: skip
        how = f"Poisson arrivals at {rate:.3g} req/s with the interval's mean lengths"
    if len(rows) < 2:
        raise UserInputError(
            f"One server's share of the busiest interval is {len(rows)} request(s): too few to judge an SLO.",
            hint="Give a longer trace, or a profile.",
        )
    return rows, how


def _config(path: Path, rows: list[dict[str, Any]], label: str | None) -> BenchConfig:
    return BenchConfig(
        dataset="trace",
        dataset_path=str(path),
        trace_format="mooncake",
        num_prompts=len(rows),
        input_len=max(1, round(sum(r["input_length"] for r in rows) / len(rows))),
        output_len=max(1, round(sum(r["output_length"] for r in rows) / len(rows))),
        ignore_eos=True,
        label=label or "fleet validation",
    )


def replay_options(max_requests: int, label: str | None = None) -> Replay:
    """``Replay`` from a shell's flags; a bad count is refused in the flag's words."""
    if not 2 <= max_requests <= MAX_REPLAY:
        raise UserInputError(f"--validate-requests {max_requests} is outside 2 to {MAX_REPLAY:,}.")
    return Replay(max_requests=max_requests, label=label)


class Replay(StrictModel):
    """How the replay is made: at most ``max_requests``, drawn with ``seed``, stored under ``label``."""

    max_requests: int = Field(default=200, ge=2, le=MAX_REPLAY, description="Most requests replayed.")
    seed: int = Field(default=0, description="Seed of the thinning or of the drawn arrivals.")
    label: str | None = Field(default=None, max_length=200, description="Label of the stored run.")


def _open_run(store: Store, endpoint: Endpoint, config: BenchConfig, instance: str) -> str:
    return store.create_run(
        kind="bench",
        status=RunStatus.benchmarking,
        label=config.label,
        served_model=endpoint.served_model,
        model=endpoint.served_model,
        base_url=redact_url(endpoint.base_url),
        instance_type=instance,
        spec={"bench": json.loads(config.model_dump_json()), "endpoint": endpoint.record()},
    ).id


def _measure(
    store: Store | None,
    endpoint: Endpoint,
    rows: list[dict[str, Any]],
    options: tuple[Replay, str],
    cancel: threading.Event | None,
) -> tuple[BenchmarkSummary, BenchConfig, str | None]:
    """Run the replay (a stored run first, so a store that cannot be written refuses before any load)."""

    replay, instance = options
    with tempfile.TemporaryDirectory(prefix="accelbench-fleet-") as tmp:
        path = Path(tmp) / "replay.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        config = _config(path, rows, replay.label)
        run_id = _open_run(store, endpoint, config, instance) if store is not None else None
        try:
            return run_benchmark(endpoint, config, cancel=cancel), config, run_id
        except BaseException as exc:  # the stored run must not stay "benchmarking"
            if store is not None and run_id is not None:
                interrupted = isinstance(exc, KeyboardInterrupt)
                store.set_status(run_id, RunStatus.interrupted if interrupted else RunStatus.failed,
                                 error=None if interrupted else f"{type(exc).__name__}: {exc}")  # fmt: skip
            raise


def validate_fleet(
    store: Store | None,
    endpoint: Endpoint,
    traffic: Traffic,
    candidate: Candidate,
    slo: CapacitySLO,
    *,
    replay: Replay | None = None,
    plan: FleetPlan | None = None,
    cancel: threading.Event | None = None,
    progress: Callable[[str], None] | None = None,
) -> FleetValidation:
    """Replay one server's share of the busiest interval against ``endpoint``, judge it, store it (see the
    module docstring)."""

    replay = replay or Replay()
    rows, how = replay_rows(traffic, candidate, replay.max_requests, replay.seed)
    j = busiest(candidate)
    per_server = traffic.intervals[j].requests_per_s / max(1, candidate.intervals[j].servers)
    if progress:
        progress(f"replaying {len(rows)} requests ({how}) at {per_server:.3g} req/s per server")
    summary, config, run_id = _measure(store, endpoint, rows, (replay, candidate.instance), cancel)
    # judged at the rate the replay itself asks for (a thinned or drawn sample's rate is not exactly the plan's),
    # so "fell behind" means the server, not the sample
    span_s = (rows[-1]["timestamp"] - rows[0]["timestamp"]) / 1000.0
    intended = (len(rows) - 1) / span_s if span_s > 0 else per_server
    probe = judge(summary, level=intended, load="request_rate", slo=slo)
    notes = [f"Replayed {how}: {intended:.3g} req/s over {span_s:.1f} s."]
    if probe.achieved_rate and math.isfinite(probe.achieved_rate):
        notes.append(f"The replay sent {probe.achieved_rate:.3g} req/s.")
    verdict = FleetValidation(
        run_id=run_id,
        instance=candidate.instance,
        interval_start_s=candidate.intervals[j].start_s,
        servers=candidate.intervals[j].servers,
        requests_per_s=per_server,
        capacity_requests_per_s=candidate.capacity.requests_per_s,
        capacity_source=candidate.capacity.source,
        requests=len(rows),
        slo=slo.label(),
        promised_attainment=slo.attainment,
        measured_attainment=probe.attainment,
        percentiles=probe.percentiles,
        met=bool(probe.met),
        why=probe.why,
        notes=notes,
    )
    if store is not None and run_id is not None:
        store.save_result(run_id, input_len=config.input_len, concurrency=config.num_prompts, repeat=0,
                          summary=summary)  # fmt: skip
        store.merge_run_extra(run_id, fleet_validation=verdict.model_dump(mode="json"))
        if plan is not None:  # the report's Fleet plan section reads it (report/fleet_view.py fleet_plans)
            store.merge_run_extra(run_id, fleet_plan=plan.model_dump(mode="json"))
        failed = summary.completed == 0 or too_many_failed(summary)
        store.set_status(run_id, RunStatus.failed if failed else RunStatus.completed,
                         error=probe.why if failed else None)  # fmt: skip
    return verdict
