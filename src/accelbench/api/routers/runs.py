"""Runs: queue a run (202, executed by the worker), list, read with results and telemetry, cancel, delete,
the run's capacity answer, and the run's HTML report, manifests export and results CSV.

A POSTed spec goes through the same checks as ``accelbench run``: strict parsing (unknown keys are errors; a
``capacity:`` section in place of ``sweep:`` with known SLO metrics, a percentile in (0, 100) and a max_load of
at least 1),
the instance looked up in the catalog, the runtime chosen from the instance's tier when the spec does not
name one, and the runtime guards (400 before anything is stored). Secrets given with a run (``hf_token``) stay
in the worker's memory only: they are not stored, logged or returned.

A run belongs to the API key that queued it: only that key or an admin key cancels or deletes it
(``api.auth.require_run_owner``); a read-only key reads only.
"""

from __future__ import annotations

import csv
import io
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from accelbench import services as service
from accelbench.api.auth import Principal, require_read, require_run_owner, require_write
from accelbench.api.deps import PageDep, StoreDep, WorkerDep
from accelbench.api.errors import ERROR_RESPONSES
from accelbench.api.responses import SafeJSONResponse
from accelbench.domain.bench_summary import TelemetrySample
from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import DryRun, RunSpec, RunStatus
from accelbench.errors import ConflictError, NotFoundError
from accelbench.report import tables
from accelbench.services import stored_runs
from accelbench.services.paths import confine_spec
from accelbench.services.run_view import RunViewRequest, public_run, run_view
from accelbench.services.targets import check_remote_targets

router = APIRouter(prefix="/runs", tags=["runs"], responses=ERROR_RESPONSES)

RunId = Annotated[str, Path(min_length=1, max_length=64, description="A run id or an unambiguous prefix.")]


class RunCreated(BaseModel):
    """A queued run."""

    id: str = Field(description="The run id.")
    status: RunStatus = Field(description="Always pending: the worker picks the run up.")
    url: str = Field(description="Where to read its progress and results.")
    engine: str = Field(description="The runtime that will serve the model.")
    accelerator_type: str | None = Field(description="gpu, neuron or cpu.")


class RunList(BaseModel):
    """One page of runs, newest first."""

    items: list[RunInfo]
    total: int = Field(description="Runs matching the filters.")
    limit: int
    offset: int


class TelemetryOut(BaseModel):
    """Server metrics scraped during the run (evenly thinned to at most ``max_points`` samples)."""

    total: int = Field(description="Samples stored.")
    metrics: list[str] = Field(description="Metric names present in the samples.")
    samples: list[TelemetrySample]


class RunDetail(BaseModel):
    """A run with its results, aggregated cells, telemetry and findings."""

    run: RunInfo
    results: list[ResultInfo] = Field(description="One row per (cell, repeat); summaries without requests.")
    cells: list[dict[str, Any]] = Field(
        description="Per (input length, concurrency): mean and min-max over repeats."
    )
    telemetry: TelemetryOut
    findings: list[dict[str, Any]] = Field(
        description="Sentences computed from this run's data (kind, text, figures quoted)."
    )


class Cancelled(BaseModel):
    id: str
    status: RunStatus
    signalled: bool = Field(description="True when a running run was told to stop by this server's worker.")


@router.post(
    "",
    status_code=202,
    response_model=RunCreated | DryRun,
    summary="Queue a run (stored pending; the worker executes it), or preview it with dry_run=true",
    responses={
        202: {
            "model": RunCreated,
            "description": "Queued: stored pending, the worker executes it.",
            # OpenAPI links: what a client (and schemathesis' state machine) can do with the new run's id
            "links": {
                name: {"operationId": op, "parameters": {"run_id": "$response.body#/id"}}
                for name, op in {
                    "GetRun": "get_run_api_v1_runs__run_id__get",
                    "CancelRun": "cancel_run_api_v1_runs__run_id__cancel_post",
                    "DeleteRun": "delete_run_api_v1_runs__run_id__delete",
                }.items()
            },
        },
        200: {"model": DryRun, "description": "dry_run=true: what would be deployed; nothing stored."},
    },
)
def create_run(
    spec: RunSpec,
    store: StoreDep,
    worker: WorkerDep,
    response: Response,
    dry_run: bool = Query(
        False, description="Check the spec and answer what would be deployed and measured; store nothing."
    ),
    who: Principal = Depends(require_write),
) -> RunCreated | DryRun:
    if dry_run:
        response.status_code = 200
        return service.dry_run(check_remote_targets(confine_spec(spec)))
    spec = check_remote_targets(confine_spec(spec))
    run = service.submit_run(store, spec, worker=worker, actor=who.actor, owner_key_id=who.key_id)
    response.headers["Location"] = f"/api/v1/runs/{run.id}"
    return RunCreated(
        id=run.id,
        status=run.status,
        url=f"/api/v1/runs/{run.id}",
        engine=run.engine or "",
        accelerator_type=run.accelerator_type,
    )


@router.get("", response_model=RunList, summary="List runs (filters, pagination)")
def list_runs(
    store: StoreDep,
    page: PageDep,
    status: list[RunStatus] | None = Query(None, description="Keep runs in these states (repeatable)."),
    model: str | None = Query(None, max_length=500, description="Model name contains this."),
    instance_type: str | None = Query(None, max_length=64, description="Exact instance type."),
    accelerator_type: AcceleratorType | None = Query(None, description="gpu, neuron or cpu."),
    engine: str | None = Query(None, max_length=64, description="Runtime name, e.g. vllm-cpu."),
    label: str | None = Query(None, max_length=200, description="Label contains this."),
    kind: str | None = Query(None, max_length=16, description="bench, sweep, run or import."),
    _: Principal = Depends(require_read),
) -> RunList:
    found = stored_runs.list_runs(
        store,
        stored_runs.RunListRequest(
            status=status,
            model=model or None,
            instance_type=instance_type or None,
            accelerator_type=accelerator_type.value if accelerator_type else None,
            engine=engine or None,
            label=label or None,
            kind=kind or None,
            limit=page.limit,
            offset=page.offset,
        ),
    )
    return RunList(
        items=[public_run(r) for r in found.items], total=found.total, limit=page.limit, offset=page.offset
    )


@router.get("/{run_id}", response_model=RunDetail, summary="A run with results, telemetry and findings")
def get_run(
    run_id: RunId,
    store: StoreDep,
    max_points: int = Query(500, ge=10, le=100_000, description="Most telemetry samples returned."),
    _: Principal = Depends(require_read),
) -> RunDetail:
    view = run_view(store, RunViewRequest(run_ref=run_id, public=True, telemetry=True, headline=False))
    samples = view.samples
    return RunDetail(
        run=view.run,
        results=view.results,
        cells=[c.model_dump(mode="json") for c in view.cells],
        telemetry=TelemetryOut(
            total=len(samples),
            metrics=sorted({k for s in samples for k in s.values}),
            samples=thin(samples, max_points),
        ),
        findings=[f.model_dump(mode="json") for f in view.findings],
    )


@router.get(
    "/{run_id}/capacity",
    response_model=service.RunCapacity,
    summary="A run's capacity at its SLO: max load, knee, every probe, price, the planner's prediction",
)
def get_run_capacity(
    run_id: RunId, store: StoreDep, _: Principal = Depends(require_read)
) -> service.RunCapacity:
    run = stored_runs.get_run(store, run_id)
    answer = service.capacity_answer(run)
    if answer is None:
        raise NotFoundError(
            f"Run {run.id} has no capacity answer: it is not a capacity search.",
            hint="Capacity runs come from `accelbench capacity` or a run spec with a capacity: section; "
            f"GET /api/v1/runs/{run.id} has this run's results.",
        )
    return answer


def thin(samples: list[TelemetrySample], max_points: int) -> list[TelemetrySample]:
    if len(samples) <= max_points:
        return samples
    step = len(samples) / max_points
    return [samples[int(i * step)] for i in range(max_points)]


@router.post(
    "/{run_id}/cancel",
    status_code=202,
    response_model=Cancelled,
    summary="Cancel a pending or running run",
)
def cancel_run(
    run_id: RunId, store: StoreDep, worker: WorkerDep, who: Principal = Depends(require_write)
) -> Cancelled:
    target = stored_runs.owned_run(store, run_id)
    require_run_owner(who, target.owner_key_id, target.run.id, "cancel")
    run = stored_runs.cancel_run(store, target.run.id)
    signalled = worker.request_cancel(run.id) if worker is not None else False
    return Cancelled(id=run.id, status=run.status, signalled=signalled)


@router.delete("/{run_id}", status_code=204, summary="Delete a finished or pending run and its results")
def delete_run(run_id: RunId, store: StoreDep, who: Principal = Depends(require_write)) -> Response:
    owned = stored_runs.owned_run(store, run_id)
    run = owned.run
    require_run_owner(who, owned.owner_key_id, run.id, "delete")
    if run.status in (RunStatus.deploying, RunStatus.benchmarking):
        raise ConflictError(
            f"Run {run.id} is {run.status.value}; cancel it first (POST /api/v1/runs/{run.id}/cancel), "
            "then delete it."
        )
    if run.status == RunStatus.pending:
        # Cancel first so a worker that is about to claim it cannot start it under our feet.
        stored_runs.cancel_run(store, run.id)
    stored_runs.delete_runs(store, [run.id])
    return Response(status_code=204)


@router.get(
    "/{run_id}/results.csv",
    responses={200: {"description": "CSV", "content": {"text/csv": {"schema": {"type": "string"}}}}},
    summary="The run's per-cell table as CSV",
)
def results_csv(run_id: RunId, store: StoreDep, _: Principal = Depends(require_read)) -> Response:
    view = run_view(store, RunViewRequest(run_ref=run_id, headline=False, findings=False))
    run, cells = view.run, view.cells
    rng = tables.has_repeats(cells)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(tables.csv_header(with_range=rng))
    w.writerows(tables.csv_rows(cells, with_range=rng))
    return Response(
        buf.getvalue(),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{run.id}-results.csv"'},
    )


@router.get(
    "/{run_id}/report",
    responses={200: {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}},
    summary="The run's self-contained HTML report",
)
def run_report(run_id: RunId, store: StoreDep, _: Principal = Depends(require_read)) -> HTMLResponse:
    run = stored_runs.get_run(store, run_id)
    html = service.render_report(store, [run.id])
    return HTMLResponse(html)


@router.get(
    "/{run_id}/export",
    summary="Kubernetes manifests that deploy this run's engine",
    responses={
        200: {
            "description": "Files by name (json) or one YAML stream (yaml).",
            "content": {"application/json": {}, "application/yaml": {"schema": {"type": "string"}}},
        }
    },
)
def export_run(
    run_id: RunId,
    store: StoreDep,
    format: str = Query(
        "json", pattern="^(json|yaml)$", description="json (files by name) or yaml (one stream)."
    ),
    _: Principal = Depends(require_read),
) -> Response:
    run = stored_runs.get_run(store, run_id)
    files = service.export_manifests(store, run)
    if format == "yaml":
        body = "".join(f"# {name}\n{text.rstrip()}\n---\n" for name, text in files.items())
        return Response(
            body,
            media_type="application/yaml",
            headers={"Content-Disposition": f'attachment; filename="{run.id}-manifests.yaml"'},
        )
    return SafeJSONResponse({"run_id": run.id, "files": files})
