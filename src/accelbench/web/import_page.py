"""The Import page (``/import``): other tools' result files uploaded as one run, through the same
``POST /api/v1/imports/{tool}`` the API offers (``services.result_imports``: every file read before anything is
stored, so a bad file imports nothing).

The page renders the form (``web/import_view.py``); its script sends the files as a cookie-authenticated write,
with the ``X-Requested-With`` header every page write carries, then opens the new run, whose page says what was
imported; a refusal is shown beside the field it concerns (the files, the label, the engine, the instance).
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from accelbench.web.import_view import import_form
from accelbench.web.pages import need_sign_in, render

router = APIRouter(include_in_schema=False)  # a page, like web/pages.py: not part of the API


@router.get("/import", response_class=HTMLResponse, response_model=None)
def import_page(
    request: Request,
    tool: str | None = Query(None, max_length=40),
    label: str | None = Query(None, max_length=200),
) -> Response:

    if (redirect := need_sign_in(request)) is not None:
        return redirect
    form, errors = import_form(tool, label)
    return render(request, "import.html", form=form, errors=errors)
