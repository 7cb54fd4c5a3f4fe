"""Page routes: server-rendered HTML over the same service functions the API uses.

Pages read through the same ``services`` use cases as the API; actions (queue a run, cancel, delete, set tool
versions) are made by the page's script through the JSON API, with the sign-in cookie and the
``X-Requested-With`` header the API requires of cookie-authenticated writes.
"""

from __future__ import annotations

import enum
import logging
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field, ValidationError

from accelbench import __version__
from accelbench import services as service
from accelbench.api.auth import COOKIE_NAME, page_principal
from accelbench.api.deps import settings_dep, store_dep
from accelbench.domain.instance_types import AcceleratorType, PriceTier
from accelbench.domain.plan_query import EstimateQuery
from accelbench.domain.run import RunStatus
from accelbench.errors import AccelbenchError, NotFoundError, UserInputError
from accelbench.report.compare_runs import not_comparable
from accelbench.report.percentiles import parse_percentiles
from accelbench.services import stored_runs
from accelbench.services.paths import confine
from accelbench.services.tool_versions import tool_versions_state
from accelbench.web import catalog_view, views
from accelbench.web.dashboard_view import dashboard_view
from accelbench.web.form_errors import field_errors, refusal_text

log = logging.getLogger("accelbench.web")

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters.update(views.FILTERS)
templates.env.globals.update(version=__version__)

router = APIRouter(include_in_schema=False)

# Pages load nothing from elsewhere; plotly injects style attributes, hence 'unsafe-inline' for styles only.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    principal = page_principal(request)
    context.setdefault("signed_in", principal is not None)
    context.setdefault("principal", principal.actor if principal else None)
    context.setdefault("read_auth", settings_dep(request).api_read_auth)
    context.setdefault("nav", name.split(".")[0])
    response = templates.TemplateResponse(request, name, context, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response


def need_sign_in(request: Request) -> RedirectResponse | None:
    """Pages are open like the read API: behind a sign-in only when reads need a token."""
    if not settings_dep(request).api_read_auth or page_principal(request) is not None:
        return None
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target)}", status_code=303)


E = TypeVar("E", bound=enum.Enum)


def choice(value: str | None, kind: type[E], what: str) -> E | None:
    """A select's value: empty means "any"; anything else must be one of the enum's values."""
    if value is None or not value.strip():
        return None
    try:
        return kind(value.strip())
    except ValueError:
        known = ", ".join(str(m.value) for m in kind)
        raise UserInputError(f"{what} {value!r} is not one of {known}.") from None


def error_page(request: Request, exc: AccelbenchError) -> HTMLResponse:
    return html_error(request, exc.status_code, exc.message, exc.hint)


def html_error(request: Request, status: int, message: str, hint: str | None) -> HTMLResponse:
    """The error page; also what the app's error handlers render for browsers on page URLs."""
    return render(
        request,
        "error.html",
        status_code=status if 400 <= status < 600 else 400,
        message=message,
        hint=hint,
    )


# ---------------------------------------------------------------------------------------- sign-in
def _safe_next(target: str | None) -> str:
    # Only same-site paths: "/runs" yes, "//evil.example" or "https://..." no (open redirect).
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = Query("/", max_length=500)) -> HTMLResponse:
    return render(request, "login.html", next=_safe_next(next), error=None)


@router.post("/login", response_model=None)
def login(
    request: Request, token: str = Form(..., max_length=500), next: str = Form("/", max_length=500)
) -> Response:
    verifier = request.app.state.verifier
    principal = verifier.verify(token)
    if principal is None:
        return render(
            request,
            "login.html",
            status_code=401,
            next=_safe_next(next),
            error="That token was not accepted. Use ACCELBENCH_API_TOKEN or a key from "
            "`accelbench apikey create NAME`.",
        )
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        COOKIE_NAME,
        token.strip(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        max_age=7 * 24 * 3600,
        path="/",
    )
    return response


@router.post("/logout")
def logout() -> RedirectResponse:
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/")
    return response


# ------------------------------------------------------------------------------------------ pages
@router.get("/", response_class=HTMLResponse, response_model=None)
def dashboard(request: Request) -> Response:
    if (redirect := need_sign_in(request)) is not None:
        return redirect
    store = store_dep(request)
    recent_runs = stored_runs.list_runs(store, stored_runs.RunListRequest(limit=10))
    recent, total = recent_runs.items, recent_runs.total
    counts = stored_runs.status_counts(store)
    worker = request.app.state.worker
    return render(
        request,
        "dashboard.html",
        recent=recent,
        total=total,
        counts=counts,
        in_flight=counts["pending"] + counts["deploying"] + counts["benchmarking"],
        tiers=views.catalog_tier_counts(),
        worker=worker.status() if worker is not None else None,
        charts=dashboard_view(store),
    )


@router.get("/catalog", response_class=HTMLResponse, response_model=None)
def catalog_page(
    request: Request,
    accelerator_type: str | None = Query(None, max_length=16),
    q: str | None = Query(None, max_length=100),
    sort: str | None = Query(None, max_length=32),
    direction: str | None = Query(None, alias="dir", max_length=4),
) -> Response:
    """The instance table: searchable (``q``), by tier, sortable; the same filters the script applies as you
    type, so a filtered view is a link and works without script (``web/catalog_view.py``)."""
    if (redirect := need_sign_in(request)) is not None:
        return redirect
    try:
        tier = choice(accelerator_type, AcceleratorType, "Accelerator type")
        view = catalog_view.catalog_context(
            store_dep(request),
            q=q,
            tier=tier.value if tier else None,
            sort=sort or None,
            direction=direction or None,
        )
    except AccelbenchError as exc:
        return error_page(request, exc)
    return render(request, "catalog.html", view=view)


@router.get("/catalog/{name}", response_class=HTMLResponse, response_model=None)
def catalog_instance_page(request: Request, name: str = PathParam(min_length=1, max_length=64)) -> Response:
    """One instance type: its specs, the sources the catalog cites, every known price with its date."""
    if (redirect := need_sign_in(request)) is not None:
        return redirect
    try:
        detail = catalog_view.detail_context(store_dep(request), name)
    except AccelbenchError as exc:
        return error_page(request, exc)
    return render(request, "catalog_instance.html", d=detail, nav="catalog")


_EQ = EstimateQuery.model_fields  # the form's defaults are the estimate query's own

#: the Estimate form's fields as the form names them (its errors start with these)
ESTIMATE_LABELS = {
    "model": "Model",
    "accelerator_type": "Accelerator",
    "instance_type": "Instance",
    "max_cost": "Max $/h",
    "min_context": "Min context",
    "quantization": "Quantization",
    "input_len": "Input tokens",
    "output_len": "Output tokens",
    "concurrency": "Concurrency",
    "slo": "SLO",
    "engine": "Engine",
    "tensor_parallel_size": "Tensor parallel",
    "max_num_seqs": "Max sequences",
    "kv_cache_dtype": "KV cache",
    "goal": "Choose for",
}


def estimate_query(typed: dict[str, str], alternatives: bool) -> tuple[EstimateQuery | None, dict[str, str]]:
    """The Estimate form's typed values (blank: the query's default) as an ``EstimateQuery``, or the reason
    for each field that is wrong, in plain words (``web/form_errors.py``). With no model typed the form is
    only being filled in: no query and no complaint about the model."""
    values: dict[str, Any] = {k: v.strip() for k, v in typed.items() if v and v.strip()}
    try:
        return EstimateQuery(**values, alternatives=alternatives), {}
    except ValidationError as exc:
        errors = field_errors(exc, ESTIMATE_LABELS)
    if "model" not in values:
        errors.pop("model", None)
    return None, errors


class EstimateForm(BaseModel):
    """The Estimate form as typed (every field text, so a wrong value is said beside its field, not refused)."""

    model: str | None = Field(None, max_length=300)
    accelerator_type: str | None = Field(None, max_length=16)
    instance_type: str | None = Field(None, max_length=64)
    max_cost: str | None = Field(None, max_length=20)
    min_context: str | None = Field(None, max_length=20)
    quantization: str | None = Field(None, max_length=16)
    input_len: str | None = Field(None, max_length=20)
    output_len: str | None = Field(None, max_length=20)
    concurrency: str | None = Field(None, max_length=20)
    slo: str | None = Field(None, max_length=100)
    limit: str | None = Field(None, max_length=20)
    engine: str | None = Field(None, max_length=32)
    tensor_parallel_size: str | None = Field(None, max_length=8)
    max_num_seqs: str | None = Field(None, max_length=8)
    kv_cache_dtype: str | None = Field(None, max_length=16)
    goal: str | None = Field(None, max_length=16)
    alternatives: str | None = Field(None, max_length=8)


@router.get("/estimate", response_class=HTMLResponse, response_model=None)
def estimate_page(request: Request, typed_form: Annotated[EstimateForm, Query()]) -> Response:
    """The ranked estimate. What was typed stays in the form; a wrong value is said beside its field."""
    if (redirect := need_sign_in(request)) is not None:
        return redirect
    alternatives = typed_form.alternatives
    typed = {k: v or "" for k, v in typed_form.model_dump(exclude={"alternatives"}).items()}
    query, errors = estimate_query(typed, bool(alternatives))
    form: dict[str, Any] = {
        **typed,
        **{k: typed[k] or _EQ[k].default for k in ("input_len", "output_len", "concurrency", "goal")},
        "alternatives": bool(alternatives),
    }
    result: dict[str, Any] | None = None
    error: AccelbenchError | None = UserInputError(errors[""]) if "" in errors else None
    if query is not None:
        try:
            confine(query.model, "model")
            result = service.estimate(store_dep(request), query)
        except AccelbenchError as exc:
            error = exc
    return render(
        request,
        "estimate.html",
        form=form,
        errors=errors,
        result=views.estimate_view(result, slo=query.slo, concurrency=query.concurrency)
        if result is not None and query is not None
        else None,
        error=error,
        models=views.model_choices(),
    )


@router.get("/run", response_class=HTMLResponse, response_model=None)
def run_page(request: Request) -> Response:
    if (redirect := need_sign_in(request)) is not None:
        return redirect
    return render(request, "run.html", **views.run_form_context())


@router.get("/runs", response_class=HTMLResponse, response_model=None)
def runs_page(
    request: Request,
    status: str | None = Query(None, max_length=16),
    accelerator_type: str | None = Query(None, max_length=16),
    model: str | None = Query(None, max_length=500),
    page: int = Query(1, ge=1, le=100_000),
) -> Response:
    if (redirect := need_sign_in(request)) is not None:
        return redirect

    errors: dict[str, str] = {}  # a filter that is not one of its choices: said beside it, and not applied
    state = tier = None
    try:
        state = choice(status, RunStatus, "Status")
    except AccelbenchError as exc:
        errors["status"] = refusal_text(exc)
    try:
        tier = choice(accelerator_type, AcceleratorType, "Accelerator type")
    except AccelbenchError as exc:
        errors["accelerator_type"] = refusal_text(exc)
    per_page = 25
    found = stored_runs.list_runs(
        store_dep(request),
        stored_runs.RunListRequest(
            status=[state] if state else None,
            accelerator_type=tier.value if tier else None,
            model=model or None,
            limit=per_page,
            offset=(page - 1) * per_page,
        ),
    )
    items, total = found.items, found.total
    return render(
        request,
        "runs.html",
        runs=items,
        total=total,
        page=page,
        pages=max(1, -(-total // per_page)),
        filters={
            "status": state.value if state else "",
            "accelerator_type": tier.value if tier else "",
            "model": model or "",
        },
        statuses=[s.value for s in RunStatus],
        errors=errors,
    )


@router.get("/runs/{run_id}", response_class=HTMLResponse, response_model=None)
def result_page(
    request: Request, run_id: str, percentiles: str | None = Query(None, max_length=40)
) -> Response:
    if (redirect := need_sign_in(request)) is not None:
        return redirect
    try:
        context = views.result_context(store_dep(request), run_id, percentiles)
    except AccelbenchError as exc:
        return error_page(request, exc)
    return render(request, "result.html", **context)


@router.get("/compare", response_class=HTMLResponse, response_model=None)
def compare_page(
    request: Request,
    runs: list[str] = Query([], max_length=20),
    tier: str | None = Query(None, max_length=32),
    baseline: str | None = Query(None, max_length=100),
    percentiles: str | None = Query(None, max_length=40),
) -> Response:
    """Compare runs: only comparable runs are offered (the others listed with why), in the order ticked; the
    baseline is picked among them (default: the first ticked)."""
    if (redirect := need_sign_in(request)) is not None:
        return redirect

    store = store_dep(request)
    comparison = None
    error: AccelbenchError | None = None
    errors: dict[str, str] = {}  # a wrong value beside its field, the rest of the form kept
    chosen = list(dict.fromkeys(r for r in runs if r))
    chosen_pcts: tuple[int, ...] = (50, 90, 99)
    price_tier = PriceTier.on_demand
    try:
        price_tier = choice(tier, PriceTier, "Price tier") or PriceTier.on_demand
    except AccelbenchError as exc:
        errors["tier"] = refusal_text(exc)
    try:
        chosen_pcts = parse_percentiles(percentiles)
    except AccelbenchError as exc:
        errors["percentiles"] = refusal_text(exc)
    try:
        if len(chosen) >= 2 and not errors:
            comparison = views.comparison_view(store, chosen, price_tier, baseline or None, chosen_pcts)
        elif len(chosen) == 1:
            raise AccelbenchError(
                "Pick at least two runs to compare.",
                hint="Tick two or more completed runs; the first one ticked is the baseline unless you pick another.",
            )
    except AccelbenchError as exc:
        error = exc
    listed = stored_runs.list_runs(store, stored_runs.RunListRequest(limit=200)).items
    offered = [r for r in listed if not_comparable(r) is None]
    withheld = [(r, why) for r in listed if (why := not_comparable(r)) is not None]
    return render(
        request,
        "compare.html",
        candidates=offered,
        withheld=withheld,
        chosen=chosen,
        baseline=comparison["baseline"].id if comparison else (baseline or (chosen[0] if chosen else None)),
        percentiles=percentiles if "percentiles" in errors else ",".join(str(p) for p in chosen_pcts),
        tier=price_tier.value,
        errors=errors,
        tiers=[t.value for t in PriceTier],
        comparison=comparison,
        error=error,
    )


@router.get("/config", response_class=HTMLResponse, response_model=None)
def config_page(request: Request) -> Response:
    if (redirect := need_sign_in(request)) is not None:
        return redirect
    state = tool_versions_state(store_dep(request), 50)
    return render(request, "config.html", versions=state.versions, audit=state.audit)


# ------------------------------------------------------------------------------------------ assets
def plotly_js_path() -> Path:
    """plotly.js from the installed plotly package (no CDN)."""
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


@router.get("/vendor/plotly.min.js")
def plotly_js() -> FileResponse:
    path = plotly_js_path()
    if not path.is_file():
        raise NotFoundError("plotly.min.js is missing from the installed plotly package; reinstall plotly.")
    return FileResponse(
        path, media_type="text/javascript", headers={"Cache-Control": "public, max-age=86400"}
    )


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
