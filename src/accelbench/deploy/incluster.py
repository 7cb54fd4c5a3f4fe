"""The load generator as it runs inside the cluster (``accelbench loadgen``), and how its results travel.

One pod per shard. For every (cell, repeat) of the sweep, in the sweep's own order and with its own
per-cell configuration (``accelbench.bench.sweep.cell_config``), a shard takes its share of the cell:
concurrency and prompts split as evenly as whole numbers allow, the request rate in proportion, and a
prompt seed of its own (shards sharing prompts would flatter the server's prefix cache). Before each cell
the shards meet at a barrier served by shard 0 and all start at the same wall-clock instant, so the server
sees the whole cell's load at once.

A capacity search (``LoadgenConfig.capacity``) runs in one pod: ``run_capacity_search`` is the search of
``bench.capacity`` with this pod's benchmarks, and every probe travels with its summary.

Device telemetry (``LoadgenConfig.telemetry``, see ``deploy/manifests/telemetry.py``): shard 0 samples the
engine node's exporter (a DCGM exporter, neuron-monitor's Prometheus exporter; a sidecar through the engine's
Service or the node's DaemonSet pod, ``find_node_exporter``) during each cell with the collectors and the
``DeviceMonitor`` a local run uses, and ``with_devices`` stores the ``DeviceTelemetry`` of the cell's window in
its summary, so runs show, compare and the report read it as they read a local run's. What cannot be read (no
exporter on the node, one that does not answer, the engine's CPU on another node) is said once per cell among the
absent sources, never an error.

Results leave the pod through its log: gzip-compressed JSON, base64, in framed lines, with a SHA-256 so a
truncated log is detected rather than half-read. The Kubernetes target reads each shard's log and
``merge_shards`` joins the shards of a cell into one ``BenchmarkSummary`` (records re-based onto a common
clock, statistics recomputed over all of them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as kconfig

from accelbench.bench import load_tokenizer, run_benchmark
from accelbench.bench.capacity_search import judge, level_config, search
from accelbench.bench.metrics import compute_metrics
from accelbench.bench.sweep import cell_config, sweep_keys
from accelbench.deploy.manifests.loadgen import LoadgenConfig
from accelbench.deploy.manifests.telemetry import LoadgenTelemetry, selector_dict
from accelbench.deploy.shards import Barrier, encode_results, remote_barrier, shard_config
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.capacity import CapacityResult, Probe
from accelbench.domain.device import DeviceTelemetry, device_notes
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.run import CellStatus, SweepSpec
from accelbench.errors import AccelbenchError, EngineError
from accelbench.telemetry.devices import DeviceMonitor, exporter_collectors


# --------------------------------------------------------------------------------- device telemetry
def _api_reason(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None)
    return f"{status} {reason}" if status else f"{type(exc).__name__}: {exc}"


def engine_node(core: Any, telemetry: LoadgenTelemetry) -> tuple[str | None, str | None]:
    """(the node the engine pod runs on, None) or (None, why it is not known)."""
    selector = ",".join(f"{k}={v}" for k, v in telemetry.engine_selector.items())
    try:
        pods = core.list_namespaced_pod(telemetry.engine_namespace, label_selector=selector).items or []
    except Exception as exc:
        return (
            None,
            f"cannot list the engine's pods in namespace {telemetry.engine_namespace} ({_api_reason(exc)})",
        )
    for pod in pods:
        node = pod.spec.node_name if pod.spec is not None else None
        if node:
            return node, None
    return None, f"no engine pod labelled {selector} is on a node yet"


def find_node_exporter(core: Any, telemetry: LoadgenTelemetry, node: str | None = None) -> LoadgenTelemetry:
    """The node exporter on the engine's node, found by label: ``telemetry`` with its ``url`` (the pod's IP and
    port) or, when there is none, with one sentence in ``missing`` saying why. ``core`` is a ``CoreV1Api``."""
    kind = telemetry.kind
    if telemetry.mode != "node" or kind is None or not telemetry.namespace or not telemetry.selector:
        return telemetry
    label = kind.label
    if node is None:
        node, why = engine_node(core, telemetry)
        if node is None:
            return telemetry.model_copy(update={"missing": [f"{label}: {why}"]})
    ns, sel = telemetry.namespace, telemetry.selector
    try:
        pods = (
            core.list_namespaced_pod(ns, label_selector=sel, field_selector=f"spec.nodeName={node}").items
            or []
        )
    except Exception as exc:
        return telemetry.model_copy(
            update={
                "engine_node": node,
                "missing": [
                    f"{label}: cannot list pods labelled {sel} in namespace {ns} ({_api_reason(exc)})"
                ],
            }
        )
    want = selector_dict(sel)
    on_node = [
        p
        for p in pods
        if p.spec is not None
        and p.spec.node_name == node
        and all((p.metadata.labels or {}).get(k) == v for k, v in want.items())
    ]
    running = [p for p in on_node if p.status is not None and p.status.phase == "Running" and p.status.pod_ip]
    if not running:
        if on_node:
            phase = on_node[0].status.phase if on_node[0].status is not None else "unknown"
            why = f"the pod labelled {sel} on node {node} (namespace {ns}) is {phase}, not running"
        else:
            why = f"no pod labelled {sel} on node {node} (namespace {ns})"
        return telemetry.model_copy(update={"engine_node": node, "missing": [f"{label}: {why}"]})
    ip = running[0].status.pod_ip
    host = f"[{ip}]" if ":" in ip else ip
    return telemetry.model_copy(
        update={"engine_node": node, "url": f"http://{host}:{telemetry.port}/metrics", "missing": []}
    )


def discover_in_pod(telemetry: LoadgenTelemetry) -> LoadgenTelemetry:
    """A bundle applied with kubectl: the load generator finds the node exporter itself, with its
    ServiceAccount (the manifests grant it list pods). A lookup that cannot run is said, never raised."""
    if telemetry.mode != "node" or telemetry.url or telemetry.missing:
        return telemetry
    label = telemetry.kind.label if telemetry.kind else "device exporter"
    try:
        kconfig.load_incluster_config()
        core = k8s.CoreV1Api(k8s.ApiClient())
    except Exception as exc:
        return telemetry.model_copy(
            update={"missing": [f"{label}: no Kubernetes API from this pod to find it ({_api_reason(exc)})"]}
        )
    return find_node_exporter(core, telemetry)


def cpu_absent(telemetry: LoadgenTelemetry) -> str:
    where = f"on node {telemetry.engine_node}" if telemetry.engine_node else "on its own node"
    return (
        f"cpu: the engine runs {where} and the load generator in a pod elsewhere (the benchmark node is "
        "reserved for the engine), so the engine's cgroups and its node's CPU and host memory are not read"
    )


def device_sources(telemetry: LoadgenTelemetry | None) -> tuple[dict[str, str], list[str]] | None:
    """(exporter URLs by kind, absent sources) for the monitor of each cell; None: no device telemetry."""
    if telemetry is None or (telemetry.mode == "off" and telemetry.kind is not None):
        return None
    missing = list(telemetry.missing)
    urls: dict[str, str] = {}
    if telemetry.url and telemetry.exporter:
        urls[f"{telemetry.exporter}_url"] = telemetry.url
    elif telemetry.mode == "node" and telemetry.kind is not None and not missing:
        missing.append(f"{telemetry.kind.label}: its address was not found")
    missing.append(cpu_absent(telemetry))
    return urls, missing


def window_of(tel: DeviceTelemetry, summary: BenchmarkSummary, wall0: float) -> DeviceTelemetry:
    """``tel`` (sampled from wall time ``wall0`` on) moved onto the benchmark's clock (``t_s`` 0 at its first
    send, as a local run's) and cut to its window: the last reading at or before the start to the first at or
    after the end, so warmups and prompt making are left out."""
    zero = _bench_start(summary)
    shift = zero - (tel.zero_wall if tel.zero_wall is not None else wall0)
    rows = [s.model_copy(update={"t_s": s.t_s - shift}) for s in tel.samples]
    times = sorted({s.t_s for s in rows})
    if times:
        end = summary.finished_at - zero
        lo = max((t for t in times if t <= 0), default=times[0])
        hi = min((t for t in times if t >= end), default=times[-1])
        rows = [s for s in rows if lo <= s.t_s <= hi]
    return DeviceTelemetry.build(
        rows, sources=tel.sources, missing=tel.missing, interval_s=tel.interval_s, zero_wall=zero
    )


def with_devices(
    bench: Callable[[Endpoint, BenchConfig], BenchmarkSummary], sources: tuple[dict[str, str], list[str]]
) -> Callable[[Endpoint, BenchConfig], BenchmarkSummary]:
    """``bench`` with the exporters sampled while it runs (every ``scrape_interval_s``), their telemetry and its
    notes stored in the summary as a local run stores them."""

    urls, missing = sources

    def run(endpoint: Endpoint, cfg: BenchConfig) -> BenchmarkSummary:
        collectors, absent = exporter_collectors(**urls)
        monitor = DeviceMonitor(collectors, interval_s=cfg.scrape_interval_s, missing=[*missing, *absent])
        wall0 = time.time()
        monitor.start(time.perf_counter())
        try:
            summary = bench(endpoint, cfg)
        finally:
            tel = monitor.stop()
        tel = window_of(tel, summary, wall0)
        notes = [*summary.notes, *device_notes(tel, summary.total_output_tokens)]
        return summary.model_copy(update={"device_telemetry": tel, "notes": notes})

    return run


# ------------------------------------------------------------------------------------------ running
@dataclass
class ShardCell:
    key: dict[str, int]
    status: str
    summary: BenchmarkSummary | None


def run_shard(
    config: LoadgenConfig,
    shard: int,
    *,
    barrier: Callable[[int, int], float] | None = None,
    bench: Callable[[Endpoint, BenchConfig], BenchmarkSummary] | None = None,
    out: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run this shard's part of every cell (or, with ``config.capacity``, the whole capacity search) and
    print the framed results; returns the payload."""

    endpoint = Endpoint(base_url=config.base_url, served_model=config.served_model)
    if bench is None:
        tokenizer = load_tokenizer(endpoint)

        def bench(ep: Endpoint, cfg: BenchConfig) -> BenchmarkSummary:
            # this pod is not the engine's machine: its own devices are never the engine's
            return run_benchmark(ep, cfg, tokenizer=tokenizer, devices=False)

    if shard == 0 and config.telemetry is not None:
        telemetry = discover_in_pod(config.telemetry)
        sources = device_sources(telemetry)
        if sources is not None:
            urls = ", ".join(sources[0].values()) or "none"
            out(f"accelbench loadgen shard 0: device telemetry from {urls}")
            bench = with_devices(bench, sources)
    if config.capacity is not None:
        return run_capacity_search(config, endpoint, bench=bench, out=out)

    own_barrier: Barrier | None = None
    if barrier is None and config.shards > 1:
        if shard == 0:
            own_barrier = Barrier(config.shards, config.barrier_port, config.barrier_timeout_s)
            barrier = own_barrier.arrive
        else:
            assert config.barrier_host, "a sharded load generator needs the barrier host"
            barrier = remote_barrier(config.barrier_host, config.barrier_port, config.barrier_timeout_s)
    cells: list[dict[str, Any]] = []
    error: str | None = None
    warmups = config.sweep.num_warmups
    try:
        for step, key in enumerate(sweep_keys(config.sweep)):
            cell = cell_config(config.sweep, key, label=config.run_id, warmups=warmups)
            part = shard_config(cell, key.concurrency, config.shards, shard)
            if barrier is not None:
                start_at = barrier(step, shard)
                time.sleep(max(0.0, start_at - time.time()))
            if part is None:
                cells.append({"key": key.as_dict(), "status": "empty", "summary": None})
                continue
            summary = bench(endpoint, part)
            warmups = 0
            status = CellStatus.completed if summary.completed else CellStatus.failed
            cells.append(
                {"key": key.as_dict(), "status": status.value, "summary": summary.model_dump(mode="json")}
            )
            out(f"accelbench loadgen shard {shard}: {key}: {summary.completed} ok, {summary.failed} failed")
    except (AccelbenchError, OSError) as exc:
        error = f"shard {shard}: {exc}"
    finally:
        if own_barrier is not None:
            own_barrier.close()
    payload = {
        "run_id": config.run_id,
        "shard": shard,
        "shards": config.shards,
        "cells": cells,
        "error": error,
    }
    for line in encode_results(shard, payload):
        out(line)
    return payload


def run_capacity_search(
    config: LoadgenConfig,
    endpoint: Endpoint,
    *,
    bench: Callable[[Endpoint, BenchConfig], BenchmarkSummary],
    out: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The capacity search in the cluster (one pod): the same search, level configs and judging as the search
    from this machine (``bench.capacity``); every probe travels with its ``BenchmarkSummary`` in the framed
    payload (``capacity.probes``, in the order measured) and the answer in ``capacity.result``, for the
    Kubernetes target to store exactly as a search from here stores them."""

    cap = config.capacity
    assert cap is not None
    base = cap.bench_config(label=config.run_id)
    slo = cap.target()
    measured: list[dict[str, Any]] = []

    def measure(level: float, repeat: int) -> Probe:
        cfg = level_config(base, load=cap.load, level=level, slo=slo)
        again = " (again)" if repeat > 1 else ""
        out(f"accelbench loadgen: {cap.load} {level:g}{again}: {cfg.num_prompts} requests")
        summary = bench(endpoint, cfg)
        probe = judge(summary, level=level, load=cap.load, slo=slo, repeat=repeat)
        measured.append({"probe": probe.model_dump(mode="json"), "summary": summary.model_dump(mode="json")})
        out(f"accelbench loadgen: {cap.load} {level:g}{again}: {probe.why or 'measured'}")
        return probe

    result = None
    error = None
    try:
        result = search(
            measure,
            load=cap.load,
            slo=slo,
            start=config.capacity_start or cap.start or 1.0,
            max_load=cap.max_load,
            max_probes=cap.max_probes,
        )
    except (AccelbenchError, OSError) as exc:
        error = f"capacity search: {exc}"
    payload = {
        "run_id": config.run_id,
        "shard": 0,
        "shards": 1,
        "cells": [],
        "capacity": {
            "result": result.model_dump(mode="json") if result is not None else None,
            "probes": measured,
        },
        "error": error,
    }
    for line in encode_results(0, payload):
        out(line)
    return payload


def decode_capacity(payload: dict[str, Any]) -> tuple[CapacityResult, list[tuple[Probe, BenchmarkSummary]]]:
    """The answer and the (probe, summary) pairs, in the order measured, of a capacity search's payload."""
    section = payload.get("capacity") or {}
    if not section.get("result"):
        raise EngineError("The load generator's results hold no capacity search.")
    result = CapacityResult.model_validate(section["result"])
    measured = [
        (Probe.model_validate(item["probe"]), BenchmarkSummary.model_validate(item["summary"]))
        for item in section.get("probes") or []
    ]
    return result, measured


#: what a cell's summary takes from shard 0 as it is: the same in every shard (the run's label, date, server,
#: model and tokenizer), or only shard 0's (the scraped telemetry)
_ALIKE_IN_SHARDS = ("label", "date", "base_url", "model_id", "tokenizer_id", "telemetry", "telemetry_samples")


def _bench_start(summary: BenchmarkSummary) -> float:
    """Wall time that the summary's record times count from (the runner's clock zero)."""
    first = min((r.start_s for r in summary.requests), default=0.0)
    return summary.started_at - first


def merge_shards(
    sweep: SweepSpec, payloads: Iterable[dict[str, Any]]
) -> list[tuple[dict[str, int], CellStatus, BenchmarkSummary]]:
    """One (key, status, summary) per (cell, repeat), joining every shard's part of it.

    Records are moved onto one clock (the earliest shard's), the statistics recomputed over all of them
    with the same function a local benchmark uses, and throughput divided by the span from the first send
    of any shard to the last completion of any shard. Telemetry is shard 0's (the only one that scrapes and
    reads the device exporters), moved onto the merged clock, its notes said again over every shard's tokens.
    """

    by_key: dict[tuple[int, int, int], list[BenchmarkSummary]] = {}
    for payload in sorted(payloads, key=lambda p: int(p.get("shard", 0))):
        for cell in payload["cells"]:
            if cell["summary"] is None:
                continue
            k = cell["key"]
            by_key.setdefault((k["input_len"], k["concurrency"], k["repeat"]), []).append(
                BenchmarkSummary.model_validate(cell["summary"])
            )
    merged = []
    for key in sweep_keys(sweep):
        parts = by_key.get((key.input_len, key.concurrency, key.repeat))
        if not parts:
            continue
        config = cell_config(sweep, key, label=parts[0].config.label)
        zero = min(_bench_start(p) for p in parts)
        records: list[RequestRecord] = []
        for p in parts:
            offset = _bench_start(p) - zero
            for r in p.requests:
                records.append(
                    r.model_copy(
                        update={
                            "index": len(records),
                            "start_s": r.start_s + offset,
                            "planned_send_s": r.planned_send_s + offset,
                        }
                    )
                )
        started = min(p.started_at for p in parts)
        finished = max(p.finished_at for p in parts)
        duration = max(0.0, finished - started)
        m = compute_metrics([r for r in records if not r.ramp], duration, config.goodput)  # a ramp's left out
        metric_values = dict(m)
        first = parts[0]
        devices = first.device_telemetry
        own = set(device_notes(devices, first.total_output_tokens)) if devices is not None else set()
        notes = [n for p in parts for n in p.notes if n not in own]
        if devices is not None:
            shift = _bench_start(first) - zero
            devices = DeviceTelemetry.build(
                [s.model_copy(update={"t_s": s.t_s + shift}) for s in devices.samples],
                sources=devices.sources,
                missing=devices.missing,
                interval_s=devices.interval_s,
                zero_wall=zero,
            )
            notes += device_notes(devices, int(metric_values.get("total_output_tokens") or 0))
        if len(parts) > 1:
            notes.append(f"Load generated by {len(parts)} in-cluster shards that started each cell together.")
        summary = BenchmarkSummary(
            **{name: getattr(first, name) for name in _ALIKE_IN_SHARDS},
            config=config,
            started_at=started,
            finished_at=finished,
            duration_s=duration,
            num_prompts=sum(p.num_prompts for p in parts),
            device_telemetry=devices,
            requests=records,
            notes=list(dict.fromkeys(notes)),
            interrupted=any(p.interrupted for p in parts),
            ramp_requests=sum(p.ramp_requests for p in parts),
            **metric_values,
        )
        status = CellStatus.completed if summary.completed and not summary.interrupted else CellStatus.failed
        if summary.completed and summary.interrupted:
            status = CellStatus.partial
        merged.append((key.as_dict(), status, summary))
    return merged
