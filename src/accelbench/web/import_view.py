"""What the Import page offers and what an imported run's page says about where its figures came from.

The form's choices are every tool ``accelbench import`` takes (``services.result_imports.tool_choices``), each
with the one line saying which files it reads, shown beside the file field. An imported run's page says what
was made of the files in the words ``accelbench import`` prints: "Imported 2 files into run ID (label): input
128 x concurrency 4 (1), ...", then each figure kept under the tool's own name, comparable or not, with the
difference in words (``report/imported.py``, as ``runs show``), and how vLLM's measured lengths were grouped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.report.imported import definition_lines
from accelbench.services.result_imports import tool_choices


def import_form(tool: str | None, label: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    """The Import form (tool choices, the chosen one's expected files, the label typed) and its field errors:
    a tool that ``import`` does not take is said beside the tool field, with the ones it does."""
    choices = tool_choices()
    known = dict(choices)
    errors: dict[str, str] = {}
    chosen = (tool or "").strip() or choices[0][0]
    if chosen not in known:
        errors["tool"] = f"Tool {chosen!r} is not one accelbench imports; choose one of {', '.join(known)}."
        chosen = choices[0][0]
    form = {
        "tools": [{"name": name, "description": description} for name, description in choices],
        "tool": chosen,
        "expected": known[chosen],
        "label": (label or "").strip(),
    }
    return form, errors


def cell_shape(results: Sequence[ResultInfo]) -> list[str]:
    """Each cell and how many repeats it holds, as ``accelbench import`` says it."""
    counts = Counter((r.input_len, r.concurrency) for r in results)
    return [f"input {i} x concurrency {c} ({n})" for (i, c), n in sorted(counts.items())]


def imported_view(run: RunInfo, results: Sequence[ResultInfo]) -> dict[str, Any] | None:
    """What an imported run's page says about its files (None for a run measured here)."""
    if run.kind != "import":
        return None

    extra = run.extra or {}
    files = [str(f) for f in extra.get("files") or []]
    n = len(files) or len(results)
    what = "file" if files else "result"
    summary = (
        f"Imported {n} {what}{'s' if n != 1 else ''} into run {run.id}"
        + (f" ({run.label})" if run.label else "")
        + f": {', '.join(cell_shape(results)) or 'no cells'}."
    )
    return {
        "source": extra.get("source") or "",
        "files": files,
        "summary": summary,
        "figures": definition_lines(run, results),
        "groups": [f"grouped {g}" for g in extra.get("input_len_groups") or []],
    }
