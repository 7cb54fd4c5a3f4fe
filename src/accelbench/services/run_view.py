"""One stored run as every view shows it: ``accelbench runs show``, the run page and the API's run resource each
render the ``RunView`` (``report/run_view.py``, the model and how it is read from the store, the same views the
HTML and Markdown reports render) that ``run_view`` assembles once, so they cannot drift apart in what they read
or how they judge it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import Field

from accelbench.domain.results import RunInfo
from accelbench.redact import redact
from accelbench.report.comparison import RunData
from accelbench.report.run_view import RunAnswer, RunView, ViewParts, read_view, run_answer
from accelbench.store import Store
from accelbench.store.owner import recover_dead_owners

#: the model and the run's answer are the report layer's (the reports render the same views); the CLI, the pages
#: and the API take them from here, the one way in
__all__ = ["RunAnswer", "RunView", "RunViewRequest", "public_run", "run_answer", "run_view", "run_view_json"]


class RunViewRequest(ViewParts):
    """Which run to show and what its view needs."""

    run_ref: str = Field(description="A run id or an unambiguous prefix.")
    public: bool = Field(
        False, description="Secrets masked in the run's spec, environment and extra (API, pages)."
    )
    recover: bool = Field(False, description="First mark runs whose process died as interrupted (the CLI).")


def public_run(run: RunInfo) -> RunInfo:
    """The run as the API and the pages show it: secrets masked, whatever a record holds."""
    return run.model_copy(
        update={
            "spec": redact(run.spec),
            "environment": redact(run.environment),
            "extra": redact(run.extra),
            "progress": redact(run.progress),
        }
    )


def run_view(store: Store, request: RunViewRequest) -> RunView:
    """The one view of a stored run (see the module's docstring)."""
    if request.recover:
        recover_dead_owners(store)  # a run whose process was killed outright is not "benchmarking" any more
    run = store.get_run(request.run_ref)
    if request.public:
        run = public_run(run)
    return read_view(store, RunData(run=run, results=store.get_results(run.id)), request)


def run_view_json(view: RunView) -> dict[str, Any]:
    """``runs show --format json``: the run, headline, SLO, cells, each cell against the SLO and the results."""
    return {
        "run": view.run.model_dump(mode="json"),
        "headline": view.headline.as_dict() if view.headline is not None else None,
        "slo": (
            {"source": view.choice.source, **view.choice.slo.model_dump(mode="json")}
            if view.choice is not None
            else None
        ),
        "cells": [c.model_dump(mode="json") for c in view.cells],
        "cells_slo": [asdict(e) for e in view.evaluation.values()],
        "results": [r.model_dump(mode="json", exclude={"summary"}) for r in view.results],
    }
