"""``accelbench bench`` as a use case: one benchmark against a running OpenAI-compatible server.

``run_bench`` takes a ``BenchRequest`` (the server, the load settings as given, what to keep) and returns a
``BenchResult``: the served model is asked for when not named, the settings validated, the server's context
checked, the run of kind ``bench`` opened before any load (a store that cannot be written refuses now, not
after the load), the quality measured when asked, the load sent, the result judged by the sweep's rule,
saved in vLLM's layout when asked, and stored with the environment. A store failure after the load never
loses the measurement: the result says so and still carries the summary.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from accelbench.bench import run_benchmark
from accelbench.bench.context import check_served_context
from accelbench.bench.datasets import DATASETS, FILE_DATASETS, check_dataset
from accelbench.bench.quality_run import before_load, parse_quality, quality_line
from accelbench.bench.results_io import write_result
from accelbench.bench.selftest import certify, client_self_test
from accelbench.bench.sweep import failure_line, judge_cell, server_alive
from accelbench.domain.bench_summary import BenchmarkSummary
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.owner import process_owner
from accelbench.domain.run import CellStatus, RunStatus
from accelbench.errors import AccelbenchError, UserInputError
from accelbench.redact import redact_url
from accelbench.services.endpoints import ServerTarget, endpoint_environment, served_model_root
from accelbench.services.session import Store, get_store

#: words the shells show beside a result (the quality option's help, a statistic's interval, a two-mode note)
__all__ = [
    "BenchRequest",
    "BenchResult",
    "bench_outcome",
    "run_bench",
]


class BenchRequest(BaseModel):
    """One benchmark: where, with which settings (``BenchConfig`` fields, validated here after the served
    model is known), and what to keep (``store``: a run of kind bench; ``save_result``: vLLM's JSON layout)."""

    server: ServerTarget
    settings: dict[str, Any] = Field(default_factory=dict)
    quality: str | None = None
    save_result: Path | None = None
    store: bool = True


class BenchResult(BaseModel):
    """What one benchmark did: the summary, where it was kept, its judgement (cell and run status, the error
    that failed it) and, when asked, the quality measured before the load."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    summary: BenchmarkSummary
    run_id: str | None = None
    saved: Path | None = None
    cell_status: CellStatus
    run_status: RunStatus
    error: str | None = None
    store_error: str | None = None
    quality: dict[str, Any] | None = None
    quality_text: str | None = None
    cancelled: bool = False


def check_settings(settings: dict[str, Any]) -> None:
    """What is refused before the server is asked anything, in the caller's words."""
    rate, burst = settings.get("request_rate"), settings.get("burstiness")
    if (rate is not None and rate <= 0) or (burst is not None and burst <= 0):
        raise UserInputError("--request-rate and --burstiness must be positive (inf is allowed).")
    dataset = settings.get("dataset", "random")
    check_dataset(dataset, "--dataset")
    if dataset in FILE_DATASETS and not settings.get("dataset_path"):
        raise UserInputError(f"--dataset {dataset} needs --dataset-path FILE.")


def dataset_names() -> list[str]:
    """What ``--dataset`` accepts (``bench``, ``sweep``, ``capacity``): every registered dataset."""
    return DATASETS.names()


def bench_config(settings: dict[str, Any]) -> BenchConfig:
    """The settings as a ``BenchConfig``; a refusal in the caller's words."""
    try:
        return BenchConfig(**settings)
    except ValueError as exc:
        raise UserInputError(f"Invalid settings: {exc}") from None


def bench_outcome(
    summary: BenchmarkSummary, endpoint: Endpoint, *, cancelled: bool
) -> tuple[CellStatus, RunStatus, str | None]:
    """(cell status, run status, error) of one benchmark, by the sweep's rule (``judge_cell``): requests that
    failed against a server that no longer answers make the cell partial (or failed, if none completed) and
    the run failed, however many finished first."""
    gone = server_alive(endpoint) if summary.failed else None
    cell = judge_cell(summary, cancelled=cancelled, server_gone=gone is not None)
    if cell is None or summary.completed == 0:
        return CellStatus.failed, RunStatus.failed, failure_line(None, summary)
    if gone is not None:
        return (
            cell,
            RunStatus.failed,
            f"the server at {redact_url(endpoint.base_url)} stopped answering: {gone}",
        )
    if cell == CellStatus.failed:  # more failed than --max-error-rate allows
        return cell, RunStatus.failed, failure_line(None, summary)
    if cell == CellStatus.partial or summary.interrupted:
        return CellStatus.partial, RunStatus.interrupted, None
    return cell, RunStatus.completed, None


def _open_run(store: Store, config: BenchConfig, endpoint: Endpoint) -> str:
    """The stored run, created before any load is sent: a store that cannot be written refuses the benchmark
    now, not after the whole load."""
    run = store.create_run(
        kind="bench",
        status=RunStatus.benchmarking,
        claimed_by=process_owner(),  # this process measures it: the run's one executor
        label=config.label,
        served_model=endpoint.served_model,
        # what the server says it serves: the directory it loaded when it lists one here (an aliased served
        # name is not one the planner can read), else its served name; never the --tokenizer directory, which
        # the endpoint record in the spec keeps on its own
        model=served_model_root(endpoint.base_url, endpoint.headers, endpoint.api_key, endpoint.served_model)
        or endpoint.served_model,
        base_url=redact_url(endpoint.base_url),
        spec={"bench": json.loads(config.model_dump_json()), "endpoint": endpoint.record()},
    )
    return run.id


def _store_result(
    store: Store,
    run_id: str,
    summary: BenchmarkSummary,
    *,
    env: dict[str, Any],
    outcome: tuple[CellStatus, RunStatus, str | None],
) -> None:
    engine = env.get("engine") or {}
    store.update_run(
        run_id,
        engine=engine.get("name"),
        engine_version=engine.get("version"),
        environment=env,
        command=env.get("command"),
    )
    cell, status, error = outcome
    store.save_result(
        run_id,
        input_len=summary.config.input_len,
        # unlimited: every prompt may be in flight at once (the cell is keyed by the most in flight)
        concurrency=summary.config.max_concurrency or summary.config.num_prompts,
        repeat=0,
        summary=summary,
        status=cell,
    )
    store.set_status(run_id, status, error=error)


def run_bench(
    request: BenchRequest,
    *,
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    during_load: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> BenchResult:
    """``accelbench bench``: measure ``request.server`` once (``progress``: requests done of total; ``cancel``:
    stop sending, keep what finished; ``during_load``: what the caller holds open while the load runs)."""
    check_settings(request.settings)
    endpoint = request.server.endpoint()
    config = bench_config(request.settings)
    if config.dataset == "random":
        check_served_context(endpoint, [config.input_len], config.output_len)  # before any load
    parse_quality(request.quality)  # an unknown setting or lm-eval missing: refused before anything is stored
    store = get_store() if request.store else None
    run_id = _open_run(store, config, endpoint) if store is not None else None
    # what the run serves and, when asked, its quality: both before the load
    measured = before_load(store, run_id, endpoint, config, quality=request.quality)
    cancel = cancel or threading.Event()
    cert = client_self_test(config) if config.self_test else None
    with during_load():
        summary = run_benchmark(endpoint, config, progress=progress, cancel=cancel)
    if cert is not None:
        summary = certify(summary, cert)
    saved = write_result(summary, request.save_result) if request.save_result is not None else None
    outcome = bench_outcome(summary, endpoint, cancelled=cancel.is_set())
    store_error = None
    if store is not None and run_id is not None:
        env = endpoint_environment(endpoint, None, headers=endpoint.headers)
        try:
            _store_result(store, run_id, summary, env=env, outcome=outcome)
        except AccelbenchError as exc:  # the measurement is returned (and saved) all the same
            store_error = exc.message
    return BenchResult(
        summary=summary,
        run_id=run_id,
        saved=saved,
        cell_status=outcome[0],
        run_status=outcome[1],
        error=outcome[2],
        store_error=store_error,
        quality=measured,
        quality_text=quality_line(measured) if measured else None,
        cancelled=cancel.is_set(),
    )
