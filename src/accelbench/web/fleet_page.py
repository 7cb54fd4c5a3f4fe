"""The Fleet page (``/fleet``): a traffic file (under the data roots), a model and an SLO in a form; the ranked
fleet per candidate instance type, the sentences it rests on and the chart of servers over the traffic's span,
from the same ``services.fleet.plan_fleet`` and ``report/fleet.py`` rows as ``accelbench fleet``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from accelbench.errors import AccelbenchError

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


@router.get("/fleet", response_class=HTMLResponse, response_model=None)
def fleet_page(
    request: Request,
    traffic: str | None = Query(None, max_length=1000),
    model: str | None = Query(None, max_length=300),
    slo: str | None = Query(None, max_length=200),
    percentile: float = Query(90.0, gt=0, lt=100),
    instances: str | None = Query(None, max_length=4000),
    interval: float = Query(3600.0, gt=0, le=86_400),
    peak_quantile: float = Query(0.99, gt=0, lt=1),
) -> Response:
    from accelbench.web.pages import _store, need_sign_in, render

    if (redirect := need_sign_in(request)) is not None:
        return redirect
    form = {
        "traffic": traffic or "",
        "model": model or "",
        "slo": slo or "",
        "percentile": percentile,
        "instances": instances or "",
        "interval": interval,
        "peak_quantile": peak_quantile,
    }
    result: dict[str, Any] | None = None
    error: AccelbenchError | None = None
    if traffic and model and slo:
        from accelbench.report.fleet import FLEET_COLUMNS, fleet_lines, fleet_rows, servers_table
        from accelbench.services.fleet import fleet_request, plan_fleet
        from accelbench.services.paths import confine, resolve_file

        try:
            request_ = fleet_request(
                traffic=resolve_file(traffic, "traffic"),
                model=model,
                slo=slo,
                percentile=percentile,
                instances=[x.strip() for x in (instances or "").split(",") if x.strip()],
                interval_s=interval,
                peak_quantile=peak_quantile,
            )
            confine(model, "model")
            plan = plan_fleet(_store(request), request_)
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
    return render(request, "fleet.html", form=form, result=result, error=error)
