"""Helpers for tests of the service: an app over a given store with a known token, and a controllable
executor that stands in for the orchestrator in tests of the worker's own mechanics (claiming, cancelling,
recovering). Tests of real runs use the real orchestrator, not this."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient

from accelbench.domain.bench_summary import BenchmarkSummary, MetricStats, TelemetrySample
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.domain.run import RunStatus
from accelbench.server.app import create_app
from accelbench.settings import Settings
from accelbench.store import Store


@dataclass
class Api:
    client: TestClient
    store: Store
    token: str
    settings: Settings

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@contextmanager
def api_for(
    store: Store,
    *,
    read_auth: bool = False,
    token: str | None = None,
    executor: Callable[..., Any] | None = None,
    start_worker: bool = False,
    worker_options: dict[str, float] | None = None,
) -> Iterator[Api]:
    token = token or "tok-" + secrets.token_urlsafe(16)
    settings = Settings(api_token=token, api_read_auth=read_auth, database_url=store.url)
    app = create_app(settings, store, start_worker=start_worker, executor=executor)
    if app.state.worker is not None:
        # Short intervals so tests do not wait for production polling periods.
        for key, value in {"poll_interval_s": 0.05, "heartbeat_s": 0.1, **(worker_options or {})}.items():
            setattr(app.state.worker, key, value)
    with TestClient(app) as client:  # runs the lifespan: the worker starts and stops with the client
        yield Api(client=client, store=store, token=token, settings=settings)


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def summary(input_len: int = 128, concurrency: int = 1, tpot: float = 25.0, n: int = 4) -> BenchmarkSummary:
    """A small BenchmarkSummary with per-request records and telemetry, as the benchmark would store it."""
    recs = [
        RequestRecord(index=i, prompt_len=input_len, server_prompt_tokens=input_len, output_tokens=32,
                      output_tokens_source="usage", ttft_s=0.2, latency_s=0.2 + 31 * tpot / 1000,
                      itl_s=[tpot / 1000] * 31, success=True, start_s=0.01 * i)
        for i in range(n)
    ]  # fmt: skip
    e2e = (0.2 + 31 * tpot / 1000) * 1000
    return BenchmarkSummary(
        date="2026-11-30T00:00:00",
        config=BenchConfig(input_len=input_len, output_len=32, num_prompts=n, max_concurrency=concurrency),
        num_prompts=n,
        completed=n,
        duration_s=2.0,
        total_input_tokens=n * input_len,
        total_output_tokens=n * 32,
        request_throughput=n / 2.0,
        output_throughput=n * 32 / 2.0,
        total_token_throughput=n * (32 + input_len) / 2.0,
        ttft_ms=MetricStats(count=n, mean=200, median=200, p50=200, p90=200, p95=200, p99=200),
        tpot_ms=MetricStats(count=n, mean=tpot, median=tpot, p50=tpot, p90=tpot, p95=tpot, p99=tpot),
        itl_ms=MetricStats(count=n, mean=tpot, median=tpot, p50=tpot, p90=tpot, p95=tpot, p99=tpot),
        e2el_ms=MetricStats(count=n, mean=e2e, median=e2e, p50=e2e, p90=e2e, p95=e2e, p99=e2e),
        requests=recs,
        telemetry_samples=[
            TelemetrySample(t_s=0.5 * k, wall=1000.0 + 0.5 * k,
                            values={"vllm:num_requests_running": float(k % 3), "vllm:kv_cache_usage_perc": 0.1 * k})
            for k in range(4)
        ],
    )  # fmt: skip


@dataclass
class ScriptedExecutor:
    """Stands in for ``execute_run``: walks a run through the real store transitions, saving cells, and
    blocks in the benchmarking phase until released or cancelled. Records every call."""

    cells: list[tuple[int, int]] = field(default_factory=lambda: [(128, 1), (128, 2)])
    hold: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    calls: list[str] = field(default_factory=list)
    kwargs: list[dict[str, Any]] = field(default_factory=list)
    fail_with: BaseException | None = None
    cells_before_hold: int = 1

    def __post_init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, store: Store, run_id: str, *, cancel: threading.Event, progress: Any = None,
                 secrets: dict[str, str] | None = None) -> None:  # fmt: skip
        with self.lock:
            self.calls.append(run_id)
            self.kwargs.append({"secrets": dict(secrets or {}), "progress": progress is not None})
        store.set_status(run_id, RunStatus.deploying)
        if self.fail_with is not None:
            self.started.set()
            raise self.fail_with
        store.set_status(run_id, RunStatus.benchmarking)
        for i, (il, c) in enumerate(self.cells):
            if i == self.cells_before_hold:
                self.started.set()
                while not self.hold.is_set():
                    if cancel.wait(0.02):
                        store.set_status(run_id, RunStatus.cancelled, error="cancelled by request")
                        return
            store.save_result(run_id, input_len=il, concurrency=c, repeat=0, summary=summary(il, c))
            if progress is not None:
                progress({"message": f"cell {i + 1}/{len(self.cells)}", "cells_done": i + 1})
        self.started.set()
        store.set_status(run_id, RunStatus.completed)
