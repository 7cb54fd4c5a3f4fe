"""The Fleet page (``/fleet``): a traffic file (under the data roots), a model and an SLO in a form; the ranked
fleet per candidate instance type, the sentences it rests on and the chart of servers over the traffic's span,
from the same ``services.fleet.plan_fleet`` and ``report/fleet_view.py`` rows as ``accelbench fleet``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field, ValidationError

from accelbench.api.deps import store_dep
from accelbench.errors import AccelbenchError
from accelbench.report.fleet_view import FLEET_COLUMNS, fleet_lines, fleet_rows, servers_table
from accelbench.services.fleet_plan import FleetRequest, plan_fleet
from accelbench.services.paths import confine, resolve_file
from accelbench.web.form_errors import field_errors, refusal_text
from accelbench.web.pages import need_sign_in, render

router = APIRouter(include_in_schema=False)  # a page, like web/pages.py: not part of the API


def chart_data(plan: Any, top: int = 8) -> dict[str, Any]:
    """Per candidate (the cheapest ``top``): the step line of servers over hours from the start."""
    series = []
    for c in plan.candidates[:top]:
        xs: list[float] = []
        ys: list[int] = []
        for i in c.intervals:
            xs += [i.start_s / 3600.0, (i.start_s + i.seconds) / 3600.0]
            ys += [i.servers, i.servers]
        series.append({"name": c.instance, "x": xs, "y": ys})
    return {"title": "Servers needed over the traffic's span", "series": series}


class FleetForm(BaseModel):
    """The Fleet form as typed, each field text under its label (a wrong value is said beside its field by
    ``fleet_form_request``, not refused here); ``interval`` is the request's ``interval_s``."""

    traffic: str | None = Field(None, max_length=1000, title="Traffic file")
    model: str | None = Field(None, max_length=300, title="Model")
    slo: str | None = Field(None, max_length=200, title="SLO")
    percentile: str | None = Field(None, max_length=20, title="Percentile")
    instances: str | None = Field(None, max_length=4000, title="Instances")
    interval: str | None = Field(None, max_length=20, title="Interval (s)")
    peak_quantile: str | None = Field(None, max_length=20, title="Peak quantile")


#: the Fleet form's fields as the form names them
FLEET_LABELS = {name: str(f.title) for name, f in FleetForm.model_fields.items()}


def fleet_form_request(typed: dict[str, str]) -> tuple[Any, dict[str, str]]:
    """The Fleet form's typed values (blank: the default) as a ``FleetRequest``, or the reason for each field
    that is wrong, in plain words. A field not filled in yet is not complained about until the plan is asked
    for (traffic, model and SLO all given); the traffic file is resolved under the data roots first."""

    values: dict[str, Any] = {k: v.strip() for k, v in typed.items() if v and v.strip()}
    filled = set(values)
    errors: dict[str, str] = {}
    if "traffic" in values:
        try:
            values["traffic"] = str(resolve_file(values["traffic"], "traffic"))
        except AccelbenchError as exc:
            errors["traffic"] = refusal_text(exc)
    if "model" in values:
        try:
            confine(values["model"], "model")
        except AccelbenchError as exc:
            errors["model"] = refusal_text(exc)
    if "interval" in values:
        values["interval_s"] = values.pop("interval")
    values["instances"] = [x.strip() for x in values.get("instances", "").split(",") if x.strip()]
    request = None
    try:
        request = FleetRequest(**values)
    except ValidationError as exc:
        found = field_errors(exc, FLEET_LABELS, {"interval_s": "interval"})
        asked = {"traffic", "model", "slo"} <= filled
        errors = {**{k: v for k, v in found.items() if asked or k in filled}, **errors}
    return (request if not errors else None), errors


@router.get("/fleet", response_class=HTMLResponse, response_model=None)
def fleet_page(request: Request, asked: Annotated[FleetForm, Query()]) -> Response:
    """A fleet plan; what was typed stays in the form and a wrong value is said beside its field."""
    if (redirect := need_sign_in(request)) is not None:
        return redirect
    typed = {k: v or "" for k, v in asked.model_dump().items()}
    plan_request, errors = fleet_form_request(typed)
    defaults = {"percentile": 90.0, "interval": 3600.0, "peak_quantile": 0.99}
    form = {**typed, **{k: typed[k] or v for k, v in defaults.items()}}
    result: dict[str, Any] | None = None
    error: AccelbenchError | None = None
    if plan_request is not None:
        try:
            plan = plan_fleet(store_dep(request), plan_request)
            result = {
                "columns": FLEET_COLUMNS,
                "rows": fleet_rows(plan),
                "lines": fleet_lines(plan),
                "chart": chart_data(plan),
                "servers": servers_table(plan),
                "skipped": plan.skipped,
            }
        except AccelbenchError as exc:
            error = exc
    return render(request, "fleet.html", form=form, errors=errors, result=result, error=error)
