"""``accelbench sweep`` and ``sweep-plot`` as use cases: the matrix against a running server, and the files of
stored sweeps.

``run_sweep_request`` takes a ``SweepRequest`` (the server as given, the settings given on the command line,
a spec file, a run to resume, where to write) and returns a ``SweepResult``: the spec is the file's (or the
resumed run's) with the given settings over it, the server and its served model found, the context checked
before a run is stored, every (cell, repeat) stored as it finishes, and ``results.md``/``results.csv``/JSON/
plots written into the output directory. Ctrl-C while the load runs leaves the cell in flight partial;
a second one aborts (``SweepAborted``, after the files of what finished are written).
``plot_sweeps`` rewrites the files of one or several stored runs (CPU vs GPU on the same axes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from accelbench.bench.context import check_served_context
from accelbench.bench.datasets import check_dataset
from accelbench.bench.quality_run import parse_quality, quality_line
from accelbench.bench.spec import load_sweep_file
from accelbench.bench.sweep import SweepOutcome, create_sweep_run, run_sweep, stored_sweep_spec, sweep_keys
from accelbench.bench.target_ci import summary_line
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import RunStatus, SweepSpec
from accelbench.domain.sweep_events import SweepEvent
from accelbench.errors import UserInputError
from accelbench.report.sweep_outputs import write_sweep_outputs
from accelbench.report.tables import CellAggregate, aggregate_results
from accelbench.services.endpoints import endpoint_environment, first_served_model, served_model_root
from accelbench.services.session import Store, get_store
from accelbench.settings import get_settings

#: the types and words the shells show of a sweep
__all__ = [
    "CellTable",
    "PlotRequest",
    "PlotResult",
    "SweepAborted",
    "SweepOutcome",
    "SweepRequest",
    "SweepResult",
    "SweepStart",
    "plot_sweeps",
    "run_sweep_request",
]


class SweepRequest(BaseModel):
    """One sweep as asked: the server (None: from the spec file or the resumed run), the settings given
    (``SweepSpec`` fields over the file's or the run's), and where things go."""

    base_url: str | None = None
    served_model: str | None = None
    tokenizer: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    headers: dict[str, str] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    spec_file: Path | None = None
    resume: str | None = None
    label: str | None = None
    out: Path | None = None
    command: list[str] = Field(default_factory=list, description="The command line, stored with a new run.")


class SweepStart(BaseModel):
    """What a sweep is about to measure (said before the load)."""

    run_id: str
    input_lens: int
    concurrency_levels: int
    repeats: int
    total: int
    base_url: str
    served_model: str


class CellTable(BaseModel):
    """The cells of one or more stored runs, with each run's name (its label, else its id)."""

    run_ids: list[str]
    names: dict[str, str]
    cells: list[CellAggregate]


class SweepResult(BaseModel):
    """How a sweep ended, the files written and what the shells show of it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    outcome: SweepOutcome
    out_dir: Path
    files: list[Path] = Field(default_factory=list)
    write_error: str | None = None
    table: CellTable
    results: list[ResultInfo] = Field(default_factory=list)
    quality_text: str | None = None
    target_ci_text: str | None = None


class SweepAborted(KeyboardInterrupt):
    """A second Ctrl-C stopped the sweep at once: the finished cells are stored and their files written."""

    def __init__(self, run_id: str, out_dir: Path, write_error: str | None) -> None:
        super().__init__("aborted")
        self.run_id, self.out_dir, self.write_error = run_id, out_dir, write_error


def build_spec(base: SweepSpec, overrides: dict[str, Any]) -> SweepSpec:
    """``base`` with the settings given (a ValidationError names the field)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return base
    data = base.model_dump(exclude_unset=True)  # a default left unset may follow other settings (stages)
    data.update(given)
    return SweepSpec.model_validate(data)


def _resumed(store: Store, run_id: str, warn: Callable[[str], None]) -> RunInfo:
    run = store.get_run(run_id)
    if run.kind != "sweep":
        raise UserInputError(f"Run {run.id} is a {run.kind} run, not a sweep; only sweeps resume here.")
    if run.status in (RunStatus.benchmarking, RunStatus.deploying):
        warn(f"Run {run.id} is marked {run.status.value}; resuming it (was its process killed?).")
    return run


def _spec_and_server(
    store: Store, request: SweepRequest, warn: Callable[[str], None]
) -> tuple[SweepSpec, dict[str, Any], str | None, RunInfo | None]:
    """(spec, the server as the file or the resumed run names it, the file's label, the resumed run)."""
    file_label: str | None = None
    server: dict[str, Any] = {}
    base = SweepSpec()
    if request.spec_file is not None:
        sf = load_sweep_file(request.spec_file)
        base, file_label = sf.sweep_spec(), sf.label
        if sf.server is not None:
            server = sf.server.model_dump(exclude_none=True)
    run = None
    if request.resume is not None:
        run = _resumed(store, request.resume, warn)
        stored_endpoint = (run.spec or {}).get("endpoint") or {}
        server = {**{k: v for k, v in stored_endpoint.items() if v}, **server}
        if request.spec_file is None:
            base = stored_sweep_spec(run)
    return build_spec(base, request.settings), server, file_label, run


def _endpoint(request: SweepRequest, server: dict[str, Any]) -> Endpoint:
    headers = {**(server.get("headers") or {}), **request.headers}
    if request.resume is not None:
        headers = {k: v for k, v in headers.items() if v != "***"}
    url = request.base_url or server.get("base_url")
    if not url:
        raise UserInputError("Which server? Pass --base-url (or a spec with server.base_url).")
    served = (
        request.served_model
        or server.get("served_model")
        or first_served_model(url, headers, request.api_key)
    )
    return Endpoint(
        base_url=url,
        served_model=served,
        tokenizer=request.tokenizer or server.get("tokenizer"),
        api_key=request.api_key,
        headers=headers,
    )


def _write_outputs(store: Store, run_id: str, out_dir: Path) -> tuple[list[Path], str | None]:
    try:
        return write_sweep_outputs(store, run_id, out_dir).all_paths(), None
    except OSError as exc:
        return [], f"Could not write the result files into {out_dir}: {exc}"


def cell_table(store: Store, run_ids: Sequence[str]) -> CellTable:
    runs = [store.get_run(r) for r in run_ids]
    results = [res for r in runs for res in store.get_results(r.id)]
    return CellTable(
        run_ids=[r.id for r in runs],
        names={r.id: r.label or r.id for r in runs},
        cells=aggregate_results(results),
    )


def run_sweep_request(
    request: SweepRequest,
    *,
    started: Callable[[SweepStart], None] = lambda _: None,
    warn: Callable[[str], None] = lambda _: None,
    progress: Callable[[SweepEvent], None] | None = None,
    cancel: threading.Event | None = None,
    during_load: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> SweepResult:
    """``accelbench sweep``: measure the matrix (``started``: what it is about to measure; ``warn``: a
    resumed run's state; ``progress``: every event of the load; ``during_load``: held open while it runs)."""
    store = get_store()
    spec, server, file_label, run = _spec_and_server(store, request, warn)
    parse_quality(spec.quality)  # an unknown setting, or lm-eval not installed: refused before any load
    check_dataset(
        spec.dataset, "--dataset"
    )  # before the server is asked (a spec file's was checked when read)
    ep = _endpoint(request, server)
    if spec.dataset == "random":
        check_served_context(ep, spec.input_lens, spec.output_len)  # before a run is stored
    if run is None:
        auth = dict(ep.headers) | ({"Authorization": f"Bearer {ep.api_key}"} if ep.api_key else {})
        env = endpoint_environment(ep, request.command, headers=auth)
        root = served_model_root(ep.base_url, ep.headers, ep.api_key, ep.served_model)
        run = create_sweep_run(
            store, ep, spec, label=request.label or file_label, environment=env, model=root
        )
    out_dir = request.out or (get_settings().runs_dir / run.id)
    total = len(sweep_keys(spec))
    started(
        SweepStart(
            run_id=run.id,
            input_lens=len(spec.input_lens),
            concurrency_levels=len(spec.concurrency),
            repeats=spec.repeats,
            total=total,
            base_url=ep.base_url,
            served_model=ep.served_model,
        )
    )
    try:
        with during_load():
            outcome = run_sweep(
                store, run.id, ep, spec, cancel=cancel, progress=progress, resume=request.resume is not None
            )
    except KeyboardInterrupt:
        _, error = _write_outputs(store, run.id, out_dir)
        raise SweepAborted(run.id, out_dir, error) from None
    files, error = _write_outputs(store, run.id, out_dir)
    measured = store.get_run(run.id).extra.get("quality")
    return SweepResult(
        outcome=outcome,
        out_dir=out_dir,
        files=files,
        write_error=error,
        table=cell_table(store, [run.id]),
        results=store.get_results(run.id),
        quality_text=quality_line(measured) if isinstance(measured, dict) else None,
        target_ci_text=summary_line(outcome.target_ci) if outcome.target_ci is not None else None,
    )


class PlotRequest(BaseModel):
    """Stored sweeps to plot and tabulate on shared axes."""

    run_ids: list[str]
    out: Path
    repeat_json: bool = False


class PlotResult(BaseModel):
    """The files written and the cells of the runs."""

    files: list[Path]
    table: CellTable


def plot_sweeps(request: PlotRequest) -> PlotResult:
    """``accelbench sweep-plot``: the files of ``request.run_ids``; a run without results is refused."""
    store = get_store()
    ids = [store.resolve_run_id(r) for r in request.run_ids]
    empty = [r for r in ids if not store.get_results(r)]
    if empty:
        raise UserInputError(f"Run(s) without results: {', '.join(empty)}; nothing to plot for them.")
    outputs = write_sweep_outputs(store, ids, request.out, repeat_json=request.repeat_json)
    return PlotResult(files=outputs.all_paths(), table=cell_table(store, ids))
