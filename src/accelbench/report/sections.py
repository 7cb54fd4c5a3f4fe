"""Report sections added by name: one module plus one registration puts a section into every written report.

A section is a ``ReportSection`` (its heading and two functions of the ``ReportData``: its HTML body and its
Markdown lines, ``None`` when this report has nothing for it, and then the section is left out) registered
with ``@SECTIONS.register("<id>")`` or ``SECTIONS.add("<id>", ReportSection(...))`` in a module listed with
``SECTIONS.add_module("pkg.module")``. ``report.html`` (report/html.py) and ``report.md`` (report/markdown.py)
show the registered sections after the built-in ones (``REPORT_SECTIONS``), in the order of their ids, so the
orchestrator's run files, ``accelbench report`` and the API's report all carry them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup

from accelbench.registry import Registry
from accelbench.report.document import ReportData


@dataclass(frozen=True)
class ReportSection:
    """One section: ``html(data)`` is the body under its heading (trusted HTML: escape what you quote from
    the data with ``markupsafe.escape``), ``markdown(data)`` its lines; either returns None to leave the
    section out of a report that has nothing for it."""

    heading: str
    html: Callable[[ReportData], str | None]
    markdown: Callable[[ReportData], list[str] | None]


@dataclass(frozen=True)
class RenderedSection:
    """A registered section's HTML id, heading and body, as the page's template shows it."""

    id: str
    heading: str
    body: Markup


SECTIONS: Registry[ReportSection] = Registry("report section")


def html_sections(data: ReportData) -> list[RenderedSection]:
    """The registered sections with something to show for ``data``, in the order of their ids."""
    rendered = []
    for sid, section in SECTIONS.items():
        body = section.html(data)
        if body is not None:
            rendered.append(RenderedSection(id=sid, heading=section.heading, body=Markup(body)))
    return rendered


def markdown_sections(data: ReportData) -> list[str]:
    """The registered sections' Markdown (a ``## heading``, then the lines), in the order of their ids."""
    out: list[str] = []
    for _, section in SECTIONS.items():
        lines = section.markdown(data)
        if lines is not None:
            out += [f"## {section.heading}", "", *lines, ""]
    return out
